// The read-once top-k's first pass (indexer_read_once.cu launches it): each row's
// threshold from a sample of its scores.
#include <cuda_runtime.h>

#include <cstdint>

#include "impl/cuda/indexer_read_once.hpp"
#include "impl/cuda/launch.cuh"
#include "impl/cuda/read_once.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::topk {

namespace {
// Pass 1 (sample): per row, one block reads one 128-byte line of scores in every
// kSampleEvery and finds, by radix passes over those keys, the key t such that
// `target` = 2K/kSampleEvery sampled keys are >= t: about 2K of the row's keys then
// are (for K 2048 and rows of 262144, 8192 sampled keys: the count is within 4096
// +- 9%, far from both K and the list's 8192). The first pass (13 bits) takes for t
// the lowest key of the bin holding the target when the sampled keys >= it, scaled
// to the row, fill at most kListedAtMost of the list; else two more (10 and 9
// bits) find t exactly, and when even then the keys >= t would crowd the list (t
// is a plateau: few distinct values, a ReLU's zeros), the row's keys equal to t
// are counted per chunk instead of listed.
// The sample only decides how fast, never what is chosen.
constexpr unsigned kBins = 1u << kDigitBits;
constexpr unsigned kSampleEvery = kSampleStride / kSampledRun;  // lines of 32 scores
static_assert(kSampledRun == 32, "a sampled line is one warp's 128 bytes");
constexpr unsigned kListedAtMost = kCandidates * 3 / 4;

__global__ void __launch_bounds__(kFinishThreads)
    wide_sample(const float* scores, std::size_t width, const std::int32_t* ends, std::size_t k,
                unsigned chunks, WideRow* rows, unsigned* chunk_ties, DeviceVerdict* verdict) {
  __shared__ unsigned hist[kBins];
  let_next_kernel_start();  // the gather's first copies need nothing from here
  const std::size_t r = blockIdx.x;
  if (threadIdx.x == 0) {  // the call's counters and verdict start here: no memset before it
    rows[r] = WideRow{0, 0, 0};
    if (r == 0)  // refusals come after this kernel
      verdict->refusal = kNoRefusal, verdict->detail[0] = 0, verdict->detail[1] = 0;
  }
  const std::int32_t end = ends[r];
  if (bad_end(end, width) || std::size_t(end) <= k) return;  // pass 2 refuses, pass 3 writes all
  const std::size_t lines = (std::size_t(end) + 31) / 32,
                    sampled_lines = (lines + kSampleEvery - 1) / kSampleEvery;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = kFinishThreads / 32;
  // The first kHeld lines of each warp (every sampled line of a row up to 262144
  // scores) are read once and held for the three passes; lines past them are
  // read again in each.
  constexpr int kHeld = 16;
  std::uint32_t held[kHeld];
  unsigned held_mask = 0;
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const std::size_t line = warp + std::size_t(i) * warps, j = line * kSampleStride + lane;
    const bool inside = line < sampled_lines && j < std::size_t(end);
    held[i] = inside ? order_key(__ldg(scores + r * width + j)) : 0;
    held_mask |= unsigned(inside) << i;
  }
  // hist[(key >> shift) mod 2^bits] counts the sampled keys whose bits under
  // `fixed` equal `prefix`'s.
  const auto count = [&](std::uint32_t prefix, std::uint32_t fixed, unsigned shift, unsigned bits) {
    __syncthreads();  // every thread has read the last pass's bins
    for (unsigned b = threadIdx.x; b < (1u << bits); b += kFinishThreads) hist[b] = 0;
    __syncthreads();
    const auto add = [&](std::uint32_t key) {
      if ((key & fixed) == prefix) atomicAdd(&hist[(key >> shift) & ((1u << bits) - 1)], 1u);
    };
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (held_mask >> i & 1) add(held[i]);
    constexpr int kBatch = 8;  // lines loaded before any is counted
    for (std::size_t line = warp + std::size_t(kHeld) * warps; line < sampled_lines;
         line += warps * kBatch) {
      float v[kBatch];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const std::size_t j = (line + std::size_t(i) * warps) * kSampleStride + lane;
        v[i] = line + std::size_t(i) * warps < sampled_lines && j < std::size_t(end)
                   ? __ldg(scores + r * width + j)
                   : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const std::size_t j = (line + std::size_t(i) * warps) * kSampleStride + lane;
        if (line + std::size_t(i) * warps < sampled_lines && j < std::size_t(end))
          add(order_key(v[i]));
      }
    }
    __syncthreads();
  };
  // every sampled line but the last is whole
  const std::size_t last = (sampled_lines - 1) * kSampleEvery * 32,
                    last_size = std::size_t(end) - last;
  const std::size_t sampled = (sampled_lines - 1) * 32 + (last_size < 32 ? last_size : 32);
  const unsigned target = unsigned((2 * k * sampled + std::size_t(end) - 1) / std::size_t(end));
  // Whether the sampled keys >= prefix (target - rank above the bin it ends in,
  // in_bin in it), scaled to the row, would crowd the list.
  const auto crowded = [&](unsigned rank, unsigned in_bin) {
    return std::size_t(target - rank + in_bin) * std::size_t(end) >
           std::size_t(kListedAtMost) * sampled;
  };
  constexpr unsigned kShifts[3] = {kDigitShift, 9, 0}, kBits[3] = {kDigitBits, 10, 9};
  std::uint32_t prefix = 0, fixed = 0;
  unsigned rank = target, in_bin = 0;
  // The digit alone when its whole bin fits the list (a smooth row: one pass);
  // else the key, down to its last bit.
  for (int p = 0; p < 3 && (p == 0 || crowded(rank, in_bin)); ++p) {
    count(prefix, fixed, kShifts[p], kBits[p]);
    unsigned above;
    const unsigned bin = bin_of_rank<kFinishThreads>(hist, 1u << kBits[p], rank, &above);
    in_bin = hist[bin];
    prefix |= bin << kShifts[p];
    fixed |= ((1u << kBits[p]) - 1) << kShifts[p];
    rank -= above;
  }
  const bool ties = fixed == 0xffffffffu && crowded(rank, in_bin);
  if (ties) {
    const std::size_t used = (std::size_t(end) + kWideChunk - 1) / kWideChunk;
    for (std::size_t c = threadIdx.x; c < used; c += kFinishThreads) chunk_ties[r * chunks + c] = 0;
  }
  if (threadIdx.x == 0) rows[r].threshold = prefix, rows[r].ties = ties;
}
}  // namespace

int launch_sample(const float* scores, std::size_t width, const std::int32_t* ends,
                  std::size_t rows, std::size_t k, unsigned chunks, WideRow* info,
                  unsigned* chunk_ties, DeviceVerdict* verdict, Stream stream) {
  wide_sample<<<unsigned(rows), kFinishThreads, 0, stream>>>(scores, width, ends, k, chunks, info,
                                                             chunk_ties, verdict);
  return cudaGetLastError();
}

}  // namespace aether::cuda::topk
