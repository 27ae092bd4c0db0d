// How the CUDA slot conversion turns a lane's row into its slot: the call's
// geometry, division by invariant divisors, the lookups of a thread's lanes in two
// ordered waves, and the refusal codes. CUDA source only (impl/cuda/paging.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

namespace aether::cuda::paging_lanes {

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

}  // namespace aether::cuda::paging_lanes
