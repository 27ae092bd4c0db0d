# The compress mutants of scripts/mutants.sh (sourced by it): mutant COMPONENT NAME FILE
# SED-EXPRESSION, cuda_mutant for those that need a GPU.
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
mutant compress model-refusal-may-change-pending-inputs model/compress_batch.cpp \
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
# prefetched ones dropped); a call captured in a graph not storing its requests in
# its own memory (or storing only the first piece of them, or not waiting for the
# pieces on other streams); a table of 8 or 16 KiB stored short of
# its last 16 bytes; the streamed pair rows reading the stage after their own or
# skipping a row's last chunk; decode leaving a position whose group completes just
# past the step out of the ring; the warp's table search overshooting; prefill's second
# kernel queued only for its first request's pending input; the bits the top-k's
# index sort covers, an index read off its bitmap, a gathered score read again one
# place off, the K-th's bucket (or its split by the next bits) taken whole, a warp's
# appends one place off, rows left to the one-block method not counted, a queued
# call's verdict not reset by the sample; slots
# written despite a refusal, the reverse pass skipping a block, the one-pass kernel
# skipping its last quad (or its last quad in shared memory), the one-pass
# kernel not resetting its verdict, a row at the table's end taken as in it, the lane and
# row divisions rounding down, a quad's lanes swapped.
cuda_mutant compress cuda-prefill-writes-pending-entries-before-its-rows impl/cuda/compress_prefill.cu \
  's|^  const std::size_t n = table.count;$|  const std::size_t n = table.count; keep_waiting_positions(c, requests, n);|'
cuda_mutant compress cuda-prefill-deferred-writes-ignore-the-verdict impl/cuda/compress_rows.cuh \
  's|if (kOnCleanVerdict \&\& \*refusal != kNoRefusal) return;||g'
cuda_mutant compress cuda-checked-copies-unchecked impl/cuda/compress_rows.cuh \
  's|        if (!all_finite(x\[k\]))$|        if (false)|'
cuda_mutant compress cuda-old-ring-entries-unchecked impl/cuda/compress_rows.cuh \
  's|        if (!isfinite(component(s\[t\], int(c)))) report(|        if (in[t].code < kRingCode \&\& !isfinite(component(s[t], int(c)))) report(|'
cuda_mutant compress cuda-nan-index-of-the-group impl/cuda/compress_rows.cuh \
  's|report(refusal, in\[t\].code + d + c);|report(refusal, in[t].code + d);|'
cuda_mutant compress cuda-ring-keeps-one-less impl/cuda/compress_prefill.cu \
  's|    if (k >= least(g.ring, std::size_t(q.tokens))) continue;|    if (k + 1 >= least(g.ring, std::size_t(q.tokens))) continue;|'
cuda_mutant compress cuda-ring-entry-one-position-off impl/cuda/compress_table.cuh \
  's|  return ring_entry_offset(q.slot, p, g.ring, g.width);|  return ring_entry_offset(q.slot, p + 1, g.ring, g.width);|'
cuda_mutant compress cuda-verdict-not-reset impl/cuda/device.cu \
  's|  if (cudaError_t e = overlapped(reset_whole_verdict, dim3(1), 1, 0, stream, verdict)) return e;||'
cuda_mutant compress cuda-search-overshoots-a-request-start impl/cuda/compress_table.cuh \
  's|std::size_t(offset(requests\[probe(lane)\])) <= x;|std::size_t(offset(requests[probe(lane)])) <= x + 1;|'
cuda_mutant compress cuda-captured-table-not-stored impl/cuda/device_scratch.cu \
  's|  return store_pieces(host, bytes, stream, \*device, captured ? s : nullptr);|  return captured ? 0 : store_pieces(host, bytes, stream, *device, nullptr);|'
cuda_mutant compress cuda-captured-table-first-piece-only impl/cuda/device_scratch.cu \
  's|  for (std::size_t p = 0; p < pieces; ++p) {|  for (std::size_t p = 0; p < 1; ++p) {|'
cuda_mutant compress cuda-captured-table-pieces-not-joined impl/cuda/device_scratch.cu \
  's|    if (cudaError_t e = cudaStreamWaitEvent(stream, fan->fan_joined, 0); e != cudaSuccess) return e;||'
cuda_mutant compress cuda-piece-blocks-copy-the-same-bytes impl/cuda/device_scratch.cu \
  's|  const std::size_t first = std::size_t(blockIdx.x) \* blockDim.x + threadIdx.x;|  const std::size_t first = threadIdx.x;|'
cuda_mutant compress cuda-8k-pieces-short-of-their-last-word impl/cuda/device_scratch.cu \
  's|    return store_pieces<2 \* kSmallPiece>(host, bytes, stream, device, fan);|    return store_pieces<2 * kSmallPiece>(host, bytes - 16, stream, device, fan);|'
cuda_mutant compress cuda-16k-pieces-short-of-their-last-word impl/cuda/device_scratch.cu \
  's|    return store_pieces<4 \* kSmallPiece>(host, bytes, stream, device, fan);|    return store_pieces<4 * kSmallPiece>(host, bytes - 16, stream, device, fan);|'
cuda_mutant compress cuda-stream-reads-the-next-stage impl/cuda/compress_prefill.cu \
  's|  unsigned u = 0, refill = kStreamStages - 1;|  unsigned u = 1, refill = kStreamStages - 1;|'
cuda_mutant compress cuda-stream-skips-a-row-s-last-chunk impl/cuda/compress_prefill.cu \
  's|    if (++at.chunk == chunks) at.chunk = 0, ++at.row;|    if (++at.chunk + 1 >= chunks) at.chunk = 0, ++at.row;|'
cuda_mutant compress cuda-decode-ring-skips-a-pending-position impl/cuda/compress_decode.cu \
  's|    return R > 0 \&\& p / r \* r + r - 1 < q.start + q.tokens;|    return R > 0 \&\& p / r * r + r - 1 <= q.start + q.tokens;|'
cuda_mutant compress cuda-prefetched-latents-unused impl/cuda/compress_rows.cuh \
  's|for (int t = 0; t < R; ++t) s\[k\]\[t\] = next_s\[k\]\[t\], v\[k\]\[t\] = next_v\[k\]\[t\];|for (int t = 0; t < R; ++t) s[k][t] = next_s[k][t];|'
# prefill's second kernel reading the verdict without waiting for the rows' kernel
# that reports into it (a race the property cases lose at once: the second kernel
# starts with the first)
cuda_mutant compress cuda-deferred-verdict-read-before-the-rows-end impl/cuda/compress_rows.cuh \
  's|if constexpr (kOnCleanVerdict) wait_for_previous_kernel();||g'
# the waiting position found one entry off
cuda_mutant compress cuda-waiting-position-one-entry-off impl/cuda/compress_prefill.cu \
  's|    const std::int64_t p = first + ((b + i - first) % S + S) % S;|    const std::int64_t p = first + ((b + i + 1 - first) % S + S) % S;|'
# a decode part's last request one token short; a request between two parts left out
cuda_mutant compress cuda-decode-part-one-token-short impl/cuda/compress_decode.cu \
  's|  part.entry\[part.count\] = {0, 0, std::int32_t(end_token - part.first_token)};|  part.entry[part.count] = {0, 0, std::int32_t(end_token - part.first_token - 1)};|'
cuda_mutant compress cuda-decode-parts-skip-a-request impl/cuda/compress_decode.cu \
  's|    first = last;|    first = last + 1;|'
# a table in the parameters searched past the request that holds the token
cuda_mutant compress cuda-parameter-search-overshoots impl/cuda/compress_table.cuh \
  's|    (std::size_t(offset(requests\[mid\])) <= x ? lo : hi) = mid;|    (std::size_t(offset(requests[mid])) <= x + 1 ? lo : hi) = mid;|'
# prefill's second kernel queued only when its first request starts inside a group
cuda_mutant compress cuda-pending-inputs-of-the-first-request-only impl/cuda/compress.cu \
  's|  c.pending_inputs = std::any_of(requests.begin(), requests.end(),|  c.pending_inputs = std::any_of(requests.begin(), requests.begin() + 1,|'
# the evict-first fetch (impl/cuda/evict_first.cuh) copying zeros: prefill's row items read
# it in calls up to cuda::kPrefillEvictFirstElements
cuda_mutant compress cuda-prefill-fetch-zero-filled impl/cuda/evict_first.cuh \
  's|\[%0\], \[%1\], 16, %2;|[%0], [%1], 16, 0, %2;|'
# the plain fetch copying zeros: prefill's row items in larger calls (the 72 x 1024
# prefill reads it) and the MainFp8 store's values
cuda_mutant compress cuda-prefill-plain-fetch-zero-filled impl/cuda/evict_first.cuh \
  's|cp.async.cg.shared.global \[%0\], \[%1\], 16;" ::"r"(to)|cp.async.cg.shared.global [%0], [%1], 16, 0;" ::"r"(to)|'
