#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "impl/cuda/paging.hpp"

namespace aether::cuda {

namespace {
namespace pe = paging_error;

constexpr unsigned long long kNoError = kNoRefusal;
constexpr int kThreads = 256, kLanesPerThread = 4;
constexpr std::int64_t kMaxSlot = std::numeric_limits<std::int32_t>::max();

// x / d for 32-bit x: a shift when d is a power of two (K 2048, B / r
// 16 in practice), else one 32-bit division; 64-bit division per lane would cost
// more than the lane's memory traffic.
struct Divisor {
  std::uint32_t d;
  int shift;  // log2 d, or -1
  explicit Divisor(std::uint32_t v) : d(v), shift((v & (v - 1)) == 0 ? __builtin_ctz(v) : -1) {}
  __device__ __forceinline__ std::uint32_t quotient(std::uint32_t x) const {
    return shift >= 0 ? x >> shift : x / d;
  }
};

// Lanes and the per-block row count fit in 32 bits (the host checks; wider calls
// take the 64-bit path).
struct Geometry {
  std::size_t k, requests, blocks_per_request;
  std::int64_t bc;  // compressed rows per block, B / r
  Divisor k32, bc32;
  bool narrow;
};

// A lane's slot, or -1 (padding, or past the valid count); *bad is set to the
// refusal (0 row outside the table, 1 bad block) when there is one.
__device__ __forceinline__ std::int32_t slot_of(const std::int32_t* rows,
                                                const std::int32_t* valid_counts,
                                                const std::int32_t* tables, const Geometry& g,
                                                std::size_t lane, int* bad) {
  const std::size_t n = g.narrow ? g.k32.quotient(std::uint32_t(lane)) : lane / g.k;
  const std::size_t i = lane - n * g.k;
  const std::int32_t count = valid_counts[n];
  const std::int64_t j = rows[lane];
  if (count <= 0 || i >= std::size_t(count) || j == -1) return -1;
  const std::int64_t block_of_j = j < 0 ? -1 : g.narrow ? g.bc32.quotient(std::uint32_t(j)) : j / g.bc;
  if (j < 0 || std::uint64_t(block_of_j) >= g.blocks_per_request) {
    *bad = 0;
    return -1;
  }
  const std::int64_t block = tables[n * g.blocks_per_request + std::size_t(block_of_j)];
  const std::int64_t slot = block * g.bc + (j - block_of_j * g.bc);
  if (block < 0 || slot > kMaxSlot) {
    *bad = 1;
    return -1;
  }
  return std::int32_t(slot);
}

__global__ void __launch_bounds__(kThreads) validate(const std::int32_t* rows,
                                                     const std::int32_t* valid_counts,
                                                     const std::int32_t* tables, Geometry g,
                                                     unsigned long long* error) {
  const std::size_t lanes = g.requests * g.k;
  const std::size_t first = (std::size_t(blockIdx.x) * kThreads * kLanesPerThread) + threadIdx.x;
#pragma unroll
  for (int u = 0; u < kLanesPerThread; ++u) {
    const std::size_t lane = first + std::size_t(u) * kThreads;
    int bad = -1;
    if (lane < lanes) slot_of(rows, valid_counts, tables, g, lane, &bad);
    if (bad >= 0) atomicMin(error, (static_cast<unsigned long long>(lane) << 1) | unsigned(bad));
  }
}

__global__ void __launch_bounds__(kThreads) convert(const std::int32_t* rows,
                                                    const std::int32_t* valid_counts,
                                                    const std::int32_t* tables, Geometry g,
                                                    std::int32_t* out) {
  const std::size_t lanes = g.requests * g.k;
  const std::size_t first = (std::size_t(blockIdx.x) * kThreads * kLanesPerThread) + threadIdx.x;
  std::int32_t slot[kLanesPerThread];
  int bad;
#pragma unroll
  for (int u = 0; u < kLanesPerThread; ++u) {  // all reads before any write: out may be rows
    const std::size_t lane = first + std::size_t(u) * kThreads;
    slot[u] = lane < lanes ? slot_of(rows, valid_counts, tables, g, lane, &bad) : -1;
  }
#pragma unroll
  for (int u = 0; u < kLanesPerThread; ++u) {
    const std::size_t lane = first + std::size_t(u) * kThreads;
    if (lane < lanes) out[lane] = slot[u];
  }
}
}  // namespace

Status<PagingError> paged_slots(std::span<const std::int32_t> rows, std::size_t k,
                                std::span<const std::int32_t> valid_counts,
                                std::span<const std::int32_t> block_tables,
                                std::size_t blocks_per_request, std::int64_t block_tokens,
                                std::int64_t ratio, std::span<std::int32_t> out, Stream stream) {
  if (ratio <= 0 || block_tokens <= 0 || block_tokens % ratio != 0)
    return pe::BadGeometry{block_tokens, ratio};
  const std::int64_t bc = block_tokens / ratio;
  const bool narrow = k > 0 && rows.size() <= 0xffffffffu && bc <= 0x7fffffff;
  const Geometry g{k, valid_counts.size(), blocks_per_request, bc,
                   Divisor(narrow ? std::uint32_t(k) : 1), Divisor(narrow ? std::uint32_t(bc) : 1), narrow};
  if (rows.size() != g.requests * k) return pe::ShapeMismatch{g.requests * k, rows.size()};
  if (block_tables.size() != g.requests * blocks_per_request)
    return pe::ShapeMismatch{g.requests * blocks_per_request, block_tables.size()};
  if (out.size() != rows.size()) return pe::ShapeMismatch{rows.size(), out.size()};
  if (rows.empty()) return Ok{};

  Verdict v;
  if (int e = begin_verdict(v, stream)) return pe::DeviceFailure{e};
  const std::size_t per_block = std::size_t(kThreads) * kLanesPerThread;
  const unsigned blocks = unsigned((rows.size() + per_block - 1) / per_block);
  validate<<<blocks, kThreads, 0, stream>>>(rows.data(), valid_counts.data(), block_tables.data(), g, v.word);
  if (int e = end_verdict(v, stream)) return pe::DeviceFailure{e};
  const unsigned long long verdict = *v.host;
  Status<PagingError> status = Ok{};
  if (verdict != kNoError) {
    const std::size_t lane = std::size_t(verdict >> 1);
    std::int32_t row = 0;
    cudaMemcpy(&row, rows.data() + lane, sizeof row, cudaMemcpyDeviceToHost);
    if (!(verdict & 1)) {
      status = pe::RowOutsideTable{lane, row};
    } else {
      std::int32_t block = 0;
      const std::size_t at = lane / k * blocks_per_request + std::size_t(row / g.bc);
      cudaMemcpy(&block, block_tables.data() + at, sizeof block, cudaMemcpyDeviceToHost);
      status = pe::BadBlock{lane, block};
    }
  } else {
    convert<<<blocks, kThreads, 0, stream>>>(rows.data(), valid_counts.data(), block_tables.data(), g, out.data());
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) status = pe::DeviceFailure{int(e)};
  }
  return status;
}

}  // namespace aether::cuda
