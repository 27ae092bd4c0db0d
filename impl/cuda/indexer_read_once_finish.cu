// The read-once top-k's third pass (indexer_read_once.cu holds the first two): per
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
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "impl/cuda/launch.cuh"
#include "impl/cuda/read_once.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::topk {

namespace {
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
