#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "impl/cuda/witness.hpp"
#include "impl/witness_refusals.hpp"

namespace aether::cuda {

namespace {
namespace we = witness_error;

// 128 threads a row: faster on the H200 than 256 and 512 (docs/performance.md).
constexpr int kThreads = 128;
// See impl/cpu/witness.cpp: floor(fma(x, S_eff/L, 2^-40)) is floor(x S_eff / L) exactly.
constexpr double kLift = 0x1p-40;

struct RowShape {
  std::size_t topk, keep, budget, num_segments;
};

// Bit min(σ(x), S - 1) of an entry x >= 0 (none for padding). For x >= L the
// clamp equals min(x, S - 1): see impl/cpu/witness.cpp.
__device__ __forceinline__ std::uint64_t segment_bit(std::int32_t x, std::int32_t len, double ratio,
                                                     int last) {
  // Branch-free: an early return for padding would wrap every entry in its own
  // divergent region and serialize the conversion latencies of a thread's entries.
  const std::int32_t xc = max(x, 0);
  const int seg = xc < len ? int(__fma_rn(double(xc), ratio, kLift)) : min(xc, last);
  return x < 0 ? 0 : std::uint64_t(1) << seg;
}

__device__ __forceinline__ std::uint64_t int4_bits(int4 v, std::int32_t len, double ratio,
                                                   int last) {
  return segment_bit(v.x, len, ratio, last) | segment_bit(v.y, len, ratio, last) |
         segment_bit(v.z, len, ratio, last) | segment_bit(v.w, len, ratio, last);
}

// OR of every thread's mask; one barrier, after which all threads hold the result.
__device__ std::uint64_t block_or(std::uint64_t mask) {
  __shared__ unsigned long long warp_masks[kThreads / 32];
  const unsigned lo = __reduce_or_sync(0xffffffffu, unsigned(mask));
  const unsigned hi = __reduce_or_sync(0xffffffffu, unsigned(mask >> 32));
  if ((threadIdx.x & 31) == 0)
    warp_masks[threadIdx.x / 32] = (static_cast<unsigned long long>(hi) << 32) | lo;
  __syncthreads();
  std::uint64_t all = 0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) all |= warp_masks[w];
  return all;
}

__device__ double reciprocal(double x) {
#ifdef __CUDA_ARCH__
  return __drcp_rn(x);
#else
  return 1.0 / x;  // never called on the host
#endif
}

struct RowGeometry {
  std::int32_t len;
  int s_eff, last;
  double ratio;  // S_eff * RN(1 / L): within 2 ulp of S_eff / L, far inside the 2^-31 margin
  __device__ RowGeometry(std::int32_t l, int num_segments)
      : len(l),
        s_eff(l > 0 ? min(num_segments, l) : 0),
        last(num_segments - 1),
        ratio(l > 0 ? double(s_eff) * reciprocal(double(l)) : 0.0) {}
  // Segments of [0, S_eff) no entry occupies; none when L <= 0.
  __device__ std::uint64_t missing(std::uint64_t occupied) const {
    if (len <= 0) return 0;
    const std::uint64_t all = s_eff == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << s_eff) - 1;
    return all & ~occupied;
  }
  // e_s = ceil(s L / S_eff)
  __device__ std::int32_t edge(int s) const {
    return std::int32_t((std::int64_t(s) * len + s_eff - 1) / s_eff);
  }
};

// How many witnesses are written: min(|W(K)|, B).
__device__ std::size_t witness_count(std::uint64_t missing, std::size_t budget) {
  const auto w = std::size_t(__popcll(missing));
  return w < budget ? w : budget;
}

// Thread s < 64 owns segment s: when s is missing and its rank among the missing
// segments is under n, its edge goes to slot keep + rank (ascending segment order).
__device__ void write_witness(std::uint64_t missing, std::size_t n, std::size_t keep,
                              std::int32_t edge, std::int32_t* row_out) {
  const int s = int(threadIdx.x);
  if (s >= 64 || !(missing >> s & 1)) return;
  const auto rank = std::size_t(__popcll(missing & ((std::uint64_t(1) << s) - 1)));
  if (rank < n) row_out[keep + rank] = edge;
}

// Any shape: every slot is copied (out of place) in the pass that builds the mask;
// block_or's barrier then orders the witness stores after the copy.
__global__ void __launch_bounds__(kThreads)
    merge_rows_any(const std::int32_t* learned, const std::int32_t* context_lens, RowShape shape,
                   std::int32_t* out) {
  const std::size_t r = blockIdx.x;
  const RowGeometry g(context_lens[r], int(shape.num_segments));
  const std::int32_t* row = learned + r * shape.topk;
  std::int32_t* dst = out + r * shape.topk;
  std::uint64_t mask = 0;
  for (std::size_t i = threadIdx.x; i < shape.topk; i += kThreads) {
    const std::int32_t v = row[i];
    if (dst != row) dst[i] = v;
    mask |= segment_bit(v, g.len, g.ratio, g.last);
  }
  const int s = int(threadIdx.x);
  const std::int32_t edge = s < g.s_eff ? g.edge(s) : 0;
  const std::uint64_t missing = g.missing(block_or(mask));
  write_witness(missing, witness_count(missing, shape.budget), shape.keep, edge, dst);
}

// topk % 4 == 0, 16-byte aligned rows, topk <= 4 * kVec * kThreads: each thread
// loads its kVec int4 into registers before using any, so a row is read once and
// (out of place) written once: the row's slots outside [keep, keep + n) by their
// threads, the n witnesses by the threads of their segments. Segment edges are
// computed while the loads are in flight.
template <int kVec>
__global__ void __launch_bounds__(kThreads)
    merge_rows_registers(const std::int32_t* learned, const std::int32_t* context_lens,
                         RowShape shape, std::int32_t* out) {
  const std::size_t r = blockIdx.x;
  const std::int32_t len = context_lens[r];
  const std::size_t n4 = shape.topk / 4;
  const auto* src = reinterpret_cast<const int4*>(learned + r * shape.topk);
  std::int32_t* row_out = out + r * shape.topk;
  const bool in_place = learned == out;
  // Slots past the row read as padding, which marks nothing: the mask loop needs no guard.
  int4 v[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const std::size_t i = threadIdx.x + std::size_t(k) * kThreads;
    v[k] = i < n4 ? __ldcs(src + i) : make_int4(-1, -1, -1, -1);
  }
  const RowGeometry g(len, int(shape.num_segments));
  const int s = int(threadIdx.x);
  const std::int32_t edge = s < g.s_eff ? g.edge(s) : 0;
  // A row with L <= 0 has no missing segment, whatever its mask.
  std::uint64_t mask = 0;
#pragma unroll
  for (int k = 0; k < kVec; ++k) mask |= int4_bits(v[k], g.len, g.ratio, g.last);
  const std::uint64_t missing = g.missing(block_or(mask));
  const std::size_t n = witness_count(missing, shape.budget);
  write_witness(missing, n, shape.keep, edge, row_out);
  if (in_place) return;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const std::size_t i = threadIdx.x + std::size_t(k) * kThreads;
    if (i >= n4) continue;
    if (4 * i + 4 <= shape.keep || 4 * i >= shape.keep + n) {
      __stcs(reinterpret_cast<int4*>(row_out) + i, v[k]);
    } else {  // an int4 that meets the witness slots: only its other lanes
      const int* lane = reinterpret_cast<const int*>(&v[k]);
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (4 * i + c - shape.keep >= n) row_out[4 * i + c] = lane[c];  // wraps below keep
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    table_kernel(const std::int32_t* learned, const std::int32_t* context_lens, RowShape shape,
                 std::int32_t* table) {
  const std::size_t r = blockIdx.x;
  const RowGeometry g(context_lens[r], int(shape.num_segments));
  const std::int32_t* row = learned + r * shape.topk;
  std::uint64_t mask = 0;
  for (std::size_t i = threadIdx.x; i < shape.topk; i += kThreads)
    mask |= segment_bit(row[i], g.len, g.ratio, g.last);
  const std::uint64_t missing = g.missing(block_or(mask));
  const int s = int(threadIdx.x);
  if (s < int(shape.num_segments))
    table[r * shape.num_segments + s] = (missing >> s & 1) ? g.edge(s) : -1;
}

Status<WitnessError> launched() {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return we::DeviceFailure{int(e)};
  return Ok{};
}
}  // namespace

Status<WitnessError> topology_witness_indices(device_span<const std::int32_t> learned,
                                              std::size_t topk,
                                              device_span<const std::int32_t> context_lens,
                                              std::size_t num_segments,
                                              device_span<std::int32_t> out, Stream stream) {
  const std::size_t rows = context_lens.size();
  if (auto e = impl::table_refusal(learned.size(), topk, rows, num_segments, out.size())) return *e;
  if (rows == 0) return Ok{};
  if (rows > 0x7fffffffu) return we::DeviceFailure{int(cudaErrorInvalidConfiguration)};
  table_kernel<<<unsigned(rows), kThreads, 0, stream>>>(
      learned.data(), context_lens.data(), RowShape{topk, 0, 0, num_segments}, out.data());
  return launched();
}

Status<WitnessError> apply_topology_witnesses(device_span<const std::int32_t> learned,
                                              std::size_t topk,
                                              device_span<const std::int32_t> context_lens,
                                              std::size_t learned_keep, std::size_t num_segments,
                                              std::size_t max_replacements,
                                              device_span<std::int32_t> out, Stream stream) {
  const std::size_t rows = context_lens.size();
  if (auto e =
          impl::merge_refusal(learned.size(), topk, rows, learned_keep, num_segments, out.size()))
    return *e;
  if (rows == 0) return Ok{};
  const std::size_t budget = std::min(max_replacements, topk - learned_keep);
  if (budget == 0 && out.data() == learned.data()) return Ok{};
  if (rows > 0x7fffffffu) return we::DeviceFailure{int(cudaErrorInvalidConfiguration)};
  const RowShape shape{topk, learned_keep, budget, num_segments};
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const std::size_t per_thread = (topk / 4 + kThreads - 1) / kThreads;
  const auto grid = unsigned(rows);
  if (topk % 4 != 0 || !aligned(learned.data()) || !aligned(out.data()) || per_thread > 16)
    merge_rows_any<<<grid, kThreads, 0, stream>>>(learned.data(), context_lens.data(), shape,
                                                  out.data());
  else if (per_thread <= 1)
    merge_rows_registers<1>
        <<<grid, kThreads, 0, stream>>>(learned.data(), context_lens.data(), shape, out.data());
  else if (per_thread <= 2)
    merge_rows_registers<2>
        <<<grid, kThreads, 0, stream>>>(learned.data(), context_lens.data(), shape, out.data());
  else if (per_thread <= 4)
    merge_rows_registers<4>
        <<<grid, kThreads, 0, stream>>>(learned.data(), context_lens.data(), shape, out.data());
  else if (per_thread <= 8)
    merge_rows_registers<8>
        <<<grid, kThreads, 0, stream>>>(learned.data(), context_lens.data(), shape, out.data());
  else
    merge_rows_registers<16>
        <<<grid, kThreads, 0, stream>>>(learned.data(), context_lens.data(), shape, out.data());
  return launched();
}

Status<WitnessError> scatter_topology_witnesses(device_span<std::int32_t> topk_indices,
                                                std::size_t topk,
                                                device_span<const std::int32_t> context_lens,
                                                std::size_t num_segments, Stream stream) {
  if (num_segments == 0) return Ok{};
  const std::size_t keep = topk - std::min(num_segments, topk);
  return apply_topology_witnesses(topk_indices, topk, context_lens, keep, num_segments,
                                  num_segments, topk_indices, stream);
}

}  // namespace aether::cuda
