// Device code shared by the read-once top-k's kernels (indexer_read_once.cu: the
// sample and the gather; indexer_read_once_finish.cu: the finish): the tile
// constants, the record each row's kernels pass on, block-wide helpers. CUDA
// source only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "impl/cuda/device.hpp"
#include "impl/cuda/indexer_read_once.hpp"

namespace aether::cuda::topk {

// The gather: chunks of kWideChunk scores, kWidePerThread per thread. A row's
// list of gathered (~key, index) items: the sample aims at 2K of them (4096 for K
// 2048) and the finish selects from any count up to kCandidates.
inline constexpr int kWideThreads = 256, kWidePerThread = 32;
static_assert(kWideChunk == std::size_t(kWideThreads) * kWidePerThread);
inline constexpr unsigned kFinishThreads = 512;
// A key's top kDigitBits bits (sign, exponent, 4 mantissa bits): the sample's
// first digit and the finish's levels.
inline constexpr unsigned kDigitBits = 13, kDigitShift = 32 - kDigitBits;

// What the sample decides for a row and the gather counts. Keys above `threshold`
// are listed; keys equal to it are listed too unless `ties`, where they are only
// counted per chunk (the sample saw so many that the list would overflow) and the
// finish takes the lowest-index ones it needs by reading those chunks again.
struct WideRow {
  std::uint32_t threshold;
  unsigned ties;        // 0 or 1
  unsigned candidates;  // listed (past kCandidates: overflowed, the rest dropped)
};

// The float whose order key is `key`: negative infinity for the keys below every
// finite one (-inf and NaN patterns), so `score >= key_float(key)` is
// `order_key(score) >= key` for every finite score.
__device__ __forceinline__ float key_float(std::uint32_t key) {
  return key & 0x80000000u   ? __uint_as_float(key & 0x7fffffffu)
         : key < 0x00800000u ? -INFINITY
                             : __uint_as_float(~key);
}

// Each thread sums `per` bins of hist from the top; the block's scan finds the
// highest bin b at which the count of keys in bins >= b reaches `rank`. Returns b
// and, in *above, the count in bins > b, to every thread (bin 0 and 0 when fewer
// than `rank` keys are counted); bins a multiple of Threads.
template <int Threads>
__device__ unsigned bin_of_rank(const unsigned* hist, unsigned bins, unsigned rank,
                                unsigned* above) {
  using Scan = cub::BlockScan<unsigned, Threads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ unsigned found_bin, found_above;
  const unsigned per = bins / Threads, top = bins - 1 - threadIdx.x * per;
  if (threadIdx.x == 0) found_bin = 0, found_above = 0;
  unsigned run = 0;
  for (unsigned i = 0; i < per; ++i) run += hist[top - i];
  unsigned before;
  Scan(scan_storage).ExclusiveSum(run, before);
  __syncthreads();
  if (before < rank && rank <= before + run) {
    for (unsigned i = 0;; ++i) {
      if (before + hist[top - i] >= rank) {
        found_bin = top - i;
        found_above = before;
        break;
      }
      before += hist[top - i];
    }
  }
  __syncthreads();
  *above = found_above;
  return found_bin;
}

// write(at) for each lane that takes, at its place after *counter: one shared
// atomic per warp (a block's same-address atomics otherwise queue one by one).
template <class Write>
__device__ __forceinline__ void warp_append(bool take, unsigned* counter, Write write) {
  const unsigned mask = __ballot_sync(0xffffffffu, take);
  if (mask == 0) return;
  const unsigned lane = threadIdx.x & 31, leader = unsigned(__ffs(mask) - 1);
  unsigned base = 0;
  if (lane == leader) base = atomicAdd(counter, unsigned(__popc(mask)));
  base = __shfl_sync(0xffffffffu, base, int(leader));
  if (take) write(base + unsigned(__popc(mask & ((1u << lane) - 1))));
}

// Queues the sample (indexer_read_once_sample.cu): per row, its threshold and
// whether its ties are counted (info), the tie counts of its chunks zeroed where
// they are. 0 or the cudaError_t.
int launch_sample(const float* scores, std::size_t width, const std::int32_t* ends,
                  std::size_t rows, std::size_t k, unsigned chunks, WideRow* info,
                  unsigned* chunk_ties, DeviceVerdict* verdict, Stream stream);

// Queues the finish (indexer_read_once_finish.cu): per row, the K best of its list
// (and of its ties), or of its scores where the list cannot say; `out` written only
// when the verdict stays clean. 0 or the cudaError_t.
int launch_finish(const float* scores, std::size_t width, const std::int32_t* ends,
                  std::size_t rows, std::size_t k, const WideRow* info,
                  const unsigned long long* candidates, const unsigned* chunk_ties,
                  DeviceVerdict* verdict, std::int32_t* out, Stream stream);

}  // namespace aether::cuda::topk
