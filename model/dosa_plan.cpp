// DoSA's model beside the pruned top-k (model/dosa.cpp): the plan rule and its
// sample, the cold prior's representatives and seeds, and the decode path.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/dosa.hpp"
#include "model/dosa_exact.hpp"

namespace aether::model {

namespace {
namespace de = dosa_error;
using namespace dosa_exact;
}  // namespace

DosaPlan plan_heads(std::span<const float> queries, std::span<const float> weights, std::size_t dim,
                    std::size_t budget, std::span<const Rational> sample_keys) {
  const std::size_t heads = weights.size();
  std::vector<std::vector<Rational>> q;
  for (std::size_t h = 0; h < heads; ++h) q.push_back(head(queries, dim, h));
  std::vector<std::uint32_t> order(heads);
  std::iota(order.begin(), order.end(), 0u);
  const auto weight_sq = [&](std::uint32_t h) { return exact(weights[h]) * exact(weights[h]); };
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return weight_sq(a) * norm_sq(q[a]) > weight_sq(b) * norm_sq(q[b]);
  });
  DosaPlan plan;
  plan.retained.assign(order.begin(), order.begin() + std::ptrdiff_t(std::min(budget, heads)));
  std::sort(plan.retained.begin(), plan.retained.end());
  std::vector<bool> kept(heads, false);
  for (std::uint32_t h : plan.retained) kept[h] = true;
  const std::size_t samples = dim ? sample_keys.size() / dim : 0;
  for (std::uint32_t h = 0; h < heads; ++h) {
    if (kept[h]) continue;
    if (weights[h] > 0) {
      // the anchor whose best nonnegative multiple removes most: [q_h.q_j]_+² / ||q_j||²
      DosaAnchor best{h, kNoAnchor, 0};
      Rational best_removed = 0;
      for (std::uint32_t j : plan.retained) {
        const Rational nj = norm_sq(q[j]);
        if (nj == 0) continue;
        Rational qhqj = 0;
        for (std::size_t d = 0; d < dim; ++d) qhqj += q[h][d] * q[j][d];
        const Rational removed = relu(qhqj) * relu(qhqj) / nj;
        if (best.anchor == kNoAnchor || removed > best_removed)
          best = {h, j, float_below(relu(qhqj) / nj)}, best_removed = removed;
      }
      plan.anchors.push_back(best);
    } else if (weights[h] < 0 && samples > 0) {
      std::size_t active = 0;
      for (std::size_t s = 0; s < samples; ++s)
        active += dot(queries.subspan(h * dim, dim), sample_keys.subspan(s * dim, dim)) > 0;
      if (2 * active >= samples) plan.aggregated.push_back(h);
    }
  }
  return plan;
}

std::vector<std::int32_t> plan_sample(std::span<const std::int32_t> seeds) {
  const std::size_t n = std::min<std::size_t>(128, seeds.size());
  std::vector<std::int32_t> sample;
  for (std::size_t i = 0; i < n; ++i) sample.push_back(seeds[i * seeds.size() / n]);
  return sample;
}

std::vector<std::size_t> representative_queries(std::size_t query_count) {
  std::vector<std::size_t> reps;
  for (std::size_t i = 0; i < 4 && query_count > 0; ++i) {
    const std::size_t t = (2 * i + 1) * query_count / 8;
    if (reps.empty() || reps.back() != t) reps.push_back(t);
  }
  return reps;
}

std::vector<std::int32_t> cold_prior_seeds(std::span<const std::vector<Rational>> rep_scores,
                                           std::size_t k, std::size_t seed_count) {
  const std::size_t keys = rep_scores.empty() ? 0 : rep_scores[0].size();
  std::vector<std::int32_t> all(keys);
  std::iota(all.begin(), all.end(), 0);
  std::vector<std::size_t> count(keys, 0);
  for (const auto& row : rep_scores)
    for (std::int32_t j : best_k(all, k, [&](std::int32_t i) { return row[std::size_t(i)]; }))
      ++count[std::size_t(j)];
  return best_k(all, seed_count, [&](std::int32_t i) { return count[std::size_t(i)]; });
}

Result<std::vector<std::int32_t>, DosaError> decode_topk(std::span<const float> scores,
                                                         std::span<const std::int32_t> recent,
                                                         std::size_t k) {
  for (std::size_t i = 0; i < scores.size(); ++i)
    if (!std::isfinite(scores[i])) return de::NonFiniteInput{3, i};
  if (auto st = check_seeds(recent, scores.size()); !st.ok()) return st.error();
  std::vector<std::int32_t> ranked(scores.size());
  std::iota(ranked.begin(), ranked.end(), 0);
  const auto score_of = [&](std::int32_t j) { return scores[std::size_t(j)]; };
  if (scores.size() > k) {
    if (recent.size() < k) return de::TooFewSeeds{recent.size(), k};
    std::vector<float> recent_scores;
    for (std::int32_t j : recent) recent_scores.push_back(scores[std::size_t(j)]);
    std::nth_element(recent_scores.begin(), recent_scores.begin() + std::ptrdiff_t(k - 1),
                     recent_scores.end(), std::greater<>());
    const float tau = recent_scores[k - 1];
    std::erase_if(ranked, [&](std::int32_t j) { return scores[std::size_t(j)] < tau; });
  }
  auto out = best_k(ranked, k, score_of);
  out.resize(k, -1);
  return out;
}
}  // namespace aether::model
