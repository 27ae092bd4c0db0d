// Threads over independent rows, only when the work pays for starting them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace aether::cpu {

// Below this many elements a thread start costs more than it saves.
inline constexpr std::size_t kParallelMinElements = std::size_t(1) << 17;

template <class RowFn>
void for_each_row(std::size_t rows, std::size_t elements_per_row, RowFn&& fn) {
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t threads =
      std::min({hw, rows, rows * elements_per_row / kParallelMinElements + 1});
  if (threads <= 1) {
    for (std::size_t r = 0; r < rows; ++r) fn(r);
    return;
  }
  std::vector<std::jthread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (std::size_t r = rows * t / threads; r < rows * (t + 1) / threads; ++r) fn(r);
    });
}

}  // namespace aether::cpu
