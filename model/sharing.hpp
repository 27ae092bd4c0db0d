// Exact model of cross-layer sharing (source 003 A.5, A.6): the rules a set of
// layer -> source maps must keep for a forward pass to read every shared object
// from a layer that computed it, who owns what, and what the owners allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "api/sharing.hpp"

namespace aether::model {

// The settings a map's object is read with: main KV by its format, ratio, block
// size and dimension; index keys likewise; candidate blocks by the ratio, their
// count and size; indices by the ratio and K.
std::vector<Setting> read_settings(SharedObject map);

// Refusals, the first in this order:
// 1. a layer's settings no format holds (BadSettings, layers ascending);
// 2. a map's length (maps MainKv, IndexKeys, CandidateBlocks, Indices);
// 3. each map in that order, layers ascending: a source outside [0, L); layer 0
//    not its own source; a source after its layer; a source that is not its own
//    source; a setting of read_settings(map) differing between layer and source;
// 4. refinement, each map against the one before it, layers ascending:
//    coarse[fine[l]] == coarse[l];
// 5. YOCO, layers ascending: a boundary layer b is its own KV source, and every
//    layer from b on takes its KV from b or later.
Status<SharingError> check_sharing(std::span<const LayerSettings> layers, const SharingMaps& maps);

// The layer that computes layer l's object in a checked map set: map[l].
std::size_t owner(const SharingMaps& maps, SharedObject map, std::size_t layer);

// A.5: completed rows in a block times a row's bytes, (block_size / ratio) row_bytes.
std::uint64_t block_payload_bytes(CacheFormat format, std::size_t dim, std::int64_t block_size,
                                  std::int64_t ratio);

// What a checked map set allocates (api/sharing.hpp), each region rounded up to
// a multiple of `alignment` (0: none); refuses what check_sharing refuses.
Result<SharingAllocation, SharingError> sharing_allocation(std::span<const LayerSettings> layers,
                                                           const SharingMaps& maps,
                                                           std::uint64_t blocks,
                                                           std::uint64_t positions,
                                                           std::uint64_t alignment);

}  // namespace aether::model
