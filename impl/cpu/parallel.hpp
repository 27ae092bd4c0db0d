// Threads over independent rows, only when the work pays for starting them.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace aether::cpu {

// Below this many elements a thread start costs more than it saves; settable so
// properties can force the threaded path on small inputs.
inline std::atomic<std::size_t>& parallel_threshold() {
  static std::atomic<std::size_t> elements{std::size_t(1) << 17};
  return elements;
}

// Most threads a CPU call may use; 0 means the hardware's count. Results never
// depend on it (properties check that); callers that own their threads lower it.
inline std::atomic<std::size_t>& thread_limit() {
  static std::atomic<std::size_t> limit{0};
  return limit;
}

// The threads a for_each_row on this thread may use: 0 for every one allowed, or,
// inside a share of a threaded for_each_row, that share's part of them (the other
// shares' threads hold the rest: starting more would only contend for cores).
inline std::size_t& threads_of_this_share() {
  thread_local std::size_t threads = 0;
  return threads;
}

template <class RowFn>
void for_each_row(std::size_t rows, std::size_t elements_per_row, RowFn&& fn) {
  // hardware_concurrency() reads /sys on every call: once is enough.
  static const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t allowed = thread_limit().load() != 0 ? thread_limit().load() : cores;
  const std::size_t hw = threads_of_this_share() != 0 ? threads_of_this_share() : allowed;
  const std::size_t threads = std::min(
      {hw, rows,
       rows * elements_per_row / std::max<std::size_t>(1, parallel_threshold().load()) + 1});
  if (threads <= 1) {
    for (std::size_t r = 0; r < rows; ++r) fn(r);
    return;
  }
  const auto part = [&](std::size_t t) {
    struct Share {  // restored however the share ends (the calling thread goes on)
      std::size_t outer = threads_of_this_share();
      explicit Share(std::size_t mine) { threads_of_this_share() = mine; }
      ~Share() { threads_of_this_share() = outer; }
    } share(std::max<std::size_t>(1, hw / threads));
    for (std::size_t r = rows * t / threads; r < rows * (t + 1) / threads; ++r) fn(r);
  };
  // the calling thread takes the first part: one thread start fewer a call
  std::vector<std::jthread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(part, t);
  part(0);
}

}  // namespace aether::cpu
