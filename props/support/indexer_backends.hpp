// Every indexer-selection backend behind one host-memory interface (see
// witness_backends.hpp): the model adapter and the CPU, and CUDA's top-k and scorer
// behind host buffers. Users add their own by filling in an IndexerBackend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "api/indexer.hpp"
#ifdef AETHER_HAVE_CUDA
#include "props/support/cuda_launch.hpp"
#endif

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
// The queued form (enqueue_valid_prefix_topk, its verdict read back and described),
// queued (Mode::Queued) or captured in a CUDA graph and replayed (Mode::Captured).
Status<IndexerError> cuda_queued_valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                                   std::span<const std::int32_t> ends,
                                                   std::size_t k, std::span<std::int32_t> out,
                                                   TopkPaths* paths = nullptr,
                                                   Mode mode = Mode::Queued);

// The CUDA scorer behind host buffers: queries [T, H, D] as bf16 bits.
Status<IndexerError> cuda_index_scores(std::span<const std::uint16_t> queries,
                                       std::span<const float> weights, std::size_t query_count,
                                       const IndexKeys& keys, std::span<float> out);

#endif

}  // namespace aether::props
