#include "impl/cuda/compress.hpp"
#include "props/support/compress_backends.hpp"
#include "props/support/device_buffer.hpp"

namespace aether::props {

namespace {
template <class Step>
CompressStep staged(Step step) {
  return [step](std::span<const CompressRequest> requests, std::span<const float> projected,
                std::span<float> ring, const CompressShape& shape, std::span<std::uint16_t> rows,
                std::span<std::int32_t> row_index, std::span<std::int32_t> positions) {
    DeviceBuffer<float> d_projected(projected), d_ring{std::span<const float>(ring)};
    DeviceBuffer<std::uint16_t> d_rows{std::span<const std::uint16_t>(rows)};
    DeviceBuffer<std::int32_t> d_index{std::span<const std::int32_t>(row_index)},
        d_positions{std::span<const std::int32_t>(positions)};
    const auto status = step(requests, d_projected.span(), d_ring.span(), shape, d_rows.span(),
                             d_index.span(), d_positions.span(), nullptr);
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
          staged([](auto... a) { return cuda::compress_decode(a...); }), false};
}

namespace {
// An enqueue_ step with its device verdict read back: the waiting signature.
template <class Enqueue>
auto with_verdict(Enqueue enqueue) {
  return [enqueue](std::span<const CompressRequest> requests,
                   cuda::device_span<const float> projected, cuda::device_span<float> ring,
                   const CompressShape& shape, cuda::device_span<std::uint16_t> rows,
                   cuda::device_span<std::int32_t> row_index,
                   cuda::device_span<std::int32_t> positions, cuda::Stream stream) {
    const cuda::DeviceVerdict unset{0x5a5a, {0x5a5a, 0x5a5a}};
    DeviceBuffer<cuda::DeviceVerdict> d_verdict{std::span<const cuda::DeviceVerdict>(&unset, 1)};
    auto status = enqueue(requests, projected, ring, shape, rows, row_index, positions,
                          d_verdict.span().data(), stream);
    cuda::DeviceVerdict verdict;
    d_verdict.download({&verdict, 1});
    if (status.ok()) status = cuda::compress_verdict(verdict);
    return status;
  };
}
}  // namespace

CompressBackend cuda_queued_compress_backend() {
  return {"cuda_queued",
          staged(with_verdict([](auto... a) { return cuda::enqueue_compress_prefill(a...); })),
          staged(with_verdict([](auto... a) { return cuda::enqueue_compress_decode(a...); })),
          false};
}

}  // namespace aether::props
