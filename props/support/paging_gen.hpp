// Reusable RapidCheck generators for paged-slot conversion (source 003 A.4.3):
// lanes and block tables of several requests, with padding lanes, rows outside
// the table, bad blocks and geometry, and shape faults.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

#include "props/support/model_adapter.hpp"

namespace aether::props {

// A batched paged-slot conversion.
struct PagingCall {
  std::vector<std::int32_t> rows;  // [requests, k]
  std::size_t k = 0;
  std::vector<std::int32_t> valid_counts;
  std::vector<std::int32_t> block_tables;  // [requests, blocks_per_request]
  std::size_t blocks_per_request = 0;
  std::int64_t block_tokens = 0, ratio = 1;
  // How much longer (or shorter) than rows the output buffer is: 0 when well formed.
  std::ptrdiff_t out_delta = 0;
  std::size_t out_len() const { return off_by(rows.size(), out_delta); }
};
void showValue(const PagingCall& call, std::ostream& os);

// Refusals included: bad lanes and geometry now and then, and in one call in four
// one or more shape faults (a lane or table entry too many or too few, an output
// of the wrong length) on top.
rc::Gen<PagingCall> gen_paging_call();

}  // namespace aether::props
