#include "impl/cuda/indexer.hpp"
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
  const auto status = cuda::valid_prefix_topk(d_scores.span(), width, d_ends.span(), k, d_out.span());
  d_out.download(out);
  return status;
}

}  // namespace aether::props
