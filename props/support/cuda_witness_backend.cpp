#include "impl/cuda/witness.hpp"
#include "props/support/device_buffer.hpp"
#include "props/support/witness_backends.hpp"

namespace aether::props {

// Every argument is uploaded (out too, so an untouched-on-refusal check means
// something), the kernel runs, and the output comes back.
WitnessBackend cuda_witness_backend() {
  using I = std::int32_t;
  return {"cuda",
          [](std::span<const I> learned, std::size_t topk, std::span<const I> lens, std::size_t s,
             std::span<I> out) {
            DeviceBuffer<I> d_learned(learned), d_lens(lens), d_out{std::span<const I>(out)};
            auto status = cuda::topology_witness_indices(d_learned.span(), topk, d_lens.span(), s,
                                                         d_out.span());
            d_out.download(out);
            return status;
          },
          [](std::span<const I> learned, std::size_t topk, std::span<const I> lens,
             std::size_t keep, std::size_t s, std::size_t budget, std::span<I> out) {
            DeviceBuffer<I> d_learned(learned), d_lens(lens), d_out{std::span<const I>(out)};
            auto status = cuda::apply_topology_witnesses(d_learned.span(), topk, d_lens.span(),
                                                         keep, s, budget, d_out.span());
            d_out.download(out);
            return status;
          },
          [](std::span<I> buf, std::size_t topk, std::span<const I> lens, std::size_t s) {
            DeviceBuffer<I> d_buf{std::span<const I>(buf)}, d_lens(lens);
            auto status = cuda::scatter_topology_witnesses(d_buf.span(), topk, d_lens.span(), s);
            d_buf.download(buf);
            return status;
          }};
}

}  // namespace aether::props
