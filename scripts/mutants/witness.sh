# The witness mutants of scripts/mutants.sh (sourced by it): mutant COMPONENT NAME FILE
# SED-EXPRESSION, cuda_mutant for those that need a GPU.
# witness: floor edges, keep off by one, padding marking segment 0, budget ignored
mutant witness cpu-edge-floor impl/cpu/witness.cpp \
  's|return std::int32_t((s \* len + s_eff - 1) / s_eff);|return std::int32_t((s * len) / s_eff);|'
mutant witness model-edge-floor model/witness.cpp \
  's|return static_cast<std::size_t>((n + d - 1) / d);|return static_cast<std::size_t>(n / d);|'
mutant witness cpu-keep-off-by-one impl/cpu/witness.cpp \
  's|      dst\[learned_keep + j\] =|      dst[learned_keep + 1 + j] =|'
mutant witness model-keep-off-by-one model/witness.cpp \
  's|out\[r \* topk + learned_keep + j++\] = w;|out[r * topk + learned_keep - (learned_keep > 0) + j++] = w;|'
mutant witness cpu-padding-marks-segment-0 impl/cpu/witness.cpp 's|  if (x < 0) return 0;|  if (x < 0) return 1;|'
mutant witness model-padding-marks-segment-0 model/witness.cpp 's|    if (x >= 0)$|    if (x >= -1)|'
mutant witness cpu-budget-ignored impl/cpu/witness.cpp \
  's|const std::size_t budget = std::min(max_replacements, topk - learned_keep);|const std::size_t budget = topk - learned_keep;|'
mutant witness model-budget-ignored model/witness.cpp \
  's|const std::size_t budget = std::min(max_replacements, topk - learned_keep);|const std::size_t budget = topk - learned_keep;|'
mutant witness cpu-refusal-writes impl/cpu/witness.cpp \
  's|^  if (auto e =$|  std::fill(out.begin(), out.end(), 0);\n  if (auto e =|'
# refusals checked in another order than the model's (calls with several faults)
mutant witness impl-keep-checked-before-segments impl/witness_refusals.hpp \
  '/std::size_t learned_keep,$/,/return std::nullopt/ s|  if (num_segments == 0 \|\| num_segments > MAX_TOPOLOGY_SEGMENTS)|  if ((num_segments == 0 \|\| num_segments > MAX_TOPOLOGY_SEGMENTS) \&\& learned_keep <= topk)|'
mutant witness impl-output-checked-first impl/witness_refusals.hpp \
  '/std::size_t learned_keep,$/,/return std::nullopt/ s|  if (static_cast<unsigned __int128>(topk) \* rows != learned_len)|  if (out_len != learned_len) return we::OutputSizeMismatch{learned_len, out_len};\n  if (static_cast<unsigned __int128>(topk) * rows != learned_len)|'
mutant witness impl-keep-equal-refused impl/witness_refusals.hpp \
  's|if (learned_keep > topk) return|if (learned_keep >= topk) return|'
