// The workload shared by the CPU and GPU decode benchmarks (source 001 §1): one
// query's row of L Gaussian scores and, for each noise scale, the recent keys: the
// top-K of the row one step earlier, each score moved by noise of that scale.
// Seeded, so both backends time the same rows.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace aether::bench {

inline constexpr float kDecodeNoise[] = {0.01f, 0.1f, 0.5f};

struct DecodeRows {
  std::vector<float> row;
  std::vector<std::vector<std::int32_t>> recent;  // one list a kDecodeNoise scale
};

inline DecodeRows decode_rows(std::size_t length, std::size_t k) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  DecodeRows d{std::vector<float>(length), {}};
  for (float& x : d.row) x = normal(rng);
  std::vector<float> earlier(length);
  for (const float noise : kDecodeNoise) {
    for (std::size_t j = 0; j < length; ++j) earlier[j] = d.row[j] + noise * normal(rng);
    std::vector<std::int32_t> recent(length);
    std::iota(recent.begin(), recent.end(), 0);
    std::partial_sort(recent.begin(), recent.begin() + std::ptrdiff_t(k), recent.end(),
                      [&](std::int32_t a, std::int32_t b) { return earlier[a] > earlier[b]; });
    recent.resize(k);
    d.recent.push_back(std::move(recent));
  }
  return d;
}

}  // namespace aether::bench
