#include <algorithm>
#include <vector>

#include "impl/cuda/paging.hpp"
#include "props/support/device_buffer.hpp"
#include "props/support/paging_backends.hpp"

namespace aether::props {

namespace {
using SlotsFn = decltype(PagingBackend::slots);

// A conversion over device copies of host buffers: in place stays in place.
template <class Convert>
SlotsFn staged(Convert convert) {
  return [convert](std::span<const std::int32_t> rows, std::size_t k,
                   std::span<const std::int32_t> counts, std::span<const std::int32_t> tables,
                   std::size_t per, std::int64_t b, std::int64_t r, std::span<std::int32_t> out) {
    const bool in_place = rows.data() == out.data() && rows.size() == out.size();
    DeviceBuffer<std::int32_t> d_rows(rows), d_counts(counts), d_tables(tables),
        d_out{std::span<const std::int32_t>(out)};
    auto& target = in_place ? d_rows : d_out;
    const Status<PagingError> status =
        convert(d_rows.span(), k, d_counts.span(), d_tables.span(), per, b, r, target.span());
    target.download(out);
    return status;
  };
}

// `host` behind one leading element, so the device copy is 4 bytes past a 16-byte
// boundary (the kernels' element-wise path).
std::vector<std::int32_t> shifted(std::span<const std::int32_t> host) {
  std::vector<std::int32_t> v{0x11111111};
  v.insert(v.end(), host.begin(), host.end());
  return v;
}

// The same over copies 4 bytes off alignment; `convert` also gets a device verdict.
template <class Convert>
SlotsFn shifted_staged(Convert convert) {
  return [convert](std::span<const std::int32_t> rows, std::size_t k,
                   std::span<const std::int32_t> counts, std::span<const std::int32_t> tables,
                   std::size_t per, std::int64_t b, std::int64_t r, std::span<std::int32_t> out) {
    const bool in_place = rows.data() == out.data() && rows.size() == out.size();
    const auto rows_host = shifted(rows), out_host = shifted(out);
    DeviceBuffer<std::int32_t> d_rows{std::span<const std::int32_t>(rows_host)}, d_counts(counts),
        d_tables(tables), d_out{std::span<const std::int32_t>(out_host)};
    const cuda::DeviceVerdict unset{0x5a5a, {0x5a5a, 0x5a5a}};
    DeviceBuffer<cuda::DeviceVerdict> d_verdict{std::span<const cuda::DeviceVerdict>(&unset, 1)};
    auto& target = in_place ? d_rows : d_out;
    const Status<PagingError> status =
        convert(d_rows.span().subspan(1), k, d_counts.span(), d_tables.span(), per, b, r,
                target.span().subspan(1), d_verdict.span().data());
    std::vector<std::int32_t> back(out.size() + 1);
    target.download(back);
    std::copy(back.begin() + 1, back.end(), out.begin());
    return status;
  };
}
}  // namespace

PagingBackend cuda_paging_backend() {
  return {"cuda", staged([](auto... a) { return cuda::paged_slots(a...); }),
          staged([](auto... a) { return cuda::paged_slots_masked(a...); }), false};
}

PagingBackend cuda_queued_paging_backend() {
  return {"cuda_queued",
          shifted_staged([](auto rows, auto k, auto counts, auto tables, auto per, auto b, auto r,
                            auto out, cuda::DeviceVerdict* d_verdict) {
            auto status =
                cuda::enqueue_paged_slots(rows, k, counts, tables, per, b, r, out, d_verdict);
            cuda::DeviceVerdict verdict;
            cuda_check(cudaMemcpy(&verdict, d_verdict, sizeof verdict, cudaMemcpyDeviceToHost),
                       "download");
            return status.ok() ? cuda::paged_slots_verdict(verdict) : status;
          }),
          shifted_staged([](auto rows, auto k, auto counts, auto tables, auto per, auto b, auto r,
                            auto out, cuda::DeviceVerdict*) {
            return cuda::enqueue_paged_slots_masked(rows, k, counts, tables, per, b, r, out);
          }),
          false};
}

}  // namespace aether::props
