#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "impl/cuda/indexer.hpp"

namespace aether::cuda {

namespace {
namespace ie = indexer_error;

constexpr int kThreads = 512;
constexpr unsigned long long kNoError = kNoRefusal;
// The first refusal in the model's order: any bad end (lowest row) before any
// non-finite score (lowest row-major position).
constexpr unsigned long long kEndBit = 0, kNaNBit = 1ull << 63;

__device__ __forceinline__ std::uint32_t order_key(float f) {
  std::uint32_t bits = __float_as_uint(f);
  if (bits == 0x80000000u) bits = 0;  // -0 ties with +0
  return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}

// Calls fn(j, key) for every j < n this thread owns (j = threadIdx.x mod kThreads),
// loading kBatch scores before using any: one block streams a whole row, so its
// loads must be in flight together rather than one behind each shared-memory atomic.
constexpr int kBatch = 8;
template <class Fn>
__device__ __forceinline__ void for_each_key(const float* row, std::size_t n, Fn&& fn) {
  for (std::size_t base = threadIdx.x; base < n; base += std::size_t(kThreads) * kBatch) {
    std::uint32_t keys[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const std::size_t j = base + std::size_t(i) * kThreads;
      keys[i] = j < n ? order_key(__ldg(row + j)) : 0;
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const std::size_t j = base + std::size_t(i) * kThreads;
      if (j < n) fn(j, keys[i]);
    }
  }
}

// Validation spreads each row over many blocks (one block per row took 0.2 ms for a
// row of 131072 on the H200): block b checks chunk b mod chunks of row b / chunks.
constexpr int kValidateThreads = 256, kValidatePerThread = 8;
constexpr std::size_t kValidateChunk = std::size_t(kValidateThreads) * kValidatePerThread;

__global__ void __launch_bounds__(kValidateThreads) validate(const float* scores, std::size_t width,
                                                             const std::int32_t* ends,
                                                             unsigned chunks,
                                                             unsigned long long* error) {
  const std::size_t r = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const std::int32_t end = ends[r];
  if (end < 0 || std::size_t(end) > width) {
    if (chunk == 0 && threadIdx.x == 0) atomicMin(error, kEndBit | r);
    return;
  }
  const std::size_t first = chunk * kValidateChunk;
  float v[kValidatePerThread];
#pragma unroll
  for (int i = 0; i < kValidatePerThread; ++i) {
    const std::size_t j = first + threadIdx.x + std::size_t(i) * kValidateThreads;
    v[i] = j < std::size_t(end) ? __ldg(scores + r * width + j) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kValidatePerThread; ++i)
    if (!isfinite(v[i]))
      atomicMin(error, kNaNBit | (r * width + first + threadIdx.x + std::size_t(i) * kValidateThreads));
}

struct WideRow;
__device__ bool skip_row(const WideRow* wide, std::size_t r);

// wide: rows the many-blocks path has taken (nullptr: none); this kernel does the rest.
__global__ void __launch_bounds__(kThreads) select(const float* scores, std::size_t width,
                                                   const std::int32_t* ends, std::size_t k,
                                                   std::int32_t* out, const WideRow* wide) {
  if (skip_row(wide, blockIdx.x)) return;
  using Scan = cub::BlockScan<unsigned, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ unsigned hist[2048];
  __shared__ unsigned chosen_digit, rank_left;
  const std::size_t r = blockIdx.x;
  const std::size_t n = std::size_t(ends[r]);
  const float* row = scores + r * width;
  std::int32_t* lanes = out + r * k;
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
    for_each_key(row, n, [&](std::size_t, std::uint32_t key) {
      if ((key & fixed) == prefix) atomicAdd(&hist[(key >> shifts[p]) & (bins - 1)], 1u);
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
// ---- Wide rows: the selection spread over many blocks per row ------------------
// Pass 1 (validation + histogram): blocks of 8192 scores count the top 13 bits of
// their keys into the row's global histogram, and record refusals as `validate`
// does. Pass 2 (bucket): per row, the bucket b holding the K-th largest key, and
// how many of it are wanted. Pass 3 (collect): keys above b are chosen (their
// indices go to the row's staging list); keys in b become candidates, (key, index).
// Pass 4 (finish): per row, the candidates sorted by key descending then index
// ascending, the first `wanted` taken, merged with the staging list and written in
// index order. A bucket with more than kCandidates keys (a row of massive ties)
// leaves its row to the one-block kernel: exact either way, never a dropped key.
constexpr int kWideThreads = 256, kWidePerThread = 32;
constexpr std::size_t kWideChunk = std::size_t(kWideThreads) * kWidePerThread;
// 13 bits: sign, exponent and 4 mantissa bits, so a bucket is a sixteenth of an octave.
constexpr unsigned kDigitBits = 13, kDigitShift = 32 - kDigitBits, kBins = 1u << kDigitBits;
constexpr unsigned kCandidates = 2048, kFinishThreads = 512;
constexpr std::size_t kWideMinWidth = 16384, kWideMaxK = 2048, kWideMaxRows = 4096;  // scratch <= 200 MB

struct WideRow {
  unsigned bucket, wanted;           // the K-th key's bucket; how many of it are chosen
  unsigned chosen, candidates;       // counters filled by pass 3
  unsigned fallback;                 // 1: the one-block kernel selects this row
};

__device__ bool skip_row(const WideRow* wide, std::size_t r) { return wide != nullptr && !wide[r].fallback; }

__global__ void __launch_bounds__(kWideThreads, 4) wide_histogram(const float* scores, std::size_t width,
                                                              const std::int32_t* ends, unsigned* hist,
                                                              unsigned long long* error) {
  __shared__ unsigned local[kBins];
  const std::size_t r = blockIdx.y, first = std::size_t(blockIdx.x) * kWideChunk;
  const std::int32_t end = ends[r];
  if (end < 0 || std::size_t(end) > width) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicMin(error, kEndBit | r);
    return;
  }
  for (unsigned b = threadIdx.x; b < kBins; b += kWideThreads) local[b] = 0;
  __syncthreads();
  float v[kWidePerThread];
#pragma unroll
  for (int i = 0; i < kWidePerThread; ++i) {
    const std::size_t j = first + threadIdx.x + std::size_t(i) * kWideThreads;
    v[i] = j < std::size_t(end) ? __ldg(scores + r * width + j) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kWidePerThread; ++i) {
    const std::size_t j = first + threadIdx.x + std::size_t(i) * kWideThreads;
    if (j >= std::size_t(end)) continue;
    if (!isfinite(v[i])) atomicMin(error, kNaNBit | (r * width + j));
    else atomicAdd(&local[order_key(v[i]) >> kDigitShift], 1u);
  }
  __syncthreads();
  for (unsigned b = threadIdx.x; b < kBins; b += kWideThreads)
    if (local[b]) atomicAdd(&hist[r * kBins + b], local[b]);
}

__global__ void __launch_bounds__(kWideThreads) wide_bucket(const unsigned* hist, const std::int32_t* ends,
                                                           std::size_t k, WideRow* rows) {
  using Scan = cub::BlockScan<unsigned, kWideThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const std::size_t r = blockIdx.x;
  const unsigned* h = hist + r * kBins;
  constexpr unsigned per = kBins / kWideThreads;
  const unsigned top = kBins - 1 - threadIdx.x * per;  // this thread's bins, from the top
  unsigned run = 0;
  for (unsigned i = 0; i < per; ++i) run += h[top - i];
  unsigned above;
  Scan(scan_storage).ExclusiveSum(run, above);
  if (std::size_t(ends[r]) <= k) {  // every valid score is chosen: pass 4 writes them
    if (threadIdx.x == 0) rows[r] = WideRow{0, 0, 0, 0, 0};
    return;
  }
  if (above < k && k <= above + run) {
    unsigned left = unsigned(k) - above;
    for (unsigned i = 0;; ++i) {
      if (h[top - i] >= left) {
        rows[r] = WideRow{top - i, left, 0, 0, h[top - i] > kCandidates ? 1u : 0u};
        break;
      }
      left -= h[top - i];
    }
  }
}

// One global reservation per block, round and list (a block scan places each
// thread's finds): per-element atomics on the row's two counters serialised the
// pass. Rounds of 8 scores per thread keep the registers, and so the occupancy, up.
__global__ void __launch_bounds__(kWideThreads, 4) wide_collect(const float* scores, std::size_t width,
                                                               const std::int32_t* ends, std::size_t k,
                                                               WideRow* rows, std::uint32_t* staging,
                                                               unsigned long long* candidates) {
  constexpr int kRound = 8;
  using Scan = cub::BlockScan<unsigned, kWideThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ unsigned base_chosen, base_candidates;
  const std::size_t r = blockIdx.y, first = std::size_t(blockIdx.x) * kWideChunk;
  const std::size_t end = std::size_t(ends[r]);
  if (end <= k || rows[r].fallback || first >= end) return;
  const unsigned bucket = rows[r].bucket;
  // The next round's scores are loaded before this round's scan and writes, so a
  // block keeps twice the bytes in flight.
  float next[kRound];
#pragma unroll
  for (int i = 0; i < kRound; ++i) {
    const std::size_t j = first + threadIdx.x + std::size_t(i) * kWideThreads;
    next[i] = j < end ? __ldg(scores + r * width + j) : 0.0f;
  }
  for (int round = 0; round < kWidePerThread / kRound; ++round) {
    const std::size_t start = first + std::size_t(round) * kRound * kWideThreads + threadIdx.x;
    std::uint32_t key[kRound];
    unsigned found = 0;  // chosen in the high 16 bits, candidates in the low 16
#pragma unroll
    for (int i = 0; i < kRound; ++i) {
      const std::size_t j = start + std::size_t(i) * kWideThreads;
      key[i] = order_key(next[i]);
      const unsigned digit = key[i] >> kDigitShift;
      if (j < end) found += digit > bucket ? 0x10000u : digit == bucket ? 1u : 0u;
    }
    if (round + 1 < kWidePerThread / kRound) {
#pragma unroll
      for (int i = 0; i < kRound; ++i) {
        const std::size_t j = start + std::size_t(kRound + i) * kWideThreads;
        next[i] = j < end ? __ldg(scores + r * width + j) : 0.0f;
      }
    }
    unsigned offset, total;
    Scan(scan_storage).ExclusiveSum(found, offset, total);
    if (threadIdx.x == 0) {
      base_chosen = (total >> 16) ? atomicAdd(&rows[r].chosen, total >> 16) : 0;
      base_candidates = (total & 0xffffu) ? atomicAdd(&rows[r].candidates, total & 0xffffu) : 0;
    }
    __syncthreads();
    unsigned next_chosen = base_chosen + (offset >> 16), next_candidate = base_candidates + (offset & 0xffffu);
    __syncthreads();  // the bases are read before the next round overwrites them
#pragma unroll
    for (int i = 0; i < kRound; ++i) {
      const std::size_t j = start + std::size_t(i) * kWideThreads;
      if (j >= end) continue;
      const unsigned digit = key[i] >> kDigitShift;
      if (digit > bucket) {
        staging[r * k + next_chosen++] = std::uint32_t(j);
      } else if (digit == bucket) {
        // ascending order of (~key, index): key descending, then index ascending
        candidates[r * kCandidates + next_candidate++] = (static_cast<unsigned long long>(~key[i]) << 32) | j;
      }
    }
  }
}

__global__ void __launch_bounds__(kFinishThreads) wide_finish(const std::int32_t* ends, std::size_t k,
                                                             const WideRow* rows, const std::uint32_t* staging,
                                                             const unsigned long long* candidates,
                                                             int index_bits, std::int32_t* out) {
  constexpr int kRankItems = kCandidates / kFinishThreads, kOutItems = kWideMaxK / kFinishThreads;
  using RankSort = cub::BlockRadixSort<unsigned long long, kFinishThreads, kRankItems>;
  using IndexSort = cub::BlockRadixSort<std::uint32_t, kFinishThreads, kOutItems>;
  __shared__ union {
    typename RankSort::TempStorage rank;
    typename IndexSort::TempStorage index;
  } storage;
  __shared__ std::uint32_t chosen[kWideMaxK];
  const std::size_t r = blockIdx.x;
  const std::size_t n = std::size_t(ends[r]);
  std::int32_t* lanes = out + r * k;
  if (n <= k) {
    for (std::size_t i = threadIdx.x; i < k; i += kFinishThreads) lanes[i] = i < n ? std::int32_t(i) : -1;
    return;
  }
  const WideRow row = rows[r];
  if (row.fallback) return;
  unsigned long long items[kRankItems];
#pragma unroll
  for (int i = 0; i < kRankItems; ++i) {
    const unsigned c = threadIdx.x * kRankItems + unsigned(i);
    items[i] = c < row.candidates ? candidates[r * kCandidates + c] : ~0ull;
  }
  // blocked: thread t holds ranks t*kRankItems + i; the bucket's digit bits of ~key
  // are equal, so only the bits below them and the index's matter
  RankSort(storage.rank).Sort(items, 0, 64 - int(kDigitBits));
  const unsigned definite = unsigned(k) - row.wanted;  // = row.chosen
#pragma unroll
  for (int i = 0; i < kRankItems; ++i) {
    const unsigned rank = threadIdx.x * kRankItems + unsigned(i);
    if (rank < row.wanted) chosen[definite + rank] = std::uint32_t(items[i]);
  }
  for (unsigned i = threadIdx.x; i < definite; i += kFinishThreads) chosen[i] = staging[r * k + i];
  __syncthreads();
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

Status<IndexerError> valid_prefix_topk(std::span<const float> scores, std::size_t width,
                                       std::span<const std::int32_t> ends, std::size_t k,
                                       std::span<std::int32_t> out, Stream stream) {
  const std::size_t rows = ends.size();
  if (scores.size() != rows * width) return ie::ShapeMismatch{rows * width, scores.size()};
  if (rows == 0) return out.size() == 0 ? Status<IndexerError>(Ok{}) : ie::ShapeMismatch{0, out.size()};
  // Wide rows: validation is pass 1 of the many-blocks path (scratch: histograms,
  // row records, staging lists, candidates).
  const bool wide = width >= kWideMinWidth && k > 0 && k <= kWideMaxK && rows <= kWideMaxRows;
  const auto aligned = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };  // each region 256-aligned
  const std::size_t hist_bytes = aligned(rows * kBins * 4), info_bytes = aligned(rows * sizeof(WideRow));
  const std::size_t staging_bytes = aligned(rows * k * 4), candidate_bytes = rows * kCandidates * 8;
  unsigned char* scratch = nullptr;
  if (wide) {
    void* p = nullptr;
    if (int e = upload_scratch(nullptr, hist_bytes + info_bytes + staging_bytes + candidate_bytes, stream, &p))
      return ie::DeviceFailure{e};
    scratch = static_cast<unsigned char*>(p);
    if (cudaError_t e = cudaMemsetAsync(scratch, 0, hist_bytes + info_bytes, stream); e != cudaSuccess)
      return ie::DeviceFailure{int(e)};
  }
  auto* hist = reinterpret_cast<unsigned*>(scratch);
  auto* info = reinterpret_cast<WideRow*>(scratch + hist_bytes);
  auto* staging = reinterpret_cast<std::uint32_t*>(scratch + hist_bytes + info_bytes);
  auto* candidates = reinterpret_cast<unsigned long long*>(scratch + hist_bytes + info_bytes + staging_bytes);
  const unsigned wide_chunks = unsigned((width + kWideChunk - 1) / kWideChunk);

  Verdict v;
  if (int e = begin_verdict(v, stream)) return ie::DeviceFailure{e};
  if (wide) {
    wide_histogram<<<dim3(wide_chunks, unsigned(rows)), kWideThreads, 0, stream>>>(scores.data(), width, ends.data(),
                                                                                  hist, v.word());
  } else {
    const unsigned chunks = unsigned(std::max<std::size_t>(1, (width + kValidateChunk - 1) / kValidateChunk));
    validate<<<unsigned(rows) * chunks, kValidateThreads, 0, stream>>>(scores.data(), width, ends.data(), chunks,
                                                                      v.word());
  }
  if (int e = end_verdict(v, stream)) return ie::DeviceFailure{e};
  const unsigned long long verdict = v.refusal();
  Status<IndexerError> status = Ok{};
  if (verdict != kNoError && !(verdict & kNaNBit)) {
    const std::size_t r = std::size_t(verdict);
    std::int32_t end = 0;
    cudaMemcpy(&end, ends.data() + r, sizeof end, cudaMemcpyDeviceToHost);
    status = ie::EndOutOfRange{r, end, width};
  } else if (verdict != kNoError) {
    const std::size_t at = std::size_t(verdict & ~kNaNBit);
    status = ie::NonFiniteScore{at / width, at % width};
  } else if (out.size() != rows * k) {
    status = ie::ShapeMismatch{rows * k, out.size()};
  } else if (wide) {
    wide_bucket<<<unsigned(rows), kWideThreads, 0, stream>>>(hist, ends.data(), k, info);
    wide_collect<<<dim3(wide_chunks, unsigned(rows)), kWideThreads, 0, stream>>>(scores.data(), width, ends.data(), k,
                                                                                info, staging, candidates);
    int index_bits = 1;
    while ((std::size_t(1) << index_bits) < width) ++index_bits;
    wide_finish<<<unsigned(rows), kFinishThreads, 0, stream>>>(ends.data(), k, info, staging, candidates, index_bits,
                                                               out.data());
    select<<<unsigned(rows), kThreads, 0, stream>>>(scores.data(), width, ends.data(), k, out.data(), info);
  } else if (k > 0) {
    select<<<unsigned(rows), kThreads, 0, stream>>>(scores.data(), width, ends.data(), k, out.data(), nullptr);
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess && status.ok()) status = ie::DeviceFailure{int(e)};
  if (wide) release_scratch(stream);
  return status;
}

}  // namespace aether::cuda
