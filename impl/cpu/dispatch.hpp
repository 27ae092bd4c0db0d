// Whether CPU kernels may take their AVX2 + FMA paths. The portable paths do the
// same operations in the same order, so results never depend on it; properties
// switch it off to check exactly that.
#pragma once

#include <atomic>

namespace aether::cpu {

inline std::atomic<bool>& simd_allowed() {
  static std::atomic<bool> allowed{true};
  return allowed;
}

inline bool use_avx2() {
  static const bool present = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return present && simd_allowed().load();
}

}  // namespace aether::cpu
