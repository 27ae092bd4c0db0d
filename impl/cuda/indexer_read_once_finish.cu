// The read-once top-k's third pass (indexer_read_once.cu launches it): per
// row, one block takes the K best by the total order (higher score, then lower
// index) and writes them in index order. Three ways, each exact:
// - by levels (typical rows): the list bucketed by digit, the keys above the K-th's
//   bucket taken, the bucket (at most kBucket) split and ranked;
// - by refinement (a bucket too full: keys sharing their top bits): radix passes
//   on the next bits of the (~key, index) items, down to exact ties and then the
//   index, over the list only;
// - by ties (the sample's plateau): every listed key, then the lowest-index keys
//   equal to the plateau, read again from the chunks whose counts say they hold
//   them.
// A row the list cannot answer (it overflowed, or with its ties holds fewer than
// K keys: the sample missed) is selected from its scores by the one-block method.
// verdict->detail[0] counts those rows, detail[1] the rows refined or tied.
#include <cuda_runtime.h>

#include <cstdint>

#include "impl/cuda/launch.cuh"
#include "impl/cuda/read_once.cuh"
#include "impl/cuda/read_once_select.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::topk {

namespace {
// By ties: appends to chosen[at, at + wanted) the first `wanted` indices j < n, in
// index order, whose score is the tie key's, reading again only the chunks whose
// count (ties_of_chunk) is not zero, up to the one that completes them. False (in
// every thread) when the row holds fewer.
__device__ __forceinline__ bool take_first_ties(FinishShared& sh, const float* row, std::size_t n,
                                                std::uint32_t tie, const unsigned* ties_of_chunk,
                                                unsigned wanted, unsigned at) {
  const std::size_t used = (n + kWideChunk - 1) / kWideChunk;
  unsigned mine = 0;
  for (std::size_t c = threadIdx.x; c < used; c += kFinishThreads) mine += ties_of_chunk[c];
  unsigned before, total;
  OrderScan(sh.order_scan).ExclusiveSum(mine, before, total);
  if (total < wanted) return false;
  const float tie_value = key_float(tie);  // +0 for the key of +-0: both compare equal
  unsigned taken = 0;
  for (std::size_t c = 0; c < used && taken < wanted; ++c) {
    if (ties_of_chunk[c] == 0) continue;
    const std::size_t last = min((c + 1) * kWideChunk, n);
    for (std::size_t base = c * kWideChunk; base < last && taken < wanted;
         base += std::size_t(kFinishThreads) * kTieItems) {
      const std::size_t first = base + threadIdx.x * kTieItems;
      unsigned mask = 0;
#pragma unroll
      for (int i = 0; i < kTieItems; ++i)
        mask |= unsigned(first + i < last && __ldg(row + first + i) == tie_value) << i;
      unsigned pos, round;
      __syncthreads();  // the scan's storage is free again
      OrderScan(sh.order_scan).ExclusiveSum(unsigned(__popc(mask)), pos, round);
      for (; mask != 0 && taken + pos < wanted; mask &= mask - 1, ++pos)
        sh.chosen[at + taken + pos] = std::uint32_t(first + unsigned(__ffs(mask) - 1));
      taken += round;
    }
  }
  return true;
}

// chosen[0, k) (indices < n) written to lanes in ascending order.
__device__ __forceinline__ void write_in_index_order(FinishShared& sh, std::size_t n, unsigned k,
                                                     int index_bits, std::int32_t* lanes) {
  if (n <= kBitmapBits) {
    // A bit per index; each thread counts a group of kGroupWords words, a scan
    // gives each group's first place, and each chosen index goes to its group's
    // place plus the bits before it in the group: every thread writes K / 512
    // lanes, however the choice crowds (a sorted row's fills four groups).
    constexpr unsigned kGroupWords = kBitmapBits / 32 / kFinishThreads;
    for (unsigned v = threadIdx.x; v < kBitmapBits / 128; v += kFinishThreads)
      sh.bitmap[v] = uint4{0, 0, 0, 0};
    __syncthreads();
    auto* bits = reinterpret_cast<unsigned*>(sh.bitmap);
    for (unsigned c = threadIdx.x; c < k; c += kFinishThreads)
      atomicOr(&bits[sh.chosen[c] / 32], 1u << (sh.chosen[c] % 32));
    __syncthreads();
    unsigned count = 0;
#pragma unroll
    for (unsigned v = 0; v < kGroupWords / 4; ++v) {
      const uint4 words = sh.bitmap[threadIdx.x * (kGroupWords / 4) + v];
      count += __popc(words.x) + __popc(words.y) + __popc(words.z) + __popc(words.w);
    }
    OrderScan(sh.order_scan).ExclusiveSum(count, sh.group_first[threadIdx.x]);
    __syncthreads();
    for (unsigned c = threadIdx.x; c < k; c += kFinishThreads) {
      const unsigned x = sh.chosen[c], word = x / 32, group = word / kGroupWords;
      unsigned place = sh.group_first[group] + __popc(bits[word] & ((1u << (x % 32)) - 1));
      for (unsigned w = group * kGroupWords; w < word; ++w) place += __popc(bits[w]);
      lanes[place] = std::int32_t(x);
    }
    return;
  }
  std::uint32_t index[kOutItems];
#pragma unroll
  for (int i = 0; i < kOutItems; ++i) {
    const unsigned c = threadIdx.x * kOutItems + unsigned(i);
    index[i] = c < k ? sh.chosen[c] : 0xffffffffu;
  }
  IndexSort(sh.ranking.storage.index).Sort(index, 0, index_bits);  // indices < 2^index_bits
#pragma unroll
  for (int i = 0; i < kOutItems; ++i) {
    const unsigned c = threadIdx.x * kOutItems + unsigned(i);
    if (c < k) lanes[c] = std::int32_t(index[i]);
  }
}

// Runs when the verdict word is clean (it reads the word itself).
__global__ void __launch_bounds__(kFinishThreads, 2)
    wide_finish(const float* scores, std::size_t width, const std::int32_t* ends, std::size_t k,
                const WideRow* rows, const unsigned long long* candidates,
                const unsigned* chunk_ties, unsigned chunks, int index_bits, DeviceVerdict* verdict,
                std::int32_t* out) {
  __shared__ FinishShared sh;
  wait_for_previous_kernel();
  if (verdict->refusal != kNoRefusal) return;
  const std::size_t r = blockIdx.x;
  const std::size_t n = std::size_t(ends[r]);
  std::int32_t* lanes = out + r * k;
  if (n <= k) {
    for (std::size_t i = threadIdx.x; i < k; i += kFinishThreads)
      lanes[i] = i < n ? std::int32_t(i) : -1;
    return;
  }
  const WideRow row = rows[r];
  const unsigned count = row.candidates;
  const unsigned long long* list = candidates + r * kCandidates;
  const auto tally = [&](int slow_path) {
    if (threadIdx.x == 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(&verdict->detail[slow_path]), 1ull);
  };
  const auto from_scores = [&] {  // every thread together, the lists' room free
    tally(0);
    select_row(scores + r * width, n, k, lanes, sh.ranking.lists.hist);
  };
  if (count > kCandidates || (count < k && !row.ties)) return from_scores();
  if (count < k) {
    for (unsigned c = threadIdx.x; c < count; c += kFinishThreads)
      sh.chosen[c] = std::uint32_t(list[c]);
    if (!take_first_ties(sh, scores + r * width, n, row.threshold, chunk_ties + r * chunks,
                         unsigned(k) - count, count))
      return from_scores();
    tally(1);
  } else if (!select_by_levels(sh, list, count, row.threshold >> kDigitShift, unsigned(k))) {
    tally(1);
    select_by_refinement(sh, list, count, unsigned(k));
  }
  __syncthreads();
  write_in_index_order(sh, n, unsigned(k), index_bits, lanes);
}

}  // namespace

int launch_finish(const float* scores, std::size_t width, const std::int32_t* ends,
                  std::size_t rows, std::size_t k, const WideRow* info,
                  const unsigned long long* candidates, const unsigned* chunk_ties,
                  DeviceVerdict* verdict, std::int32_t* out, Stream stream) {
  int index_bits = 1;
  while ((std::size_t(1) << index_bits) < width) ++index_bits;
  const unsigned chunks = unsigned((width + kWideChunk - 1) / kWideChunk);
  return overlapped(wide_finish, dim3(unsigned(rows)), kFinishThreads, 0, stream, scores, width,
                    ends, k, info, candidates, chunk_ties, chunks, index_bits, verdict, out);
}

}  // namespace aether::cuda::topk
