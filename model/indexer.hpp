// Exact reference model of the indexer's selection path (source 003 A.4 and
// 001 §3): visibility, valid-prefix top-k with -1 padding, prefill offsets,
// candidate blocks, chunk sizing. Literal: sorts and sets, no selection tricks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "api/indexer.hpp"
#include "model/rational.hpp"

namespace aether::model {

// I_j = Σ_h w_h max(0, q_h · k_j), exactly, from the actual float inputs (every
// float is a dyadic rational): queries [H, D], weights [H], keys [L, D] -> [L].
// Weights may be negative, so scores may be. Refuses NaN/inf inputs.
Result<std::vector<Rational>, IndexerError> index_scores(std::span<const float> queries,
                                                         std::span<const float> weights,
                                                         std::span<const float> keys,
                                                         std::size_t dim);

// The exact value of every stored key element, row-major [L, D]: bf16 is the high
// half of a float; E4M3 is (-1)^s 2^(e-7) (1 + m/8), subnormal 2^-6 m/8 when e = 0,
// NaN for e = 15, m = 7 (no infinities), times the row's fp32 scale. Refuses a
// NaN/inf element or scale, and a negative scale (input 2 = keys).
Result<std::vector<Rational>, IndexerError> decode_keys(const IndexKeys& keys);

// The same score from stored keys.
Result<std::vector<Rational>, IndexerError> index_scores(std::span<const float> queries,
                                                         std::span<const float> weights,
                                                         const IndexKeys& keys);

// T queries at once: queries [T, H, D], weights [T, H] (H = weights.size() / T),
// out [T, L], row t the scores of query t. Refusal order: shapes, then the first
// non-finite query value and weight by flat index, then the keys.
Result<std::vector<Rational>, IndexerError> index_scores_batch(std::span<const float> queries,
                                                               std::span<const float> weights,
                                                               std::size_t query_count,
                                                               const IndexKeys& keys);

// γ_n = n u / (1 - n u), u = 2^-24: the relative error bound of n roundings in fp32.
Rational gamma(std::size_t n);

// A rigorous bound on |impl - exact| for a backend that forms each head's dot
// product in fp32 (any order, FMA or not), applies ReLU, and accumulates the
// weighted heads in fp32, with one more rounding for an E4M3 row scale:
//   err_j = γ_{D + H + 2} Σ_h |w_h| Σ_d |q_hd k_jd|.
Result<std::vector<Rational>, IndexerError> index_score_error_bounds(std::span<const float> queries,
                                                                     std::span<const float> weights,
                                                                     const IndexKeys& keys);

// The same for a backend whose dot products run on bf16 tensor cores (products
// exact, each 16-deep step a fused addition of 17 terms aligned to the largest and
// truncated to 24 bits, then normalized by truncation: < 36 u of the step's
// magnitudes, Fasi et al. 2021), then the weighted heads in fp32 as above:
//   err_j = γ_{48 ceil(D/16) + H + 2} Σ_h |w_h| Σ_d |q_hd k_jd|
// (48 per step absorbs the growth of the accumulator's magnitude across steps).
Result<std::vector<Rational>, IndexerError> tensor_core_score_error_bounds(
    std::span<const float> queries, std::span<const float> weights, const IndexKeys& keys);

// A query at original position p with compression ratio r sees floor((p + 1) / r)
// completed rows (r >= 1).
std::int64_t completed_rows(std::int64_t position, std::int64_t ratio);

// Under speculative decode, the query at offset o of next_n verified positions of
// a sequence of seq_len tokens ends its valid range at max(0, seq_len - next_n + o + 1).
std::int64_t speculative_row_end(std::int64_t seq_len, std::int64_t next_n, std::int64_t offset);

// The total order of every selection: a before b when score(a) > score(b), or the
// scores are equal and a < b.
bool ranks_before(float score_a, std::size_t a, float score_b, std::size_t b);

// Per row r of scores [rows, width]: the min(K, end_r) best of scores[r][0, end_r)
// in the total order, listed in ascending index order, padded with -1 to K.
// Entries at or past end_r are never read. Refuses an end outside [0, width] and
// NaN/inf inside a valid range.
Result<std::vector<std::int32_t>, IndexerError> valid_prefix_topk(
    std::span<const float> scores, std::size_t width, std::span<const std::int32_t> ends,
    std::size_t k);

// Prefill: logical rows plus the request's offset ks; -1 stays -1.
std::vector<std::int32_t> add_prefill_offset(std::span<const std::int32_t> rows,
                                             std::int32_t offset);

// Block b of a row covers rows [b bs, (b + 1) bs) ∩ [0, end); its score is the max
// over them. Blocks with no valid row are absent: ceil(end / bs) blocks.
Result<std::vector<float>, IndexerError> candidate_block_scores(std::span<const float> row,
                                                                std::size_t end,
                                                                std::size_t block_size);

// Token top-k inside the retained blocks only: the min(K, n) best of the n valid
// rows (< end) of the retained blocks, in the total order, listed ascending,
// padded with -1 to K. Refuses a retained block that is negative, repeated or has
// no valid row, and NaN/inf in a candidate row.
Result<std::vector<std::int32_t>, IndexerError> candidate_topk(
    std::span<const float> row, std::size_t end, std::span<const std::int32_t> retained_blocks,
    std::size_t block_size, std::size_t k);

// Compact candidate offset c -> logical row retained[c / bs] * bs + c mod bs; -1 stays -1.
Result<std::vector<std::int32_t>, IndexerError> restore_candidate_indices(
    std::span<const std::int32_t> compact, std::span<const std::int32_t> retained_blocks,
    std::size_t block_size);

// Queries per prefill chunk: floor(budget / (row_width * bytes_per_logit)), rounded
// down to a multiple of 8, at most 8192; refused when that is 0.
Result<std::size_t, IndexerError> prefill_chunk_rows(std::size_t row_width,
                                                     std::size_t budget_bytes,
                                                     std::size_t bytes_per_logit = 4);

}  // namespace aether::model
