// What the store's and the read side's kernels share (impl/cuda/formats_store.cuh,
// impl/cuda/formats_gather.cuh): one pass, a warp a batch of rows worked in items
// of kChunk elements, lane l owning the item's elements [16 l, 16 l + 16) (a
// LanePart); the main formats' items pass through shared memory in the cache's
// own layout (interleaved groups), copied as whole words; refusals are
// atomicMin'd into the call's verdict on the way (docs/formats.md). CUDA source
// only.
#pragma once

#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "impl/cuda/device.hpp"
#include "impl/cuda/launch.cuh"
#include "impl/formats_codes.hpp"

namespace aether::cuda::formats_rows {

using namespace formats_codes;

inline constexpr int kWarps = 8, kThreads = 32 * kWarps;
// Blocks an SM holds: the read side 4 (64 registers a thread); the store 4 where
// it fits 64 registers unspilled (IndexFp4 under the Cuda profile), else 3 (80; at
// 64 ptxas -v reports up to 160 bytes of spill loads).
inline constexpr int kGatherBlocksPerSm = 4;
__host__ __device__ constexpr int store_blocks_per_sm(bool e4m3, bool fast) {
  return !e4m3 && fast ? 4 : 3;
}
// Elements a warp converts between two copies (an item). An item's bytes are at
// most 528 (MainFp8: 16 groups of 33).
inline constexpr unsigned kChunk = 512, kChunkBytes = 544;
inline constexpr unsigned kAll = 0xffffffffu;

// Refusal codes: a bad slot (by row) before a NaN/inf (by flat index), each the lowest.
__host__ __device__ constexpr unsigned long long refusal(unsigned kind, std::size_t index) {
  return (static_cast<unsigned long long>(kind) << 62) | index;
}
inline constexpr unsigned long long kIndexBits = (1ull << 62) - 1;

// A refusal into the call's verdict. A kernel that runs beside the verdict's reset
// (Beside: Layout::read_beside_reset) waits for the reset first; every other kernel
// starts after it.
template <bool Beside>
__device__ void refuse(unsigned long long* verdict, unsigned long long code) {
  if constexpr (Beside) wait_for_previous_kernel();
  atomicMin(verdict, code);
}

// a / b, in 32 bits where both fit (a runtime divisor costs about 20 instructions
// in 32 bits, several times that in 64).
__device__ inline std::size_t quotient(std::size_t a, std::size_t b) {
  return (a | b) >> 32 == 0 ? std::size_t(unsigned(a) / unsigned(b)) : a / b;
}

// Where a slot's bytes are, and an item's within them; the format's constants at
// compile time (a group's size divides as a shift).
template <CacheFormat F>
struct Layout {
  static constexpr GroupFormat format = group_format(F);
  static constexpr unsigned group = unsigned(format.group);
  static constexpr bool index = F == CacheFormat::IndexFp4;  // data section, then scales
  static constexpr bool e4m3 = format.element == Element::E4M3;
  static constexpr unsigned data_bytes = e4m3 ? group : group / 2;  // a group's elements
  static constexpr unsigned group_bytes = data_bytes + (index ? 0 : 1);
  // IndexFp4's read side is a programmatic dependent of the verdict's reset: it reads
  // at once and waits for the reset only to report and to end (0.81 of the copy at
  // 65536 rows against 0.77 stream-ordered; MainFp8's fell from 0.88 to 0.83 so,
  // docs/performance.md)
  static constexpr bool read_beside_reset = index;
  std::size_t dim, rows_per_block, row_bytes;
  std::int64_t slots;
  // Slot s's bytes: its row (main formats), or its data and its scales (IndexFp4,
  // where elements from e0 on start e0 / 2 and e0 / 32 further).
  __device__ std::size_t row_data(std::size_t s) const {
    if constexpr (!index) return s * row_bytes;
    const std::size_t block = quotient(s, rows_per_block);
    return block * rows_per_block * row_bytes + (s - block * rows_per_block) * (dim / 2);
  }
  __device__ std::size_t row_scales(std::size_t s) const {
    const std::size_t block = quotient(s, rows_per_block);
    return block * rows_per_block * row_bytes + rows_per_block * (dim / 2) +
           (s - block * rows_per_block) * (dim / 32);
  }
  // Main formats (one range a row): where elements from e0 on start in their row,
  // and the bytes of n elements (whole groups).
  static __device__ std::size_t data_within(std::size_t e0) { return e0 / group * group_bytes; }
  static __device__ unsigned data_length(unsigned n) { return n / group * group_bytes; }
  // Within an item's image of n elements: element e's group's data, and its scale.
  static __device__ unsigned image_data(unsigned e) { return e / group * group_bytes; }
  static __device__ unsigned image_scale(unsigned e, unsigned n) {
    return index ? n / 2 + e / group : image_data(e) + data_bytes;
  }
  __device__ bool inside(std::int64_t s) const { return s >= 0 && s < slots; }
};

// `length` bytes from `from` to `to` (shared and global, either way) by the warp,
// in the widest words both addresses and the length allow.
template <class Word>
__device__ void copy_words(std::byte* to, const std::byte* from, unsigned length, unsigned lane) {
  for (unsigned i = lane; i < length / sizeof(Word); i += 32)
    reinterpret_cast<Word*>(to)[i] = reinterpret_cast<const Word*>(from)[i];
}
__device__ inline void copy_bytes(std::byte* to, const std::byte* from, unsigned length,
                                  unsigned lane) {
  const auto a =
      reinterpret_cast<std::uintptr_t>(to) | reinterpret_cast<std::uintptr_t>(from) | length;
  if (a % 16 == 0) return copy_words<uint4>(to, from, length, lane);
  if (a % 8 == 0) return copy_words<uint2>(to, from, length, lane);
  if (a % 4 == 0) return copy_words<unsigned>(to, from, length, lane);
  if (a % 2 == 0) return copy_words<unsigned short>(to, from, length, lane);
  copy_words<unsigned char>(to, from, length, lane);
}

// The same, asynchronous where the words allow (cp.async: 4, 8 or 16 bytes), for
// a fetch into shared memory that overlaps the work on the chunk before; the
// caller commits it and waits (__pipeline_commit, __pipeline_wait_prior).
template <int Word>
__device__ void fetch_words(std::byte* to, const std::byte* from, unsigned length, unsigned lane) {
  for (unsigned i = lane; i < length / Word; i += 32)
    __pipeline_memcpy_async(to + i * Word, from + i * Word, Word);
}
__device__ inline void fetch_bytes(std::byte* to, const std::byte* from, unsigned length,
                                   unsigned lane) {
  const auto a =
      reinterpret_cast<std::uintptr_t>(to) | reinterpret_cast<std::uintptr_t>(from) | length;
  if (a % 16 == 0) return fetch_words<16>(to, from, length, lane);
  if (a % 8 == 0) return fetch_words<8>(to, from, length, lane);
  if (a % 4 == 0) return fetch_words<4>(to, from, length, lane);
  copy_bytes(to, from, length, lane);
}

// A warp's rows, `per_batch` (at most 32) at a time, grid-stride: lane i holds the
// slot of row base + i (-1 past the batch) and refuses it if it is neither -1 nor
// inside the cache. The batch's values are one flat run (rows are contiguous, in
// and out), cut into items of kChunk elements; an item may end inside a row or
// cover several, but never cuts a group (kChunk and D are whole groups). Flat
// element f is element f % D of row base + f / D.
struct Batch {
  std::size_t base, dim;
  unsigned count;
  std::int32_t slot;         // this lane's row's
  std::size_t data, scales;  // where that slot's bytes start (Layout::row_data, row_scales)
  __device__ unsigned items() const { return unsigned((count * dim + kChunk - 1) / kChunk); }
  __device__ std::size_t first(unsigned t) const { return std::size_t(t) * kChunk; }
  __device__ unsigned size(unsigned t) const {
    const std::size_t left = count * dim - first(t);
    return unsigned(left < kChunk ? left : kChunk);
  }
};
// The batch at `base`, its shape only (no slot loaded).
__device__ inline Batch batch_shape(std::size_t base, unsigned per_batch, std::size_t n,
                                    std::size_t dim) {
  return {base, dim, unsigned(n - base < per_batch ? n - base : per_batch), -1, 0, 0};
}
// Lane i's slot in the batch at `base`: row base + i's, -1 past the batch or the call.
__device__ inline std::int32_t slot_at(std::size_t base, unsigned per_batch, std::size_t n,
                                       const std::int32_t* slots) {
  const unsigned lane = threadIdx.x % 32;
  return base < n && lane < per_batch && lane < n - base ? slots[base + lane] : -1;
}
// The batch at `base` whose lanes' slots are `slot` (slot_at: a caller may load them
// ahead).
template <bool Beside = false, CacheFormat F>
__device__ Batch batch_of(std::size_t base, unsigned per_batch, std::size_t n, std::int32_t slot,
                          const Layout<F>& lay, unsigned long long* verdict) {
  const unsigned lane = threadIdx.x % 32;
  Batch b = batch_shape(base, per_batch, n, lay.dim);
  b.slot = slot;
  if (b.slot != -1 && !lay.inside(b.slot)) refuse<Beside>(verdict, refusal(0, base + lane));
  if (lay.inside(b.slot)) {
    b.data = lay.row_data(std::size_t(b.slot));
    if constexpr (Layout<F>::index) b.scales = lay.row_scales(std::size_t(b.slot));
  }
  return b;
}
// The same, its slots loaded here.
template <bool Beside = false, CacheFormat F>
__device__ Batch batch_at(std::size_t base, unsigned per_batch, std::size_t n,
                          const std::int32_t* slots, const Layout<F>& lay,
                          unsigned long long* verdict) {
  const unsigned lane = threadIdx.x % 32, count = batch_shape(base, per_batch, n, lay.dim).count;
  return batch_of<Beside>(base, per_batch, n, lane < count ? slots[base + lane] : -1, lay, verdict);
}
// A lane's share of an item, kLaneElems consecutive elements (whole groups or half
// of one), all in one row: D and kChunk are multiples of 16. Past the batch's end,
// and for a row whose slot is -1 or outside the cache, nothing is stored. Item 0's
// part takes a division; each next one's moves kChunk elements on: kChunk / D rows
// and kChunk % D elements (a LaneStep: the store finds it once a kernel, the gather
// once an item of its multi-item batches), then at most one row more, as
// kChunk % D < D.
inline constexpr unsigned kLaneElems = kChunk / 32;
struct LanePart {
  unsigned row;    // in the batch
  std::size_t at;  // the first element's place in its row
  bool stored;
  std::size_t data = 0, scales = 0;  // IndexFp4: where the row's sections start (Batch)
};
template <CacheFormat F>
__device__ void settle(LanePart& p, const Batch& b, const Layout<F>& lay) {
  const int source = int(p.row < 32 ? p.row : 31);  // past the batch: any lane
  const std::int32_t slot = __shfl_sync(kAll, b.slot, source);
  p.stored = p.row < b.count && lay.inside(slot);
  if constexpr (Layout<F>::index) {
    p.data = __shfl_sync(kAll, (unsigned long long)b.data, source);
    p.scales = __shfl_sync(kAll, (unsigned long long)b.scales, source);
  }
}
template <CacheFormat F>
__device__ LanePart first_lane_part(const Batch& b, const Layout<F>& lay) {
  const std::size_t f = kLaneElems * (threadIdx.x % 32);
  LanePart p{unsigned(quotient(f, b.dim)), 0, false};
  p.at = f - p.row * b.dim;
  settle(p, b, lay);
  return p;
}
struct LaneStep {
  unsigned rows, at;
};
__device__ inline LaneStep lane_step(std::size_t dim) {
  const auto rows = unsigned(quotient(kChunk, dim));
  return {rows, unsigned(kChunk - rows * dim)};
}
template <CacheFormat F>
__device__ void next_lane_part(LanePart& p, LaneStep step, const Batch& b, const Layout<F>& lay) {
  p.at += step.at, p.row += step.rows;
  if (p.at >= b.dim) p.at -= b.dim, ++p.row;
  settle(p, b, lay);
}

// A warp's first batch, and the grid's stride between batches.
__device__ inline std::size_t first_batch(unsigned per_batch) {
  return (blockIdx.x * std::size_t(kWarps) + threadIdx.x / 32) * per_batch;
}
__device__ inline std::size_t batch_stride(unsigned per_batch) {
  return std::size_t(gridDim.x) * kWarps * per_batch;
}

// Main formats: fn(stored, data, e, i, n) for each row item t touches: its elements
// [e, e + n) are the item's [i, i + n); stored says its slot is inside the cache,
// whose row then starts at data (Batch). Where D is a multiple of kChunk every item
// lies in one row, lane 0's (p: this lane's part of item t).
template <CacheFormat F, class Fn>
__device__ void for_each_row_part(const Batch& b, unsigned t, const LanePart& p,
                                  const Layout<F>& lay, Fn fn) {
  static_assert(!Layout<F>::index);
  const auto row_part = [&](unsigned r, std::size_t e, unsigned i, unsigned n) {
    const std::int32_t s = __shfl_sync(kAll, b.slot, int(r));
    const std::size_t data = __shfl_sync(kAll, (unsigned long long)b.data, int(r));
    fn(lay.inside(s), data, e, i, n);
  };
  if (b.dim % kChunk == 0) {
    const auto at = std::size_t(__shfl_sync(kAll, (unsigned long long)p.at, 0));
    return row_part(__shfl_sync(kAll, p.row, 0), at, 0, b.size(t));
  }
  const std::size_t f0 = b.first(t), end = f0 + b.size(t);
  for (std::size_t r = quotient(f0, b.dim); r * b.dim < end; ++r) {
    const std::size_t lo = r * b.dim > f0 ? r * b.dim : f0;
    const std::size_t hi = (r + 1) * b.dim < end ? (r + 1) * b.dim : end;
    row_part(unsigned(r), lo - r * b.dim, unsigned(lo - f0), unsigned(hi - lo));
  }
}

// E2M1 by a table of CUDA's own conversions, one entry a class of floats
// (formats_codes::e2m1_class: sign, exponent, two fraction bits, any bit below):
// sm_90 has no E2M1 conversion instruction, and cuda_fp4.h's software path costs
// about a hundred instructions a value; a class's entry costs five. Filled
// a block at a time, one conversion a thread at most: the 128 classes of [2^-3, 32)
// their own, then every other run of 16 entries the code of the class that starts
// [2^-3, 1/4) or [8, 16) in its sign, as every class below 2^-2 converts to +-0 and
// every finite one from 8 up to +-6 (never reached: |q| <= 6; a NaN's class is refused
// input, whose codes are unspecified). Decoding: pair[b], the values of byte b's two
// codes (low nibble first).
struct E2m1Codes {
  alignas(16) std::uint8_t code[kE2m1Classes];
};
struct E2m1Pairs {
  float2 pair[256];
};
__device__ inline std::uint8_t e2m1_class_code(unsigned c) {
  const float member = __uint_as_float(e2m1_class_member(c));
  return __nv_cvt_double_to_fp4(double(member), __NV_E2M1, cudaRoundNearest);
}
// Classes 992 to 1055 (biased exponents 124 to 131) and 3040 to 3103 (the same negated)
// are runs 62 to 65 and 190 to 193 of 16; the second step reads them, never writes.
__device__ inline void fill_e2m1_codes(E2m1Codes& t) {
  for (unsigned i = threadIdx.x; i < 128; i += blockDim.x) {
    const unsigned c = (i < 64 ? 992 : 2976) + i;
    t.code[c] = e2m1_class_code(c);
  }
  __syncthreads();
  for (unsigned i = threadIdx.x; i < kE2m1Classes / 16; i += blockDim.x) {
    const unsigned run = i % 128, sign = i / 128 * 2048;
    if (run >= 62 && run <= 65) continue;
    const unsigned c = t.code[sign + (run < 62 ? 992 : 1040)] * 0x01010101u;
    reinterpret_cast<uint4*>(t.code)[i] = make_uint4(c, c, c, c);
  }
}
__device__ inline void fill_e2m1_pairs(E2m1Pairs& t) {
  for (unsigned i = threadIdx.x; i < 256; i += blockDim.x)
    t.pair[i] =
        __half22float2(__half2(__nv_cvt_fp4x2_to_halfraw2(__nv_fp4x2_storage_t(i), __NV_E2M1)));
}
// Two E2M1 codes in a byte (the first in the low nibble) for q.x, q.y.
__device__ inline std::uint8_t e2m1_pair(const float2& q, const E2m1Codes& t) {
  return std::uint8_t(t.code[e2m1_class(__float_as_uint(q.x))] |
                      t.code[e2m1_class(__float_as_uint(q.y))] << 4);
}

}  // namespace aether::cuda::formats_rows
