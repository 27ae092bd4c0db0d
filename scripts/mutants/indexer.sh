# The indexer mutants of scripts/mutants.sh (sourced by it): mutant COMPONENT NAME FILE
# SED-EXPRESSION, cuda_mutant for those that need a GPU.
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
  's|? scores\[t\] \* row_scale(keys, rows\[t\])|? scores[t] + 0 * row_scale(keys, rows[t])|'
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
# keys named by id (index_scores_at) all read at the first id
mutant indexer cpu-keys-by-id-read-at-the-first-id impl/cpu/indexer_scores.cpp \
  's|(ids != nullptr ? std::size_t(ids\[r\]) : r)|(ids != nullptr ? std::size_t(ids[0]) : r)|'
mutant indexer cpu-key-check-skipped impl/cpu/key_rows.hpp 's|  return bad != 0;|  return bad != 0 \&\& false;|'

cuda_mutant indexer cuda-index-sort-one-bit-short impl/cuda/indexer_read_once_finish.cu \
  's|Sort(index, 0, index_bits);|Sort(index, 0, index_bits - 1);|'
cuda_mutant indexer cuda-gather-rereads-the-next-score impl/cuda/indexer_read_once.cu \
  's|return order_key(chunk_scores\[j - first\]); });|return order_key(chunk_scores[j - first + 1]); });|'
cuda_mutant indexer cuda-sub-bucket-taken-whole impl/cuda/read_once_select.cuh \
  's|      warp_append(c < in_bucket \&\& sub\[i\] > sub_bucket,|      warp_append(c < in_bucket \&\& sub[i] >= sub_bucket,|'
cuda_mutant indexer cuda-bitmap-place-counts-its-own-bit impl/cuda/indexer_read_once_finish.cu \
  's|__popc(bits\[word\] \& ((1u << (x % 32)) - 1));|__popc(bits[word] \& (1u << (x % 32)));|'
cuda_mutant indexer cuda-topk-verdict-not-reset impl/cuda/indexer_read_once_sample.cu \
  's|      verdict->refusal = kNoRefusal, verdict->detail\[0\] = 0,|      verdict->detail[0] = 0,|'
cuda_mutant indexer cuda-bucket-taken-whole impl/cuda/read_once_select.cuh \
  's|    warp_append(valid \&\& level > bucket,|    warp_append(valid \&\& level >= bucket,|'
cuda_mutant indexer cuda-warp-append-place-off impl/cuda/read_once.cuh \
  's|  if (take) write(base + unsigned(__popc(mask \& ((1u << lane) - 1))));|  if (take) write(base + unsigned(__popc(mask \& (1u << lane))));|'
cuda_mutant indexer cuda-slow-rows-not-counted impl/cuda/indexer_read_once_finish.cu \
  's|      atomicAdd(reinterpret_cast<unsigned long long\*>(\&verdict->detail\[slow_path\]), 1ull);|      (void)0;|'
cuda_mutant indexer cuda-refined-ties-to-higher-index impl/cuda/read_once_select.cuh \
  's|  const auto merit = \[\](unsigned long long item) { return ~item; };|  const auto merit = [](unsigned long long item) { return item ^ 0xffffffff00000000ull; };|'
cuda_mutant indexer cuda-plateau-ties-taken-after-the-first-chunk impl/cuda/indexer_read_once_finish.cu \
  's|  for (std::size_t c = 0; c < used \&\& taken < wanted; ++c) {|  for (std::size_t c = used > 1; c < used \&\& taken < wanted; ++c) {|'
cuda_mutant indexer cuda-overflowing-list-dropped impl/cuda/indexer_read_once_finish.cu \
  's|  const unsigned count = row.candidates;|  const unsigned count = min(row.candidates, unsigned(kCandidates));|'
cuda_mutant indexer cuda-refined-bin-of-the-kth-dropped impl/cuda/read_once_select.cuh \
  's|    warp_append(valid \&\& (merit(item) \& fixed) >= prefix,|    warp_append(valid \&\& (merit(item) \& fixed) > prefix,|'
cuda_mutant indexer cuda-list-round-place-off impl/cuda/indexer_read_once.cu \
  's|  const unsigned below = (1u << lane) - 1;|  const unsigned below = (2u << lane) - 1;|'
# the scorer's query pieces: a wrapped chunk carried two head rows on, not one (left
# uncarried, a thread's pieces are still a permutation of the tile's: an equivalent
# mutant); every query of a block weighted by the first one's weight tile
cuda_mutant indexer cuda-query-piece-row-carried-twice impl/cuda/indexer_scores_tiles.cuh \
  's|    if (c >= p.chunks) c -= p.chunks, ++h;|    if (c >= p.chunks) c -= p.chunks, h += 2;|'
cuda_mutant indexer cuda-weights-of-the-first-tile impl/cuda/indexer_scores.cu \
  's|    const float\* w = weight_tile(t - t0);|    const float* w = weight_tile(0);|'
# the key tile's asynchronous copies never committed: the wait before the barrier
# finds no group pending, and the warps read the tile before it lands
cuda_mutant indexer cuda-key-tile-not-committed impl/cuda/indexer_scores.cu \
  's|  copy_async_commit();  // the key tile|  // the key tile|'
# an E4M3 key tile's piece given its low word twice (the high word's four codes lost)
cuda_mutant indexer cuda-e4m3-tile-high-word-lost impl/cuda/indexer_scores_tiles.cuh \
  's|hi\[u\] = real ? words\[2 \* c + 1\] : 0;|hi[u] = real ? words[2 * c] : 0;|'
# the read-once path synchronising its stream between two kernels: a queued call
# that waits, and under capture one that ends the capture (only the captured call's
# property sees it)
cuda_mutant indexer cuda-read-once-synchronizes-its-stream impl/cuda/indexer_read_once.cu \
  's|  if (e == 0) e = gather();|  if (e == 0) e = cudaStreamSynchronize(stream); if (e == 0) e = gather();|'
