// CPU backend of segment witnesses: the batched merge and the serving scatter.
// Same contracts and refusals as the model (model/witness.hpp); outputs go to
// caller buffers, and a refused call writes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "api/witness.hpp"

namespace aether::cpu {

// out: row-major [rows, S], rows = context_lens.size().
Status<WitnessError> topology_witness_indices(std::span<const std::int32_t> learned,
                                              std::size_t topk,
                                              std::span<const std::int32_t> context_lens,
                                              std::size_t num_segments,
                                              std::span<std::int32_t> out);

// out has learned's length; it may be learned itself (in place).
Status<WitnessError> apply_topology_witnesses(std::span<const std::int32_t> learned,
                                              std::size_t topk,
                                              std::span<const std::int32_t> context_lens,
                                              std::size_t learned_keep, std::size_t num_segments,
                                              std::size_t max_replacements,
                                              std::span<std::int32_t> out);

Status<WitnessError> scatter_topology_witnesses(std::span<std::int32_t> topk_indices,
                                                std::size_t topk,
                                                std::span<const std::int32_t> context_lens,
                                                std::size_t num_segments);

}  // namespace aether::cpu
