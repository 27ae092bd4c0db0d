// The store's and the read side's kernels (impl/cuda/formats.cu): one pass, a warp
// a row. A row is converted in chunks of kChunk elements, each chunk's bytes built
// in shared memory in the cache's own layout (interleaved groups, or an IndexFp4
// row's data then scales) and copied as whole words; refusals are atomicMin'd into
// the call's verdict on the way (docs/formats.md). Codes come from
// impl/formats_codes.hpp, the CPU's rules. CUDA source only.
#pragma once

#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "impl/cuda/device.hpp"
#include "impl/formats_codes.hpp"

namespace aether::cuda::formats_rows {

using namespace formats_codes;

inline constexpr int kWarps = 8, kThreads = 32 * kWarps;
// Elements a warp converts between two copies: four float4 a lane. A chunk's bytes
// are at most 528 (MainFp8: 16 groups of 33).
inline constexpr unsigned kChunk = 512, kChunkBytes = 544;

// Refusal codes: a bad slot (by row) before a NaN/inf (by flat index), each the lowest.
__host__ __device__ constexpr unsigned long long refusal(unsigned kind, std::size_t index) {
  return (static_cast<unsigned long long>(kind) << 62) | index;
}
inline constexpr unsigned long long kIndexBits = (1ull << 62) - 1;

// Where a slot's bytes are, and a chunk's within them.
struct Layout {
  GroupFormat group;
  bool index;                   // IndexFp4: a block's data section, then its scales
  unsigned data_bytes;          // a group's element bytes
  std::size_t dim, rows_per_block, row_bytes, slots;
  __host__ __device__ unsigned group_bytes() const { return data_bytes + (index ? 0 : 1); }
  // The destination of chunk [e0, e0 + n) of slot s: one range (main formats), or
  // the data range and the scale range (IndexFp4).
  __device__ std::byte* data_at(std::byte* cache, std::size_t s, std::size_t e0) const {
    if (!index) return cache + s * row_bytes + e0 / group.group * group_bytes();
    const std::size_t block = s / rows_per_block * rows_per_block * row_bytes;
    return cache + block + s % rows_per_block * (dim / 2) + e0 / 2;
  }
  __device__ std::byte* scales_at(std::byte* cache, std::size_t s, std::size_t e0) const {
    const std::size_t block = s / rows_per_block * rows_per_block * row_bytes;
    return cache + block + rows_per_block * (dim / 2) + s % rows_per_block * (dim / 32) + e0 / 32;
  }
  // Bytes of a chunk of n elements: its data range (everything, main formats).
  __device__ unsigned data_length(unsigned n) const {
    return index ? n / 2 : n / unsigned(group.group) * group_bytes();
  }
  // Within a chunk's image: element e's group's data, and its scale byte.
  __device__ unsigned image_data(unsigned e) const {
    return e / unsigned(group.group) * group_bytes();
  }
  __device__ unsigned image_scale(unsigned e, unsigned n) const {
    return index ? n / 2 + e / unsigned(group.group) : image_data(e) + data_bytes;
  }
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
  const auto a = reinterpret_cast<std::uintptr_t>(to) | reinterpret_cast<std::uintptr_t>(from) |
                 length;
  if (a % 16 == 0) return copy_words<uint4>(to, from, length, lane);
  if (a % 8 == 0) return copy_words<uint2>(to, from, length, lane);
  if (a % 4 == 0) return copy_words<unsigned>(to, from, length, lane);
  if (a % 2 == 0) return copy_words<unsigned short>(to, from, length, lane);
  copy_words<unsigned char>(to, from, length, lane);
}

// The claims' open-addressed table: 2^bits entries (at least twice the distinct
// slots a call can name, at most 2^32), keys -1 and rows ~0 when empty; a slot's
// first probe is the top bits of a multiplicative hash, so slots that differ only
// in their high bits spread too.
struct Claims {
  std::int32_t* keys;
  unsigned* rows;
  unsigned bits;
};

// Row j's claim on slot s: of two rows on one slot the later is refused, whichever
// arrives first, so every row but the lowest on a slot is refused and the verdict
// keeps the lowest of them (rows fit 32 bits: 2^32 rows of 16 floats outgrow any
// device).
__device__ inline void claim_slot(Claims c, std::int32_t s, unsigned j,
                                  unsigned long long* verdict) {
  const std::size_t mask = (std::size_t(1) << c.bits) - 1;
  for (std::size_t h = (unsigned(s) * 0x9e3779b1u) >> (32 - c.bits);; h = (h + 1) & mask) {
    const std::int32_t key = atomicCAS(c.keys + h, -1, s);
    if (key != -1 && key != s) continue;
    const unsigned before = atomicMin(c.rows + h, j);
    if (before != ~0u) atomicMin(verdict, refusal(0, before > j ? before : j));
    return;
  }
}

// Four values' codes and their group's scale byte into the chunk's image, at
// element e of the chunk (n elements). Exact (docs/formats.md): with a UE8M0 scale
// and the Cuda profile, x times the scale's inverse is exact in float (a power of
// two; a product that underflows is under 2^-126, whose code is +-0 either way),
// so the paired conversions give the double path's codes.
template <bool Fast>
__device__ void encode_quad(const float4& v, float amax, const Layout& lay,
                            RoundingProfile profile, unsigned e, unsigned n, std::byte* image) {
  const GroupFormat f = lay.group;
  const std::uint8_t scale = scale_byte(f, double(amax), profile);
  const bool e4m3 = f.element == Element::E4M3;
  std::uint8_t codes[4];
  if constexpr (Fast) {
    const float inv = float(1.0 / scale_of(f.scale, scale));
    const float2 lo{v.x * inv, v.y * inv}, hi{v.z * inv, v.w * inv};
    if (e4m3) {
      const unsigned a = __nv_cvt_float2_to_fp8x2(lo, __NV_SATFINITE, __NV_E4M3);
      const unsigned b = __nv_cvt_float2_to_fp8x2(hi, __NV_SATFINITE, __NV_E4M3);
      codes[0] = a & 0xff, codes[1] = a >> 8, codes[2] = b & 0xff, codes[3] = b >> 8;
    } else {
      codes[0] = __nv_cvt_float2_to_fp4x2(lo, __NV_E2M1, cudaRoundNearest);
      codes[1] = __nv_cvt_float2_to_fp4x2(hi, __NV_E2M1, cudaRoundNearest);
    }
  } else {
    const double s = scale_of(f.scale, scale);
    const float x[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 4; ++i) codes[i] = encode(f.element, double(x[i]) / s, profile);
    if (!e4m3) codes[0] = codes[0] | codes[1] << 4, codes[1] = codes[2] | codes[3] << 4;
  }
  const unsigned at = lay.image_data(e) + (e % unsigned(f.group)) / (e4m3 ? 1 : 2);
  for (int i = 0; i < (e4m3 ? 4 : 2); ++i) image[at + i] = std::byte(codes[i]);
  if (e % unsigned(f.group) == 0) image[lay.image_scale(e, n)] = std::byte(scale);
}

// The store: a warp a row (grid-stride); placeholders skipped; a slot outside the
// cache refused and not written; a slot given twice refused at the later row
// (claim_slot), both rows written; a NaN/inf refused, its row written anyway.
template <bool Fast>
__global__ void __launch_bounds__(kThreads)
    store_rows(const float* rows, const std::int32_t* slots, std::size_t n, Layout lay,
               RoundingProfile profile, Claims claims, unsigned long long* verdict,
               std::byte* cache) {
  __shared__ alignas(16) std::byte images[kWarps][kChunkBytes];
  const unsigned lane = threadIdx.x % 32;
  std::byte* image = images[threadIdx.x / 32];
  const std::size_t warps = std::size_t(gridDim.x) * kWarps;
  for (std::size_t j = blockIdx.x * std::size_t(kWarps) + threadIdx.x / 32; j < n; j += warps) {
    const std::int64_t s = slots[j];
    if (s == -1) continue;
    if (s < -1 || s >= std::int64_t(lay.slots)) {
      if (lane == 0) atomicMin(verdict, refusal(0, j));
      continue;
    }
    if (lane == 0) claim_slot(claims, std::int32_t(s), unsigned(j), verdict);
    for (std::size_t e0 = 0; e0 < lay.dim; e0 += kChunk) {
      const unsigned size = unsigned(lay.dim - e0 < kChunk ? lay.dim - e0 : kChunk);
      float4 v[kChunk / 128];
#pragma unroll
      for (unsigned u = 0; u < kChunk / 128; ++u) {
        const unsigned e = u * 128 + 4 * lane;
        v[u] = e < size ? *reinterpret_cast<const float4*>(rows + j * lay.dim + e0 + e)
                        : float4{0, 0, 0, 0};
      }
#pragma unroll
      for (unsigned u = 0; u < kChunk / 128; ++u) {
        const unsigned e = u * 128 + 4 * lane;
        const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
        for (int i = 0; i < 4; ++i)
          if (!isfinite(x[i])) atomicMin(verdict, refusal(1, j * lay.dim + e0 + e + i));
        float amax = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
        for (unsigned m = 1; m < lay.group.group / 4; m *= 2)
          amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, int(m)));
        if (e < size) encode_quad<Fast>(v[u], amax, lay, profile, e, size, image);
      }
      __syncwarp();
      copy_bytes(lay.data_at(cache, std::size_t(s), e0), image, lay.data_length(size), lane);
      if (lay.index)
        copy_bytes(lay.scales_at(cache, std::size_t(s), e0), image + size / 2, size / 32, lane);
      __syncwarp();
    }
  }
}

// The read side: a warp an output row; a -1 slot reads zeros; a slot outside the
// cache refused (its row unwritten); a NaN element or scale refused at its value,
// written anyway. Values are exact doubles (a code's value times its scale).
__global__ void __launch_bounds__(kThreads)
    gather_rows(const std::byte* cache, const std::int32_t* slots, std::size_t m, Layout lay,
                unsigned long long* verdict, double* out) {
  __shared__ alignas(16) std::byte images[kWarps][kChunkBytes];
  const unsigned lane = threadIdx.x % 32;
  std::byte* image = images[threadIdx.x / 32];
  const GroupFormat f = lay.group;
  const bool e4m3 = f.element == Element::E4M3;
  const bool pairs = reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  const std::size_t warps = std::size_t(gridDim.x) * kWarps;
  for (std::size_t j = blockIdx.x * std::size_t(kWarps) + threadIdx.x / 32; j < m; j += warps) {
    const std::int64_t s = slots[j];
    double* row = out + j * lay.dim;
    if (s == -1) {
      for (std::size_t e = lane; e < lay.dim; e += 32) row[e] = 0;
      continue;
    }
    if (s < -1 || s >= std::int64_t(lay.slots)) {
      if (lane == 0) atomicMin(verdict, refusal(0, j));
      continue;
    }
    for (std::size_t e0 = 0; e0 < lay.dim; e0 += kChunk) {
      const unsigned size = unsigned(lay.dim - e0 < kChunk ? lay.dim - e0 : kChunk);
      __syncwarp();
      copy_bytes(image, lay.data_at(const_cast<std::byte*>(cache), std::size_t(s), e0),
                 lay.data_length(size), lane);
      if (lay.index)
        copy_bytes(image + size / 2, lay.scales_at(const_cast<std::byte*>(cache), std::size_t(s), e0),
                   size / 32, lane);
      __syncwarp();
      for (unsigned e = 2 * lane; e < size; e += 64) {
        const unsigned at = lay.image_data(e) + (e % unsigned(f.group)) / (e4m3 ? 1 : 2);
        const double scale = scale_of(f.scale, std::uint8_t(image[lay.image_scale(e, size)]));
        __half2_raw h;
        if (e4m3)
          h = __nv_cvt_fp8x2_to_halfraw2(
              __nv_fp8x2_storage_t(unsigned(image[at]) | unsigned(image[at + 1]) << 8), __NV_E4M3);
        else
          h = __nv_cvt_fp4x2_to_halfraw2(__nv_fp4x2_storage_t(image[at]), __NV_E2M1);
        const float2 x = __half22float2(__half2(h));
        const double a = double(x.x) * scale, b = double(x.y) * scale;
        if (isnan(a) || isnan(b))
          atomicMin(verdict, refusal(1, j * lay.dim + e0 + e + (isnan(a) ? 0 : 1)));
        if (pairs)
          *reinterpret_cast<double2*>(row + e0 + e) = double2{a, b};
        else
          row[e0 + e] = a, row[e0 + e + 1] = b;
      }
    }
  }
}

}  // namespace aether::cuda::formats_rows
