// CUDA backend of segment witnesses: the CPU backend's signatures (impl/cpu/witness.hpp)
// over device memory, asynchronous on `stream`. Validation reads only sizes, so a
// refusal is decided on the host and launches nothing; DeviceFailure carries a
// launch error. Callers synchronize before reading the output.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/witness.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

Status<WitnessError> topology_witness_indices(device_span<const std::int32_t> learned,
                                              std::size_t topk,
                                              device_span<const std::int32_t> context_lens,
                                              std::size_t num_segments,
                                              device_span<std::int32_t> out,
                                              Stream stream = nullptr);

// One pass over each row: occupancy mask, then the row (out of place) and the
// witnesses into the tail. out may be learned itself.
Status<WitnessError> apply_topology_witnesses(device_span<const std::int32_t> learned,
                                              std::size_t topk,
                                              device_span<const std::int32_t> context_lens,
                                              std::size_t learned_keep, std::size_t num_segments,
                                              std::size_t max_replacements,
                                              device_span<std::int32_t> out,
                                              Stream stream = nullptr);

// In place: reads each row once and writes at most S slots.
Status<WitnessError> scatter_topology_witnesses(device_span<std::int32_t> topk_indices,
                                                std::size_t topk,
                                                device_span<const std::int32_t> context_lens,
                                                std::size_t num_segments, Stream stream = nullptr);

}  // namespace aether::cuda
