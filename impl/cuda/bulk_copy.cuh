// Hopper's bulk copy engine (TMA, one-dimensional form) into shared memory, with
// the shared-memory barriers that say when a copy has landed: a block streams its
// input through a ring of shared buffers while it works on the last one, so the
// memory system always has copies in flight whatever the threads are doing
// (register loads stop being in flight the moment a block starts using them).
// Device code only (sm_90); PTX ISA 8.0: mbarrier, cp.async.bulk.
#pragma once

#include <cstdint>

namespace aether::cuda::bulk {

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// A barrier whose phase completes after `arrivals` arrivals and every byte it
// was told to expect; one thread initialises it before a __syncthreads.
__device__ __forceinline__ void init(unsigned long long* barrier, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)),
               "r"(arrivals)
               : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// This thread's arrival, with `bytes` more to land before the phase completes.
__device__ __forceinline__ void arrive_expecting(unsigned long long* barrier, unsigned bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)),
      "r"(bytes)
      : "memory");
}

__device__ __forceinline__ void arrive(unsigned long long* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(barrier))
               : "memory");
}

// Waits for the completion of the phase with this parity (0 for the first).
__device__ __forceinline__ void wait(unsigned long long* barrier, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "waiting:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra waiting;\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to
// shared memory, counted against the barrier's expected bytes.
__device__ __forceinline__ void copy(void* to, const void* from, unsigned bytes,
                                     unsigned long long* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(shared_address(to)),
      "l"(from), "r"(bytes), "r"(shared_address(barrier))
      : "memory");
}

}  // namespace aether::cuda::bulk
