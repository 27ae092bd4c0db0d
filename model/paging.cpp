#include "model/paging.hpp"

#include <algorithm>
#include <limits>

namespace aether::model {

namespace {
namespace pe = paging_error;
}

// slot(j) = block_table[floor(j / Bc)] Bc + (j mod Bc), Bc = B / r
Result<std::vector<std::int32_t>, PagingError> paged_slots(
    std::span<const std::int32_t> rows, std::size_t k, std::span<const std::int32_t> valid_counts,
    std::span<const std::int32_t> block_tables, std::size_t blocks_per_request,
    std::int64_t block_tokens, std::int64_t ratio) {
  if (ratio <= 0 || block_tokens <= 0 || block_tokens % ratio != 0)
    return pe::BadGeometry{block_tokens, ratio};
  const std::int64_t bc = block_tokens / ratio;
  const std::size_t requests = valid_counts.size();
  if (rows.size() != requests * k) return pe::ShapeMismatch{requests * k, rows.size()};
  if (block_tables.size() != requests * blocks_per_request)
    return pe::ShapeMismatch{requests * blocks_per_request, block_tables.size()};

  std::vector<std::int32_t> out(rows.size(), -1);
  for (std::size_t n = 0; n < requests; ++n)
    for (std::size_t i = 0; i < std::min<std::size_t>(k, std::size_t(std::max(valid_counts[n], 0))); ++i) {
      const std::size_t lane = n * k + i;
      const std::int64_t j = rows[lane];
      if (j == -1) continue;
      if (j < 0 || std::uint64_t(j / bc) >= blocks_per_request)
        return pe::RowOutsideTable{lane, rows[lane]};
      const std::int64_t block = block_tables[n * blocks_per_request + std::size_t(j / bc)];
      const std::int64_t slot = block * bc + j % bc;
      if (block < 0 || slot > std::numeric_limits<std::int32_t>::max())
        return pe::BadBlock{lane, block};
      out[lane] = std::int32_t(slot);
    }
  return out;
}

}  // namespace aether::model
