#include "model/paging.hpp"

#include <algorithm>
#include <limits>

namespace aether::model {

namespace {
namespace pe = paging_error;

// Bc = B / r, or the geometry or shape refusal.
Result<std::int64_t, PagingError> rows_per_block(std::size_t lanes, std::size_t k,
                                                 std::size_t requests, std::size_t table_size,
                                                 std::size_t blocks_per_request,
                                                 std::int64_t block_tokens, std::int64_t ratio) {
  if (ratio <= 0 || block_tokens <= 0 || block_tokens % ratio != 0)
    return pe::BadGeometry{block_tokens, ratio};
  if (lanes != requests * k) return pe::ShapeMismatch{requests * k, lanes};
  if (table_size != requests * blocks_per_request)
    return pe::ShapeMismatch{requests * blocks_per_request, table_size};
  return block_tokens / ratio;
}

// Valid lane `lane` of request n holding row j != -1:
//   slot(j) = block_table[n][floor(j / Bc)] Bc + (j mod Bc),
// or the refusal it owes (j outside the table, a negative block, a slot past INT32_MAX).
Result<std::int32_t, PagingError> slot_of(std::size_t lane, std::int64_t j,
                                          std::span<const std::int32_t> table, std::int64_t bc) {
  if (j < 0 || std::uint64_t(j / bc) >= table.size())
    return pe::RowOutsideTable{lane, std::int32_t(j)};
  const std::int64_t block = table[std::size_t(j / bc)];
  const __int128 slot = __int128(block) * bc + j % bc;  // exact, whatever Bc
  if (block < 0 || slot > std::numeric_limits<std::int32_t>::max())
    return pe::BadBlock{lane, block};
  return std::int32_t(slot);
}

// Every valid lane's slot, -1 elsewhere; a lane's refusal ends the call unless `masked`.
Result<std::vector<std::int32_t>, PagingError> convert(
    std::span<const std::int32_t> rows, std::size_t k, std::span<const std::int32_t> valid_counts,
    std::span<const std::int32_t> block_tables, std::size_t blocks_per_request,
    std::int64_t block_tokens, std::int64_t ratio, bool masked) {
  auto bc = rows_per_block(rows.size(), k, valid_counts.size(), block_tables.size(),
                           blocks_per_request, block_tokens, ratio);
  if (!bc.ok()) return bc.error();
  std::vector<std::int32_t> out(rows.size(), -1);
  for (std::size_t n = 0; n < valid_counts.size(); ++n)
    for (std::size_t i = 0; i < std::min<std::size_t>(k, std::size_t(std::max(valid_counts[n], 0)));
         ++i) {
      const std::size_t lane = n * k + i;
      if (rows[lane] == -1) continue;
      auto slot =
          slot_of(lane, rows[lane],
                  block_tables.subspan(n * blocks_per_request, blocks_per_request), bc.value());
      if (slot.ok())
        out[lane] = slot.value();
      else if (!masked)
        return slot.error();
    }
  return out;
}
}  // namespace

Result<std::vector<std::int32_t>, PagingError> paged_slots(
    std::span<const std::int32_t> rows, std::size_t k, std::span<const std::int32_t> valid_counts,
    std::span<const std::int32_t> block_tables, std::size_t blocks_per_request,
    std::int64_t block_tokens, std::int64_t ratio) {
  return convert(rows, k, valid_counts, block_tables, blocks_per_request, block_tokens, ratio,
                 false);
}

Result<std::vector<std::int32_t>, PagingError> paged_slots_masked(
    std::span<const std::int32_t> rows, std::size_t k, std::span<const std::int32_t> valid_counts,
    std::span<const std::int32_t> block_tables, std::size_t blocks_per_request,
    std::int64_t block_tokens, std::int64_t ratio) {
  return convert(rows, k, valid_counts, block_tables, blocks_per_request, block_tokens, ratio,
                 true);
}

}  // namespace aether::model
