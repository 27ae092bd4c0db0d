#include "impl/cpu/paging.hpp"

#include <algorithm>
#include <limits>

namespace aether::cpu {

namespace {
namespace pe = paging_error;

std::size_t valid_lanes(std::int32_t count, std::size_t k) {
  return std::min<std::size_t>(k, std::size_t(std::max(count, 0)));
}

// block Bc + offset is a slot (0 <= it <= INT32_MAX), decided without forming
// the product, which a huge Bc would overflow (offset = j mod Bc <= j < 2^31).
bool slot_fits(std::int64_t block, std::int64_t offset, std::int64_t bc) {
  return block >= 0 && block <= (std::numeric_limits<std::int32_t>::max() - offset) / bc;
}

// The geometry and shape refusals, in the model's order.
Status<PagingError> shape_error(std::size_t lanes, std::size_t k, std::size_t requests,
                                std::size_t table_size, std::size_t blocks_per_request,
                                std::int64_t block_tokens, std::int64_t ratio,
                                std::size_t out_size) {
  if (ratio <= 0 || block_tokens <= 0 || block_tokens % ratio != 0)
    return pe::BadGeometry{block_tokens, ratio};
  if (lanes != requests * k) return pe::ShapeMismatch{requests * k, lanes};
  if (table_size != requests * blocks_per_request)
    return pe::ShapeMismatch{requests * blocks_per_request, table_size};
  if (out_size != lanes) return pe::ShapeMismatch{lanes, out_size};
  return Ok{};
}
}  // namespace

Status<PagingError> paged_slots(std::span<const std::int32_t> rows, std::size_t k,
                                std::span<const std::int32_t> valid_counts,
                                std::span<const std::int32_t> block_tables,
                                std::size_t blocks_per_request, std::int64_t block_tokens,
                                std::int64_t ratio, std::span<std::int32_t> out) {
  if (auto s = shape_error(rows.size(), k, valid_counts.size(), block_tables.size(),
                           blocks_per_request, block_tokens, ratio, out.size());
      !s.ok())
    return s;
  const std::int64_t bc = block_tokens / ratio;

  // Every valid lane is checked before any is written (out may alias rows); with
  // none refused, the masked conversion is the conversion.
  for (std::size_t n = 0; n < valid_counts.size(); ++n)
    for (std::size_t i = 0; i < valid_lanes(valid_counts[n], k); ++i) {
      const std::size_t lane = n * k + i;
      const std::int64_t j = rows[lane];
      if (j == -1) continue;
      if (j < 0 || std::uint64_t(j / bc) >= blocks_per_request)
        return pe::RowOutsideTable{lane, rows[lane]};
      const std::int64_t block = block_tables[n * blocks_per_request + std::size_t(j / bc)];
      if (!slot_fits(block, j % bc, bc)) return pe::BadBlock{lane, block};
    }
  return paged_slots_masked(rows, k, valid_counts, block_tables, blocks_per_request, block_tokens,
                            ratio, out);
}

Status<PagingError> paged_slots_masked(std::span<const std::int32_t> rows, std::size_t k,
                                       std::span<const std::int32_t> valid_counts,
                                       std::span<const std::int32_t> block_tables,
                                       std::size_t blocks_per_request, std::int64_t block_tokens,
                                       std::int64_t ratio, std::span<std::int32_t> out) {
  if (auto s = shape_error(rows.size(), k, valid_counts.size(), block_tables.size(),
                           blocks_per_request, block_tokens, ratio, out.size());
      !s.ok())
    return s;
  const std::int64_t bc = block_tokens / ratio;
  for (std::size_t n = 0; n < valid_counts.size(); ++n) {
    const std::size_t valid = valid_lanes(valid_counts[n], k);
    const std::int32_t* table = block_tables.data() + n * blocks_per_request;
    for (std::size_t i = 0; i < k; ++i) {
      const std::int64_t j = rows[n * k + i];  // read before out, which may be rows, is written
      std::int64_t slot = -1;
      if (i < valid && j >= 0 && std::uint64_t(j / bc) < blocks_per_request) {
        const std::int64_t block = table[j / bc];
        if (slot_fits(block, j % bc, bc)) slot = block * bc + j % bc;
      }
      out[n * k + i] = std::int32_t(slot);
    }
  }
  return Ok{};
}

}  // namespace aether::cpu
