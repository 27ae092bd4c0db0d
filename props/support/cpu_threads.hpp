// A property's CPU calls on a chosen number of threads, the threaded path taken
// even on the smallest inputs, the previous settings restored however the scope
// ends (RC_ASSERT throws). Results must not depend on either (impl/cpu/parallel.hpp).
#pragma once

#include <cstddef>

#include "impl/cpu/parallel.hpp"

namespace aether::props {

class ForcedThreads {
 public:
  explicit ForcedThreads(std::size_t threads)
      : limit_(cpu::thread_limit().exchange(threads)),
        threshold_(cpu::parallel_threshold().exchange(1)) {}
  ~ForcedThreads() {
    cpu::thread_limit() = limit_;
    cpu::parallel_threshold() = threshold_;
  }
  ForcedThreads(const ForcedThreads&) = delete;
  ForcedThreads& operator=(const ForcedThreads&) = delete;

 private:
  std::size_t limit_, threshold_;
};

}  // namespace aether::props
