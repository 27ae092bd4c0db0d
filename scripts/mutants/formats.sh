# The formats mutants of scripts/mutants.sh (sourced by it): mutant COMPONENT NAME FILE
# SED-EXPRESSION, cuda_mutant for those that need a GPU.
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
# an E2M1 class blind to one bit under its two fraction bits
mutant formats codes-e2m1-class-misses-bit-19 impl/formats_codes.hpp \
  's|const std::uint32_t low = bits \& 0xfffffu;|const std::uint32_t low = bits \& 0x7ffffu;|'

# formats on CUDA (staged): the index block's scale section one row off, a slot
# given twice not refused, or refused at the earlier row, the E2M1 table's negative
# classes left with the fill's first codes, the scale's inverse one power off, a
# placeholder's row stored at byte 0, a group's amax taken from one half of it
cuda_mutant formats cuda-index-scales-one-row-off impl/cuda/formats_rows.cuh \
  's|    return block \* rows_per_block \* row_bytes + rows_per_block \* (dim / 2) +|    return block * rows_per_block * row_bytes + (rows_per_block - 1) * (dim / 2) +|'
cuda_mutant formats cuda-slot-twice-not-refused impl/cuda/formats_store.cuh \
  's|    if (held == kUnclaimed) return;|    if (true) return;|'
cuda_mutant formats cuda-slot-twice-refused-at-the-earlier-row impl/cuda/formats_store.cuh \
  's|refusal(0, before > j ? before : j)|refusal(0, before > j ? j : before)|'
cuda_mutant formats cuda-e2m1-negative-classes-unfilled impl/cuda/formats_rows.cuh \
  's|const unsigned c = (i < 64 ? 992 : 2976) + i;|const unsigned c = (i < 64 ? 992 : 928) + i;|'
cuda_mutant formats cuda-inverse-scale-one-power-off impl/cuda/formats_store.cuh \
  's|unsigned(254 - scale) << 23|unsigned(253 - scale) << 23|'
cuda_mutant formats cuda-placeholder-stored-at-byte-0 impl/cuda/formats_rows.cuh \
  's|  p.stored = p.row < b.count \&\& lay.inside(slot);|  p.stored = p.row < b.count \&\& (slot == -1 \|\| lay.inside(slot));|'
cuda_mutant formats cuda-group-amax-from-one-half impl/cuda/formats_store.cuh \
  's|bits = max(bits, __shfl_xor_sync(kAll, bits, 1));|bits = max(bits, 0u);|'
# the staged values read back without the fetch's swizzle; a lane's codes whose
# last bytes (past its last aligned word) are never written into the item's image
cuda_mutant formats cuda-stage-read-unswizzled impl/cuda/formats_store.cuh \
  's|const float4 quad = stage\[key ^ u\];|const float4 quad = stage[i / 4 + u];|'
cuda_mutant formats cuda-image-trailing-bytes-dropped impl/cuda/formats_store.cuh \
  's|if (s != 0 \&\& m + 4 >= N + s)|if (s != 0 \&\& m + 4 > N + s)|'
# a lane's part that reaches its row's end exactly left in that row (the step's
# wrap one element late); a second claim on a slot taken as another slot's entry
cuda_mutant formats cuda-lane-step-wraps-one-late impl/cuda/formats_rows.cuh \
  's|if (p.at >= b.dim) p.at -= b.dim, ++p.row;|if (p.at > b.dim) p.at -= b.dim, ++p.row;|'
cuda_mutant formats cuda-claim-of-the-same-slot-probes-on impl/cuda/formats_store.cuh \
  's|if (held >> 32 != unsigned(s)) continue;|if (held >> 32 != unsigned(s) + 1) continue;|'
# a direct claims' table whose answers are never settled (a slot given twice not
# refused there)
cuda_mutant formats cuda-direct-claim-unsettled impl/cuda/formats_store.cuh \
  's|  if (before != kNoRow) refuse_the_later(before, j, verdict);|  if (false) refuse_the_later(before, j, verdict);|'
# the claims' table half cleared: a later call finds an earlier call's claims
cuda_mutant formats cuda-claims-half-cleared impl/cuda/formats.cu \
  's|i < words; i += stride)|i < words / 2; i += stride)|'
# the store's first kernel not resetting the verdict: a refusal outlives its call
cuda_mutant formats cuda-store-verdict-not-reset impl/cuda/formats.cu \
  's|if (blockIdx.x == 0 \&\& threadIdx.x == 0) \*verdict = |if (blockIdx.x == 0 \&\& threadIdx.x == 0 \&\& false) *verdict = |'
# the evict-first fetch (impl/cuda/evict_first.cuh) copying zeros: IndexFp4's store reads it
cuda_mutant formats cuda-index-fetch-zero-filled impl/cuda/evict_first.cuh \
  's|\[%0\], \[%1\], 16, %2;|[%0], [%1], 16, 0, %2;|'
# a queued call's scratch (the store's claims' table) waiting for the device first:
# a store queued behind a held stream does not return
cuda_mutant formats cuda-queued-table-waits-for-the-device impl/cuda/device_scratch.cu \
  's|  s->current = \*device;|  s->current = *device; if (!captured) cudaStreamSynchronize(stream);|'
