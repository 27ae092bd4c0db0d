// Programmatic dependent launch (sm_90): a kernel launched with `overlapped`
// may start while the kernel before it on the stream still runs; it does what
// needs nothing of that kernel's output (loads of the caller's inputs, shared
// memory set-up), then calls wait_for_previous_kernel, which returns once that
// kernel has finished and its writes are visible. Where no kernel precedes it, the
// wait returns at once. CUDA source only.
#pragma once

#include <cuda_runtime.h>

#include "impl/cuda/device.hpp"

namespace aether::cuda {

__device__ __forceinline__ void wait_for_previous_kernel() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
// Lets the next kernel (if launched `overlapped`) start before this one ends.
__device__ __forceinline__ void let_next_kernel_start() {
  asm volatile("griddepcontrol.launch_dependents;");
}

// Launches kernel<<<grid, threads, shared, stream>>>(args...) as a programmatic
// dependent of the previous kernel on the stream. The arguments are taken by
// reference and converted once, by the runtime: a decode's parameters are up to
// 32 KiB, and each extra copy is host time on every queued call.
template <class... Params, class... Args>
cudaError_t overlapped(void (*kernel)(Params...), dim3 grid, int threads, std::size_t shared,
                       Stream stream, const Args&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(unsigned(threads));
  config.dynamicSmemBytes = shared;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

}  // namespace aether::cuda
