#include "impl/cuda/formats.hpp"
#include "props/support/device_buffer.hpp"
#include "props/support/formats_backends.hpp"

namespace aether::props {

Status<FormatsError> cuda_store_rows(const StoreCase& c, std::vector<std::byte>& cache) {
  DeviceBuffer<float> d_rows{std::span<const float>(c.rows)};
  DeviceBuffer<std::int32_t> d_slots{std::span<const std::int32_t>(c.slots)};
  DeviceBuffer<std::byte> d_cache{std::span<const std::byte>(cache)};
  const auto status =
      cuda::store_rows(c.cache, d_rows.span(), d_slots.span(), d_cache.span(), c.profile);
  d_cache.download(cache);
  return status;
}

Result<std::vector<double>, FormatsError> cuda_gather_rows(const StoreCase& c,
                                                           const std::vector<std::byte>& cache) {
  DeviceBuffer<std::byte> d_cache{std::span<const std::byte>(cache)};
  DeviceBuffer<std::int32_t> d_reads{std::span<const std::int32_t>(c.reads)};
  std::vector<double> out(c.reads.size() * c.cache.dim);
  DeviceBuffer<double> d_out{std::span<const double>(out)};
  const auto status = cuda::gather_rows(c.cache, d_cache.span(), d_reads.span(), d_out.span());
  if (!status.ok()) return status.error();
  d_out.download(out);
  return out;
}

}  // namespace aether::props
