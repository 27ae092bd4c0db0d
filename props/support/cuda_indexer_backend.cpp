#include <vector>

#include "impl/cuda/indexer.hpp"
#include "props/support/cuda_launch.hpp"
#include "props/support/device_buffer.hpp"
#include "props/support/indexer_backends.hpp"

namespace aether::props {

// Host buffers staged through device memory (out too, so untouched-on-refusal
// checks mean something).
Status<IndexerError> cuda_valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                            std::span<const std::int32_t> ends, std::size_t k,
                                            std::span<std::int32_t> out) {
  DeviceBuffer<float> d_scores(scores);
  DeviceBuffer<std::int32_t> d_ends(ends), d_out{std::span<const std::int32_t>(out)};
  const auto status =
      cuda::valid_prefix_topk(d_scores.span(), width, d_ends.span(), k, d_out.span());
  d_out.download(out);
  return status;
}

Status<IndexerError> cuda_queued_valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                                   std::span<const std::int32_t> ends,
                                                   std::size_t k, std::span<std::int32_t> out,
                                                   TopkPaths* paths, Mode mode) {
  DeviceBuffer<float> d_scores(scores);
  DeviceBuffer<std::int32_t> d_ends(ends), d_out{std::span<const std::int32_t>(out)};
  const cuda::DeviceVerdict unset{0x5a5a, {0x5a5a, 0x5a5a}};
  DeviceBuffer<cuda::DeviceVerdict> d_verdict{std::span<const cuda::DeviceVerdict>(&unset, 1)};
  const auto queue = [&](cudaStream_t stream) {
    return cuda::enqueue_valid_prefix_topk(d_scores.span(), width, d_ends.span(), k, d_out.span(),
                                           d_verdict.span().data(), stream);
  };
  Status<IndexerError> status = Ok{};
  if (mode == Mode::Captured) {
    // refusals of shape come back from the capture; the data's from the replay's verdict
    Graph graph([&](cudaStream_t stream) { return (status = queue(stream)).ok(); });
    if (status.ok() && !(graph.ok() && graph.replay()))
      status = IndexerError{indexer_error::DeviceFailure{int(cudaGetLastError())}};
  } else {
    status = queue(nullptr);
  }
  cuda::DeviceVerdict verdict;
  d_verdict.download({&verdict, 1});
  if (status.ok()) status = cuda::valid_prefix_topk_verdict(verdict, width);
  if (paths != nullptr) *paths = TopkPaths{verdict.detail[0], verdict.detail[1]};
  d_out.download(out);
  return status;
}

Status<IndexerError> cuda_index_scores(std::span<const std::uint16_t> queries,
                                       std::span<const float> weights, std::size_t query_count,
                                       const IndexKeys& keys, std::span<float> out) {
  DeviceBuffer<std::uint16_t> d_queries(queries);
  DeviceBuffer<float> d_weights(weights), d_out{std::span<const float>(out)};
  DeviceBuffer<std::byte> d_keys(keys.bytes);
  const auto status =
      cuda::index_scores(d_queries.span(), d_weights.span(), query_count,
                         cuda::DeviceIndexKeys{keys.format, d_keys.span(), keys.dim}, d_out.span());
  d_out.download(out);
  return status;
}

}  // namespace aether::props
