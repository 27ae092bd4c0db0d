// CPU backend of the indexer's selection path: the model's contracts and
// refusals (model/indexer.hpp), outputs into caller buffers, nothing written on
// a refusal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "api/indexer.hpp"

namespace aether::cpu {

// out: [rows, K], rows = ends.size(). Exact radix selection, threads over rows.
Status<IndexerError> valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                       std::span<const std::int32_t> ends, std::size_t k,
                                       std::span<std::int32_t> out);

// out has rows' length and may be rows itself.
Status<IndexerError> add_prefill_offset(std::span<const std::int32_t> rows, std::int32_t offset,
                                        std::span<std::int32_t> out);

// out: ceil(end / block_size) block maxima.
Status<IndexerError> candidate_block_scores(std::span<const float> row, std::size_t end,
                                            std::size_t block_size, std::span<float> out);

// out: [K], logical rows ascending, -1 padded.
Status<IndexerError> candidate_topk(std::span<const float> row, std::size_t end,
                                    std::span<const std::int32_t> retained_blocks,
                                    std::size_t block_size, std::size_t k,
                                    std::span<std::int32_t> out);

// out has compact's length and may be compact itself.
Status<IndexerError> restore_candidate_indices(std::span<const std::int32_t> compact,
                                               std::span<const std::int32_t> retained_blocks,
                                               std::size_t block_size, std::span<std::int32_t> out);

Result<std::size_t, IndexerError> prefill_chunk_rows(std::size_t row_width,
                                                     std::size_t budget_bytes,
                                                     std::size_t bytes_per_logit = 4);

}  // namespace aether::cpu

namespace aether::cpu {

// I_j = Σ_h w_h max(0, q_h · k_j) for every stored key: queries [H, D], weights [H],
// out [L]. Evaluation order (fixed, so other backends can match it bit for bit):
// dot_h = fma(q_h,D-1, k_D-1, ... fma(q_h,0, k_0, 0)), d ascending, in fp32;
// score = fma(w_H-1, max(dot_H-1, 0), ... fma(w_0, max(dot_0, 0), 0)), h ascending;
// E4M3 rows: dots over the raw E4M3 values, then score * scale. AVX2 + FMA when the
// CPU has them, else the same operations one key at a time; threads over keys.
// Refuses NaN/inf inputs, bad shapes and negative E4M3 scales like the model.
Status<IndexerError> index_scores(std::span<const float> queries, std::span<const float> weights,
                                  const IndexKeys& keys, std::span<float> out);

// T queries at once over the same keys: queries [T, H, D], weights [T, H], out
// [T, L], row t bit for bit index_scores of query t. Each tile of keys is decoded
// once for all T queries, so that few heads a query (DoSA's screen) cost what their
// arithmetic costs. Refusals as index_scores': shapes, the first non-finite query
// value and weight by flat index, the keys, then out's length T L.
Status<IndexerError> index_scores_batch(std::span<const float> queries,
                                        std::span<const float> weights, std::size_t query_count,
                                        const IndexKeys& keys, std::span<float> out);

// index_scores_batch for the keys at `ids` alone (each in [0, L), repeats allowed):
// out [T, |ids|], query t's score i bit for bit index_scores' score of key ids[i].
// The rows are read where they are stored, a tile of 16 at a time for all T queries:
// no copy of them and no scan of them for NaN. Unchecked: for a caller that has
// checked the queries, weights, keys and ids (DoSA's CPU path, once a call), with
// out of length T |ids|.
void index_scores_at(std::span<const float> queries, std::span<const float> weights,
                     std::size_t query_count, const IndexKeys& keys,
                     std::span<const std::int32_t> ids, std::span<float> out);

// The head count at or above `heads` that the scorer runs at its full pace: it takes
// heads six at a time, then four, then one by one, and a lone head runs at about a
// third of a block's pace (118 against 40-42 ns a head and 16-key tile), so a count
// whose sixes leave 2, 3 or 5 rounds up to a four or a six (17: 18). A caller pads
// its queries with zero heads (exact zeros) to it.
std::size_t index_scores_paced_heads(std::size_t heads);

}  // namespace aether::cpu
