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
inline double gamma(std::size_t n) { return double(n) * 0x1p-24 / (1 - double(n) * 0x1p-24); }
// x raised past the error of a few double roundings of quantities no larger than |x|
AETHER_HOST_DEVICE inline double up(double x) { return x + (x < 0 ? -x : x) * 0x1p-50; }
// ||v|| from above for a row of floats: squares and sum in double, then the sqrt
inline double norm_up(std::span<const float> v) {
  double s = 0;
  for (float x : v) s += double(x) * double(x);
  return std::sqrt(s) * (1 + double(v.size() + 4) * 0x1p-52);
}

// What the backend's scorer and screen rows are: its error index n(H) for H heads
// of D, and the value a screen row stores for a double (the float nearest; bf16
// rows: the bf16 nearest that float).
struct Arithmetic {
  std::size_t (*error_index)(std::size_t heads, std::size_t dim);
  float (*stored)(double);
};

// A query's screen (source 001 §2.2): the retained heads with their anchored heads'
// w_h beta_h folded into their weights (rounded up: each multiplies a ReLU), and
// a_A (in double; the backend rounds it to its row type) with weight -1. A key's
// U = P + residual ||k|| + slack max(1, row scale), P the screen's scorer value.
struct Screen {
  std::vector<float> queries, weights;  // |R| rows, then a_A when aggregated
  double residual = 0, slack = 0;
};

inline Screen prepare(std::span<const float> q, std::span<const float> w, std::size_t dim,
                      const DosaPlan& plan, const Arithmetic& arithmetic) {
  const std::size_t heads = w.size();
  const auto row = [&](std::size_t h) { return q.subspan(h * dim, dim); };
  std::vector<double> head_norm(heads);  // ||q_h|| from above, each once
  for (std::size_t h = 0; h < heads; ++h) head_norm[h] = norm_up(row(h));
  Screen s;
  std::vector<double> folded(heads, 0);
  for (std::uint32_t j : plan.retained) folded[j] = w[j];
  double c = 0;  // Σ w_h ||d_h||, each from above
  for (const DosaAnchor& a : plan.anchors) {
    // d_h in double, each product beta q exact, one rounding a subtraction (relative
    // to the running value): the error of ||d_h|| grows by 2^-52 a further anchor
    double dd = 0;
    for (std::size_t i = 0; i < dim; ++i) {
      double x = a.anchor == kNoAnchor ? double(row(a.head)[i])
                                       : double(row(a.head)[i]) - double(a.beta) * row(a.anchor)[i];
      for (const DosaTerm& m : a.more) x -= double(m.beta) * row(m.anchor)[i];
      dd += x * x;
    }
    double spread = a.anchor == kNoAnchor ? 0 : double(a.beta) * head_norm[a.anchor];
    for (const DosaTerm& m : a.more) {
      spread += double(m.beta) * head_norm[m.anchor];
      folded[m.anchor] += double(w[a.head]) * double(m.beta);
    }
    c += double(w[a.head]) * (std::sqrt(dd) * (1 + double(dim + 4) * 0x1p-52) +
                              double(a.more.size() + 2) * 0x1p-52 * (head_norm[a.head] + spread));
    if (a.anchor != kNoAnchor) folded[a.anchor] += double(w[a.head]) * double(a.beta);
  }
  double total_weight = 0, error = 0, screen_magnitude = 0;  // Σ|w_h|, then the margins
  for (std::size_t h = 0; h < heads; ++h) {
    total_weight += std::abs(double(w[h]));
    error += std::abs(double(w[h])) * head_norm[h];
  }
  error *= gamma(arithmetic.error_index(heads, dim));  // the scorer's own error (full scoring)
  for (std::uint32_t j : plan.retained) {
    float f = float(folded[j]);
    if (double(f) < folded[j]) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    s.queries.insert(s.queries.end(), row(j).begin(), row(j).end());
    s.weights.push_back(f);
    screen_magnitude += std::abs(double(f)) * head_norm[j];
  }
  if (!plan.aggregated.empty()) {
    std::vector<double> a(dim, 0);
    double spread = 0;  // Σ |w_h| ||q_h||, the scale of a_A's rounding in double
    for (std::uint32_t h : plan.aggregated) {
      for (std::size_t i = 0; i < dim; ++i) a[i] += std::abs(double(w[h])) * row(h)[i];
      spread += std::abs(double(w[h])) * head_norm[h];
    }
    double moved = 0;  // ||â - a||² in double: each difference exact or within 2^-53
    for (std::size_t i = 0; i < dim; ++i) {
      const float stored = arithmetic.stored(a[i]);
      s.queries.push_back(stored);
      moved += (double(stored) - a[i]) * (double(stored) - a[i]);
    }
    s.weights.push_back(-1.0f);
    screen_magnitude += norm_up(std::span<const float>(s.queries).last(dim));
    // the stored â deducts at most ||â - a|| ||k|| more than the exact a_A
    error += double(plan.aggregated.size()) * 0x1p-52 * spread +
             std::sqrt(moved) * (1 + double(dim + 4) * 0x1p-52);
  }
  error += gamma(arithmetic.error_index(s.weights.size(), dim)) * screen_magnitude;
  s.residual = up(up(up(c) * (1 + double(heads) * 0x1p-52)) + up(error));
  double screen_weight = 0;
  for (float f : s.weights) screen_weight += std::abs(double(f));
  // products and sums that underflow: at most 2^-149 each, times the weights after them
  s.slack = double((dim + 2) * (heads + s.weights.size() + 2)) * 0x1p-148 *
            (1 + total_weight + screen_weight);
  return s;
}

// U of one key from the screen's scorer value p (residual and slack: the query's
// Screen's; norm: ||k|| from above; scale: the row's, 1 unscaled): plus the
// residual term and the slacks, each rounding of the sum covered (docs/dosa.md).
AETHER_HOST_DEVICE inline double bound_of(double residual, double slack, float p, double norm,
                                          double scale) {
  const double term = up(residual * norm) + slack * (scale > 1 ? scale : 1.0);
  return double(p) + term + 0x1p-148 + ((p < 0 ? -double(p) : double(p)) + term) * 0x1p-50;
}

// A plan that splits query weights `w`'s heads as api/dosa.hpp says: the failing
// head, or none.
inline Status<DosaError> check_plan(std::span<const float> w, const DosaPlan& plan) {
  namespace de = dosa_error;
  const std::size_t heads = w.size();
  std::vector<char> placed(heads, 0), retained(heads, 0);
  const auto place = [&](std::uint32_t h) -> bool {
    if (h >= heads || placed[h]) return false;
    return placed[h] = 1;
  };
  for (std::uint32_t h : plan.retained)
    if (!place(h))
      return de::BadPlan{h};
    else
      retained[h] = 1;
  const auto anchored = [&](std::uint32_t j, float beta) {
    return beta >= 0 && std::isfinite(beta) && j < heads && retained[j];
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
