// Exact reference model of logical-row -> paged-slot conversion (source 003 A.4.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "api/paging.hpp"

namespace aether::model {

// Bc = B / r compressed rows per allocator block of B tokens (B a multiple of r).
// For each request n and lane i < K of rows [n, K]:
//   lane >= valid_count[n] (negative counts read as 0), or row -1  ->  -1
//   otherwise slot(j) = block_table[n][floor(j / Bc)] * Bc + (j mod Bc).
// Refused: a bad geometry; a valid lane whose row is below -1 or past the table;
// a negative block id or a slot past INT32_MAX.
Result<std::vector<std::int32_t>, PagingError> paged_slots(
    std::span<const std::int32_t> rows, std::size_t k, std::span<const std::int32_t> valid_counts,
    std::span<const std::int32_t> block_tables, std::size_t blocks_per_request,
    std::int64_t block_tokens, std::int64_t ratio);

// The masked conversion: the same slots, except that every valid lane the
// conversion above would refuse reads -1 (a row below -1 or past the table, a
// negative block id, a slot past INT32_MAX). Refused: a bad geometry or shape
// only, so no refusal depends on the lanes and a call may write each lane as it
// converts it (either choice is allowed; docs/paging.md).
Result<std::vector<std::int32_t>, PagingError> paged_slots_masked(
    std::span<const std::int32_t> rows, std::size_t k, std::span<const std::int32_t> valid_counts,
    std::span<const std::int32_t> block_tables, std::size_t blocks_per_request,
    std::int64_t block_tokens, std::int64_t ratio);

}  // namespace aether::model
