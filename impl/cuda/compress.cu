// The host side of a CUDA compression call: the plan (impl/compress_plan.hpp, the
// CPU's), the request table in the kernels' parameters (or a prefill's long one
// uploaded), the verdict.
#include "impl/cuda/compress.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "impl/compress_plan.hpp"
#include "impl/cuda/compress_kernels.hpp"

namespace aether::cuda {

namespace {
namespace ce = compress_error;
namespace ck = compress_kernels;
using impl::Step;

bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Queues a planned, non-empty call whose verdict word (`refusal`) already holds
// kNoRefusal. 0 or the cudaError_t.
int launch(const impl::CompressPlan& plan, std::span<const CompressRequest> requests,
           device_span<const float> projected, device_span<float> ring, const CompressShape& shape,
           device_span<std::uint16_t> rows, device_span<std::int32_t> row_index,
           device_span<std::int32_t> positions, Step step, unsigned long long* refusal,
           Stream stream) {
  if (plan.rows == 0) return 0;  // a decode of no tokens: nothing read, nothing written
  ck::Launch c{};
  c.most_tokens = plan.most_tokens;
  c.rows = plan.rows;
  c.tokens = plan.tokens;
  c.projected = projected.data();
  c.ring = ring.data();
  c.g = {shape.ratio, shape.ring, unsigned(shape.dim), unsigned(2 * shape.dim)};
  c.out = rows.data();
  c.row_index = row_index.data();
  c.positions = positions.data();
  c.refusal = refusal;
  c.vector = shape.dim % 4 == 0 && aligned(projected.data(), 16) && aligned(ring.data(), 16);
  c.ratio_path = c.vector && aligned(rows.data(), 8) ? int(shape.ratio) : 0;
  if (step == Step::Decode) {
    int failure = ck::queue_decode(c, requests, plan.token_offset, stream);
    return failure != 0 ? failure : int(cudaGetLastError());
  }
  ck::Requests table{};
  table.count = requests.size();
  std::vector<ck::RequestMeta> meta;
  meta.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i)
    meta.push_back({requests[i].start, std::int64_t(plan.token_offset[i]),
                    std::int64_t(plan.row_offset[i]), requests[i].state_slot, requests[i].tokens});
  const bool in_parameters = meta.size() <= ck::kRequestsInParameters;
  if (in_parameters) {
    std::copy(meta.begin(), meta.end(), table.in_parameters);
  } else {
    void* uploaded = nullptr;
    if (int e =
            upload_scratch(meta.data(), meta.size() * sizeof(ck::RequestMeta), stream, &uploaded))
      return e;
    table.in_memory = static_cast<const ck::RequestMeta*>(uploaded);
  }
  // with no pending input (every start a multiple of r) no ring write waits for
  // the verdict: the second kernel would only wait
  c.pending_inputs = std::any_of(requests.begin(), requests.end(),
                                 [&](const auto& q) { return q.start % shape.ratio != 0; });
  c.evict_first = plan.rows * shape.dim <= kPrefillEvictFirstElements;
  int failure = ck::queue_prefill(c, table, stream);
  if (failure == 0) failure = cudaGetLastError();
  // recorded on every path: the call that next takes the buffer waits for it
  if (!in_parameters)
    if (const int e = release_scratch(stream); failure == 0) failure = e;
  return failure;
}

using Planned = std::variant<impl::CompressPlan, CompressError>;
Planned plan_of(std::span<const CompressRequest> requests, device_span<const float> projected,
                device_span<float> ring, const CompressShape& shape,
                device_span<std::uint16_t> rows, device_span<std::int32_t> row_index,
                device_span<std::int32_t> positions, Step step) {
  return impl::plan_call(requests, shape, step, projected.size(), ring.size(), rows.size(),
                         row_index.size(), positions.size());
}

// The call, waiting once for the device's verdict.
Status<CompressError> run(std::span<const CompressRequest> requests,
                          device_span<const float> projected, device_span<float> ring,
                          const CompressShape& shape, device_span<std::uint16_t> rows,
                          device_span<std::int32_t> row_index, device_span<std::int32_t> positions,
                          Step step, Stream stream) {
  const Planned planned =
      plan_of(requests, projected, ring, shape, rows, row_index, positions, step);
  if (auto* e = std::get_if<CompressError>(&planned)) return *e;
  if (requests.empty()) return Ok{};
  Verdict v;
  int failure = begin_verdict(v, stream);
  if (failure == 0)
    failure = launch(std::get<impl::CompressPlan>(planned), requests, projected, ring, shape, rows,
                     row_index, positions, step, v.word(), stream);
  if (failure == 0) failure = end_verdict(v, stream);
  if (failure != 0) return ce::DeviceFailure{failure};
  return compress_verdict(*v.host);
}

// The call queued, its device refusals left in *verdict.
Status<CompressError> enqueue(std::span<const CompressRequest> requests,
                              device_span<const float> projected, device_span<float> ring,
                              const CompressShape& shape, device_span<std::uint16_t> rows,
                              device_span<std::int32_t> row_index,
                              device_span<std::int32_t> positions, Step step,
                              DeviceVerdict* verdict, Stream stream) {
  const Planned planned =
      plan_of(requests, projected, ring, shape, rows, row_index, positions, step);
  if (auto* e = std::get_if<CompressError>(&planned)) return *e;
  int failure = reset_verdict(verdict, stream);
  if (failure == 0 && !requests.empty())
    failure = launch(std::get<impl::CompressPlan>(planned), requests, projected, ring, shape, rows,
                     row_index, positions, step, &verdict->refusal, stream);
  if (failure != 0) return ce::DeviceFailure{failure};
  return Ok{};
}
}  // namespace

Status<CompressError> compress_verdict(const DeviceVerdict& verdict) {
  if (verdict.refusal == kNoRefusal) return Ok{};
  const bool ring = verdict.refusal & ck::kRingCode;
  return ce::NonFiniteInput{ring ? ce::Input::Ring : ce::Input::Projected,
                            std::size_t(verdict.refusal & ~ck::kRingCode)};
}

Status<CompressError> compress_prefill(std::span<const CompressRequest> requests,
                                       device_span<const float> projected, device_span<float> ring,
                                       const CompressShape& shape, device_span<std::uint16_t> rows,
                                       device_span<std::int32_t> row_index,
                                       device_span<std::int32_t> positions, Stream stream) {
  return run(requests, projected, ring, shape, rows, row_index, positions, Step::Prefill, stream);
}

Status<CompressError> compress_decode(std::span<const CompressRequest> requests,
                                      device_span<const float> projected, device_span<float> ring,
                                      const CompressShape& shape, device_span<std::uint16_t> rows,
                                      device_span<std::int32_t> row_index,
                                      device_span<std::int32_t> positions, Stream stream) {
  return run(requests, projected, ring, shape, rows, row_index, positions, Step::Decode, stream);
}

Status<CompressError> enqueue_compress_prefill(std::span<const CompressRequest> requests,
                                               device_span<const float> projected,
                                               device_span<float> ring, const CompressShape& shape,
                                               device_span<std::uint16_t> rows,
                                               device_span<std::int32_t> row_index,
                                               device_span<std::int32_t> positions,
                                               DeviceVerdict* verdict, Stream stream) {
  return enqueue(requests, projected, ring, shape, rows, row_index, positions, Step::Prefill,
                 verdict, stream);
}

Status<CompressError> enqueue_compress_decode(std::span<const CompressRequest> requests,
                                              device_span<const float> projected,
                                              device_span<float> ring, const CompressShape& shape,
                                              device_span<std::uint16_t> rows,
                                              device_span<std::int32_t> row_index,
                                              device_span<std::int32_t> positions,
                                              DeviceVerdict* verdict, Stream stream) {
  return enqueue(requests, projected, ring, shape, rows, row_index, positions, Step::Decode,
                 verdict, stream);
}

}  // namespace aether::cuda
