// CPU backend of cross-layer sharing (model/sharing.hpp): the same refusals and
// accounting in one pass over the layers, for a configuration loader or a cache
// allocator to call. Host logic only: there is no CUDA layer.
#pragma once

#include <cstdint>
#include <span>

#include "api/sharing.hpp"

namespace aether::cpu {

// model::check_sharing's refusals, the first in its order.
Status<SharingError> check_sharing(std::span<const LayerSettings> layers, const SharingMaps& maps);

// model::sharing_allocation's bytes and owners.
Result<SharingAllocation, SharingError> sharing_allocation(std::span<const LayerSettings> layers,
                                                           const SharingMaps& maps,
                                                           std::uint64_t blocks,
                                                           std::uint64_t positions,
                                                           std::uint64_t alignment);

}  // namespace aether::cpu
