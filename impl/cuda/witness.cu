#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "impl/cuda/witness.hpp"

namespace aether::cuda {

namespace {
namespace we = witness_error;

constexpr int kThreads = 256;
// See impl/cpu/witness.cpp: floor(fma(x, S_eff/L, 2^-40)) is floor(x S_eff / L) exactly.
constexpr double kLift = 0x1p-40;

struct RowShape {
  std::size_t topk, keep, budget, num_segments;
};

__device__ __forceinline__ std::uint64_t segment_bit(std::int32_t x, std::int32_t len,
                                                     double ratio, int s_eff, int num_segments) {
  int seg;
  if (x < 0) return 0;
  if (x < len) seg = int(__fma_rn(double(x), ratio, kLift));
  else seg = s_eff == num_segments ? num_segments - 1 : min(x, num_segments - 1);
  return std::uint64_t(1) << seg;
}

// Occupancy of the whole row, or-reduced over the block; 0 when L <= 0 (unused then).
__device__ std::uint64_t row_occupancy(const std::int32_t* row, std::size_t topk,
                                       std::int32_t len, int s_eff, int num_segments,
                                       std::int32_t* copy_to) {
  __shared__ unsigned long long block_mask;
  if (threadIdx.x == 0) block_mask = 0;
  __syncthreads();
  std::uint64_t mask = 0;
  const double ratio = len > 0 ? double(s_eff) / double(len) : 0.0;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool vec = topk % 4 == 0 && aligned(row) && aligned(copy_to);
  if (vec) {
    const auto* src4 = reinterpret_cast<const int4*>(row);
    auto* dst4 = reinterpret_cast<int4*>(copy_to);
#pragma unroll 4
    for (std::size_t i = threadIdx.x; i < topk / 4; i += blockDim.x) {
      const int4 v = __ldcs(src4 + i);
      if (copy_to) __stcs(dst4 + i, v);
      if (len > 0)
        mask |= segment_bit(v.x, len, ratio, s_eff, num_segments) |
                segment_bit(v.y, len, ratio, s_eff, num_segments) |
                segment_bit(v.z, len, ratio, s_eff, num_segments) |
                segment_bit(v.w, len, ratio, s_eff, num_segments);
    }
  } else {
    for (std::size_t i = threadIdx.x; i < topk; i += blockDim.x) {
      const std::int32_t v = row[i];
      if (copy_to) copy_to[i] = v;
      if (len > 0) mask |= segment_bit(v, len, ratio, s_eff, num_segments);
    }
  }
  const unsigned lo = __reduce_or_sync(0xffffffffu, unsigned(mask));
  const unsigned hi = __reduce_or_sync(0xffffffffu, unsigned(mask >> 32));
  if ((threadIdx.x & 31) == 0 && (lo | hi))
    atomicOr(&block_mask, (static_cast<unsigned long long>(hi) << 32) | lo);
  __syncthreads();
  return block_mask;
}

__device__ std::uint64_t missing_of(std::uint64_t occupied, std::int32_t len, int s_eff) {
  if (len <= 0) return 0;
  const std::uint64_t all = s_eff == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << s_eff) - 1;
  return all & ~occupied;
}

// e_s = ceil(s L / S_eff)
__device__ std::int32_t edge_of(int s, std::int32_t len, int s_eff) {
  return std::int32_t((std::int64_t(s) * len + s_eff - 1) / s_eff);
}

// One block per row. Out of place, every slot is copied in the same pass that
// builds the mask; the barrier then orders the witness stores after the copy.
__global__ void __launch_bounds__(kThreads) merge_kernel(const std::int32_t* learned,
                                                         const std::int32_t* context_lens,
                                                         RowShape shape, std::int32_t* out) {
  const std::size_t r = blockIdx.x;
  const std::int32_t len = context_lens[r];
  const int S = int(shape.num_segments);
  const int s_eff = len > 0 ? min(S, len) : 0;
  const std::int32_t* row = learned + r * shape.topk;
  std::int32_t* dst = out + r * shape.topk;
  const std::uint64_t missing =
      missing_of(row_occupancy(row, shape.topk, len, s_eff, S, dst == row ? nullptr : dst), len,
                 s_eff);
  const int s = int(threadIdx.x);
  if (s < 64 && (missing >> s & 1)) {
    const int rank = __popcll(missing & ((std::uint64_t(1) << s) - 1));
    if (std::size_t(rank) < shape.budget) dst[shape.keep + rank] = edge_of(s, len, s_eff);
  }
}

__global__ void __launch_bounds__(kThreads) table_kernel(const std::int32_t* learned,
                                                         const std::int32_t* context_lens,
                                                         RowShape shape, std::int32_t* table) {
  const std::size_t r = blockIdx.x;
  const std::int32_t len = context_lens[r];
  const int S = int(shape.num_segments);
  const int s_eff = len > 0 ? min(S, len) : 0;
  const std::uint64_t missing = missing_of(
      row_occupancy(learned + r * shape.topk, shape.topk, len, s_eff, S, nullptr), len, s_eff);
  const int s = int(threadIdx.x);
  if (s < S) table[r * S + s] = (missing >> s & 1) ? edge_of(s, len, s_eff) : -1;
}

std::optional<WitnessError> check_call(std::size_t learned_len, std::size_t topk,
                                       std::size_t rows, std::size_t num_segments) {
  if (static_cast<unsigned __int128>(topk) * rows != learned_len)
    return we::RowsMismatch{learned_len, topk, rows};
  if (num_segments == 0 || num_segments > MAX_TOPOLOGY_SEGMENTS)
    return we::SegmentsOutOfRange{num_segments};
  return std::nullopt;
}

Status<WitnessError> launched() {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return we::DeviceFailure{int(e)};
  return Ok{};
}
}  // namespace

Status<WitnessError> topology_witness_indices(std::span<const std::int32_t> learned,
                                              std::size_t topk,
                                              std::span<const std::int32_t> context_lens,
                                              std::size_t num_segments,
                                              std::span<std::int32_t> out, Stream stream) {
  const std::size_t rows = context_lens.size();
  if (auto e = check_call(learned.size(), topk, rows, num_segments)) return *e;
  if (out.size() != rows * num_segments)
    return we::OutputSizeMismatch{rows * num_segments, out.size()};
  if (rows == 0) return Ok{};
  if (rows > 0x7fffffffu) return we::DeviceFailure{int(cudaErrorInvalidConfiguration)};
  table_kernel<<<unsigned(rows), kThreads, 0, stream>>>(learned.data(), context_lens.data(),
                                                        RowShape{topk, 0, 0, num_segments},
                                                        out.data());
  return launched();
}

Status<WitnessError> apply_topology_witnesses(std::span<const std::int32_t> learned,
                                              std::size_t topk,
                                              std::span<const std::int32_t> context_lens,
                                              std::size_t learned_keep, std::size_t num_segments,
                                              std::size_t max_replacements,
                                              std::span<std::int32_t> out, Stream stream) {
  const std::size_t rows = context_lens.size();
  if (auto e = check_call(learned.size(), topk, rows, num_segments)) return *e;
  if (learned_keep > topk) return we::LearnedKeepOutOfRange{learned_keep, topk};
  if (out.size() != learned.size()) return we::OutputSizeMismatch{learned.size(), out.size()};
  if (rows == 0) return Ok{};
  const std::size_t budget = std::min(max_replacements, topk - learned_keep);
  if (budget == 0 && out.data() == learned.data()) return Ok{};
  if (rows > 0x7fffffffu) return we::DeviceFailure{int(cudaErrorInvalidConfiguration)};
  merge_kernel<<<unsigned(rows), kThreads, 0, stream>>>(
      learned.data(), context_lens.data(),
      RowShape{topk, learned_keep, budget, num_segments}, out.data());
  return launched();
}

Status<WitnessError> scatter_topology_witnesses(std::span<std::int32_t> topk_indices,
                                                std::size_t topk,
                                                std::span<const std::int32_t> context_lens,
                                                std::size_t num_segments, Stream stream) {
  if (num_segments == 0) return Ok{};
  const std::size_t keep = topk - std::min(num_segments, topk);
  return apply_topology_witnesses(topk_indices, topk, context_lens, keep, num_segments,
                                  num_segments, topk_indices, stream);
}

}  // namespace aether::cuda
