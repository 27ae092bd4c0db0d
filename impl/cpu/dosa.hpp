// CPU backend of DoSA (model/dosa.hpp): a batch of queries' pruned top-K over the
// same stored keys. Each query's lanes equal, bit for bit, full scoring
// (cpu::index_scores) followed by cpu::valid_prefix_topk. docs/dosa.md proves the
// float bound's margin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "api/dosa.hpp"

namespace aether::cpu {

using aether::DosaOptions;
using aether::DosaStats;

// queries [T, H, D] fp32, weights [T, H], keys [L] in any KeyFormat, seeds shared by
// the batch (distinct, visible), plans [T], out [T, K]: per query the best
// min(K, L) keys in the total order (higher score, then lower index), ascending,
// -1 padded. Refusals, in this order: shapes; the first NaN/inf query value, then
// weight, by flat index; the keys as the scorer refuses them; a bad seed; plans'
// length and a bad plan; fewer than K seeds while L > K; out's length. Nothing is
// written on a refusal.
//
// Per query: full scoring with L <= K, or when the screen cannot pay: S H +
// L (|R| + 1 + 9) + rho (L - S) H >= 0.9 L H, with rho = 0 before screening
// and, after the first 2048 screened keys that are not seeds, their survivor rate
// (a batch whose probe says no scores its later queries in full too). Else tau =
// the K-th best seed score; every other key's float bound U (the retained heads
// with folded weights and a_A, scored by the scorer, plus the residual term and
// the rounding margin) compared with tau; survivors scored by the scorer, those
// below tau dropped, the rest merged with the seeds' top-K.
Status<DosaError> dosa_topk(std::span<const float> queries, std::span<const float> weights,
                            std::size_t query_count, const IndexKeys& keys, std::size_t k,
                            std::span<const std::int32_t> seeds, std::span<const DosaPlan> plans,
                            std::span<std::int32_t> out, const DosaOptions& options = {},
                            DosaStats* stats = nullptr);

// The float bound U of every key for one query [H, D] under a valid plan, checked
// inputs (out [L]): what dosa_topk compares with tau. U >= the scorer's own score
// of the key, whatever the inputs (the properties check it).
void dosa_bounds(std::span<const float> query, std::span<const float> weights,
                 const IndexKeys& keys, const DosaPlan& plan, std::span<double> out);

// The plan rule of model::plan_heads in double arithmetic for one query [H, D]; the
// sample keys are rows `sample` of `keys` (equal to the model's wherever the
// products and sums involved are exact, as on integer grids). With anchors > 1,
// each anchored head also takes up to anchors - 1 further anchors, one at a time:
// the retained head whose nonnegative multiple (rounded down to a float) removes
// most of the residual left (the joint bound; the model checks any such plan).
DosaPlan plan_heads(std::span<const float> queries, std::span<const float> weights,
                    const IndexKeys& keys, std::size_t budget, std::span<const std::int32_t> sample,
                    std::size_t anchors = 1);

// Decode (source 001 §1, model::decode_topk): full scores [L] stay; tau is the K-th
// best score among the recently selected keys (distinct, at least K when L > K),
// and only keys scoring at least tau are ranked, unless more than
// decode_list_limit(L) are: then the row's top-k ranks it. out [K]: the lanes
// valid_prefix_topk gives for the row. Refuses a non-finite score
// (NonFiniteInput{3, i}), a bad id, too few ids, out's length.
Status<DosaError> decode_topk(std::span<const float> scores, std::span<const std::int32_t> recent,
                              std::size_t k, std::span<std::int32_t> out);
// The most keys at or above tau that decode_topk ranks as a list: a quarter of the
// row, and at least 4096 (the CUDA ranking block's capacity), so that short rows,
// whose lists rank in microseconds, keep the document's method.
inline std::size_t decode_list_limit(std::size_t row) { return row / 4 > 4096 ? row / 4 : 4096; }

// The cold prior of model::cold_prior_seeds for a batch [T, H, D] (checked inputs):
// each of the representatives floor((2i + 1) T / 8) scored in full, each key
// counted once per representative top-K it is in; the `seed_count` keys of highest
// count (ties to the lower index), ascending.
std::vector<std::int32_t> cold_prior_seeds(std::span<const float> queries,
                                           std::span<const float> weights, std::size_t query_count,
                                           const IndexKeys& keys, std::size_t k,
                                           std::size_t seed_count);

// The plan rule's sample: min(128, S) seeds evenly spaced, positions floor(i S / n).
std::vector<std::int32_t> plan_sample(std::span<const std::int32_t> seeds);

}  // namespace aether::cpu
