// Exact helpers DoSA's model shares between its pruned top-k (model/dosa.cpp) and
// its plan rule, cold prior and decode path (model/dosa_plan.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <span>
#include <vector>

#include "model/dosa.hpp"

namespace aether::model::dosa_exact {

// q . k over a float query row and an exact key row
inline Rational dot(std::span<const float> q, std::span<const Rational> k) {
  Rational s = 0;
  for (std::size_t d = 0; d < k.size(); ++d) s += exact(q[d]) * k[d];
  return s;
}
inline Rational relu(const Rational& x) { return x > 0 ? x : Rational(0); }

// row h of queries [H, D], exactly
inline std::vector<Rational> head(std::span<const float> queries, std::size_t dim, std::size_t h) {
  std::vector<Rational> q;
  for (std::size_t d = 0; d < dim; ++d) q.push_back(exact(queries[h * dim + d]));
  return q;
}
inline Rational norm_sq(std::span<const Rational> v) {
  Rational s = 0;
  for (const Rational& x : v) s += x * x;
  return s;
}

// the largest float <= x (x >= 0); FLT_MAX past it
inline float float_below(const Rational& x) {
  constexpr float kMax = std::numeric_limits<float>::max();
  if (x >= exact(kMax)) return kMax;
  float f = static_cast<float>(x.convert_to<double>());
  while (exact(f) > x) f = std::nextafter(f, 0.0f);
  while (exact(std::nextafter(f, kMax)) <= x) f = std::nextafter(f, kMax);
  return f;
}

// the best min(K, n) of ids in the total order (higher score, then lower id), ascending
inline std::vector<std::int32_t> best_k(std::vector<std::int32_t> ids, std::size_t k,
                                        const auto& score_of) {
  std::sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    return score_of(a) > score_of(b) || (score_of(a) == score_of(b) && a < b);
  });
  ids.resize(std::min(k, ids.size()));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// seeds in [0, L), each once (BadSeed at the first that is not)
inline Status<DosaError> check_seeds(std::span<const std::int32_t> seeds, std::size_t keys) {
  std::set<std::int32_t> seen;
  for (std::size_t i = 0; i < seeds.size(); ++i)
    if (seeds[i] < 0 || std::size_t(seeds[i]) >= keys || !seen.insert(seeds[i]).second)
      return dosa_error::BadSeed{i, seeds[i]};
  return Ok{};
}

}  // namespace aether::model::dosa_exact
