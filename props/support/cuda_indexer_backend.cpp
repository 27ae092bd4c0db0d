#include "impl/cuda/indexer.hpp"
#include "impl/cuda/paging.hpp"
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

Status<IndexerError> cuda_index_scores(std::span<const std::uint16_t> queries,
                                       std::span<const float> weights, std::size_t query_count,
                                       const IndexKeys& keys, std::span<float> out) {
  DeviceBuffer<std::uint16_t> d_queries(queries);
  DeviceBuffer<float> d_weights(weights), d_out{std::span<const float>(out)};
  DeviceBuffer<std::byte> d_keys(keys.bytes);
  const auto status = cuda::index_scores(d_queries.span(), d_weights.span(), query_count,
                                         IndexKeys{keys.format, d_keys.span(), keys.dim},
                                         d_out.span());
  d_out.download(out);
  return status;
}

PagingBackend cuda_paging_backend() {
  return {"cuda", [](std::span<const std::int32_t> rows, std::size_t k,
                     std::span<const std::int32_t> counts, std::span<const std::int32_t> tables,
                     std::size_t per, std::int64_t b, std::int64_t r, std::span<std::int32_t> out) {
            const bool in_place = rows.data() == out.data() && rows.size() == out.size();
            DeviceBuffer<std::int32_t> d_rows(rows), d_counts(counts), d_tables(tables),
                d_out{std::span<const std::int32_t>(out)};
            auto& target = in_place ? d_rows : d_out;
            const auto status = cuda::paged_slots(d_rows.span(), k, d_counts.span(), d_tables.span(),
                                                  per, b, r, target.span());
            target.download(out);
            return status;
          }};
}

}  // namespace aether::props
