// Every paged-slot conversion backend behind one host-memory interface (see
// witness_backends.hpp): the model adapter, the CPU, and CUDA (waiting and
// queued) where present. Users add their own by filling in a PagingBackend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "api/paging.hpp"

namespace aether::props {

struct PagingBackend {
  std::string name;
  std::function<Status<PagingError>(
      std::span<const std::int32_t> rows, std::size_t k, std::span<const std::int32_t> valid_counts,
      std::span<const std::int32_t> block_tables, std::size_t blocks_per_request,
      std::int64_t block_tokens, std::int64_t ratio, std::span<std::int32_t> out)>
      slots;
  decltype(slots) masked;  // the masked conversion (model::paged_slots_masked), the same signature
  // A call refused for its data (RowOutsideTable, BadBlock) leaves out untouched:
  // the model and the CPU; CUDA's one pass leaves it unspecified (SPEC section 3).
  bool transactional = true;
};

#ifdef AETHER_HAVE_CUDA
PagingBackend cuda_paging_backend();  // host buffers staged; in place stays in place
// enqueue_paged_slots and its device verdict, rows and out 4 bytes off alignment
PagingBackend cuda_queued_paging_backend();
#endif

PagingBackend model_paging_backend();
PagingBackend cpu_paging_backend();
std::vector<PagingBackend> all_paging_backends();

}  // namespace aether::props
