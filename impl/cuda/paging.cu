#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "impl/cuda/device.hpp"
#include "impl/cuda/launch.cuh"
#include "impl/cuda/paging.hpp"

namespace aether::cuda {

namespace {
namespace pe = paging_error;

// 8 lanes per thread in flight (two groups of four) and small blocks: enough
// outstanding loads per SM for DRAM speed, and still four blocks per SM for a
// call of 2 MiB.
constexpr int kThreads = 128, kQuads = 2;
constexpr std::int64_t kMaxSlot = std::numeric_limits<std::int32_t>::max();

// x / d for 32-bit x by a multiply-high and two shifts, for any d >= 1 (Granlund
// and Montgomery, "Division by invariant integers using multiplication", 1994,
// fig. 4.1): no branch and no division per lane, so the lanes' lookups batch.
struct Divisor {
  std::uint32_t d = 1, m = 1;
  unsigned s1 = 0, s2 = 0;
  Divisor() = default;
  explicit Divisor(std::uint32_t v) : d(v) {
    unsigned l = 0;  // ceil(log2 d)
    while ((std::uint64_t(1) << l) < d) ++l;
    m = std::uint32_t((std::uint64_t(1) << 32) * ((std::uint64_t(1) << l) - d) / d + 1);
    s1 = l < 1 ? l : 1;
    s2 = l > 1 ? l - 1 : 0;
  }
  __device__ __forceinline__ std::uint32_t quotient(std::uint32_t x) const {
    const std::uint32_t t = __umulhi(m, x);
    return (t + ((x - t) >> s1)) >> s2;
  }
};

// Lanes and the per-block row count fit in 32 bits (the host checks; wider calls
// take the 64-bit path).
struct Geometry {
  std::size_t lanes, k, blocks_per_request;
  std::int64_t bc;  // compressed rows per block, B / r
  Divisor k32, bc32;
  std::uint32_t rows_in_table;  // blocks_per_request bc, at most 2^31 (above every 32-bit row)
  bool narrow;
};

// Refusal codes order by lane, so the atomic minimum is the model's first refusal:
// (lane << 1) | kind, kind 0 a row outside the table, 1 a bad block.
__device__ __forceinline__ unsigned long long refusal_code(std::size_t lane, int kind) {
  return (static_cast<unsigned long long>(lane) << 1) | unsigned(kind);
}

// Lane `lane` holding row j: its slot, or -1 (padding, or past the valid count);
// *bad is set to the refusal kind when there is one.
__device__ __forceinline__ std::int32_t slot_of(std::int64_t j, std::size_t lane,
                                                const std::int32_t* valid_counts,
                                                const std::int32_t* tables, const Geometry& g,
                                                int* bad) {
  const std::size_t n = lane / g.k;
  const std::size_t i = lane - n * g.k;
  const std::int32_t count = valid_counts[n];
  if (count <= 0 || i >= std::size_t(count) || j == -1) return -1;
  const std::int64_t block_of_j = j < 0 ? -1 : j / g.bc;
  if (j < 0 || std::uint64_t(block_of_j) >= g.blocks_per_request) {
    *bad = 0;
    return -1;
  }
  const std::int64_t block = tables[n * g.blocks_per_request + std::size_t(block_of_j)];
  const std::int64_t offset = j - block_of_j * g.bc;
  // block Bc + offset past INT32_MAX, decided without the product (Bc may be huge)
  if (block < 0 || block > (kMaxSlot - offset) / g.bc) {
    *bad = 1;
    return -1;
  }
  return std::int32_t(block * g.bc + offset);
}

// *p if `take`, else 0. Volatile, so the compiler keeps these loads in program
// order: a wave of them is issued before any is used (plain loads get sunk to
// just before their use, one round trip per lane).
__device__ __forceinline__ std::int32_t load_if(bool take, const std::int32_t* p) {
  std::int32_t v = 0;
  asm volatile("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.nc.s32 %0, [%1];\n\t}"
               : "+r"(v)
               : "l"(p), "r"(int(take)));
  return v;
}

// B quads of rows, j[base, base + B), become their slots in place (quad u holds
// lanes [4 quad(u), 4 quad(u) + 4)), `lowest` lowered to the first refusal among
// them; a refused lane becomes -1, or keeps its row (KeepRefused). 32-bit arithmetic (a narrow
// call). The loads go in two waves, each lane's valid count, then each lane's table entry, rather
// than a dependent pair per lane, so the lanes' lookups overlap instead of queueing; and the few
// instructions per lane matter as much, since large calls are issue-bound. When
// k is a multiple of 4 (OneRequest) a quad's lanes share their request, found
// once per quad.
template <bool OneRequest, bool KeepRefused, int B, int U, class QuadOf>
__device__ __forceinline__ void convert_narrow(std::int32_t (&j)[U][4], int base, QuadOf quad,
                                               const std::int32_t* valid_counts,
                                               const std::int32_t* tables, const Geometry& g,
                                               unsigned long long& lowest) {
  const auto lane_of = [&](int u, int e) { return 4 * quad(base + u) + std::size_t(e); };
  const auto request_of = [&](int u, int e) {
    return g.k32.quotient(std::uint32_t(lane_of(u, OneRequest ? 0 : e)));
  };
  std::uint32_t limit[B][4];  // lanes of the request below it are valid: max(0, count)
  std::int32_t block[B][4];
#pragma unroll
  for (int u = 0; u < B; ++u)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (OneRequest && e > 0) {
        limit[u][e] = limit[u][0];
        continue;
      }
      limit[u][e] =
          std::uint32_t(max(load_if(lane_of(u, e) < g.lanes, valid_counts + request_of(u, e)), 0));
    }
    // A row is in the table when 0 <= row < blocks_per_request bc: one unsigned
    // comparison (a negative row reads as 2^31 or more, and rows_in_table <= 2^31).
#pragma unroll
  for (int u = 0; u < B; ++u)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::uint32_t n = request_of(u, e), i = std::uint32_t(lane_of(u, e)) - n * g.k32.d;
      const std::uint32_t row = std::uint32_t(j[base + u][e]);
      block[u][e] = load_if(i < limit[u][e] && row < g.rows_in_table,
                            tables + std::size_t(n) * g.blocks_per_request + g.bc32.quotient(row));
    }
#pragma unroll
  for (int u = 0; u < B; ++u)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::uint32_t n = request_of(u, e), i = std::uint32_t(lane_of(u, e)) - n * g.k32.d;
      const std::uint32_t row = std::uint32_t(j[base + u][e]);
      const std::uint64_t slot = std::uint64_t(std::uint32_t(block[u][e])) * g.bc32.d +
                                 (row - g.bc32.quotient(row) * g.bc32.d);
      const bool taken = i < limit[u][e] && j[base + u][e] != -1;
      const bool in_table = row < g.rows_in_table,
                 good = in_table && block[u][e] >= 0 && slot <= kMaxSlot;
      j[base + u][e] = taken && good                   ? std::int32_t(slot)
                       : KeepRefused && taken && !good ? j[base + u][e]
                                                       : -1;
      if (taken && !good) [[unlikely]]
        lowest = min(lowest, refusal_code(lane_of(u, e), in_table ? 1 : 0));
    }
}

// U quads of rows become their slots in place, B at a time, `lowest` lowered to
// the first refusal among them (a refused lane as convert_narrow leaves it). Calls
// too wide for 32-bit arithmetic go lane by lane through slot_of.
template <int B, bool KeepRefused, int U, class QuadOf>
__device__ __forceinline__ void convert_quads(std::int32_t (&j)[U][4], QuadOf quad,
                                              const std::int32_t* valid_counts,
                                              const std::int32_t* tables, const Geometry& g,
                                              unsigned long long& lowest) {
  static_assert(U % B == 0);
  if (!g.narrow) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::size_t lane = 4 * quad(u) + std::size_t(e);
        int bad = -1;
        const std::int32_t row = j[u][e];
        j[u][e] = lane < g.lanes ? slot_of(row, lane, valid_counts, tables, g, &bad) : -1;
        if (bad >= 0) lowest = min(lowest, refusal_code(lane, bad));
        if (KeepRefused && bad >= 0) j[u][e] = row;
      }
    return;
  }
#pragma unroll
  for (int base = 0; base < U; base += B) {
    if (g.k32.d % 4 == 0)
      convert_narrow<true, KeepRefused, B>(j, base, quad, valid_counts, tables, g, lowest);
    else
      convert_narrow<false, KeepRefused, B>(j, base, quad, valid_counts, tables, g, lowest);
  }
}

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
  if (Checked && lowest != kNoRefusal) atomicMin(refusal, lowest);
#pragma unroll
  for (int u = 0; u < kQuads; ++u) store_quad<Vector>(out, quad_of(blockIdx.x, u), g.lanes, j[u]);
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
  kernel<<<blocks, kThreads, 0, stream>>>(rows, valid_counts, tables, g, refusal, out);
  if (verdict != nullptr)
    if (cudaError_t e =
            overlapped(describe_refusal, dim3(1), 32, 0, stream, rows, tables, g, verdict);
        e != cudaSuccess)
      return e;
  return cudaGetLastError();
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
