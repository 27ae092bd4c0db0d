// Exact reference model of DoSA (source 001): an indexer top-k that proves most
// keys cannot win before scoring them. One query: heads q_h (rows of queries
// [H, D]) with weights w_h, keys k (rows of stored keys, decoded exactly).
// Everything is a rational; the one irrational quantity, a norm, enters only
// through squares (excluded) or an upper dyadic (upper_sqrt).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "api/dosa.hpp"
#include "model/rational.hpp"

namespace aether::model {

// sqrt(x) when x >= 0 is the square of a rational, else the least multiple of
// 2^-64 above sqrt(x): an upper bound, exact on perfect squares.
Rational upper_sqrt(const Rational& x);

// tau = the K-th best of the seeds' scores (1 <= K <= seed_scores.size()).
Rational seed_threshold(std::span<const Rational> seed_scores, std::size_t k);

// c = Σ over anchored heads h of w_h upper_sqrt(||d_h||²), d_h = q_h - beta_h q_j
// - Σ_i beta_i q_{j_i} (q_j = 0 without an anchor): the query's residual coefficient.
Rational residual_coefficient(std::span<const float> queries, std::span<const float> weights,
                              std::size_t dim, const DosaPlan& plan);

// U(k) = P(k) + c ||k||, kept as its parts:
//   P(k) = Σ_{h retained} w_h [q_h.k]_+ + Σ_{h anchored to j} w_h beta_h [q_j.k]_+
//          + Σ_{h, its further anchors j_i} w_h beta_i [q_{j_i}.k]_+ - [a_A.k]_+,
//   a_A = Σ_{h aggregated} |w_h| q_h.
struct DosaBound {
  Rational rational_part, residual, key_norm_sq;
};
DosaBound upper_bound(std::span<const float> queries, std::span<const float> weights,
                      std::span<const Rational> key, const DosaPlan& plan,
                      const Rational& residual);

// U < tau, decided exactly: P + c ||k|| < tau iff tau - P > 0 and c² ||k||² < (tau - P)².
bool excluded(const DosaBound& u, const Rational& tau);

// The plan's checks (BadPlan) for H heads with these weights.
Status<DosaError> check_plan(std::span<const float> weights, const DosaPlan& plan);

// The plan rule. Retained: the `budget` heads of largest w_h² ||q_h||² (ties to the
// lower head), ascending. Each omitted head of positive weight: the retained anchor
// j whose best nonnegative multiple removes most of q_h, the greatest
// [q_h.q_j]_+² / ||q_j||² (ties to the lower j; kNoAnchor when no retained head has
// q_j != 0), with beta = [q_h.q_j]_+ / ||q_j||² rounded down to a float. Aggregated: the omitted
// heads of negative weight active (q_h.k > 0) on at least half of the sample keys (source 001 §3.2:
// a heuristic, sound whatever it picks).
DosaPlan plan_heads(std::span<const float> queries, std::span<const float> weights, std::size_t dim,
                    std::size_t budget, std::span<const Rational> sample_keys);

// The sample the plan rule reads: min(128, S) seeds evenly spaced over the seed
// list, at positions floor(i S / n), i < n.
std::vector<std::int32_t> plan_sample(std::span<const std::int32_t> seeds);

// Representative queries of a batch of T: floor((2i + 1) T / 8), i < 4, each once.
std::vector<std::size_t> representative_queries(std::size_t query_count);

// Cold prior: each representative's top-K of its exact scores (rows of
// representative_scores, L each) counts once for each key in it; the seeds are the
// `seed_count` keys of highest count (ties to the lower index), or every key when
// L <= seed_count, listed ascending.
std::vector<std::int32_t> cold_prior_seeds(std::span<const std::vector<Rational>> rep_scores,
                                           std::size_t k, std::size_t seed_count);

// The pruned top-K of one query over keys [L, D] (decoded): tau from the seeds'
// exact scores; every other key excluded when U < tau, else scored, dropped below
// tau, merged with the seeds' top-K; the best min(K, L) in the total order (higher
// score, then lower index), ascending, -1 padded to K. With L < K: the plain top-K.
// Refuses non-finite queries and weights, a bad seed, fewer than K distinct seeds,
// a bad plan.
Result<std::vector<std::int32_t>, DosaError> dosa_topk(
    std::span<const float> queries, std::span<const float> weights, std::span<const Rational> keys,
    std::size_t dim, std::size_t k, std::span<const std::int32_t> seeds, const DosaPlan& plan);

// The teaching count (source 001 §5): a screen of |retained| dot products a key (one
// more for a_A) over L keys, then H for each survivor; full scoring costs L H.
std::size_t pruned_dot_products(std::size_t keys, const DosaPlan& plan, std::size_t survivors,
                                std::size_t heads);

// The same over stored keys: queries and weights checked first, then the keys as
// decode_keys refuses them (ShapeMismatch, NonFiniteInput{2, .}), then the rest.
Result<std::vector<std::int32_t>, DosaError> dosa_topk(std::span<const float> queries,
                                                       std::span<const float> weights,
                                                       const IndexKeys& keys, std::size_t k,
                                                       std::span<const std::int32_t> seeds,
                                                       const DosaPlan& plan);

// Decode (source 001 §1): full scores stay; tau is the K-th best score among the
// recently selected keys (at least K distinct), and only keys scoring at least tau
// are ranked: the best K of them, ascending. The same answer as the plain top-K.
Result<std::vector<std::int32_t>, DosaError> decode_topk(std::span<const float> scores,
                                                         std::span<const std::int32_t> recent,
                                                         std::size_t k);

}  // namespace aether::model
