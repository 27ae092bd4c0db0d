// A block's check of a gate: a word that decides, on the device, whether work
// queued before the host knew it was needed runs (DoSA's probe count gating the
// fallback's scorer and the batch's speculative seeds). CUDA source only.
#pragma once

#include <cstdint>

namespace aether::cuda {

// Open when there is no gate or low <= *gate <= high. Read from L2, where other
// kernels' atomics land while this one runs, not from a line this SM cached before.
__device__ __forceinline__ bool gate_open(const std::int32_t* gate, std::int32_t low,
                                          std::int32_t high) {
  if (gate == nullptr) return true;
  const std::int32_t v = __ldcg(gate);
  return low <= v && v <= high;
}

}  // namespace aether::cuda
