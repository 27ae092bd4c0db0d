#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "impl/cuda/device.hpp"
#include "impl/cuda/launch.cuh"
#include "impl/cuda/paging.hpp"
#include "impl/cuda/paging_lanes.cuh"

namespace aether::cuda {

namespace {
namespace pe = paging_error;
using namespace paging_lanes;

// 8 lanes per thread in flight (two groups of four) and small blocks: enough
// outstanding loads per SM for DRAM speed, and still four blocks per SM for a
// call of 2 MiB.
constexpr int kThreads = 128, kQuads = 2;
constexpr std::size_t kLanesPerBlock = std::size_t(kThreads) * kQuads * 4;

// A thread's quads (lanes [4q, 4q + 4)) lie kThreads apart, so each load of a
// warp covers 512 contiguous bytes.
__device__ __forceinline__ std::size_t quad_of(unsigned block, int u) {
  return (std::size_t(block) * kQuads + std::size_t(u)) * kThreads + threadIdx.x;
}

// One 16-byte access per quad when Vector (rows and out 16-byte aligned), else
// four; lanes past the end read as -1 and are not written.
template <bool Vector>
__device__ __forceinline__ void load_quad(const std::int32_t* rows, std::size_t q,
                                          std::size_t lanes, std::int32_t (&j)[4]) {
  if (Vector && 4 * q + 4 <= lanes) {
    const int4 v = reinterpret_cast<const int4*>(rows)[q];
    j[0] = v.x, j[1] = v.y, j[2] = v.z, j[3] = v.w;
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) j[e] = 4 * q + e < lanes ? rows[4 * q + e] : -1;
}

template <bool Vector>
__device__ __forceinline__ void store_quad(std::int32_t* out, std::size_t q, std::size_t lanes,
                                           const std::int32_t (&s)[4]) {
  if (Vector && 4 * q + 4 <= lanes) {  // streaming: the rows still to be read stay in L2
    __stcs(reinterpret_cast<int4*>(out) + q, make_int4(s[0], s[1], s[2], s[3]));
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e)
    if (4 * q + e < lanes) out[4 * q + e] = s[e];
}

// The lanes of each block (kQuads quads a thread) read, converted and written in
// one pass; each thread reads all its lanes before writing any, as out may be
// rows. Checked: the lowest refusal goes into *refusal and a refused lane is
// written as its row (out is unspecified after a refusal, and with out == rows
// describe_refusal still finds the row there); masked (model::paged_slots_masked):
// a refused lane is -1 and nothing is recorded.
template <bool Vector, bool Checked>
__global__ void __launch_bounds__(kThreads)
    convert(const std::int32_t* rows, const std::int32_t* valid_counts, const std::int32_t* tables,
            Geometry g, unsigned long long* refusal, std::int32_t* out) {
  std::int32_t j[kQuads][4];
#pragma unroll
  for (int u = 0; u < kQuads; ++u) load_quad<Vector>(rows, quad_of(blockIdx.x, u), g.lanes, j[u]);
  unsigned long long lowest = kNoRefusal;
  convert_quads<kQuads, Checked>(
      j, [](int u) { return quad_of(blockIdx.x, u); }, valid_counts, tables, g, lowest);
  if (Checked && lowest != kNoRefusal) {
    wait_for_previous_kernel();  // the verdict's reset (docs/paging.md)
    atomicMin(refusal, lowest);
  }
#pragma unroll
  for (int u = 0; u < kQuads; ++u) store_quad<Vector>(out, quad_of(blockIdx.x, u), g.lanes, j[u]);
  if (Checked) wait_for_previous_kernel();  // ends after the reset: describe_refusal waits for this
}

// After the checked pass (its programmatic dependent): the refused lane's row, and
// for a bad block the block id, for the host's error.
__global__ void describe_refusal(const std::int32_t* rows, const std::int32_t* tables, Geometry g,
                                 DeviceVerdict* verdict) {
  wait_for_previous_kernel();
  const unsigned long long refusal = verdict->refusal;
  if (refusal == kNoRefusal) return;
  const std::size_t lane = std::size_t(refusal >> 1);
  const std::int64_t row = rows[lane];
  verdict->detail[0] = row;
  if (refusal & 1)
    verdict->detail[1] = tables[lane / g.k * g.blocks_per_request + std::size_t(row / g.bc)];
}

// The host's refusals (geometry, shapes), else the call's geometry.
Status<PagingError> plan(std::size_t lanes, std::size_t k, std::size_t requests,
                         std::size_t table_size, std::size_t blocks_per_request,
                         std::int64_t block_tokens, std::int64_t ratio, std::size_t out_size,
                         Geometry* g) {
  if (ratio <= 0 || block_tokens <= 0 || block_tokens % ratio != 0)
    return pe::BadGeometry{block_tokens, ratio};
  const std::int64_t bc = block_tokens / ratio;
  constexpr std::uint64_t kRowLimit = std::uint64_t(1) << 31;  // above every 32-bit row
  const bool narrow = k > 0 && lanes <= 0xffffffffu && bc <= 0x7fffffff;
  *g = Geometry{lanes,
                k,
                blocks_per_request,
                bc,
                Divisor(narrow ? std::uint32_t(k) : 1),
                Divisor(narrow ? std::uint32_t(bc) : 1),
                std::uint32_t(blocks_per_request >= kRowLimit
                                  ? kRowLimit
                                  : std::min<std::uint64_t>(blocks_per_request * bc, kRowLimit)),
                narrow};
  if (lanes != requests * k) return pe::ShapeMismatch{requests * k, lanes};
  if (table_size != requests * blocks_per_request)
    return pe::ShapeMismatch{requests * blocks_per_request, table_size};
  if (out_size != lanes) return pe::ShapeMismatch{lanes, out_size};
  return Ok{};
}

// The conversion's kernel, the checked one followed by describe_refusal (the
// verdict reset before: begin_verdict, reset_verdict).
cudaError_t launch(const std::int32_t* rows, const std::int32_t* valid_counts,
                   const std::int32_t* tables, const Geometry& g, DeviceVerdict* verdict,
                   std::int32_t* out, Stream stream) {
  const unsigned blocks = unsigned((g.lanes + kLanesPerBlock - 1) / kLanesPerBlock);
  const bool vector = reinterpret_cast<std::uintptr_t>(rows) % 16 == 0 &&
                      reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  unsigned long long* refusal = verdict != nullptr ? &verdict->refusal : nullptr;
  const auto kernel = verdict == nullptr ? (vector ? convert<true, false> : convert<false, false>)
                                         : (vector ? convert<true, true> : convert<false, true>);
  if (verdict == nullptr) {
    kernel<<<blocks, kThreads, 0, stream>>>(rows, valid_counts, tables, g, refusal, out);
    return cudaGetLastError();
  }
  // behind the verdict's reset, which lets it start once every earlier kernel has
  // finished: the checked pass reads at once and waits for the reset only to report
  if (cudaError_t e = overlapped(kernel, dim3(blocks), kThreads, 0, stream, rows, valid_counts,
                                 tables, g, refusal, out);
      e != cudaSuccess)
    return e;
  return overlapped(describe_refusal, dim3(1), 32, 0, stream, rows, tables, g, verdict);
}
}  // namespace

Status<PagingError> paged_slots_verdict(const DeviceVerdict& verdict) {
  if (verdict.refusal == kNoRefusal) return Ok{};
  const std::size_t lane = std::size_t(verdict.refusal >> 1);
  if (!(verdict.refusal & 1)) return pe::RowOutsideTable{lane, std::int32_t(verdict.detail[0])};
  return pe::BadBlock{lane, verdict.detail[1]};
}

Status<PagingError> enqueue_paged_slots(device_span<const std::int32_t> rows, std::size_t k,
                                        device_span<const std::int32_t> valid_counts,
                                        device_span<const std::int32_t> block_tables,
                                        std::size_t blocks_per_request, std::int64_t block_tokens,
                                        std::int64_t ratio, device_span<std::int32_t> out,
                                        DeviceVerdict* verdict, Stream stream) {
  Geometry g;
  if (auto s = plan(rows.size(), k, valid_counts.size(), block_tables.size(), blocks_per_request,
                    block_tokens, ratio, out.size(), &g);
      !s.ok())
    return s;
  if (int e = reset_verdict(verdict, stream)) return pe::DeviceFailure{e};
  if (rows.empty()) return Ok{};
  if (cudaError_t e = launch(rows.data(), valid_counts.data(), block_tables.data(), g, verdict,
                             out.data(), stream);
      e != cudaSuccess)
    return pe::DeviceFailure{int(e)};
  return Ok{};
}

Status<PagingError> paged_slots(device_span<const std::int32_t> rows, std::size_t k,
                                device_span<const std::int32_t> valid_counts,
                                device_span<const std::int32_t> block_tables,
                                std::size_t blocks_per_request, std::int64_t block_tokens,
                                std::int64_t ratio, device_span<std::int32_t> out, Stream stream) {
  Geometry g;
  if (auto s = plan(rows.size(), k, valid_counts.size(), block_tables.size(), blocks_per_request,
                    block_tokens, ratio, out.size(), &g);
      !s.ok())
    return s;
  if (rows.empty()) return Ok{};
  Verdict v;
  if (int e = begin_verdict(v, stream)) return pe::DeviceFailure{e};
  if (cudaError_t e = launch(rows.data(), valid_counts.data(), block_tables.data(), g, v.device,
                             out.data(), stream);
      e != cudaSuccess)
    return pe::DeviceFailure{int(e)};
  if (int e = end_verdict(v, stream)) return pe::DeviceFailure{e};
  return paged_slots_verdict(*v.host);
}

Status<PagingError> enqueue_paged_slots_masked(device_span<const std::int32_t> rows, std::size_t k,
                                               device_span<const std::int32_t> valid_counts,
                                               device_span<const std::int32_t> block_tables,
                                               std::size_t blocks_per_request,
                                               std::int64_t block_tokens, std::int64_t ratio,
                                               device_span<std::int32_t> out, Stream stream) {
  Geometry g;
  if (auto s = plan(rows.size(), k, valid_counts.size(), block_tables.size(), blocks_per_request,
                    block_tokens, ratio, out.size(), &g);
      !s.ok())
    return s;
  if (rows.empty()) return Ok{};
  if (cudaError_t e = launch(rows.data(), valid_counts.data(), block_tables.data(), g, nullptr,
                             out.data(), stream);
      e != cudaSuccess)
    return pe::DeviceFailure{int(e)};
  return Ok{};
}

Status<PagingError> paged_slots_masked(device_span<const std::int32_t> rows, std::size_t k,
                                       device_span<const std::int32_t> valid_counts,
                                       device_span<const std::int32_t> block_tables,
                                       std::size_t blocks_per_request, std::int64_t block_tokens,
                                       std::int64_t ratio, device_span<std::int32_t> out,
                                       Stream stream) {
  if (auto s = enqueue_paged_slots_masked(rows, k, valid_counts, block_tables, blocks_per_request,
                                          block_tokens, ratio, out, stream);
      !s.ok())
    return s;
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return pe::DeviceFailure{int(e)};
  return Ok{};
}

}  // namespace aether::cuda
