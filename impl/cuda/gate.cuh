// A block's check of a gate: a word that decides, on the device, whether work
// queued before the host knew it was needed runs (DoSA's probe count gating the
// fallback's scorer and the batch's speculative seeds). CUDA source only.
#pragma once

#include <cstdint>

#include "impl/cuda/device.hpp"

namespace aether::cuda {

// Open when there is no word or low <= *word <= high. Read from L2, where other
// kernels' atomics land while this one runs, not from a line this SM cached before.
__device__ __forceinline__ bool gate_open(const Gate& gate) {
  if (gate.word == nullptr) return true;
  const std::int32_t v = __ldcg(gate.word);
  return gate.low <= v && v <= gate.high;
}

}  // namespace aether::cuda
