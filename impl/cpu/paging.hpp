// CPU backend of logical-row -> paged-slot conversion; contracts and refusals of
// model/paging.hpp. out may be rows itself (the runtime converts in place); a
// refused call writes nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "api/paging.hpp"

namespace aether::cpu {

Status<PagingError> paged_slots(std::span<const std::int32_t> rows, std::size_t k,
                                std::span<const std::int32_t> valid_counts,
                                std::span<const std::int32_t> block_tables,
                                std::size_t blocks_per_request, std::int64_t block_tokens,
                                std::int64_t ratio, std::span<std::int32_t> out);

// model::paged_slots_masked into out (out may be rows): one pass, each lane
// written as it is converted; only geometry and shape refusals, before any write.
Status<PagingError> paged_slots_masked(std::span<const std::int32_t> rows, std::size_t k,
                                       std::span<const std::int32_t> valid_counts,
                                       std::span<const std::int32_t> block_tables,
                                       std::size_t blocks_per_request, std::int64_t block_tokens,
                                       std::int64_t ratio, std::span<std::int32_t> out);

}  // namespace aether::cpu
