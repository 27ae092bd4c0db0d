// The read-once top-k: sample, gather, finish (see indexer_read_once.hpp).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "impl/cuda/bulk_copy.cuh"
#include "impl/cuda/indexer_read_once.hpp"
#include "impl/cuda/launch.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::topk {

namespace {
// Pass 1 (sample): per row, one block reads one 128-byte line of scores in every
// kSampleEvery and finds the highest 13-bit key prefix (the "digit": sign, exponent,
// 4 mantissa bits) d such that at least 2K/kSampleEvery sampled keys have a digit
// >= d; about 2K of the row's keys then do (for K 2048 and rows of 262144, 128
// sampled keys: the count is within 4096 +- 9%, far from both K and the list's 8192).
// Pass 2 (gather, the one full read): chunks of 8192 scores checked as `validate`
// does, each key whose digit is >= d appended, as (~key, index), to the row's list
// of up to kCandidates. Pass 3 (finish): when the list holds at least K keys and did
// not overflow, the row's K largest are the list's K largest (every key outside it
// is below every key in it): the list is bucketed by digit, the keys above the
// K-th's bucket taken, the bucket split by the key's next bits and ranked, its first
// `wanted` taken; all written in index order. Any other row (a short or overflowing
// list, a bucket of more than kBucket ties) is counted in the verdict's detail[0]
// and selected by the same block from the scores, as the one-block kernel does:
// exact either way, never a dropped key. The sample only decides how fast, never
// what is chosen.
constexpr int kWideThreads = 256, kWidePerThread = 32;
constexpr std::size_t kWideChunk = std::size_t(kWideThreads) * kWidePerThread;
constexpr unsigned kDigitBits = 13, kDigitShift = 32 - kDigitBits, kBins = 1u << kDigitBits;
constexpr unsigned kSampleEvery = 32;  // lines of 32 scores
constexpr unsigned kCandidates = 8192, kBucket = 2048, kLevels = 2048, kFinishThreads = 512;
constexpr unsigned kBitmapBits =
    262144;  // rows up to this many valid scores are ordered by a bitmap
constexpr unsigned kSubBits = 11, kSubShift = kDigitShift - kSubBits, kSubLevels = 1u << kSubBits;
constexpr std::size_t kWideMinWidth = 16384, kWideMaxK = 2048,
                      kWideMaxRows = 2048;  // scratch <= 128 MiB

struct WideRow {
  unsigned digit;       // pass 1: keys with a digit >= this one are gathered
  unsigned candidates;  // pass 2: keys gathered (past kCandidates: overflowed)
};

// Each thread sums `per` bins of hist from the top; the block's scan finds the
// highest bin b at which the count of keys in bins >= b reaches `rank`. Returns b
// and, in *above, the count in bins > b, to every thread; hist.size() <= per * threads.
template <int Threads>
__device__ unsigned bin_of_rank(const unsigned* hist, unsigned bins, unsigned rank,
                                unsigned* above) {
  using Scan = cub::BlockScan<unsigned, Threads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ unsigned found_bin, found_above;
  const unsigned per = bins / Threads, top = bins - 1 - threadIdx.x * per;
  if (threadIdx.x == 0) found_bin = 0, found_above = 0;  // fewer than rank keys: bin 0
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

__global__ void __launch_bounds__(kFinishThreads)
    wide_sample(const float* scores, std::size_t width, const std::int32_t* ends, std::size_t k,
                WideRow* rows, DeviceVerdict* verdict) {
  __shared__ unsigned hist[kBins];
  let_next_kernel_start();  // the gather's first copies need nothing from here
  const std::size_t r = blockIdx.x;
  if (threadIdx.x == 0) {  // the call's counters and verdict start here: no memset before it
    rows[r] = WideRow{0, 0};
    if (r == 0)
      verdict->refusal = kNoRefusal, verdict->detail[0] = 0;  // refusals come after this kernel
  }
  const std::int32_t end = ends[r];
  if (bad_end(end, width) || std::size_t(end) <= k) return;  // pass 2 refuses, pass 3 writes all
  for (unsigned b = threadIdx.x; b < kBins; b += kFinishThreads) hist[b] = 0;
  __syncthreads();
  const std::size_t lines = (std::size_t(end) + 31) / 32,
                    sampled_lines = (lines + kSampleEvery - 1) / kSampleEvery;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x / 32, warps = kFinishThreads / 32;
  constexpr int kBatch = 8;  // lines loaded before any is counted
  for (std::size_t line = warp; line < sampled_lines; line += warps * kBatch) {
    float v[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const std::size_t j = (line + std::size_t(i) * warps) * kSampleEvery * 32 + lane;
      v[i] = line + std::size_t(i) * warps < sampled_lines && j < std::size_t(end)
                 ? __ldg(scores + r * width + j)
                 : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const std::size_t j = (line + std::size_t(i) * warps) * kSampleEvery * 32 + lane;
      if (line + std::size_t(i) * warps < sampled_lines && j < std::size_t(end))
        atomicAdd(&hist[order_key(v[i]) >> kDigitShift], 1u);
    }
  }
  // every sampled line but the last is whole
  const std::size_t last = (sampled_lines - 1) * kSampleEvery * 32,
                    last_size = std::size_t(end) - last;
  const std::size_t sampled = (sampled_lines - 1) * 32 + (last_size < 32 ? last_size : 32);
  __syncthreads();
  const unsigned target = unsigned((2 * k * sampled + std::size_t(end) - 1) / std::size_t(end));
  unsigned above;
  const unsigned digit = bin_of_rank<kFinishThreads>(hist, kBins, target, &above);
  if (threadIdx.x == 0) rows[r].digit = digit;
}

// Thread t holds scores first + 4 (t + 256 i) + c, c < 4 (Vector), else
// first + t + 256 (4 i + c): either way a warp's loads are contiguous.
template <bool Vector>
__device__ __forceinline__ unsigned wide_index(unsigned first, int i, int c) {
  return Vector ? first + 4 * (threadIdx.x + unsigned(i) * kWideThreads) + unsigned(c)
                : first + threadIdx.x + unsigned(4 * i + c) * kWideThreads;
}

// One chunk of row r starting at `first`, this thread's 32 scores in `bits` (+0
// past the end): checked as `validate` does, and every key at or above the row's
// digit appended to the row's list. The per-score work is a few operations (a
// float compare into a bit mask, an exponent maximum): the pass is as much
// instruction- as memory-bound. Non-finite scores are looked for exactly only in
// a thread that saw one. Each warp reserves room for its finds with one atomic on
// the row's counter (a block-wide scan per round, with its barriers, makes this
// pass three times as slow as a plain read). key_at(j): the order key of
// score j, read again for the (few) finds.
template <bool Vector, class KeyAt>
__device__ __forceinline__ void gather_chunk(const std::uint32_t (&bits)[kWidePerThread],
                                             std::size_t r, unsigned first, unsigned end,
                                             std::size_t width, std::size_t k, WideRow* rows,
                                             unsigned long long* candidates,
                                             unsigned long long* error, KeyAt key_at) {
  // Gathered: order_key(score) >= the digit's lowest key, i.e. score >= that
  // key's float (one compare; NaN never compares, and refuses the call anyway).
  const bool gather = end > k, full = first + unsigned(kWideChunk) <= end;
  const std::uint32_t lowest = gather ? rows[r].digit << kDigitShift : 0xffffffffu;
  // Digits 0 to 15 hold only negative infinity and NaN patterns: every finite key
  // is above them (a row of K to 2K valid scores samples digit 0).
  const float threshold = lowest & 0x80000000u   ? __uint_as_float(lowest & 0x7fffffffu)
                          : lowest < 0x00800000u ? -INFINITY
                                                 : __uint_as_float(~lowest);
  unsigned found_mask = 0, exponent_max = 0;
  if (full) {  // no bound per score in a whole chunk
#pragma unroll
    for (int i = 0; i < kWidePerThread; ++i) {
      exponent_max = max(exponent_max, bits[i] & 0x7f800000u);
      found_mask |= unsigned(__uint_as_float(bits[i]) >= threshold) << i;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kWidePerThread; ++i) {
      exponent_max = max(exponent_max, bits[i] & 0x7f800000u);
      found_mask |= unsigned(__uint_as_float(bits[i]) >= threshold &&
                             wide_index<Vector>(first, i / 4, i % 4) < end)
                    << i;
    }
  }
  if (!gather) found_mask = 0;
  if (exponent_max == 0x7f800000u) {  // lanes past the end hold +0: finite
#pragma unroll
    for (int i = 0; i < kWidePerThread; ++i)
      if ((bits[i] & 0x7f800000u) == 0x7f800000u)
        atomicMin(error, kNaNBit | (r * width + wide_index<Vector>(first, i / 4, i % 4)));
  }
  if (!gather) return;
  const unsigned lane = threadIdx.x & 31, found = __popc(found_mask);
  unsigned at = found;  // inclusive sum over the warp's lanes
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const unsigned x = __shfl_up_sync(0xffffffffu, at, d);
    if (lane >= unsigned(d)) at += x;
  }
  const unsigned total = __shfl_sync(0xffffffffu, at, 31);
  if (total == 0) return;
  unsigned base = 0;
  if (lane == 31) base = atomicAdd(&rows[r].candidates, total);
  at = __shfl_sync(0xffffffffu, base, 31) + at - found;
  unsigned long long* list = candidates + r * kCandidates;
  // Half a find per thread on average: each is read again rather than every
  // score paying a test in an unrolled loop over the registers.
  while (found_mask) {
    const int i = __ffs(found_mask) - 1;
    found_mask &= found_mask - 1;
    const unsigned j = wide_index<Vector>(first, i / 4, i % 4);
    // ascending order of (~key, index): key descending, then index ascending
    const std::uint32_t key = key_at(j);
    if (at < kCandidates) list[at] = (static_cast<unsigned long long>(~key) << 32) | j;
    ++at;
  }
}

// Rows not 16-byte aligned (or a device without room for the streaming kernel):
// block (c, r) loads chunk c of row r into registers, 32 scores per thread
// before using any.
__global__ void __launch_bounds__(kWideThreads, 2)
    wide_gather(const float* scores, std::size_t width, const std::int32_t* ends, std::size_t k,
                WideRow* rows, unsigned long long* candidates, unsigned long long* error) {
  wait_for_previous_kernel();
  const std::size_t r = blockIdx.y;
  const unsigned first = blockIdx.x * unsigned(kWideChunk);
  const std::int32_t end_value = ends[r];
  if (bad_end(end_value, width)) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicMin(error, end_refusal(r, end_value));
    return;
  }
  const unsigned end = unsigned(end_value);
  if (first >= end) return;
  const float* row = scores + r * width;
  std::uint32_t bits[kWidePerThread];
#pragma unroll
  for (int i = 0; i < kWidePerThread; ++i) {
    const unsigned j = wide_index<false>(first, i / 4, i % 4);
    bits[i] = j < end ? __float_as_uint(__ldg(row + j)) : 0;
  }
  gather_chunk<false>(bits, r, first, end, width, k, rows, candidates, error,
                      [&](unsigned j) { return order_key(__ldg(row + j)); });
}

// 16-byte aligned rows: a persistent grid, each block streaming its chunks
// (blockIdx.x, + gridDim.x, ...) through kStreamStages shared buffers filled by
// the bulk copy engine, kStreamStages - 1 copies in flight while it works on one.
// Only the valid part of a chunk is copied (rounded up to 4 scores, inside the
// row as the row's width is a multiple of 4).
constexpr unsigned kStreamStages = 3;
constexpr std::size_t kStreamBytes = kStreamStages * kWideChunk * sizeof(float);
__global__ void __launch_bounds__(kWideThreads, 2)
    wide_gather_streamed(const float* scores, std::size_t width, const std::int32_t* ends,
                         std::size_t k, WideRow* rows, unsigned long long* candidates,
                         unsigned long long* error, unsigned chunks, unsigned total) {
  extern __shared__ uint4 staged[];  // kStreamStages chunks
  __shared__ unsigned long long landed[kStreamStages];
  // Thread 0 starts the copy of this block's n-th chunk into stage n mod
  // kStreamStages; a chunk with nothing to read completes its phase empty.
  const auto start = [&](unsigned n) {
    const unsigned q = blockIdx.x + n * gridDim.x;
    if (q >= total) return;
    unsigned long long* barrier = &landed[n % kStreamStages];
    const std::size_t r = q / chunks;
    const unsigned first = (q % chunks) * unsigned(kWideChunk);
    const std::int32_t end = ends[r];
    if (bad_end(end, width) || first >= unsigned(end)) return bulk::arrive(barrier);
    const unsigned count = min(unsigned(kWideChunk), (unsigned(end) - first + 3) / 4 * 4);
    bulk::arrive_expecting(barrier, count * 4);
    bulk::copy(staged + std::size_t(n % kStreamStages) * (kWideChunk / 4),
               scores + r * width + first, count * 4, barrier);
  };
  if (threadIdx.x == 0)
    for (unsigned s = 0; s < kStreamStages; ++s) bulk::init(&landed[s], 1);
  __syncthreads();
  if (threadIdx.x == 0)
    for (unsigned n = 0; n < kStreamStages; ++n) start(n);  // the scores and ends are the caller's
  wait_for_previous_kernel();                               // the sample's digits and counters
  for (unsigned n = 0; blockIdx.x + n * gridDim.x < total; ++n) {
    const unsigned q = blockIdx.x + n * gridDim.x;
    bulk::wait(&landed[n % kStreamStages], (n / kStreamStages) & 1);
    const std::size_t r = q / chunks;
    const unsigned first = (q % chunks) * unsigned(kWideChunk);
    const std::int32_t end_value = ends[r];
    const uint4* chunk = staged + std::size_t(n % kStreamStages) * (kWideChunk / 4);
    if (bad_end(end_value, width)) {
      if (first == 0 && threadIdx.x == 0) atomicMin(error, end_refusal(r, end_value));
    } else if (first < unsigned(end_value)) {
      const unsigned end = unsigned(end_value);
      std::uint32_t bits[kWidePerThread];
#pragma unroll
      for (int i = 0; i < kWidePerThread / 4; ++i) {
        const uint4 v = chunk[threadIdx.x + unsigned(i) * kWideThreads];
        bits[4 * i] = v.x, bits[4 * i + 1] = v.y, bits[4 * i + 2] = v.z, bits[4 * i + 3] = v.w;
      }
      if (first + unsigned(kWideChunk) > end) {  // past the end: not copied, +0 for the checks
#pragma unroll
        for (int i = 0; i < kWidePerThread; ++i)
          if (wide_index<true>(first, i / 4, i % 4) >= end) bits[i] = 0;
      }
      const auto* chunk_scores = reinterpret_cast<const float*>(chunk);
      gather_chunk<true>(bits, r, first, end, width, k, rows, candidates, error,
                         [&](unsigned j) { return order_key(chunk_scores[j - first]); });
    }
    __syncthreads();  // every thread is done with this stage before it is filled again
    if (threadIdx.x == 0) start(n + kStreamStages);
  }
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

// Runs when the verdict word is clean (it reads the word itself).
static_assert(kFinishThreads == kThreads,
              "a row the list cannot finish is selected by the same block");
__global__ void __launch_bounds__(kFinishThreads, 2)
    wide_finish(const float* scores, std::size_t width, const std::int32_t* ends, std::size_t k,
                const WideRow* rows, const unsigned long long* candidates, int index_bits,
                DeviceVerdict* verdict, std::int32_t* out) {
  constexpr int kListItems = kCandidates / kFinishThreads, kListBatch = 4,
                kRankItems = kBucket / kFinishThreads, kOutItems = kWideMaxK / kFinishThreads;
  using RankSort = cub::BlockRadixSort<unsigned long long, kFinishThreads, kRankItems>;
  using IndexSort = cub::BlockRadixSort<std::uint32_t, kFinishThreads, kOutItems>;
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
  __shared__ union {
    struct {
      Storage storage;
      Lists lists;
    } ranking;
    uint4 bitmap[kBitmapBits / 128];
  } shared;
  Storage& storage = shared.ranking.storage;
  Lists& lists = shared.ranking.lists;
  __shared__
      typename cub::BlockScan<unsigned, kFinishThreads, cub::BLOCK_SCAN_WARP_SCANS>::TempStorage
          order_scan;
  __shared__ std::uint32_t chosen[kWideMaxK];
  __shared__ unsigned definite_count, bucket_count;
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
  const unsigned count = rows[r].candidates, digit = rows[r].digit;
  // Every thread takes it together (count and bucket sizes are the block's), with
  // the list's shared memory free.
  const auto fall_back = [&] {
    if (threadIdx.x == 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(&verdict->detail[0]), 1ull);
    select_row(scores + r * width, n, k, lanes, lists.hist);
  };
  if (count < k || count > kCandidates) return fall_back();
  // The list by level: a key's digit above d, the top levels lumped together (a
  // lumped bucket is still sorted on the whole key). The list is read twice (an
  // L2 hit the second time) rather than held: 48 registers fewer, two blocks per SM.
  const unsigned long long* list = candidates + r * kCandidates;
  const auto level_of = [&](unsigned long long item) {
    return min((unsigned(~(item >> 32)) >> kDigitShift) - digit, kLevels - 1);
  };
  for (unsigned b = threadIdx.x; b < kLevels; b += kFinishThreads) lists.hist[b] = 0;
  if (threadIdx.x == 0) definite_count = 0, bucket_count = 0;
  __syncthreads();
  // Both passes over the list load kListBatch items per thread before using any
  // (one L2 round trip per batch, not per item) and stop past the list's end.
  const auto for_each_batch = [&](auto use) {
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
  };
  for_each_batch([&](unsigned long long item, bool valid) {
    const unsigned level = valid ? level_of(item) : ~0u;
    // the list crowds a few levels: one atomic per level and warp, not per key
    const unsigned same = __match_any_sync(0xffffffffu, level);
    if (valid && (threadIdx.x & 31) == unsigned(__ffs(same) - 1))
      atomicAdd(&lists.hist[level], __popc(same));
  });
  __syncthreads();
  unsigned definite;
  const unsigned bucket = bin_of_rank<kFinishThreads>(lists.hist, kLevels, unsigned(k), &definite);
  unsigned in_bucket = lists.hist[bucket];
  __syncthreads();  // the histogram is read before the bucket list overwrites it
  if (in_bucket > kBucket) return fall_back();
  unsigned wanted = unsigned(k) - definite;
  for_each_batch([&](unsigned long long item, bool valid) {
    const unsigned level = valid ? level_of(item) : 0;
    warp_append(valid && level > bucket, &definite_count,
                [&](unsigned at) { chosen[at] = std::uint32_t(item); });
    warp_append(valid && level == bucket, &bucket_count,
                [&](unsigned at) { lists.bucket[at] = item; });
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
    for (unsigned b = threadIdx.x; b < kSubLevels; b += kFinishThreads) storage.hist[b] = 0;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      const unsigned c = threadIdx.x + unsigned(i) * kFinishThreads;
      held[i] = c < in_bucket ? lists.bucket[c] : ~0ull;
      sub[i] = (unsigned(~(held[i] >> 32)) >> kSubShift) & (kSubLevels - 1);
      if (c < in_bucket) atomicAdd(&storage.hist[sub[i]], 1u);
    }
    if (threadIdx.x == 0) bucket_count = 0;
    __syncthreads();
    unsigned above;
    const unsigned sub_bucket =
        bin_of_rank<kFinishThreads>(storage.hist, kSubLevels, wanted, &above);
    const unsigned in_sub = storage.hist[sub_bucket];
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      const unsigned c = threadIdx.x + unsigned(i) * kFinishThreads;
      const unsigned long long item = held[i];
      warp_append(c < in_bucket && sub[i] > sub_bucket, &definite_count,
                  [&](unsigned at) { chosen[at] = std::uint32_t(item); });
      warp_append(c < in_bucket && sub[i] == sub_bucket, &bucket_count,
                  [&](unsigned at) { lists.bucket[at] = item; });
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
    const unsigned long long mine = threadIdx.x < in_bucket ? lists.bucket[threadIdx.x] : ~0ull;
    unsigned rank = 0;
    if (threadIdx.x / 32 * 32 < in_bucket)
      for (unsigned c = 0; c < in_bucket; ++c) rank += lists.bucket[c] < mine;
    if (threadIdx.x < in_bucket && rank < wanted) chosen[definite + rank] = std::uint32_t(mine);
  } else {
    unsigned long long ranked[kRankItems];
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      const unsigned c = threadIdx.x * kRankItems + unsigned(i);
      ranked[i] = c < in_bucket ? lists.bucket[c] : ~0ull;
    }
    RankSort(storage.rank).Sort(ranked, 0, sort_bits);
#pragma unroll
    for (int i = 0; i < kRankItems; ++i) {
      const unsigned rank = threadIdx.x * kRankItems + unsigned(i);
      if (rank < wanted) chosen[definite + rank] = std::uint32_t(ranked[i]);
    }
  }
  __syncthreads();
  if (n <= kBitmapBits) {
    // In index order: a bit per index, each thread's 512 bits counted, a scan for
    // where its indices go, then written (a radix sort of the 2048 indices takes
    // five passes).
    constexpr unsigned kVectors = kBitmapBits / 128 / kFinishThreads;
    for (unsigned v = threadIdx.x; v < kBitmapBits / 128; v += kFinishThreads)
      shared.bitmap[v] = uint4{0, 0, 0, 0};
    __syncthreads();
    auto* bits = reinterpret_cast<unsigned*>(shared.bitmap);
    for (unsigned c = threadIdx.x; c < k; c += kFinishThreads)
      atomicOr(&bits[chosen[c] / 32], 1u << (chosen[c] % 32));
    __syncthreads();
    uint4 mine[kVectors];
    unsigned count = 0;
#pragma unroll
    for (unsigned v = 0; v < kVectors; ++v) {
      mine[v] = shared.bitmap[threadIdx.x * kVectors + v];
      count += __popc(mine[v].x) + __popc(mine[v].y) + __popc(mine[v].z) + __popc(mine[v].w);
    }
    unsigned at;
    cub::BlockScan<unsigned, kFinishThreads, cub::BLOCK_SCAN_WARP_SCANS>(order_scan)
        .ExclusiveSum(count, at);
#pragma unroll
    for (unsigned v = 0; v < kVectors; ++v) {
      const unsigned words[4] = {mine[v].x, mine[v].y, mine[v].z, mine[v].w};
#pragma unroll
      for (unsigned w = 0; w < 4; ++w)
        for (unsigned b = words[w]; b != 0; b &= b - 1)
          lanes[at++] =
              std::int32_t(((threadIdx.x * kVectors + v) * 4 + w) * 32 + unsigned(__ffs(b) - 1));
    }
    return;
  }
  std::uint32_t index[kOutItems];
#pragma unroll
  for (int i = 0; i < kOutItems; ++i) {
    const unsigned c = threadIdx.x * kOutItems + unsigned(i);
    index[i] = c < k ? chosen[c] : 0xffffffffu;
  }
  __syncthreads();
  IndexSort(storage.index).Sort(index, 0, index_bits);  // indices < width <= 2^index_bits
#pragma unroll
  for (int i = 0; i < kOutItems; ++i) {
    const unsigned c = threadIdx.x * kOutItems + unsigned(i);
    if (c < k) lanes[c] = std::int32_t(index[i]);
  }
}

}  // namespace

bool read_once_fits(std::size_t width, std::size_t k, std::size_t rows) {
  return width >= kWideMinWidth && width < (std::size_t(1) << 31) && k > 0 && k <= kWideMaxK &&
         rows <= kWideMaxRows;
}

int launch_read_once(const float* scores, std::size_t width, const std::int32_t* ends,
                     std::size_t rows, std::size_t k, std::int32_t* out, DeviceVerdict* verdict,
                     Stream stream) {
  const std::size_t info_bytes = (rows * sizeof(WideRow) + 255) / 256 * 256;
  void* p = nullptr;
  if (int e = upload_scratch(nullptr, info_bytes + rows * kCandidates * 8, stream, &p)) return e;
  auto* info = static_cast<WideRow*>(p);
  auto* candidates =
      reinterpret_cast<unsigned long long*>(static_cast<unsigned char*>(p) + info_bytes);
  int index_bits = 1;
  while ((std::size_t(1) << index_bits) < width) ++index_bits;
  const unsigned chunks = unsigned((width + kWideChunk - 1) / kWideChunk);
  wide_sample<<<unsigned(rows), kFinishThreads, 0, stream>>>(scores, width, ends, k, info, verdict);
  const std::size_t streamers = resident_blocks(reinterpret_cast<const void*>(wide_gather_streamed),
                                                kWideThreads, kStreamBytes);
  if (width % 4 == 0 && reinterpret_cast<std::uintptr_t>(scores) % 16 == 0 && streamers > 0) {
    const unsigned total = chunks * unsigned(rows);
    overlapped(wide_gather_streamed, dim3(unsigned(std::min<std::size_t>(total, streamers))),
               kWideThreads, kStreamBytes, stream, scores, width, ends, k, info, candidates,
               &verdict->refusal, chunks, total);
  } else {
    overlapped(wide_gather, dim3(chunks, unsigned(rows)), kWideThreads, 0, stream, scores, width,
               ends, k, info, candidates, &verdict->refusal);
  }
  overlapped(wide_finish, dim3(unsigned(rows)), kFinishThreads, 0, stream, scores, width, ends, k,
             static_cast<const WideRow*>(info), static_cast<const unsigned long long*>(candidates),
             index_bits, verdict, out);
  const int e = cudaGetLastError();
  const int released = release_scratch(stream);
  return e != 0 ? e : released;
}

}  // namespace aether::cuda::topk
