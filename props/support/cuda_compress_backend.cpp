#include "impl/cuda/compress.hpp"
#include "props/support/compress_backends.hpp"
#include "props/support/device_buffer.hpp"

namespace aether::props {

namespace {
template <class Step>
CompressStep staged(Step step) {
  return [step](std::span<const CompressRequest> requests, std::span<const float> projected, std::span<float> ring,
                const CompressShape& shape, std::span<std::uint16_t> rows, std::span<std::int32_t> row_index,
                std::span<std::int32_t> positions) {
    DeviceBuffer<float> d_projected(projected), d_ring{std::span<const float>(ring)};
    DeviceBuffer<std::uint16_t> d_rows{std::span<const std::uint16_t>(rows)};
    DeviceBuffer<std::int32_t> d_index{std::span<const std::int32_t>(row_index)},
        d_positions{std::span<const std::int32_t>(positions)};
    const auto status = step(requests, d_projected.span(), d_ring.span(), shape, d_rows.span(), d_index.span(),
                             d_positions.span(), nullptr);
    d_ring.download(ring);
    d_rows.download(rows);
    d_index.download(row_index);
    d_positions.download(positions);
    return status;
  };
}
}  // namespace

CompressBackend cuda_compress_backend() {
  return {"cuda", staged([](auto... a) { return cuda::compress_prefill(a...); }),
          staged([](auto... a) { return cuda::compress_decode(a...); })};
}

}  // namespace aether::props
