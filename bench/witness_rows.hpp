// The benchmark workload shared by the CPU and GPU witness benchmarks: serving
// rows of topk 2048 over a context of 131072 with S 64, learned tokens drawn from
// the first three quarters of the context (about a quarter of the segments
// missing) and the reserved tail of S slots padded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace aether::bench {

inline constexpr std::size_t kTopk = 2048, kSegments = 64;
inline constexpr std::int32_t kContext = 131072;

inline std::vector<std::int32_t> learned_rows(std::size_t rows) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<std::int32_t> token(0, kContext * 3 / 4 - 1);
  std::vector<std::int32_t> v(rows * kTopk);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = (i % kTopk) < kTopk - kSegments ? token(rng) : -1;
  return v;
}

}  // namespace aether::bench
