// Device code shared by the two top-k translation units (indexer.cu: validation and
// the one-block kernel; indexer_read_once.cu: the read-once path): the order key,
// the refusal words, and the one-block selection of a row. CUDA source only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "impl/cuda/device.hpp"

namespace aether::cuda::topk {

inline constexpr int kThreads = 512;
// The first refusal in the model's order: any bad end (lowest row) before any
// non-finite score (lowest row-major position). A bad end's word carries the end
// itself below the row (rows < 2^31), so the verdict alone describes it.
inline constexpr unsigned long long kNaNBit = 1ull << 63;
__device__ __forceinline__ unsigned long long end_refusal(std::size_t r, std::int32_t end) {
  return (static_cast<unsigned long long>(r) << 32) | std::uint32_t(end);
}

// The score's bits as an unsigned key in the scores' order (a larger key is a larger
// score; +0 and -0 equal), so radix digits and integer compares rank scores.
__device__ __forceinline__ std::uint32_t order_key(float f) {
  std::uint32_t bits = __float_as_uint(f);
  if (bits == 0x80000000u) bits = 0;  // -0 ties with +0
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

// Calls fn(j, key, inside) for the indices j this thread owns (j = threadIdx.x mod
// kThreads), inside for j < n, loading kBatch scores before using any: one block
// streams a whole row, so its loads must be in flight together rather than one
// behind each shared-memory atomic. Every lane runs the same rounds (past n,
// inside false), so that fn may use warp-wide operations.
inline constexpr int kBatch = 8;
template <class Fn>
__device__ __forceinline__ void for_each_key(const float* row, std::size_t n, Fn&& fn) {
  for (std::size_t base = 0; base < n; base += std::size_t(kThreads) * kBatch) {
    std::uint32_t keys[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const std::size_t j = base + threadIdx.x + std::size_t(i) * kThreads;
      keys[i] = j < n ? order_key(__ldg(row + j)) : 0;
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const std::size_t j = base + threadIdx.x + std::size_t(i) * kThreads;
      fn(j, keys[i], j < n);
    }
  }
}

// hist[d] += 1 for each lane that counts, one shared atomic per distinct d and
// warp: equal digits (a plateau, a row offset far from zero) would otherwise
// queue on one address, 32 to a warp.
__device__ __forceinline__ void count_by_warp(unsigned* hist, bool counted, unsigned d) {
  const unsigned same = __match_any_sync(0xffffffffu, counted ? d : ~0u);
  if (counted && (threadIdx.x & 31) == unsigned(__ffs(same) - 1)) atomicAdd(&hist[d], __popc(same));
}

__device__ __forceinline__ bool bad_end(std::int32_t end, std::size_t width) {
  return end < 0 || std::size_t(end) > width;
}

// One block of kThreads selects a row's K largest of its n valid scores into
// `lanes`, in index order; `hist` is 2048 words of the caller's shared memory.
// Not inlined: inlined into wide_finish it spilled at that kernel's 64 registers.
static __device__ __noinline__ void select_row(const float* row, std::size_t n, std::size_t k,
                                               std::int32_t* lanes, unsigned* hist) {
  using Scan = cub::BlockScan<unsigned, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ unsigned chosen_digit, rank_left;
  if (n <= k) {
    for (std::size_t i = threadIdx.x; i < k; i += kThreads) lanes[i] = i < n ? std::int32_t(i) : -1;
    return;
  }
  // Radix select of the k-th largest key, most significant digits first.
  const int shifts[3] = {21, 10, 0}, bits[3] = {11, 11, 10};
  std::uint32_t prefix = 0, fixed = 0;
  unsigned rank = unsigned(k);
  for (int p = 0; p < 3; ++p) {
    const unsigned bins = 1u << bits[p];
    for (unsigned b = threadIdx.x; b < bins; b += kThreads) hist[b] = 0;
    __syncthreads();
    for_each_key(row, n, [&](std::size_t, std::uint32_t key, bool inside) {
      count_by_warp(hist, inside && (key & fixed) == prefix, (key >> shifts[p]) & (bins - 1));
    });
    __syncthreads();
    // Each thread sums a run of bins from the top; a scan finds the run holding the rank.
    const unsigned per = (bins + kThreads - 1) / kThreads;
    const unsigned top = bins - 1 - threadIdx.x * per;  // this thread's highest bin
    unsigned run = 0;
    for (unsigned i = 0; i < per && threadIdx.x * per + i < bins; ++i) run += hist[top - i];
    unsigned above;  // keys in the runs of lower-numbered threads (higher bins)
    Scan(scan_storage).ExclusiveSum(run, above);
    if (above < rank && rank <= above + run) {
      unsigned left = rank - above;
      for (unsigned i = 0;; ++i) {
        if (hist[top - i] >= left) {
          chosen_digit = top - i;
          rank_left = left;
          break;
        }
        left -= hist[top - i];
      }
    }
    __syncthreads();
    prefix |= chosen_digit << shifts[p];
    fixed |= (bins - 1) << shifts[p];
    rank = rank_left;
    __syncthreads();
  }
  const std::uint32_t threshold = prefix;
  const unsigned ties_wanted = rank;  // keys equal to the threshold that are chosen
  // Index-ordered write. Warp w owns the contiguous indices [w seg, (w + 1) seg) and
  // reads them 32 at a time (coalesced); ballots order the choices inside a warp,
  // a scan over warps orders the warps.
  constexpr int kWarps = kThreads / 32;
  __shared__ unsigned warp_greater[kWarps], warp_equal[kWarps];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const unsigned below = (1u << lane) - 1;
  const std::size_t seg = (n + kWarps - 1) / kWarps;
  const std::size_t lo = warp * seg, hi = lo + seg < n ? lo + seg : n;
  unsigned greater = 0, equal = 0;
  for (std::size_t base = lo; base < hi; base += 32) {
    const std::size_t j = base + lane;
    const std::uint32_t key = j < hi ? order_key(__ldg(row + j)) : 0;
    greater += __popc(__ballot_sync(0xffffffffu, j < hi && key > threshold));
    equal += __popc(__ballot_sync(0xffffffffu, j < hi && key == threshold));
  }
  if (lane == 0) {
    warp_greater[warp] = greater;
    warp_equal[warp] = equal;
  }
  __syncthreads();
  unsigned pos = 0, ties_seen = 0;  // choices and equal keys before this warp
  for (unsigned w = 0; w < warp; ++w) {
    pos += warp_greater[w];
    ties_seen += warp_equal[w];
  }
  pos += ties_seen < ties_wanted ? ties_seen : ties_wanted;
  for (std::size_t base = lo; base < hi; base += 32) {
    const std::size_t j = base + lane;
    const std::uint32_t key = j < hi ? order_key(__ldg(row + j)) : 0;
    const bool is_equal = j < hi && key == threshold;
    const unsigned equal_mask = __ballot_sync(0xffffffffu, is_equal);
    const bool take = (j < hi && key > threshold) ||
                      (is_equal && ties_seen + __popc(equal_mask & below) < ties_wanted);
    const unsigned take_mask = __ballot_sync(0xffffffffu, take);
    if (take) lanes[pos + __popc(take_mask & below)] = std::int32_t(j);
    pos += __popc(take_mask);
    ties_seen += __popc(equal_mask);
  }
}

}  // namespace aether::cuda::topk
