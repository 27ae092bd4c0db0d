#include "model/dosa.hpp"

#include "model/dosa_exact.hpp"
#include "model/indexer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace aether::model {

namespace {
namespace de = dosa_error;
using namespace dosa_exact;
}  // namespace

// sqrt(p/q) = sqrt(p)/sqrt(q) for perfect squares p, q; else ceil(sqrt(x 2^128)) 2^-64
Rational upper_sqrt(const Rational& x) {
  if (x <= 0) return 0;
  const Integer p = numerator(x), q = denominator(x);
  const Integer rp = sqrt(p), rq = sqrt(q);
  if (rp * rp == p && rq * rq == q) return Rational(rp, rq);
  const Integer scaled = (p << 128) / q + 1;  // > x 2^128
  Integer root = sqrt(scaled);
  if (root * root < scaled) root += 1;
  return Rational(root, Integer(1) << 64);
}

// tau = the K-th best seed score
Rational seed_threshold(std::span<const Rational> seed_scores, std::size_t k) {
  std::vector<Rational> sorted(seed_scores.begin(), seed_scores.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  return sorted[k - 1];
}

// c = Σ_h w_h upper_sqrt(||q_h - beta_h q_j||²)
Rational residual_coefficient(std::span<const float> queries, std::span<const float> weights,
                              std::size_t dim, const DosaPlan& plan) {
  Rational c = 0;
  for (const DosaAnchor& a : plan.anchors) {
    std::vector<Rational> d = head(queries, dim, a.head);
    if (a.anchor != kNoAnchor)
      for (std::size_t i = 0; i < dim; ++i)
        d[i] -= exact(a.beta) * exact(queries[a.anchor * dim + i]);
    for (const DosaTerm& m : a.more)
      for (std::size_t i = 0; i < dim; ++i)
        d[i] -= exact(m.beta) * exact(queries[m.anchor * dim + i]);
    c += exact(weights[a.head]) * upper_sqrt(norm_sq(d));
  }
  return c;
}

// P(k) = Σ_R w_h [q_h.k]_+ + Σ_anchored w_h beta_h [q_j.k]_+ - [a_A.k]_+
DosaBound upper_bound(std::span<const float> queries, std::span<const float> weights,
                      std::span<const Rational> key, const DosaPlan& plan,
                      const Rational& residual) {
  const std::size_t dim = key.size();
  const auto q = [&](std::size_t h) { return queries.subspan(h * dim, dim); };
  Rational p = 0, deduction = 0;
  for (std::uint32_t h : plan.retained) p += exact(weights[h]) * relu(dot(q(h), key));
  for (const DosaAnchor& a : plan.anchors) {
    if (a.anchor != kNoAnchor)
      p += exact(weights[a.head]) * exact(a.beta) * relu(dot(q(a.anchor), key));
    for (const DosaTerm& m : a.more)
      p += exact(weights[a.head]) * exact(m.beta) * relu(dot(q(m.anchor), key));
  }
  for (std::uint32_t h : plan.aggregated) deduction += abs(exact(weights[h])) * dot(q(h), key);
  return {p - relu(deduction), residual, norm_sq(key)};
}

// P + c m^1/2 < tau iff tau - P > 0 and c² m < (tau - P)²   (c, m >= 0)
bool excluded(const DosaBound& u, const Rational& tau) {
  const Rational gap = tau - u.rational_part;
  return gap > 0 && u.residual * u.residual * u.key_norm_sq < gap * gap;
}

Status<DosaError> check_plan(std::span<const float> weights, const DosaPlan& plan) {
  const std::size_t heads = weights.size();
  std::vector<bool> placed(heads, false), retained(heads, false);
  const auto place = [&](std::uint32_t h) -> bool {
    if (h >= heads || placed[h]) return false;
    placed[h] = true;
    return true;
  };
  for (std::uint32_t h : plan.retained) {
    if (!place(h)) return de::BadPlan{h};
    retained[h] = true;
  }
  const auto anchored = [&](std::uint32_t j, float beta) {
    return beta >= 0 && std::isfinite(beta) && j < heads && retained[j];
  };
  for (const DosaAnchor& a : plan.anchors) {
    if (!place(a.head) || !(weights[a.head] > 0) || !(a.beta >= 0) || !std::isfinite(a.beta) ||
        (a.anchor != kNoAnchor && !anchored(a.anchor, a.beta)))
      return de::BadPlan{a.head};
    for (const DosaTerm& m : a.more)
      if (!anchored(m.anchor, m.beta)) return de::BadPlan{a.head};
  }
  for (std::uint32_t h : plan.aggregated)
    if (!place(h) || !(weights[h] < 0)) return de::BadPlan{h};
  for (std::uint32_t h = 0; h < heads; ++h)
    if (weights[h] > 0 && !placed[h]) return de::BadPlan{h};
  return Ok{};
}

Result<std::vector<std::int32_t>, DosaError> dosa_topk(
    std::span<const float> queries, std::span<const float> weights, std::span<const Rational> keys,
    std::size_t dim, std::size_t k, std::span<const std::int32_t> seeds, const DosaPlan& plan) {
  if (queries.size() != weights.size() * dim)
    return de::ShapeMismatch{weights.size() * dim, queries.size()};
  if (dim == 0 ? !keys.empty() : keys.size() % dim != 0)
    return de::ShapeMismatch{dim ? keys.size() / dim * dim : 0, keys.size()};
  for (std::size_t i = 0; i < queries.size(); ++i)
    if (!std::isfinite(queries[i])) return de::NonFiniteInput{0, i};
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (!std::isfinite(weights[i])) return de::NonFiniteInput{1, i};
  const std::size_t count = dim ? keys.size() / dim : 0;
  if (auto st = check_seeds(seeds, count); !st.ok()) return st.error();
  if (auto st = check_plan(weights, plan); !st.ok()) return st.error();
  if (k == 0) return std::vector<std::int32_t>{};  // no lane, and no K-th seed for tau
  const auto key = [&](std::size_t j) { return keys.subspan(j * dim, dim); };
  std::vector<Rational> score(count);  // filled for seeds and survivors only
  const auto full_score = [&](std::size_t j) {
    Rational s = 0;
    for (std::size_t h = 0; h < weights.size(); ++h)
      s += exact(weights[h]) * relu(dot(queries.subspan(h * dim, dim), key(j)));
    return score[j] = s;
  };
  const auto score_of = [&](std::int32_t j) { return score[std::size_t(j)]; };
  std::vector<std::int32_t> all(count);
  std::iota(all.begin(), all.end(), 0);
  if (count <= k) {
    for (std::size_t j = 0; j < count; ++j) full_score(j);
    auto out = best_k(all, k, score_of);
    out.resize(k, -1);
    return out;
  }
  if (seeds.size() < k) return de::TooFewSeeds{seeds.size(), k};
  std::vector<Rational> seed_scores;
  for (std::int32_t s : seeds) seed_scores.push_back(full_score(std::size_t(s)));
  const Rational tau = seed_threshold(seed_scores, k);
  std::vector<std::int32_t> candidates =
      best_k(std::vector<std::int32_t>(seeds.begin(), seeds.end()), k, score_of);
  const std::set<std::int32_t> is_seed(seeds.begin(), seeds.end());
  const Rational c = residual_coefficient(queries, weights, dim, plan);
  for (std::size_t j = 0; j < count; ++j) {
    if (is_seed.contains(std::int32_t(j))) continue;
    if (excluded(upper_bound(queries, weights, key(j), plan, c), tau)) continue;
    if (full_score(j) >= tau) candidates.push_back(std::int32_t(j));
  }
  return best_k(candidates, k, score_of);
}

Result<std::vector<std::int32_t>, DosaError> dosa_topk(std::span<const float> queries,
                                                       std::span<const float> weights,
                                                       const IndexKeys& keys, std::size_t k,
                                                       std::span<const std::int32_t> seeds,
                                                       const DosaPlan& plan) {
  if (queries.size() != weights.size() * keys.dim)
    return de::ShapeMismatch{weights.size() * keys.dim, queries.size()};
  for (std::size_t i = 0; i < queries.size(); ++i)
    if (!std::isfinite(queries[i])) return de::NonFiniteInput{0, i};
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (!std::isfinite(weights[i])) return de::NonFiniteInput{1, i};
  const auto decoded = decode_keys(keys);
  if (!decoded.ok()) {
    if (auto* m = std::get_if<indexer_error::ShapeMismatch>(&decoded.error())) return *m;
    return std::get<indexer_error::NonFiniteInput>(decoded.error());
  }
  return dosa_topk(queries, weights, decoded.value(), keys.dim, k, seeds, plan);
}

// L (|R| + [A nonempty]) + survivors H
std::size_t pruned_dot_products(std::size_t keys, const DosaPlan& plan, std::size_t survivors,
                                std::size_t heads) {
  return keys * (plan.retained.size() + (plan.aggregated.empty() ? 0 : 1)) + survivors * heads;
}

}  // namespace aether::model
