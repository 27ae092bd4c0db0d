#!/usr/bin/env bash
# Deliberately broken variants: each must make a property or test of its
# component fail. Breaks one line, rebuilds that component's suites, runs them,
# restores the file. Exits non-zero if a mutant survives.
# Usage: scripts/mutants.sh [build-dir] [component ...]   (default: every component)
#
# CUDA mutants need a GPU: with AETHER_MUTANT_STAGE=DIR set, only they are built,
# each suite copied to DIR/NAME/ (the GPU host has no compiler), and
# scripts/gpu.sh BUILD runs every BUILD/mutants/NAME there, expecting failures.
# With AETHER_MUTANT_CHECK=1 nothing is built: each expression is only checked to
# still change its line (run it after reformatting a file). AETHER_MUTANT_NAMES=REGEX
# keeps only the mutants whose names match.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/default}
shift || true
only=" ${*:-witness indexer paging compress dosa sharing formats parallel} "
stage=${AETHER_MUTANT_STAGE:-}
check_only=${AETHER_MUTANT_CHECK:-}
names=${AETHER_MUTANT_NAMES:-.}
survivors=0

# A component's suites: its props and test binaries, the CUDA ones and the
# contract's included (STEM_props, STEM_cuda_test, STEM_refusal_props, ...).
suites_of() {
  ls "$build"/props/"$1"_props "$build"/props/"$1"_*_props "$build"/tests/"$1"_test \
    "$build"/tests/"$1"_*_test 2>/dev/null
}

backup=""
# Breaks FILE with the sed EXPR and rebuilds COMPONENT's suites; non-zero (and
# counted) when the expression no longer applies or the result does not build.
# restore FILE afterwards either way.
break_and_build() {  # break_and_build COMPONENT NAME FILE EXPR
  local component=$1 name=$2 file=$3 expr=$4
  backup=""
  [[ $name =~ $names ]] || return 1
  backup=$(mktemp)
  cp "$file" "$backup"
  sed -i "$expr" "$file"
  if cmp -s "$file" "$backup"; then
    echo "mutant $name: the expression no longer applies to $file"
  elif [ -n "$check_only" ]; then
    echo "mutant $name: applies"
    return 1
  elif ! cmake --build "$build" --target $(suites_of "$component" | xargs -n1 basename) \
      >/dev/null 2>&1; then
    echo "mutant $name: does not build"
  else
    return 0
  fi
  survivors=$((survivors + 1))
  return 1
}
restore() { [ -z "$backup" ] || { cp "$backup" "$1"; rm -f "$backup"; }; }

cuda_mutant() {  # cuda_mutant COMPONENT NAME FILE SED-EXPRESSION: built only when staging
  local component=$1 name=$2 file=$3
  [[ ( -n $stage || -n $check_only ) && $only == *" $component "* ]] || return 0
  if break_and_build "$@"; then
    mkdir -p "$stage/$name"
    cp $(suites_of "$component") "$stage/$name/"
    echo "mutant $name: staged in $stage/$name"
  fi
  restore "$file"
}

mutant() {  # mutant COMPONENT NAME FILE SED-EXPRESSION
  local component=$1 name=$2 file=$3 failed
  [[ -z $stage && $only == *" $component "* ]] || return 0
  if break_and_build "$@"; then
    failed=$(for suite in $(suites_of "$component"); do
               RC_PARAMS=max_success=10000 "$suite" --gtest_brief=1
             done 2>&1 | grep -c '^\[  FAILED  \] [A-Z].*(')
    if [ "$failed" -gt 0 ]; then echo "mutant $name: killed by $failed failing tests"
    else echo "mutant $name: SURVIVED"; survivors=$((survivors + 1)); fi
  fi
  restore "$file"
}

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

# dosa: the threshold one rank too high, the anchored residual dropped or shrunk,
# the aggregated deduction doubled, a bound equal to tau excluded (the model's: the
# CPU's float bound exceeds the exact one by its margin, so its `>=` against `>`
# differs only where a float lands on tau), the rounding margin dropped, survivors
# scoring exactly tau dropped from the merge, a screened key named by its place in
# the gathered chunk, a key's norm short of one partial sum, the probe's first chunk
# screened again when it joins the batch, the seeds' second round skipped (those the
# first round's K-th score does not rule out left unscored), a seed bounded exactly at
# that score left out, the plan rule's anchor ties given to the higher head
mutant dosa model-threshold-one-rank-high model/dosa.cpp \
  's|  return sorted\[k - 1\];|  return sorted[k > 1 ? k - 2 : 0];|'
mutant dosa cpu-threshold-one-rank-high impl/cpu/dosa.cpp \
  's|      q.tau = q.chosen.back().first;  // the K-th best seed score|      q.tau = q.chosen[k > 1 ? k - 2 : 0].first;|'
mutant dosa cpu-anchor-tie-to-the-higher-head impl/cpu/dosa_plan.cpp \
  's|p \* p \* best_n > best_p \* best_p \* nj|p * p * best_n >= best_p * best_p * nj|'
mutant dosa model-residual-halved model/dosa.cpp \
  's|    c += exact(weights\[a.head\]) \* upper_sqrt(norm_sq(d));|    c += exact(weights[a.head]) * upper_sqrt(norm_sq(d) / 4);|'
mutant dosa cpu-residual-dropped impl/dosa_screen.hpp \
  's|         (norm_from_squares(squares, dim) + double(more + 2)|         (0 * norm_from_squares(squares, dim) + double(more + 2)|'
mutant dosa model-deduction-doubled model/dosa.cpp \
  's|  return {p - relu(deduction), residual, norm_sq(key)};|  return {p - 2 * relu(deduction), residual, norm_sq(key)};|'
mutant dosa cpu-deduction-doubled impl/dosa_screen.hpp \
  's|  if (!plan.aggregated.empty()) out.push_back(-1.0f);|  if (!plan.aggregated.empty()) out.push_back(-2.0f);|'
mutant dosa model-bound-at-tau-excluded model/dosa.cpp \
  's|  return gap > 0 \&\& u.residual \* u.residual \* u.key_norm_sq < gap \* gap;|  return gap >= 0 \&\& u.residual * u.residual * u.key_norm_sq <= gap * gap;|'
mutant dosa cpu-rounding-margin-dropped impl/dosa_screen.hpp \
  's|  return {up(up(up(s.c) \* sums) + up(error)),|  return {up(up(s.c) * sums),|'
mutant dosa model-survivor-at-tau-dropped model/dosa.cpp \
  's|    if (full_score(j) >= tau) candidates.push_back(std::int32_t(j));|    if (full_score(j) > tau) candidates.push_back(std::int32_t(j));|'
mutant dosa cpu-survivor-at-tau-dropped impl/cpu/dosa.cpp \
  's|        if (scores\[i\] >= q.tau) q.chosen.emplace_back(scores\[i\], q.survivors\[i\]);|        if (scores[i] > q.tau) q.chosen.emplace_back(scores[i], q.survivors[i]);|'
mutant dosa model-further-anchors-unbounded model/dosa.cpp \
  's|      p += exact(weights\[a.head\]) \* exact(m.beta) \* relu(dot(q(m.anchor), key));|      (void)m;|'
mutant dosa cpu-further-anchors-not-folded impl/dosa_screen.hpp \
  's|    for (const DosaTerm\& m : a.more) folded\[m.anchor\] += double(w\[a.head\]) \* double(m.beta);||'
mutant dosa cpu-merge-ties-to-the-higher-id impl/cpu/dosa_seeds.hpp \
  's|(a.first == b.first \&\& a.second < b.second)|(a.first == b.first \&\& a.second > b.second)|'
mutant dosa cpu-cold-prior-counts-a-representative-twice impl/cpu/dosa_plan.cpp \
  's|    if (t == last) continue;||'
mutant dosa cpu-group-member-bounded-against-the-first-tau impl/cpu/dosa.cpp \
  's|, chunk_norms\[i\], scale) >= double(q.tau))|, chunk_norms[i], scale) >= double(active[0]->tau))|'
mutant dosa cpu-screened-key-named-by-its-place impl/cpu/dosa.cpp \
  's|q.survivors.push_back(ids\[i\]);|q.survivors.push_back(std::int32_t(first + i));|'
mutant dosa cpu-norm-drops-a-partial-sum impl/dosa_screen.hpp \
  's|norm_from_squares((s\[0\] + s\[1\]) + (s\[2\] + s\[3\]), v.size())|norm_from_squares((s[0] + s[1]) + s[2], v.size())|'
mutant dosa cpu-probe-screens-its-first-chunk-twice impl/cpu/dosa.cpp \
  's|if (q.paid \&\& q.screened == first) active|if (q.paid) active|'
mutant dosa cpu-seeds-second-round-skipped impl/cpu/dosa_seeds.hpp \
  's|  if (!again.empty()) score_into_chosen(again);||'
mutant dosa cpu-seed-bounded-at-t-left-out impl/cpu/dosa_seeds.hpp \
  's|bounds\[i\] >= double(t)|bounds[i] > double(t)|'
mutant dosa cpu-decode-drops-keys-at-tau impl/cpu/dosa_plan.cpp \
  's|    if (scores\[j\] >= tau) ranked.emplace_back(scores\[j\], std::int32_t(j));|    if (scores[j] > tau) ranked.emplace_back(scores[j], std::int32_t(j));|'
# dosa on CUDA (staged): the threshold taken over all but the last of the seeds' top-K,
# the anchored residual dropped and the aggregated deduction doubled (the shared
# preparation, as the device computes it), the margin without the tensor cores'
# error, survivors scoring exactly tau dropped, ties merged toward the higher id
cuda_mutant dosa cuda-threshold-skips-the-last-lane impl/cuda/dosa_kernels.cu \
  's|  for (std::size_t i = threadIdx.x; i < k; i += kThreads)|  for (std::size_t i = threadIdx.x; i + 1 < k; i += kThreads)|'
cuda_mutant dosa cuda-residual-dropped impl/cuda/dosa_kernels.cu \
  's|          dosa_screen::anchor_share(w\[a.head\], s, dim|          0 * dosa_screen::anchor_share(w[a.head], s, dim|'
cuda_mutant dosa cuda-deduction-doubled impl/dosa_screen.hpp \
  's|  if (!plan.aggregated.empty()) out.push_back(-1.0f);|  if (!plan.aggregated.empty()) out.push_back(-2.0f);|'
cuda_mutant dosa cuda-margin-without-tensor-core-error impl/cuda/dosa_kernels.cu \
  's|  return 48 \* ((dim + 15) / 16) + heads + 2;|  return 0 * (dim + heads);|'
cuda_mutant dosa cuda-survivor-at-tau-dropped impl/cuda/dosa_merge.cu \
  's|  return score >= c.tau\[t\];|  return score > c.tau[t];|'
cuda_mutant dosa cuda-ties-merged-to-the-higher-id impl/cuda/dosa_merge.cu \
  's|(mask - std::uint32_t(id))|std::uint32_t(id)|'


# formats: a UE8M0 scale rounded down, ties away from even, saturation to NaN, the
# index block's scale section one row off
mutant formats model-ue8m0-scale-one-power-low model/formats.cpp \
  's|  return std::uint8_t(b);|  return std::uint8_t(b > 0 ? b - 1 : 0);|'
mutant formats model-ties-away-from-even model/formats.cpp \
  's|profile == RoundingProfile::Cuda \&\& (code \& 1) == 0;|profile == RoundingProfile::Cuda;|'
mutant formats model-index-scales-one-row-off model/formats.cpp \
  's|  return {row \* (dim / 2), rows \* (dim / 2) + row \* (dim / 32)};|  return {row * (dim / 2), (rows - 1) * (dim / 2) + row * (dim / 32)};|'
mutant formats codes-ue8m0-scale-rounded-down impl/formats_codes.hpp \
  's|                                   cudaRoundPosInf);|                                   cudaRoundMinInf);|'
mutant formats codes-ties-not-to-even impl/formats_codes.hpp \
  's|  if (profile == RoundingProfile::Cuda \|\| magnitude == 0) return code;|  if (magnitude == 0) return code;|'
mutant formats codes-saturation-to-nan impl/formats_codes.hpp \
  's|__nv_cvt_double_to_fp8(q, __NV_SATFINITE, __NV_E4M3)|__nv_cvt_double_to_fp8(q, __NV_NOSAT, __NV_E4M3)|'
mutant formats cpu-index-scales-one-row-off impl/cpu/formats.cpp \
  's|  return {row \* data_bytes, rows \* data_bytes + row \* scale_bytes};|  return {row * data_bytes, (rows - 1) * data_bytes + row * scale_bytes};|'
mutant formats codes-ue8m0-bits-threshold-one-low impl/formats_codes.hpp \
  's|(e4m3 ? 0x600000u : 0x400000u)|(e4m3 ? 0x5fffffu : 0x400000u)|'
mutant formats codes-ue8m0-value-one-power-low impl/formats_codes.hpp \
  's|std::uint64_t(byte + 896u) << 52|std::uint64_t(byte + 895u) << 52|'

# formats on CUDA (staged): the index block's scale section one row off, a slot
# given twice not refused, or refused at the earlier row, the E2M1 table's sides
# swapped, the scale's inverse one power off, a placeholder's row stored at byte 0,
# a group's amax taken from one half of it
cuda_mutant formats cuda-index-scales-one-row-off impl/cuda/formats_rows.cuh \
  's|    return block \* rows_per_block \* row_bytes + rows_per_block \* (dim / 2) +|    return block * rows_per_block * row_bytes + (rows_per_block - 1) * (dim / 2) +|'
cuda_mutant formats cuda-slot-twice-not-refused impl/cuda/formats_store.cuh \
  's|    if (before != ~0u) atomicMin|    if (false \&\& before != ~0u) atomicMin|'
cuda_mutant formats cuda-slot-twice-refused-at-the-earlier-row impl/cuda/formats_store.cuh \
  's|refusal(0, before > j ? before : j)|refusal(0, before > j ? j : before)|'
cuda_mutant formats cuda-e2m1-sides-swapped impl/cuda/formats_rows.cuh \
  's|return q == v ? 0 : q > v ? 1 : 2;|return q == v ? 0 : q > v ? 2 : 1;|'
cuda_mutant formats cuda-inverse-scale-one-power-off impl/cuda/formats_store.cuh \
  's|unsigned(254 - scale) << 23|unsigned(253 - scale) << 23|'
cuda_mutant formats cuda-placeholder-stored-at-byte-0 impl/cuda/formats_rows.cuh \
  's|  p.stored = p.row < b.count \&\& lay.inside(slot);|  p.stored = p.row < b.count \&\& (slot == -1 \|\| lay.inside(slot));|'
cuda_mutant formats cuda-group-amax-from-one-half impl/cuda/formats_store.cuh \
  's|bits = max(bits, __shfl_xor_sync(kAll, bits, 1));|bits = max(bits, 0u);|'

# parallel (impl/cpu/parallel.hpp): a share given every thread, not its part; a
# share's count left set on the calling thread after the call
mutant parallel share-given-every-thread impl/cpu/parallel.hpp \
  's|    } share(std::max<std::size_t>(1, hw / threads));|    } share(hw);|'
mutant parallel share-not-restored impl/cpu/parallel.hpp \
  's|      ~Share() { threads_of_this_share() = outer; }|      ~Share() {}|'

# sharing: refinement checked the wrong way round, a source's ownership not
# required, the YOCO boundary ignored, a setting left out of the match, a shared
# object counted once per reader
mutant sharing model-refinement-reversed model/sharing.cpp \
  's|      if (coarse\[std::size_t(fine\[l\])\] != coarse\[l\])|      if (fine[std::size_t(coarse[l])] != fine[l])|'
mutant sharing cpu-refinement-reversed impl/cpu/sharing.cpp \
  's|      if (coarse\[std::size_t(maps.maps\[m\]\[l\])\] != coarse\[l\])|      if (maps.maps[m][std::size_t(coarse[l])] != maps.maps[m][l])|'
mutant sharing model-owner-not-required model/sharing.cpp \
  's|      if (map\[std::size_t(s)\] != s) return|      if (false) return|'
mutant sharing model-yoco-ignored model/sharing.cpp \
  's|    if (s < boundary) return|    if (s < 0) return|'
mutant sharing cpu-kv-dim-not-matched impl/cpu/sharing.cpp \
  's|s.ratio, s.block_size, s.kv_dim},|s.ratio, s.block_size, 0},|'
mutant sharing cpu-shared-object-counted-per-reader impl/cpu/sharing.cpp \
  's|      if (maps.maps\[m\]\[l\] == std::int32_t(l)) {|      if (maps.maps[m][l] >= 0) {|'

# indexer: tie order, signed zeros, the valid end, the tie quota, a radix digit,
# candidates past the end. (hist[d] >= rank -> > rank is an equivalent mutant: the
# threshold moves to the largest key below the needed ones, the output does not.)
mutant indexer cpu-ties-to-higher-index impl/cpu/indexer.cpp \
  's|for (std::size_t j = 0; j < n \&\& written < k; ++j) {|for (std::size_t jj = n; jj-- > 0 \&\& written < k;) { const std::size_t j = jj;|'
mutant indexer cpu-signed-zeros-differ impl/cpu/indexer.cpp \
  's|  return key + (key == 0x7fffffffu);  // -0.s key, one below +0.s|  return key;|'
mutant indexer cpu-kept-keys-from-higher-digits impl/cpu/indexer.cpp \
  's|      left += digit(key) == d;|      left += digit(key) >= d;|'
mutant indexer cpu-reads-past-end impl/cpu/indexer.cpp \
  's|select_row(scores.data() + r \* width, std::size_t(ends\[r\]), k|select_row(scores.data() + r * width, std::min(width, std::size_t(ends[r]) + 1), k|'
mutant indexer cpu-tie-quota-ignored impl/cpu/indexer.cpp 's|        ties -= key == threshold;||'
mutant indexer cpu-radix-digit-lost impl/cpu/indexer.cpp 's|kBits\[3\] = {11, 11, 10}|kBits[3] = {11, 11, 9}|'
mutant indexer model-candidates-ignore-end model/indexer.cpp \
  's|         j < std::min((std::size_t(b) + 1) \* block_size, end); ++j)|         j < (std::size_t(b) + 1) * block_size \&\& j < row.size(); ++j)|'
mutant indexer model-ties-to-higher-index model/indexer.cpp \
  's|return score_a > score_b \|\| (score_a == score_b \&\& a < b);|return score_a > score_b \|\| (score_a == score_b \&\& a > b);|'

# indexer scores: ReLU dropped, E4M3 scale dropped, a head skipped, and a
# certified bound too tight to hold (the L2 property must notice the real error)
mutant indexer cpu-no-relu impl/cpu/indexer_scores.cpp \
  's|score0 = _mm256_fmadd_ps(w, _mm256_max_ps(acc\[i\]\[0\], zero), score0);|score0 = _mm256_fmadd_ps(w, acc[i][0], score0);|'
mutant indexer cpu-scale-dropped impl/cpu/indexer_scores.cpp \
  's|                 ? scores\[t\] \* row_scale(|                 ? scores[t] + 0 * row_scale(|'
mutant indexer cpu-head-skipped impl/cpu/indexer_scores.cpp 's|  for (; h < heads; ++h)$|  for (++h; h < heads; ++h)|'
mutant indexer model-bound-too-tight model/indexer.cpp \
  's|return magnitude_bounds(queries, weights, keys, keys.dim + weights.size() + 2);|return magnitude_bounds(queries, weights, keys, 1);|'

mutant indexer cpu-non-finite-rows-scanned-backwards impl/cpu/indexer.cpp \
  's|    if (auto j = first_non_finite(scores.data() + r \* width, std::size_t(ends\[r\])))|    if (auto j = first_non_finite(scores.data() + (rows - 1 - r) * width, std::size_t(ends[rows - 1 - r])))|; s|      return ie::NonFiniteScore{r, \*j};|      return ie::NonFiniteScore{rows - 1 - r, *j};|'
mutant indexer cpu-output-checked-before-data impl/cpu/indexer.cpp \
  's|  for (std::size_t r = 0; r < rows; ++r)$|  if (out.size() != rows * k) return ie::ShapeMismatch{rows * k, out.size()};\n  for (std::size_t r = 0; r < rows; ++r)|'
mutant indexer cpu-chunk-sizing-ignores-logit-width impl/cpu/indexer.cpp \
  's|  const std::size_t row_bytes = row_width \* bytes_per_logit;|  const std::size_t row_bytes = row_width * 4;|'
mutant indexer cpu-batch-scores-the-first-query-for-all impl/cpu/indexer_scores.cpp \
  's|        score_tile_avx2(queries.subspan(q \* heads \* dim, heads \* dim),|        score_tile_avx2(queries.subspan(0, heads * dim),|'
mutant indexer cpu-key-check-skipped impl/cpu/key_rows.hpp 's|  return bad != 0;|  return bad != 0 \&\& false;|'

# paging: offset, valid count, table bound, negative blocks and the slot bound; the masked conversion refusing, its table bound
mutant paging cpu-offset-plus-one impl/cpu/paging.cpp \
  's|slot = block \* bc + j % bc;|slot = block * bc + j % bc + 1;|'
mutant paging cpu-valid-count-inclusive impl/cpu/paging.cpp \
  's|if (i < valid \&\& j >= 0|if (i <= valid \&\& j >= 0|'
mutant paging model-table-bound model/paging.cpp \
  's|std::uint64_t(j / bc) >= table.size())|std::uint64_t(j / bc) > table.size())|'
mutant paging model-masked-refuses model/paging.cpp \
  's|      else if (!masked)$|      else|'
mutant paging cpu-negative-blocks-fit impl/cpu/paging.cpp \
  's|  return block >= 0 \&\& block <= |  return block <= |'
mutant paging cpu-slot-bound-off-by-one impl/cpu/paging.cpp \
  's|(std::numeric_limits<std::int32_t>::max() - offset) / bc;|(std::numeric_limits<std::int32_t>::max() - offset) / bc + 1;|'
mutant paging cpu-masked-table-bound impl/cpu/paging.cpp \
  's|std::uint64_t(j / bc) < blocks_per_request) {|std::uint64_t(j / bc) <= blocks_per_request) {|'

mutant paging cpu-output-length-checked-first impl/cpu/paging.cpp \
  's|^  if (ratio <= 0 \|\| block_tokens <= 0 \|\| block_tokens % ratio != 0)$|  if (out_size != lanes) return pe::ShapeMismatch{lanes, out_size};\n&|'
mutant paging cpu-table-checked-before-lanes impl/cpu/paging.cpp \
  's|^  if (lanes != requests \* k) return pe::ShapeMismatch{requests \* k, lanes};|  if (table_size != requests * blocks_per_request) return pe::ShapeMismatch{requests * blocks_per_request, table_size};\n&|'

# compress: the ring a prefill keeps, the placeholder row, the ring slot, the
# capacity bound, the softmax denominator, exp's range reduction, the old entries checked,
# the rows a chunk completes, the pair form's weight given to the wrong score
mutant compress model-ring-keeps-one-less model/compress.cpp \
  's|for (std::int64_t p = std::max(s, e - S); p < e; ++p)$|for (std::int64_t p = std::max(s, e - S + 1); p < e; ++p)|'
mutant compress cpu-placeholder-missing impl/cpu/compress.cpp \
  's|      if (out == plan.row_offset\[i\]) write_row(c, out, -1, read);  // placeholder||'
mutant compress cpu-ring-slot-shifted impl/cpu/compress.cpp \
  's|ring_entry_offset(q.state_slot, p, S, width), from|ring_entry_offset(q.state_slot, p + 1, S, width), from|'
mutant compress api-capacity-one-short api/compress.hpp \
  's|  return decode ? ratio + qmax - 1 : ratio;|  return decode ? ratio + qmax - 2 : ratio;|'
mutant compress math-denominator-counts-positions impl/compress_math.hpp 's|    den += e;|    den += 1.0f;|'
mutant compress math-exp-drops-ln2-low-part impl/compress_math.hpp 's|  f = fmaf(k, 2.12194440e-4f, f);||'
mutant compress math-exp-rounds-the-product-twice impl/compress_math.hpp \
  's|  const float t = fmaf(xc, 1.44269504088896341f, kRound);|  const float t = xc * 1.44269504088896341f + kRound;|'
mutant compress cpu-exp8-k-minus-150-scaled-once impl/cpu/compress.cpp \
  's|_mm256_cmpgt_epi32(ki, _mm256_set1_epi32(-150))|_mm256_cmpgt_epi32(ki, _mm256_set1_epi32(-151))|'
mutant compress cpu-bf16-eight-lanes-packed-wrong impl/cpu/compress.cpp \
  's|_mm256_permute4x64_epi64(packed, 0x08)|_mm256_permute4x64_epi64(packed, 0x00)|'
mutant compress impl-old-entries-unchecked impl/compress_plan.hpp \
  's|return {q.start / ratio \* ratio, q.start};|return {q.start, q.start};|'
mutant compress model-refusal-may-change-pending-inputs model/compress.cpp \
  's|      if (!pending.contains(entry_of(p))) may_change.insert(entry_of(p));|      may_change.insert(entry_of(p));|'
# bf16 ties rounded other than to even (the eight-lane path down, the scalar one
# away), and the score gate weighting every position by the first one's score
mutant compress cpu-bf16-eight-lanes-ties-down impl/cpu/compress.cpp \
  's|      _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd), 16);|      _mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), 16);|'
mutant compress math-bf16-ties-away impl/compress_math.hpp \
  's|  return std::uint16_t((bits + 0x7fffu + ((bits >> 16) \& 1u)) >> 16);|  return std::uint16_t((bits + 0x8000u) >> 16);|'
mutant compress model-score-gate-weights-by-the-first-score model/compress.cpp \
  's|    for (const Rational\& s : g) w.push_back(exp_enclosure(s - m));|    for (const Rational\& s : g) w.push_back(exp_enclosure(g.front() + 0 * s - m));|'
# a decode step keeping only its first position in the ring (killed by the verify
# batch and rollback identities)
mutant compress cpu-decode-keeps-one-position impl/cpu/compress.cpp \
  's|      for (std::int64_t p = s; p < e; ++p) copy_to_ring(c, q, p, input(p));|      for (std::int64_t p = s; p < std::min(e, s + 1); ++p) copy_to_ring(c, q, p, input(p));|'
mutant compress model-chunk-completes-one-less model/compress.cpp \
  's|for (std::int64_t j = s / ratio; j < e / ratio; ++j) {|for (std::int64_t j = s / ratio; j < (e - 1) / ratio; ++j) {|'
mutant compress math-pair-weight-on-the-wrong-score impl/compress_math.hpp \
  's|const float e0 = s0 < s1 ? e : 1.0f|const float e0 = s0 > s1 ? e : 1.0f|'

# compress refusals in another order than the model's (calls with several faults)
mutant compress impl-positions-checked-before-row-index impl/compress_plan.hpp \
  's|^  if (row_index != plan.rows) return ce::ShapeMismatch{plan.rows, row_index};|  if (positions != plan.rows) return ce::ShapeMismatch{plan.rows, positions};\n&|'
mutant compress impl-ring-size-checked-before-requests impl/compress_plan.hpp \
  's|^  std::vector<unsigned char> used(shape.state_slots,|  if (std::int64_t(shape.ring) < shape.ratio) return ce::RingTooSmall{shape.ring, shape.ratio};\n&|'
mutant compress cpu-ring-checked-before-inputs impl/cpu/compress.cpp \
  's|^  if (bad != c.projected.end())$|  if (bad != c.projected.end() \&\& false)|'

# CUDA (run by scripts/gpu.sh): compression's prefill writing the ring entries of its
# pending inputs before its rows read them, or on a refused call; the checked copies
# or the old ring entries left unchecked; the index a 16-byte group reports; a
# prefill's ring keeping one position less; a ring entry one position off; the
# verdict not reset; the rows computed with the previous chunk's latents (the
# prefetched ones dropped); a call captured in a graph copying its requests from the
# pinned mirror later calls reuse (or storing only the first piece of them, or not
# waiting for the pieces on other streams); a table of 8 or 16 KiB stored short of
# its last 16 bytes; the streamed pair rows reading the stage after their own or
# skipping a row's last chunk; decode leaving a position whose group completes just
# past the step out of the ring; the warp's table search overshooting; the bits the top-k's
# index sort covers, an index read off its bitmap, a gathered score read again one
# place off, the K-th's bucket (or its split by the next bits) taken whole, a warp's
# appends one place off, rows left to the one-block method not counted, a queued
# call's verdict not reset by the sample; slots
# written despite a refusal, the reverse pass skipping a block, the one-pass kernel
# skipping its last quad (or its last quad in shared memory), the one-pass
# kernel not resetting its verdict, a row at the table's end taken as in it, the lane and
# row divisions rounding down, a quad's lanes swapped.
cuda_mutant compress cuda-prefill-writes-pending-entries-before-its-rows impl/cuda/compress_kernels.cu \
  's|^  const RequestMeta\* requests = c.table.table();$|  const RequestMeta* requests = c.table.table(); keep_last_positions(c, requests, true);|'
cuda_mutant compress cuda-prefill-deferred-writes-ignore-the-verdict impl/cuda/compress_kernels.cu \
  's|  if (\*c.refusal != kNoRefusal) return;||'
cuda_mutant compress cuda-checked-copies-unchecked impl/cuda/compress_rows.cuh \
  's|        if (!all_finite(x\[k\]))$|        if (false)|'
cuda_mutant compress cuda-old-ring-entries-unchecked impl/cuda/compress_rows.cuh \
  's|        if (!isfinite(component(s\[t\], int(c)))) report(|        if (in[t].code < kRingCode \&\& !isfinite(component(s[t], int(c)))) report(|'
cuda_mutant compress cuda-nan-index-of-the-group impl/cuda/compress_rows.cuh \
  's|report(refusal, in\[t\].code + d + c);|report(refusal, in[t].code + d);|'
cuda_mutant compress cuda-ring-keeps-one-less impl/cuda/compress_kernels.cu \
  's|    if (k >= least(g.ring, std::size_t(q.tokens))) continue;|    if (k + 1 >= least(g.ring, std::size_t(q.tokens))) continue;|'
cuda_mutant compress cuda-ring-entry-one-position-off impl/cuda/compress_table.cuh \
  's|  return ring_entry_offset(q.slot, p, g.ring, g.width);|  return ring_entry_offset(q.slot, p + 1, g.ring, g.width);|'
cuda_mutant compress cuda-verdict-not-reset impl/cuda/device.cu \
  's|  return cudaMemsetAsync(verdict, 0xff, sizeof \*verdict, stream);|  return 0;|'
cuda_mutant compress cuda-search-overshoots-a-request-start impl/cuda/compress_table.cuh \
  's|std::size_t(offset(requests\[probe(lane)\])) <= x;|std::size_t(offset(requests[probe(lane)])) <= x + 1;|'
cuda_mutant compress cuda-captured-table-from-the-pinned-mirror impl/cuda/device.cu \
  's|  if (capture == cudaStreamCaptureStatusActive)$|  if (false)|'
cuda_mutant compress cuda-captured-table-first-piece-only impl/cuda/device.cu \
  's|  for (std::size_t p = 0; p < pieces; ++p) {|  for (std::size_t p = 0; p < 1; ++p) {|'
cuda_mutant compress cuda-captured-table-pieces-not-joined impl/cuda/device.cu \
  's|    if (cudaError_t e = cudaStreamWaitEvent(stream, fan->fan_joined, 0); e != cudaSuccess) return e;||'
cuda_mutant compress cuda-piece-blocks-copy-the-same-bytes impl/cuda/device.cu \
  's|  const std::size_t first = std::size_t(blockIdx.x) \* blockDim.x + threadIdx.x;|  const std::size_t first = threadIdx.x;|'
cuda_mutant compress cuda-8k-pieces-short-of-their-last-word impl/cuda/device.cu \
  's|    return store_pieces<2 \* kSmallPiece>(host, bytes, stream, device, fan);|    return store_pieces<2 * kSmallPiece>(host, bytes - 16, stream, device, fan);|'
cuda_mutant compress cuda-16k-pieces-short-of-their-last-word impl/cuda/device.cu \
  's|    return store_pieces<4 \* kSmallPiece>(host, bytes, stream, device, fan);|    return store_pieces<4 * kSmallPiece>(host, bytes - 16, stream, device, fan);|'
cuda_mutant compress cuda-stream-reads-the-next-stage impl/cuda/compress_kernels.cu \
  's|  unsigned u = 0, refill = kStreamStages - 1;|  unsigned u = 1, refill = kStreamStages - 1;|'
cuda_mutant compress cuda-stream-skips-a-row-s-last-chunk impl/cuda/compress_kernels.cu \
  's|    if (++at.chunk == chunks) at.chunk = 0, ++at.row;|    if (++at.chunk + 1 >= chunks) at.chunk = 0, ++at.row;|'
cuda_mutant compress cuda-decode-ring-skips-a-pending-position impl/cuda/compress_kernels.cu \
  's|    return R > 0 \&\& p / r \* r + r - 1 < q.start + q.tokens;|    return R > 0 \&\& p / r * r + r - 1 <= q.start + q.tokens;|'
cuda_mutant compress cuda-prefetched-latents-unused impl/cuda/compress_rows.cuh \
  's|for (int t = 0; t < R; ++t) s\[k\]\[t\] = next_s\[k\]\[t\], v\[k\]\[t\] = next_v\[k\]\[t\];|for (int t = 0; t < R; ++t) s[k][t] = next_s[k][t];|'
cuda_mutant indexer cuda-index-sort-one-bit-short impl/cuda/indexer_read_once_finish.cu \
  's|Sort(index, 0, index_bits);|Sort(index, 0, index_bits - 1);|'
cuda_mutant indexer cuda-gather-rereads-the-next-score impl/cuda/indexer_read_once.cu \
  's|return order_key(chunk_scores\[j - first\]); });|return order_key(chunk_scores[j - first + 1]); });|'
cuda_mutant indexer cuda-sub-bucket-taken-whole impl/cuda/indexer_read_once_finish.cu \
  's|      warp_append(c < in_bucket \&\& sub\[i\] > sub_bucket,|      warp_append(c < in_bucket \&\& sub[i] >= sub_bucket,|'
cuda_mutant indexer cuda-bitmap-place-counts-its-own-bit impl/cuda/indexer_read_once_finish.cu \
  's|__popc(bits\[word\] \& ((1u << (x % 32)) - 1));|__popc(bits[word] \& (1u << (x % 32)));|'
cuda_mutant indexer cuda-topk-verdict-not-reset impl/cuda/indexer_read_once.cu \
  's|      verdict->refusal = kNoRefusal, verdict->detail\[0\] = 0,|      verdict->detail[0] = 0,|'
cuda_mutant indexer cuda-bucket-taken-whole impl/cuda/indexer_read_once_finish.cu \
  's|    warp_append(valid \&\& level > bucket,|    warp_append(valid \&\& level >= bucket,|'
cuda_mutant indexer cuda-warp-append-place-off impl/cuda/read_once.cuh \
  's|  if (take) write(base + unsigned(__popc(mask \& ((1u << lane) - 1))));|  if (take) write(base + unsigned(__popc(mask \& (1u << lane))));|'
cuda_mutant indexer cuda-slow-rows-not-counted impl/cuda/indexer_read_once_finish.cu \
  's|      atomicAdd(reinterpret_cast<unsigned long long\*>(\&verdict->detail\[slow_path\]), 1ull);|      (void)0;|'
cuda_mutant indexer cuda-refined-ties-to-higher-index impl/cuda/indexer_read_once_finish.cu \
  's|  const auto merit = \[\](unsigned long long item) { return ~item; };|  const auto merit = [](unsigned long long item) { return item ^ 0xffffffff00000000ull; };|'
cuda_mutant indexer cuda-plateau-ties-taken-after-the-first-chunk impl/cuda/indexer_read_once_finish.cu \
  's|  for (std::size_t c = 0; c < used \&\& taken < wanted; ++c) {|  for (std::size_t c = used > 1; c < used \&\& taken < wanted; ++c) {|'
cuda_mutant indexer cuda-overflowing-list-dropped impl/cuda/indexer_read_once_finish.cu \
  's|  const unsigned count = row.candidates;|  const unsigned count = min(row.candidates, unsigned(kCandidates));|'
cuda_mutant indexer cuda-refined-bin-of-the-kth-dropped impl/cuda/indexer_read_once_finish.cu \
  's|    warp_append(valid \&\& (merit(item) \& fixed) >= prefix,|    warp_append(valid \&\& (merit(item) \& fixed) > prefix,|'
cuda_mutant indexer cuda-list-round-place-off impl/cuda/indexer_read_once.cu \
  's|  const unsigned below = (1u << lane) - 1;|  const unsigned below = (2u << lane) - 1;|'
cuda_mutant paging cuda-refusal-not-recorded impl/cuda/paging.cu \
  's|  if (Checked \&\& lowest != kNoRefusal) atomicMin(refusal, lowest);||'
cuda_mutant paging cuda-refused-lane-written-as-minus-one impl/cuda/paging_lanes.cuh \
  's|                       : KeepRefused \&\& taken \&\& !good ? j\[base + u\]\[e\]|                       : false ? j[base + u][e]|'
cuda_mutant paging cuda-pass-skips-a-block impl/cuda/paging.cu \
  's|  for (int u = 0; u < kQuads; ++u) load_quad<Vector>(rows, quad_of(blockIdx.x, u), g.lanes, j\[u\]);|  for (int u = 0; u < kQuads; ++u) load_quad<Vector>(rows, quad_of(blockIdx.x \| 1, u), g.lanes, j[u]);|'
cuda_mutant paging cuda-pass-skips-its-last-quad impl/cuda/paging.cu \
  's|  for (int u = 0; u < kQuads; ++u) store_quad<Vector>(out, quad_of(blockIdx.x, u), g.lanes, j\[u\]);|  for (int u = 0; u + 1 < kQuads; ++u) store_quad<Vector>(out, quad_of(blockIdx.x, u), g.lanes, j[u]);|'
cuda_mutant paging cuda-wide-slot-bound-off-by-one impl/cuda/paging_lanes.cuh \
  's|  if (block < 0 \|\| block > (kMaxSlot - offset) / g.bc) {|  if (block < 0 \|\| block > (kMaxSlot - offset) / g.bc + 1) {|'
cuda_mutant paging cuda-row-at-the-table-end-taken impl/cuda/paging.cu \
  's|std::min<std::uint64_t>(blocks_per_request \* bc, kRowLimit)|std::min<std::uint64_t>(blocks_per_request * bc + 1, kRowLimit)|'
cuda_mutant paging cuda-divisor-rounds-down impl/cuda/paging_lanes.cuh \
  's|((std::uint64_t(1) << l) - d) / d + 1);|((std::uint64_t(1) << l) - d) / d);|'
cuda_mutant paging cuda-quad-lanes-swapped impl/cuda/paging.cu \
  's|j\[0\] = v.x, j\[1\] = v.y|j[0] = v.y, j[1] = v.x|'

if [ -n "$check_only" ]; then
  echo "mutants: $survivors expressions no longer apply"
  exit $((survivors > 0))
fi
# every suite rebuilt from the restored sources (the CUDA ones too: staging leaves
# the last mutant built)
for c in $only; do
  targets=$(suites_of "$c" | xargs -r -n1 basename)
  [ -z "$targets" ] || cmake --build "$build" --target $targets >/dev/null 2>&1
done
[ -n "$stage" ] && { echo "mutants: staged in $stage ($survivors failed to stage)"; exit $((survivors > 0)); }
echo "mutants: $survivors survived"
exit $((survivors > 0))
