// CUDA backend of logical-row -> paged-slot conversion: the CPU signature
// (impl/cpu/paging.hpp) over device memory, out may be rows itself. Refusals
// depend on device data, so a first kernel finds the lowest bad lane and a second
// converts only if there is none; the call waits for the verdict, returns the
// model's error and writes nothing on a refusal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "api/paging.hpp"
#include "impl/cuda/device.hpp"

namespace aether::cuda {

Status<PagingError> paged_slots(std::span<const std::int32_t> rows, std::size_t k,
                                std::span<const std::int32_t> valid_counts,
                                std::span<const std::int32_t> block_tables,
                                std::size_t blocks_per_request, std::int64_t block_tokens,
                                std::int64_t ratio, std::span<std::int32_t> out,
                                Stream stream = nullptr);

}  // namespace aether::cuda
