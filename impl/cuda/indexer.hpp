// CUDA backend of the indexer's valid-prefix top-k: the CPU signature
// (impl/cpu/indexer.hpp) over device memory. Whether a call is refused depends on
// device data (ends, NaN), so a first kernel validates and a second selects only
// if nothing was refused; the call waits for the verdict, so it returns the same
// error the model would, and a refused call writes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "api/indexer.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

// One block per row: three radix passes (11, 11, 10 bits) find the K-th largest
// order key, one pass writes the choice in index order (ties to the lower index).
Status<IndexerError> valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                       std::span<const std::int32_t> ends, std::size_t k,
                                       std::span<std::int32_t> out, Stream stream = nullptr);

}  // namespace aether::cuda
