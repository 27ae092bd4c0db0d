// The read-once top-k: sample, gather, finish (see indexer_read_once.hpp). This
// file holds the gather (the one full read) and the launch; the sample and the
// finish are in indexer_read_once_sample.cu and indexer_read_once_finish.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "impl/cuda/bulk_copy.cuh"
#include "impl/cuda/indexer_read_once.hpp"
#include "impl/cuda/launch.cuh"
#include "impl/cuda/read_once.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::topk {

namespace {
// Pass 1 (sample, indexer_read_once_sample.cu) sets each row's threshold t.
// Pass 2 (gather, the one full read): chunks of kWideChunk scores checked as
// `validate` does, each key above t (or equal) appended, as (~key, index), to the
// row's list of up to kCandidates.
// Pass 3 (finish): the row's K best from its list, its ties and, only where they
// cannot say (a list that overflowed or holds too few), its scores.
// The sample only decides how fast, never what is chosen.

// Thread t holds scores first + 4 (t + 256 i) + c, c < 4 (Vector), else
// first + t + 256 (4 i + c): either way a warp's loads are contiguous.
template <bool Vector>
__device__ __forceinline__ unsigned wide_index(unsigned first, int i, int c) {
  return Vector ? first + 4 * (threadIdx.x + unsigned(i) * kWideThreads) + unsigned(c)
                : first + threadIdx.x + unsigned(4 * i + c) * kWideThreads;
}

// This thread's 32 scores against the row's threshold: found_mask bit i when
// bits[i] is listed, tie_mask when it is only counted (Ties), exponent_max the
// largest exponent field (all ones: a non-finite score). Full: a whole chunk, no
// bound per score; otherwise lanes past the end (+0) are neither.
template <bool Vector, bool Full, bool Ties>
__device__ __forceinline__ void classify(const std::uint32_t (&bits)[kWidePerThread],
                                         unsigned first, unsigned end, float listed_from, float tie,
                                         unsigned* found_mask, unsigned* tie_mask,
                                         unsigned* exponent_max) {
#pragma unroll
  for (int i = 0; i < kWidePerThread; ++i) {
    const float v = __uint_as_float(bits[i]);
    const bool inside = Full || wide_index<Vector>(first, i / 4, i % 4) < end;
    *exponent_max = max(*exponent_max, bits[i] & 0x7f800000u);
    *found_mask |= unsigned(v >= listed_from && inside) << i;
    if (Ties) *tie_mask |= unsigned(v == tie && inside) << i;
  }
}

// One chunk of row r starting at `first`, this thread's 32 scores in `bits` (+0
// past the end): checked as `validate` does, every key the sample says to list
// appended to the row's list and, for a row that counts its ties, those counted
// in chunk_ties. The per-score work is a few operations (float compares into bit
// masks, an exponent maximum): the pass is as much instruction- as memory-bound.
// Non-finite scores are looked for exactly only in a thread that saw one. Each
// warp reserves room for its finds with one atomic on the row's counter (a
// block-wide scan per round, with its barriers, makes this pass three times as
// slow as a plain read). key_at(j): the order key of score j, read again for the
// (few) finds.
template <bool Vector, class KeyAt>
__device__ __forceinline__ void gather_chunk(const std::uint32_t (&bits)[kWidePerThread],
                                             std::size_t r, unsigned first, unsigned end,
                                             std::size_t width, std::size_t k, WideRow* rows,
                                             unsigned long long* candidates, unsigned* chunk_ties,
                                             unsigned chunks, unsigned long long* error,
                                             KeyAt key_at) {
  // Listed: order_key(score) >= the threshold (> it when ties are counted), i.e.
  // score >= that key's float (one compare; NaN never compares, and refuses the
  // call anyway).
  const bool gather = end > k, full = first + unsigned(kWideChunk) <= end;
  const bool ties = gather && rows[r].ties;
  const std::uint32_t threshold = gather ? rows[r].threshold : 0xffffffffu;
  const float listed_from = key_float(threshold + unsigned(ties)), tie = key_float(threshold);
  unsigned found_mask = 0, tie_mask = 0, exponent_max = 0;
  if (full && !ties)
    classify<Vector, true, false>(bits, first, end, listed_from, tie, &found_mask, &tie_mask,
                                  &exponent_max);
  else if (full)
    classify<Vector, true, true>(bits, first, end, listed_from, tie, &found_mask, &tie_mask,
                                 &exponent_max);
  else if (!ties)
    classify<Vector, false, false>(bits, first, end, listed_from, tie, &found_mask, &tie_mask,
                                   &exponent_max);
  else
    classify<Vector, false, true>(bits, first, end, listed_from, tie, &found_mask, &tie_mask,
                                  &exponent_max);
  if (!gather) found_mask = 0;
  if (exponent_max == 0x7f800000u) {  // lanes past the end hold +0: finite
#pragma unroll
    for (int i = 0; i < kWidePerThread; ++i)
      if ((bits[i] & 0x7f800000u) == 0x7f800000u)
        atomicMin(error, kNaNBit | (r * width + wide_index<Vector>(first, i / 4, i % 4)));
  }
  if (!gather) return;
  const unsigned lane = threadIdx.x & 31, found = __popc(found_mask);
  if (ties) {
    const unsigned tied = __reduce_add_sync(0xffffffffu, unsigned(__popc(tie_mask)));
    if (lane == 0 && tied != 0) atomicAdd(&chunk_ties[r * chunks + first / kWideChunk], tied);
  }
  const unsigned total = __reduce_add_sync(0xffffffffu, found);
  if (total == 0) return;
  unsigned at = 0;
  if (lane == 0) at = atomicAdd(&rows[r].candidates, total);
  at = __shfl_sync(0xffffffffu, at, 0);
  unsigned long long* list = candidates + r * kCandidates;
  // Half a find per thread on average: each is read again rather than every
  // score paying a test in an unrolled loop over the registers. The lanes take
  // turns, one find each per round at consecutive places, so that a warp's
  // stores land together (a lane's finds one after another would put a warp's
  // stores 32 lines apart: sorted rows find a whole chunk's top half).
  const unsigned below = (1u << lane) - 1;
  for (unsigned pending = __ballot_sync(0xffffffffu, found_mask != 0); pending != 0;
       pending = __ballot_sync(0xffffffffu, found_mask != 0)) {
    if (found_mask != 0) {
      const int i = __ffs(found_mask) - 1;
      found_mask &= found_mask - 1;
      const unsigned j = wide_index<Vector>(first, i / 4, i % 4),
                     place = at + __popc(pending & below);
      // ascending order of (~key, index): key descending, then index ascending
      if (place < kCandidates)
        list[place] = (static_cast<unsigned long long>(~key_at(j)) << 32) | j;
    }
    at += __popc(pending);
  }
}

// Rows not 16-byte aligned (or a device without room for the streaming kernel):
// block (c, r) loads chunk c of row r into registers, 32 scores per thread
// before using any.
__global__ void __launch_bounds__(kWideThreads, 2)
    wide_gather(const float* scores, std::size_t width, const std::int32_t* ends, std::size_t k,
                WideRow* rows, unsigned long long* candidates, unsigned* chunk_ties,
                unsigned long long* error) {
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
  gather_chunk<false>(bits, r, first, end, width, k, rows, candidates, chunk_ties, gridDim.x, error,
                      [&](unsigned j) { return order_key(__ldg(row + j)); });
}

// 16-byte aligned rows: a persistent grid, each block streaming its chunks
// (blockIdx.x, + gridDim.x, ...) through kStreamStages shared buffers filled by
// the bulk copy engine, kStreamStages - 1 copies in flight while it works on one.
// Chunk q is chunk q / rows of row q mod rows: a block's chunks sit at different
// places in their rows, so a row's costly chunks (a sorted row finds all its
// keys in one) are spread over the grid, not dealt to the same few blocks.
// Only the valid part of a chunk is copied (rounded up to 4 scores, inside the
// row as the row's width is a multiple of 4).
constexpr unsigned kStreamStages = 3;
constexpr std::size_t kStreamBytes = kStreamStages * kWideChunk * sizeof(float);
__global__ void __launch_bounds__(kWideThreads, 2)
    wide_gather_streamed(const float* scores, std::size_t width, const std::int32_t* ends,
                         std::size_t k, WideRow* rows, unsigned long long* candidates,
                         unsigned* chunk_ties, unsigned long long* error, unsigned chunks,
                         unsigned row_count) {
  const unsigned total = chunks * row_count;
  extern __shared__ uint4 staged[];  // kStreamStages chunks
  __shared__ unsigned long long landed[kStreamStages];
  // Thread 0 starts the copy of this block's n-th chunk into stage n mod
  // kStreamStages; a chunk with nothing to read completes its phase empty.
  const auto start = [&](unsigned n) {
    const unsigned q = blockIdx.x + n * gridDim.x;
    if (q >= total) return;
    unsigned long long* barrier = &landed[n % kStreamStages];
    const std::size_t r = q % row_count;
    const unsigned first = (q / row_count) * unsigned(kWideChunk);
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
    const std::size_t r = q % row_count;
    const unsigned first = (q / row_count) * unsigned(kWideChunk);
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
      gather_chunk<true>(bits, r, first, end, width, k, rows, candidates, chunk_ties, chunks, error,
                         [&](unsigned j) { return order_key(chunk_scores[j - first]); });
    }
    __syncthreads();  // every thread is done with this stage before it is filled again
    if (threadIdx.x == 0) start(n + kStreamStages);
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
  // one buffer: the rows' records, their lists, their per-chunk tie counts
  const unsigned chunks = unsigned((width + kWideChunk - 1) / kWideChunk);
  const std::size_t info_bytes = (rows * sizeof(WideRow) + 255) / 256 * 256,
                    list_bytes = rows * kCandidates * 8;
  void* p = nullptr;
  if (int e = upload_scratch(nullptr, info_bytes + list_bytes + rows * chunks * 4, stream, &p))
    return e;
  auto* bytes = static_cast<unsigned char*>(p);
  auto* info = reinterpret_cast<WideRow*>(bytes);
  auto* candidates = reinterpret_cast<unsigned long long*>(bytes + info_bytes);
  auto* chunk_ties = reinterpret_cast<unsigned*>(bytes + info_bytes + list_bytes);
  const auto gather = [&]() -> int {
    const std::size_t streamers = resident_blocks(
        reinterpret_cast<const void*>(wide_gather_streamed), kWideThreads, kStreamBytes);
    if (width % 4 == 0 && reinterpret_cast<std::uintptr_t>(scores) % 16 == 0 && streamers > 0)
      return overlapped(wide_gather_streamed,
                        dim3(unsigned(std::min<std::size_t>(chunks * rows, streamers))),
                        kWideThreads, kStreamBytes, stream, scores, width, ends, k, info,
                        candidates, chunk_ties, &verdict->refusal, chunks, unsigned(rows));
    return overlapped(wide_gather, dim3(chunks, unsigned(rows)), kWideThreads, 0, stream, scores,
                      width, ends, k, info, candidates, chunk_ties, &verdict->refusal);
  };
  int e = launch_sample(scores, width, ends, rows, k, chunks, info, chunk_ties, verdict, stream);
  if (e == 0) e = gather();
  if (e == 0)
    e = launch_finish(scores, width, ends, rows, k, info, candidates, chunk_ties, verdict, out,
                      stream);
  if (e == 0) e = cudaGetLastError();
  const int released = release_scratch(stream);
  return e != 0 ? e : released;
}

}  // namespace aether::cuda::topk
