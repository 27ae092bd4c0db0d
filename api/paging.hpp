// Vocabulary of logical-row -> paged-slot conversion (source 003 A.4.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <variant>

#include "api/result.hpp"

namespace aether {

namespace paging_error {
// r = 0, B not a multiple of r, or B / r = 0: no whole compressed rows per block.
struct BadGeometry {
  std::int64_t block_tokens, ratio;
  friend bool operator==(const BadGeometry&, const BadGeometry&) = default;
};
// rows and out differ in length.
struct ShapeMismatch {
  std::size_t expected, actual;
  friend bool operator==(const ShapeMismatch&, const ShapeMismatch&) = default;
};
// A lane declared valid holds a row that is neither -1 nor inside the block table.
struct RowOutsideTable {
  std::size_t lane;
  std::int32_t row;
  friend bool operator==(const RowOutsideTable&, const RowOutsideTable&) = default;
};
// The block table maps a valid row to a negative block id, or the slot overflows i32.
struct BadBlock {
  std::size_t lane;
  std::int64_t block;
  friend bool operator==(const BadBlock&, const BadBlock&) = default;
};

// CUDA only: the runtime reported an error (cudaError_t value).
struct DeviceFailure {
  int code;
  friend bool operator==(const DeviceFailure&, const DeviceFailure&) = default;
};

using PagingError =
    std::variant<BadGeometry, ShapeMismatch, RowOutsideTable, BadBlock, DeviceFailure>;

inline std::ostream& operator<<(std::ostream& os, const PagingError& e) {
  if (auto* p = std::get_if<BadGeometry>(&e))
    return os << "BadGeometry{block_tokens=" << p->block_tokens << ", ratio=" << p->ratio << "}";
  if (auto* p = std::get_if<ShapeMismatch>(&e))
    return os << "ShapeMismatch{expected=" << p->expected << ", actual=" << p->actual << "}";
  if (auto* p = std::get_if<RowOutsideTable>(&e))
    return os << "RowOutsideTable{lane=" << p->lane << ", row=" << p->row << "}";
  if (auto* p = std::get_if<BadBlock>(&e))
    return os << "BadBlock{lane=" << p->lane << ", block=" << p->block << "}";
  return os << "DeviceFailure{code=" << std::get<DeviceFailure>(e).code << "}";
}
}  // namespace paging_error

using paging_error::PagingError;

}  // namespace aether
