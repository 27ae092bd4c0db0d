// Host code both DoSA backends share (impl/cpu/dosa.cpp, impl/cuda/dosa.cu): the
// plan check, and the screen a query's plan gives with its rounding margin for a
// scorer whose error on a key is at most γ_n Σ_h |w_h| ||q_h|| ||k|| (n from the
// backend: D + H + 2 on the CPU, 48 ceil(D/16) + H + 2 on the tensor cores).
// docs/dosa.md derives every term.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "api/dosa.hpp"

#ifdef __CUDACC__
#define AETHER_HOST_DEVICE __host__ __device__
#else
#define AETHER_HOST_DEVICE
#endif

namespace aether::dosa_screen {

// γ_n = n u / (1 - n u), u = 2^-24: n float roundings
AETHER_HOST_DEVICE inline double gamma(std::size_t n) {
  return double(n) * 0x1p-24 / (1 - double(n) * 0x1p-24);
}
// x raised past the error of a few double roundings of quantities no larger than |x|
AETHER_HOST_DEVICE inline double up(double x) { return x + (x < 0 ? -x : x) * 0x1p-50; }
// ||v|| from above from the double sum of its n squares (each square exact, the
// sum in any order, then the sqrt)
AETHER_HOST_DEVICE inline double norm_from_squares(double squares, std::size_t n) {
  return sqrt(squares) * (1 + double(n + 4) * 0x1p-52);
}
inline double norm_up(std::span<const float> v) {
  double s[4] = {0, 0, 0, 0};  // four running sums (any order will do): no chain of adds
  std::size_t i = 0;
  for (; i + 4 <= v.size(); i += 4)
    for (std::size_t j = 0; j < 4; ++j) s[j] += double(v[i + j]) * double(v[i + j]);
  for (; i < v.size(); ++i) s[0] += double(v[i]) * double(v[i]);
  return norm_from_squares((s[0] + s[1]) + (s[2] + s[3]), v.size());
}

// One anchored head's share of c = Σ w_h ||d_h||: d_h = q_h - beta q_j - Σ beta_i
// q_{j_i} in double (each product exact, each subtraction one rounding relative
// to the running value, so ||d_h|| grows by at most (m + 2) 2^-52 (||q_h|| +
// spread), spread = beta ||q_j|| + Σ beta_i ||q_{j_i}||), `squares` = Σ d_i².
AETHER_HOST_DEVICE inline double anchor_share(double weight, double squares, std::size_t dim,
                                              std::size_t more, double head_norm, double spread) {
  return weight *
         (norm_from_squares(squares, dim) + double(more + 2) * 0x1p-52 * (head_norm + spread));
}

// What a query's screen margin is made of, each from above (docs/dosa.md):
struct ScreenSums {
  double c = 0;                 // Σ anchor_share
  double weighted_norms = 0;    // Σ_h |w_h| ||q_h||: the scorer's error on a key, / γ ||k||
  double screen_magnitude = 0;  // Σ_j |w'_j| ||s_j|| over the screen's rows s_j
  double aggregate_error = 0;   // |A| 2^-52 Σ_A |w_h| ||q_h|| + ||â - a||: a_A's rounding
  double total_weight = 0, screen_weight = 0;  // Σ |w_h|, Σ |w'_j|
  std::size_t heads = 0, screen_heads = 0, dim = 0;
};
struct ScreenTerms {
  double residual = 0, slack = 0;
};

// U = P + residual ||k|| + slack max(1, scale): residual = c plus the scorer's and
// the screen's errors (error indices n_full and n_screen of the backend) and a_A's
// rounding, each sum of at most H + |R| + 1 terms raised by that many roundings;
// slack = subnormal products and sums, at most 2^-149 each times the weights after.
AETHER_HOST_DEVICE inline ScreenTerms terms_of(const ScreenSums& s, std::size_t full_index,
                                               std::size_t screen_index) {
  const double sums = 1 + double(s.heads + s.screen_heads + 8) * 0x1p-52;
  const double error = (gamma(full_index) * s.weighted_norms + s.aggregate_error +
                        gamma(screen_index) * s.screen_magnitude) *
                       sums;
  return {up(up(up(s.c) * sums) + up(error)), double((s.dim + 2) * (s.heads + s.screen_heads + 2)) *
                                                  0x1p-148 *
                                                  (1 + s.total_weight + s.screen_weight)};
}

// U of one key from the screen's scorer value p (norm: ||k|| from above; scale: the
// row's, 1 unscaled), each rounding of the sum covered.
AETHER_HOST_DEVICE inline double bound_of(const ScreenTerms& terms, float p, double norm,
                                          double scale) {
  const double term = up(terms.residual * norm) + terms.slack * (scale > 1 ? scale : 1.0);
  return double(p) + term + 0x1p-148 + ((p < 0 ? -double(p) : double(p)) + term) * 0x1p-50;
}

// The screen's weights: each retained head's own, plus w_h beta for every head it
// anchors, rounded up to a float (each multiplies a ReLU), then -1 for a_A when
// the plan aggregates; written to `out` (room for |R| + 1), their count returned.
inline std::size_t screen_weights(std::span<const float> w, const DosaPlan& plan, float* out) {
  thread_local std::vector<double> folded;  // a batch's plans reuse it
  folded.assign(w.size(), 0);
  for (std::uint32_t j : plan.retained) folded[j] = w[j];
  for (const DosaAnchor& a : plan.anchors) {
    if (a.anchor != kNoAnchor) folded[a.anchor] += double(w[a.head]) * double(a.beta);
    for (const DosaTerm& m : a.more) folded[m.anchor] += double(w[a.head]) * double(m.beta);
  }
  std::size_t count = 0;
  for (std::uint32_t j : plan.retained) {
    float f = float(folded[j]);
    if (double(f) < folded[j]) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    out[count++] = f;
  }
  if (!plan.aggregated.empty()) out[count++] = -1.0f;
  return count;
}
inline std::vector<float> screen_weights(std::span<const float> w, const DosaPlan& plan) {
  std::vector<float> out(plan.retained.size() + 1);
  out.resize(screen_weights(w, plan, out.data()));
  return out;
}

// A query's screen (source 001 §2.2) on the host: the retained heads' rows, then
// a_A (in double, stored as `stored` gives) with weight -1, and its terms.
struct Screen {
  std::vector<float> queries, weights;
  ScreenTerms terms;
};
inline Screen prepare(std::span<const float> q, std::span<const float> w, std::size_t dim,
                      const DosaPlan& plan, std::size_t (*error_index)(std::size_t, std::size_t),
                      float (*stored)(double)) {
  const std::size_t heads = w.size();
  const auto row = [&](std::size_t h) { return q.subspan(h * dim, dim); };
  std::vector<double> head_norm(heads);
  ScreenSums sums;
  sums.heads = heads;
  sums.dim = dim;
  for (std::size_t h = 0; h < heads; ++h) {
    head_norm[h] = norm_up(row(h));
    sums.weighted_norms += std::abs(double(w[h])) * head_norm[h];
    sums.total_weight += std::abs(double(w[h]));
  }
  for (const DosaAnchor& a : plan.anchors) {
    double squares = 0;
    for (std::size_t i = 0; i < dim; ++i) {
      double x = a.anchor == kNoAnchor ? double(row(a.head)[i])
                                       : double(row(a.head)[i]) - double(a.beta) * row(a.anchor)[i];
      for (const DosaTerm& m : a.more) x -= double(m.beta) * row(m.anchor)[i];
      squares += x * x;
    }
    double spread = a.anchor == kNoAnchor ? 0 : double(a.beta) * head_norm[a.anchor];
    for (const DosaTerm& m : a.more) spread += double(m.beta) * head_norm[m.anchor];
    sums.c += anchor_share(w[a.head], squares, dim, a.more.size(), head_norm[a.head], spread);
  }
  Screen s;
  s.weights = screen_weights(w, plan);
  sums.screen_heads = s.weights.size();
  for (std::size_t r = 0; r < plan.retained.size(); ++r) {
    s.queries.insert(s.queries.end(), row(plan.retained[r]).begin(), row(plan.retained[r]).end());
    sums.screen_magnitude += std::abs(double(s.weights[r])) * head_norm[plan.retained[r]];
  }
  if (!plan.aggregated.empty()) {
    double spread = 0, squares = 0, moved = 0;
    for (std::uint32_t h : plan.aggregated) spread += std::abs(double(w[h])) * head_norm[h];
    for (std::size_t i = 0; i < dim; ++i) {
      double a = 0;
      for (std::uint32_t h : plan.aggregated) a += std::abs(double(w[h])) * row(h)[i];
      const float value = stored(a);
      s.queries.push_back(value);
      squares += double(value) * double(value);
      moved += (double(value) - a) * (double(value) - a);
    }
    sums.screen_magnitude += norm_from_squares(squares, dim);
    sums.aggregate_error =
        double(plan.aggregated.size()) * 0x1p-52 * spread + norm_from_squares(moved, dim);
  }
  for (float f : s.weights) sums.screen_weight += std::abs(double(f));
  s.terms = terms_of(sums, error_index(heads, dim), error_index(sums.screen_heads, dim));
  return s;
}

// A plan that splits query weights `w`'s heads as api/dosa.hpp says: the failing
// head, or none.
inline Status<DosaError> check_plan(std::span<const float> w, const DosaPlan& plan) {
  namespace de = dosa_error;
  const std::size_t heads = w.size();
  thread_local std::vector<char> placed;  // 0 free, 1 placed, 2 retained (a batch's plans reuse it)
  placed.assign(heads, 0);
  const auto place = [&](std::uint32_t h) -> bool {
    if (h >= heads || placed[h]) return false;
    return placed[h] = 1;
  };
  for (std::uint32_t h : plan.retained)
    if (!place(h))
      return de::BadPlan{h};
    else
      placed[h] = 2;
  const auto anchored = [&](std::uint32_t j, float beta) {
    return beta >= 0 && std::isfinite(beta) && j < heads && placed[j] == 2;
  };
  for (const DosaAnchor& a : plan.anchors) {
    if (!place(a.head) || !(w[a.head] > 0) || !(a.beta >= 0) || !std::isfinite(a.beta) ||
        (a.anchor != kNoAnchor && !anchored(a.anchor, a.beta)))
      return de::BadPlan{a.head};
    for (const DosaTerm& m : a.more)
      if (!anchored(m.anchor, m.beta)) return de::BadPlan{a.head};
  }
  for (std::uint32_t h : plan.aggregated)
    if (!place(h) || !(w[h] < 0)) return de::BadPlan{h};
  for (std::uint32_t h = 0; h < heads; ++h)
    if (w[h] > 0 && !placed[h]) return de::BadPlan{h};
  return Ok{};
}

}  // namespace aether::dosa_screen
