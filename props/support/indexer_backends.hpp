// Every indexer-selection backend behind one host-memory interface (see
// witness_backends.hpp): the model adapter and the CPU; CUDA joins when its
// kernels land. Users add their own by filling in an IndexerBackend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "api/indexer.hpp"
#include "api/paging.hpp"

namespace aether::props {

struct IndexerBackend {
  std::string name;
  std::function<Status<IndexerError>(std::span<const float> scores, std::size_t width,
                                     std::span<const std::int32_t> ends, std::size_t k,
                                     std::span<std::int32_t> out)>
      topk;
  std::function<Status<IndexerError>(
      std::span<const float> row, std::size_t end, std::span<const std::int32_t> retained_blocks,
      std::size_t block_size, std::size_t k, std::span<std::int32_t> out)>
      candidate_topk;
  std::function<Status<IndexerError>(std::span<const float> row, std::size_t end,
                                     std::size_t block_size, std::span<float> out)>
      block_scores;
  std::function<Status<IndexerError>(std::span<const std::int32_t> compact,
                                     std::span<const std::int32_t> retained_blocks,
                                     std::size_t block_size, std::span<std::int32_t> out)>
      restore;
  std::function<Status<IndexerError>(std::span<const std::int32_t> rows, std::int32_t offset,
                                     std::span<std::int32_t> out)>
      offset;
};

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

IndexerBackend model_indexer_backend();
IndexerBackend cpu_indexer_backend();
std::vector<IndexerBackend> all_indexer_backends();  // model, then the impls present

#ifdef AETHER_HAVE_CUDA
// The CUDA top-k behind the host-memory signature of IndexerBackend::topk.
Status<IndexerError> cuda_valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                            std::span<const std::int32_t> ends, std::size_t k,
                                            std::span<std::int32_t> out);
// The verdict's counts of read-once rows by the way their finish took (a speed
// figure): selected from their scores (the list could not say), and refined or
// finished by their ties (impl/cuda/indexer_read_once_finish.cu).
struct TopkPaths {
  long long from_scores = -1, refined_or_tied = -1;
};
// The queued form (enqueue_valid_prefix_topk, its verdict read back and described).
Status<IndexerError> cuda_queued_valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                                   std::span<const std::int32_t> ends,
                                                   std::size_t k, std::span<std::int32_t> out,
                                                   TopkPaths* paths = nullptr);

// The CUDA scorer behind host buffers: queries [T, H, D] as bf16 bits.
Status<IndexerError> cuda_index_scores(std::span<const std::uint16_t> queries,
                                       std::span<const float> weights, std::size_t query_count,
                                       const IndexKeys& keys, std::span<float> out);

PagingBackend cuda_paging_backend();  // host buffers staged; in place stays in place
// enqueue_paged_slots and its device verdict, rows and out 4 bytes off alignment
PagingBackend cuda_queued_paging_backend();
#endif

PagingBackend model_paging_backend();
PagingBackend cpu_paging_backend();
std::vector<PagingBackend> all_paging_backends();

}  // namespace aether::props
