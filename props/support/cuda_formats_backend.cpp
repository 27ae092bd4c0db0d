#include "impl/cuda/formats.hpp"
#include "props/support/device_buffer.hpp"
#include "props/support/formats_backends.hpp"

namespace aether::props {

namespace {
// `queue` (an enqueue_ call on a stream, given the verdict) run in `mode`; the
// waiting form is `wait`.
template <class Wait, class Queue>
Status<FormatsError> in_mode(Mode mode, Wait wait, Queue queue) {
  if (mode == Mode::Waiting) return wait();
  // a verdict the call must reset: anything but kNoRefusal before it
  DeviceBuffer<cuda::DeviceVerdict> verdict{
      std::vector<cuda::DeviceVerdict>(1, {0x5a5a, {0x5a5a, 0x5a5a}})};
  cuda::DeviceVerdict* v = verdict.span().data();
  if (mode == Mode::Queued) {
    if (auto st = queue(v, cudaStream_t(nullptr)); !st.ok()) return st;
    cuda_check(cudaStreamSynchronize(nullptr), "queued call");
  } else {
    Status<FormatsError> queued = Ok{};
    Graph graph([&](cudaStream_t stream) { return (queued = queue(v, stream)).ok(); });
    if (!queued.ok()) return queued;
    if (!graph.ok() || !graph.replay()) return formats_error::DeviceFailure{-1};
  }
  std::vector<cuda::DeviceVerdict> host(1);
  verdict.download(host);
  return cuda::formats_verdict(host[0]);
}
}  // namespace

Status<FormatsError> cuda_store_rows(const StoreCase& c, std::vector<std::byte>& cache, Mode mode) {
  DeviceBuffer<float> d_rows{std::span<const float>(c.rows)};
  DeviceBuffer<std::int32_t> d_slots{std::span<const std::int32_t>(c.slots)};
  DeviceBuffer<std::byte> d_cache{std::span<const std::byte>(cache)};
  const auto status = in_mode(
      mode,
      [&] {
        return cuda::store_rows(c.cache, d_rows.span(), d_slots.span(), d_cache.span(), c.profile);
      },
      [&](cuda::DeviceVerdict* v, cudaStream_t stream) {
        return cuda::enqueue_store_rows(c.cache, d_rows.span(), d_slots.span(), d_cache.span(), v,
                                        c.profile, stream);
      });
  d_cache.download(cache);
  return status;
}

Result<std::vector<double>, FormatsError> cuda_gather_rows(const StoreCase& c,
                                                           const std::vector<std::byte>& cache,
                                                           Mode mode) {
  DeviceBuffer<std::byte> d_cache{std::span<const std::byte>(cache)};
  DeviceBuffer<std::int32_t> d_reads{std::span<const std::int32_t>(c.reads)};
  std::vector<double> out(c.reads.size() * c.cache.dim);
  DeviceBuffer<double> d_out{std::span<const double>(out)};
  const auto status = in_mode(
      mode,
      [&] { return cuda::gather_rows(c.cache, d_cache.span(), d_reads.span(), d_out.span()); },
      [&](cuda::DeviceVerdict* v, cudaStream_t stream) {
        return cuda::enqueue_gather_rows(c.cache, d_cache.span(), d_reads.span(), d_out.span(), v,
                                         stream);
      });
  if (!status.ok()) return status.error();
  d_out.download(out);
  return out;
}

}  // namespace aether::props
