#include "model/dosa.hpp"

#include "model/indexer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace aether::model {

namespace {
namespace de = dosa_error;

// q . k over a float query row and an exact key row
Rational dot(std::span<const float> q, std::span<const Rational> k) {
  Rational s = 0;
  for (std::size_t d = 0; d < k.size(); ++d) s += exact(q[d]) * k[d];
  return s;
}
Rational relu(const Rational& x) { return x > 0 ? x : Rational(0); }

// row h of queries [H, D], exactly
std::vector<Rational> head(std::span<const float> queries, std::size_t dim, std::size_t h) {
  std::vector<Rational> q;
  for (std::size_t d = 0; d < dim; ++d) q.push_back(exact(queries[h * dim + d]));
  return q;
}
Rational norm_sq(std::span<const Rational> v) {
  Rational s = 0;
  for (const Rational& x : v) s += x * x;
  return s;
}

// the largest float <= x (x >= 0); FLT_MAX past it
float float_below(const Rational& x) {
  constexpr float kMax = std::numeric_limits<float>::max();
  if (x >= exact(kMax)) return kMax;
  float f = static_cast<float>(x.convert_to<double>());
  while (exact(f) > x) f = std::nextafter(f, 0.0f);
  while (exact(std::nextafter(f, kMax)) <= x) f = std::nextafter(f, kMax);
  return f;
}

// the best min(K, n) of ids in the total order (higher score, then lower id), ascending
std::vector<std::int32_t> best_k(std::vector<std::int32_t> ids, std::size_t k,
                                 const auto& score_of) {
  std::sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    return score_of(a) > score_of(b) || (score_of(a) == score_of(b) && a < b);
  });
  ids.resize(std::min(k, ids.size()));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// seeds in [0, L), each once (BadSeed at the first that is not)
Status<DosaError> check_seeds(std::span<const std::int32_t> seeds, std::size_t keys) {
  std::set<std::int32_t> seen;
  for (std::size_t i = 0; i < seeds.size(); ++i)
    if (seeds[i] < 0 || std::size_t(seeds[i]) >= keys || !seen.insert(seeds[i]).second)
      return de::BadSeed{i, seeds[i]};
  return Ok{};
}
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
