// The read-once finish's shared memory and its two selections from a row's list
// (by levels, by refinement), for impl/cuda/indexer_read_once_finish.cu, which
// holds the third way (by ties) and the kernel. CUDA source only.
#pragma once

#include <cstdint>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "impl/cuda/read_once.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::topk {

constexpr unsigned kBucket = 2048, kLevels = 2048;
constexpr unsigned kBitmapBits = 262144;  // rows up to this many valid scores: a bitmap orders
constexpr unsigned kSubBits = 11, kSubShift = kDigitShift - kSubBits, kSubLevels = 1u << kSubBits;
constexpr int kListItems = kCandidates / kFinishThreads, kListBatch = 4,
              kRankItems = kBucket / kFinishThreads, kOutItems = kWideMaxK / kFinishThreads;
constexpr int kTieItems = 8;  // contiguous scores per thread when ties are read again
static_assert(kFinishThreads == kThreads,
              "a row the list cannot finish is selected by the same block");

using RankSort = cub::BlockRadixSort<unsigned long long, kFinishThreads, kRankItems>;
using IndexSort = cub::BlockRadixSort<std::uint32_t, kFinishThreads, kOutItems>;
using OrderScan = cub::BlockScan<unsigned, kFinishThreads, cub::BLOCK_SCAN_WARP_SCANS>;

struct FinishShared {
  union Storage {
    typename RankSort::TempStorage rank;
    typename IndexSort::TempStorage index;
    unsigned hist[kSubLevels];  // the bucket by the key's next bits
  };
  union Lists {
    unsigned hist[kLevels];
    unsigned long long bucket[kBucket];
  };
  // the bitmap that orders the choice by index takes the room of the lists
  union {
    struct {
      Storage storage;
      Lists lists;
    } ranking;
    struct {
      uint4 bitmap[kBitmapBits / 128];
      unsigned group_first[kFinishThreads];  // the bitmap's groups' first places
    };
  };
  typename OrderScan::TempStorage order_scan;
  std::uint32_t chosen[kWideMaxK];
  unsigned definite_count, bucket_count;
};

// use(item, valid) for every slot of list[0, count), kListBatch items per thread
// loaded before any is used (one L2 round trip per batch, not per item); every
// lane of the block calls it the same number of times.
template <class Use>
__device__ __forceinline__ void for_each_batch(const unsigned long long* list, unsigned count,
                                               Use use) {
  for (int base = 0; base < kListItems && unsigned(base) * kFinishThreads < count;
       base += kListBatch) {
    unsigned long long batch[kListBatch];
#pragma unroll
    for (int i = 0; i < kListBatch; ++i) {
      const unsigned c = threadIdx.x + unsigned(base + i) * kFinishThreads;
      batch[i] = c < count ? list[c] : 0;
    }
#pragma unroll
    for (int i = 0; i < kListBatch; ++i)
      use(batch[i], threadIdx.x + unsigned(base + i) * kFinishThreads < count);
  }
}

// By levels: a key's digit above the threshold's, the top levels lumped together
// (a lumped bucket is still sorted on the whole key). The list is read twice (an
// L2 hit the second time) rather than held: 48 registers fewer, two blocks per SM.
// False, with nothing chosen, when the K-th key's bucket holds more than kBucket.
__device__ __forceinline__ bool select_by_levels(FinishShared& sh, const unsigned long long* list,
                                                 unsigned count, unsigned digit, unsigned k) {
  const auto level_of = [&](unsigned long long item) {
    return min((unsigned(~(item >> 32)) >> kDigitShift) - digit, kLevels - 1);
  };
  for (unsigned b = threadIdx.x; b < kLevels; b += kFinishThreads) sh.ranking.lists.hist[b] = 0;
  if (threadIdx.x == 0) sh.definite_count = 0, sh.bucket_count = 0;
  __syncthreads();
  for_each_batch(list, count, [&](unsigned long long item, bool valid) {
    count_by_warp(sh.ranking.lists.hist, valid, valid ? level_of(item) : 0);
  });
  __syncthreads();
  unsigned definite;
  const unsigned bucket = bin_of_rank<kFinishThreads>(sh.ranking.lists.hist, kLevels, k, &definite);
  unsigned in_bucket = sh.ranking.lists.hist[bucket];
  __syncthreads();  // the histogram is read before the bucket list overwrites it
  if (in_bucket > kBucket) return false;
  unsigned wanted = k - definite;
  for_each_batch(list, count, [&](unsigned long long item, bool valid) {
    const unsigned level = valid ? level_of(item) : 0;
    warp_append(valid && level > bucket, &sh.definite_count,
                [&](unsigned at) { sh.chosen[at] = std::uint32_t(item); });
    warp_append(valid && level == bucket, &sh.bucket_count,
                [&](unsigned at) { sh.ranking.lists.bucket[at] = item; });
  });
  __syncthreads();
  // A bucket too large to rank by counting, below the lumped top level (where the
  // digits differ), is split once more by the key's next kSubBits bits: the keys
  // above the wanted one's sub-bucket are taken, the sub-bucket (equal in the
  // digit and those bits) stays the bucket. Typical rows (a bucket of a few
  // hundred keys) need no more; ties past kFinishThreads take the radix sort.
  if (in_bucket > kFinishThreads && bucket != kLevels - 1) {
    unsigned long long held[kRankItems];
    unsigned sub[kRankItems];
    for (unsigned b = threadIdx.x; b < kSubLevels; b += kFinishThreads)
      sh.ranking.storage.hist[b] = 0;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      const unsigned c = threadIdx.x + unsigned(i) * kFinishThreads;
      held[i] = c < in_bucket ? sh.ranking.lists.bucket[c] : ~0ull;
      sub[i] = (unsigned(~(held[i] >> 32)) >> kSubShift) & (kSubLevels - 1);
      if (c < in_bucket) atomicAdd(&sh.ranking.storage.hist[sub[i]], 1u);
    }
    if (threadIdx.x == 0) sh.bucket_count = 0;
    __syncthreads();
    unsigned above;
    const unsigned sub_bucket =
        bin_of_rank<kFinishThreads>(sh.ranking.storage.hist, kSubLevels, wanted, &above);
    const unsigned in_sub = sh.ranking.storage.hist[sub_bucket];
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      const unsigned c = threadIdx.x + unsigned(i) * kFinishThreads;
      const unsigned long long item = held[i];
      warp_append(c < in_bucket && sub[i] > sub_bucket, &sh.definite_count,
                  [&](unsigned at) { sh.chosen[at] = std::uint32_t(item); });
      warp_append(c < in_bucket && sub[i] == sub_bucket, &sh.bucket_count,
                  [&](unsigned at) { sh.ranking.lists.bucket[at] = item; });
    }
    definite += above, wanted -= above, in_bucket = in_sub;
    __syncthreads();
  }
  // Below the top level the bucket's digit bits of ~key are equal; only the bits
  // below them and the index's matter to the radix sort of a large bucket.
  const int sort_bits = bucket == kLevels - 1 ? 64 : 64 - int(kDigitBits);
  if (in_bucket <= kFinishThreads) {
    // One item per thread: its rank is the count of smaller items (all distinct:
    // the indices differ), read as shared-memory broadcasts; only warps holding
    // an item count.
    const unsigned long long mine =
        threadIdx.x < in_bucket ? sh.ranking.lists.bucket[threadIdx.x] : ~0ull;
    unsigned rank = 0;
    if (threadIdx.x / 32 * 32 < in_bucket)
      for (unsigned c = 0; c < in_bucket; ++c) rank += sh.ranking.lists.bucket[c] < mine;
    if (threadIdx.x < in_bucket && rank < wanted) sh.chosen[definite + rank] = std::uint32_t(mine);
  } else {
    unsigned long long ranked[kRankItems];
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      const unsigned c = threadIdx.x * kRankItems + unsigned(i);
      ranked[i] = c < in_bucket ? sh.ranking.lists.bucket[c] : ~0ull;
    }
    RankSort(sh.ranking.storage.rank).Sort(ranked, 0, sort_bits);
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      const unsigned rank = threadIdx.x * kRankItems + unsigned(i);
      if (rank < wanted) sh.chosen[definite + rank] = std::uint32_t(ranked[i]);
    }
  }
  return true;
}

// By refinement: the `wanted` smallest of list[0, count) (distinct: the indices
// differ), i.e. the best keys, lower index first among equal ones, into
// chosen[0, wanted). Radix select of the wanted-th smallest on 11-bit digits of
// the item's merit from the top (the highest bin is the best), each pass
// counting only the items that share the digits chosen so far, stopping where the
// bin holding it is taken whole: at most six passes over the list, whatever the
// keys (equal keys are told apart by the index's digits).
__device__ __forceinline__ void select_by_refinement(FinishShared& sh,
                                                     const unsigned long long* list, unsigned count,
                                                     unsigned wanted) {
  unsigned* hist = sh.ranking.lists.hist;
  // ~item: the key, then the index's complement; the larger, the better
  const auto merit = [](unsigned long long item) { return ~item; };
  unsigned long long prefix = 0, fixed = 0;  // merit's digits chosen so far, their mask
  unsigned rank = wanted;                    // its rank among the items sharing them
  for (unsigned shift = 53;; shift = shift > 11 ? shift - 11 : 0) {
    const unsigned digits = (shift == 0 ? 1u << 9 : 1u << 11) - 1;
    for (unsigned b = threadIdx.x; b < kLevels; b += kFinishThreads) hist[b] = 0;
    __syncthreads();
    for_each_batch(list, count, [&](unsigned long long item, bool valid) {
      const bool sharing = valid && (merit(item) & fixed) == prefix;
      count_by_warp(hist, sharing, unsigned(merit(item) >> shift) & digits);
    });
    __syncthreads();
    unsigned above;
    const unsigned bin = bin_of_rank<kFinishThreads>(hist, kLevels, rank, &above);
    const unsigned in_bin = hist[bin];
    prefix |= static_cast<unsigned long long>(bin) << shift;
    fixed |= static_cast<unsigned long long>(digits) << shift;
    rank -= above;
    __syncthreads();  // every thread has read hist before it is cleared or reused
    if (in_bin == rank || shift == 0) break;
  }
  if (threadIdx.x == 0) sh.definite_count = 0;
  __syncthreads();
  // chosen: the items whose chosen digits are at or above the wanted one's
  for_each_batch(list, count, [&](unsigned long long item, bool valid) {
    warp_append(valid && (merit(item) & fixed) >= prefix, &sh.definite_count,
                [&](unsigned at) { sh.chosen[at] = std::uint32_t(item); });
  });
}

}  // namespace aether::cuda::topk
