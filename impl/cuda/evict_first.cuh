// 16-byte asynchronous copies into shared memory (cp.async.cg; the caller commits
// and waits) of values a kernel reads once, marked first to leave the L2: the
// formats' IndexFp4 store (faster at every size measured) and prefill's row items
// up to a size (faster at 32 and 64 x 512, slower from 128 x 512: compress.hpp);
// MainFp8's store and decode's register loads measured slower and keep plain ones
// (docs/performance.md), through fetch_plain.
// Device code only (sm_90).
#pragma once

namespace aether::cuda {

// The policy every hinted copy of a thread carries (one instruction).
__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// 16 bytes from `from` to the shared address `to`.
__device__ __forceinline__ void fetch_evict_first(unsigned to, const void* from,
                                                  unsigned long long policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(to), "l"(from),
               "l"(policy)
               : "memory");
}

// The same without a policy, for copies that keep the L2's normal one.
__device__ __forceinline__ void fetch_plain(unsigned to, const void* from) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(from) : "memory");
}

}  // namespace aether::cuda
