// Score distributions a top-k must not slow down on, timed beside the Gaussian of
// the same shape (indexer_bench_cuda distributions, indexer_bench): rows offset far
// from zero (the K-th score then sits among keys that share their top bits), few
// distinct values, all equal, a ReLU plateau of exact zeros with fewer than K
// positive scores, half a row tied at its K-th value, and sorted rows.
#pragma once

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

namespace aether::bench {

struct TopkDistribution {
  const char* name;
  // Fills one row of `width` scores; K is the top-k's K (for the rows built around it).
  std::function<void(float* row, std::size_t width, std::size_t k, std::mt19937& rng)> fill;
};

inline std::vector<TopkDistribution> topk_distributions() {
  const auto normal_plus = [](float offset) {
    return [offset](float* row, std::size_t width, std::size_t, std::mt19937& rng) {
      std::normal_distribution<float> normal;
      for (std::size_t j = 0; j < width; ++j) row[j] = normal(rng) + offset;
    };
  };
  return {
      {"gaussian", normal_plus(0)},
      {"gaussian+100", normal_plus(100)},
      {"gaussian-10000", normal_plus(-10000)},
      {"16 distinct",
       [](float* row, std::size_t width, std::size_t, std::mt19937& rng) {
         for (std::size_t j = 0; j < width; ++j) row[j] = float(rng() % 16);
       }},
      {"all equal", [](float* row, std::size_t width, std::size_t,
                       std::mt19937&) { std::fill(row, row + width, 1.0f); }},
      {"relu, K/2 positive",
       [](float* row, std::size_t width, std::size_t k, std::mt19937& rng) {
         std::fill(row, row + width, 0.0f);
         std::exponential_distribution<float> positive;
         for (std::size_t i = 0; i < k / 2; ++i) row[rng() % width] = positive(rng) + 1e-3f;
       }},
      {"half tied at the K-th",
       [](float* row, std::size_t width, std::size_t k, std::mt19937& rng) {
         std::normal_distribution<float> normal;
         for (std::size_t j = 0; j < width; ++j) row[j] = normal(rng);
         std::vector<float> sorted(row, row + width);
         std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(k - 1), sorted.end(),
                          std::greater<float>());
         const float kth = sorted[k - 1];
         for (std::size_t j = 0; j < width; ++j)
           if (row[j] < kth && rng() % 2) row[j] = kth;
       }},
      {"ascending",
       [](float* row, std::size_t width, std::size_t, std::mt19937&) {
         for (std::size_t j = 0; j < width; ++j) row[j] = float(j);
       }},
      {"descending",
       [](float* row, std::size_t width, std::size_t, std::mt19937&) {
         for (std::size_t j = 0; j < width; ++j) row[j] = float(width - j);
       }},
  };
}

}  // namespace aether::bench
