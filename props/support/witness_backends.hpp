// Every witness backend behind one host-memory interface, so tests and properties
// run the same check against the model adapter, the CPU and (when a GPU is
// visible) CUDA. Users add their own kernel by filling in a WitnessBackend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "api/witness.hpp"

namespace aether::props {

struct WitnessBackend {
  std::string name;
  std::function<Status<WitnessError>(std::span<const std::int32_t> learned, std::size_t topk,
                                     std::span<const std::int32_t> context_lens,
                                     std::size_t num_segments, std::span<std::int32_t> out)>
      indices;
  std::function<Status<WitnessError>(std::span<const std::int32_t> learned, std::size_t topk,
                                     std::span<const std::int32_t> context_lens,
                                     std::size_t learned_keep, std::size_t num_segments,
                                     std::size_t max_replacements, std::span<std::int32_t> out)>
      apply;
  std::function<Status<WitnessError>(std::span<std::int32_t> topk_indices, std::size_t topk,
                                     std::span<const std::int32_t> context_lens,
                                     std::size_t num_segments)>
      scatter;
};

WitnessBackend model_witness_backend();  // the model, writing into caller buffers
WitnessBackend cpu_witness_backend();
#ifdef AETHER_HAVE_CUDA
WitnessBackend cuda_witness_backend();  // host buffers staged through device memory
#endif

// The optimized backends present here: CPU, and CUDA when a device is visible.
std::vector<WitnessBackend> impl_witness_backends();
// The model adapter first, then impl_witness_backends(): what hand examples run on.
std::vector<WitnessBackend> all_witness_backends();

}  // namespace aether::props
