// The store's kernel (impl/cuda/formats.cu): a warp a batch of rows
// (impl/cuda/formats_rows.cuh), each item loaded while the item before is
// converted. Codes come from impl/formats_codes.hpp, the CPU's rules. CUDA source
// only.
#pragma once

#include "impl/cuda/formats_rows.cuh"

namespace aether::cuda::formats_rows {

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

// Item t's values (zeros past the item and for rows not stored).
template <CacheFormat F>
__device__ void load_item(const float* rows, const Layout<F>& lay, const Batch& b, unsigned t,
                          float4 (&v)[kQuads]) {
  const std::size_t f0 = b.first(t);
  const unsigned size = b.size(t), lane = threadIdx.x % 32;
  std::int32_t s[kQuads];
  b.slots_from(f0 + 4 * lane, 128, s);
#pragma unroll
  for (unsigned u = 0; u < kQuads; ++u) {
    const unsigned i = u * 128 + 4 * lane;
    v[u] = lay.inside(s[u]) && i < size
               ? *reinterpret_cast<const float4*>(rows + b.base * lay.dim + f0 + i)
               : float4{0, 0, 0, 0};
  }
}

// Four values' codes and their group's scale byte into the item's image, at
// element i of the item (n elements). Exact (docs/formats.md): with a UE8M0 scale
// and the Cuda profile, x times the scale's inverse (`inverse`, a power of two) is
// exact in float (a product that underflows is under 2^-126, whose code is +-0
// either way), so the paired E4M3 conversion and e2m1_pair give the double path's
// codes.
template <CacheFormat F, bool Fast>
__device__ void encode_quad(const float4& v, std::uint8_t scale, float inverse,
                            RoundingProfile profile, const E2m1Tables& e2m1, unsigned i, unsigned n,
                            std::byte* image) {
  using L = Layout<F>;
  std::uint8_t codes[4];
  if constexpr (Fast) {
    const float2 lo{v.x * inverse, v.y * inverse}, hi{v.z * inverse, v.w * inverse};
    if constexpr (L::e4m3) {
      const unsigned a = __nv_cvt_float2_to_fp8x2(lo, __NV_SATFINITE, __NV_E4M3);
      const unsigned b = __nv_cvt_float2_to_fp8x2(hi, __NV_SATFINITE, __NV_E4M3);
      codes[0] = a & 0xff, codes[1] = a >> 8, codes[2] = b & 0xff, codes[3] = b >> 8;
    } else {
      codes[0] = e2m1_pair(lo, e2m1), codes[1] = e2m1_pair(hi, e2m1);
    }
  } else {
    const double s = scale_of(L::format.scale, scale);
    const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) codes[k] = encode(L::format.element, double(x[k]) / s, profile);
    if (!L::e4m3) codes[0] = codes[0] | codes[1] << 4, codes[1] = codes[2] | codes[3] << 4;
  }
  const unsigned at = L::image_data(i) + i % L::group / (L::e4m3 ? 1 : 2);
#pragma unroll
  for (int k = 0; k < (L::e4m3 ? 4 : 2); ++k) image[at + k] = std::byte(codes[k]);
  if (i % L::group == 0) image[L::image_scale(i, n)] = std::byte(scale);
}

// Item t into the cache: NaN/inf in a stored row refused (written anyway), each
// group's amax by a shuffle over its lanes, each group's scale computed once, by
// lane g for group g, then the codes into the item's image and each stored row's
// part of it into its slot.
template <CacheFormat F, bool Fast>
__device__ void store_item(const float4 (&v)[kQuads], const Batch& b, unsigned t,
                           const Layout<F>& lay, RoundingProfile profile, const E2m1Tables& e2m1,
                           std::byte* image, unsigned long long* verdict, std::byte* cache) {
  using L = Layout<F>;
  constexpr unsigned group_lanes = L::group / 4, groups_a_quad = 128 / L::group;
  const unsigned lane = threadIdx.x % 32, size = b.size(t);
  const std::size_t f0 = b.first(t);
  float amax[kQuads];
#pragma unroll
  for (unsigned u = 0; u < kQuads; ++u) {
    const unsigned i = u * 128 + 4 * lane;
    const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
    for (int k = 0; k < 4; ++k)  // rows not stored load zeros
      if (!isfinite(x[k])) atomicMin(verdict, refusal(1, b.base * lay.dim + f0 + i + k));
    amax[u] = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
#pragma unroll
    for (unsigned m = 1; m < group_lanes; m *= 2)
      amax[u] = fmaxf(amax[u], __shfl_xor_sync(kAll, amax[u], int(m)));
  }
  // lane g: group g of the item (at most 32 groups: 512 / 16)
  float mine = 0;
#pragma unroll
  for (unsigned u = 0; u < kQuads; ++u) {
    const float a = __shfl_sync(kAll, amax[u], int(lane % groups_a_quad * group_lanes));
    if (lane / groups_a_quad == u) mine = a;
  }
  std::uint8_t scale = 0;
  float inverse = 0;
  if (lane < size / L::group) {
    scale = scale_byte(L::format, double(mine), profile);
    // 2^(127 - b) = the UE8M0 value of 254 - b (b <= 254: the scale is finite)
    if constexpr (Fast) inverse = float(scale_of(ScaleKind::UE8M0, std::uint8_t(254 - scale)));
  }
#pragma unroll
  for (unsigned u = 0; u < kQuads; ++u) {
    const unsigned i = u * 128 + 4 * lane;
    const int g = int(i / L::group % 32);
    const std::uint8_t sb = std::uint8_t(__shfl_sync(kAll, unsigned(scale), g));
    const float inv = Fast ? __shfl_sync(kAll, inverse, g) : 0.0f;
    if (i < size) encode_quad<F, Fast>(v[u], sb, inv, profile, e2m1, i, size, image);
  }
  __syncwarp();
  for_each_row_part(
      b, t, lay, [&](std::size_t data, std::size_t scales, std::size_t e, unsigned i, unsigned n) {
        copy_bytes(cache + data + L::data_within(e), image + L::image_data(i), L::data_length(n),
                   lane);
        if constexpr (L::index)
          copy_bytes(cache + scales + e / 32, image + L::image_scale(i, size), n / 32, lane);
      });
  __syncwarp();
}

// The store: placeholders skipped (their values never read); a slot outside the
// cache refused (batch_at) and not written; a slot given twice refused at the later
// row (claim_slot), both rows written; a NaN/inf refused, its row written anyway.
template <CacheFormat F, bool Fast>
__global__ void __launch_bounds__(kThreads, kStoreBlocksPerSm)
    store_rows(const float* rows, const std::int32_t* slots, std::size_t n, unsigned per_batch,
               Layout<F> lay, RoundingProfile profile, Claims claims, unsigned long long* verdict,
               std::byte* cache) {
  __shared__ alignas(16) std::byte images[kWarps][kChunkBytes];
  __shared__ E2m1Tables e2m1;
  if constexpr (Fast && !Layout<F>::e4m3) fill_e2m1_tables(e2m1);
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  std::byte* image = images[threadIdx.x / 32];
  for (std::size_t base = first_batch(per_batch); base < n; base += batch_stride(per_batch)) {
    const Batch b = batch_at(base, per_batch, n, slots, lay, verdict);
    if (lay.inside(b.slot))
      claim_slot(claims, std::int32_t(b.slot), unsigned(base + lane), verdict);
    float4 v[kQuads], next[kQuads];
    load_item(rows, lay, b, 0, v);
    for (unsigned t = 0; t < b.items(); ++t) {
      if (t + 1 < b.items()) load_item(rows, lay, b, t + 1, next);
      store_item<F, Fast>(v, b, t, lay, profile, e2m1, image, verdict, cache);
#pragma unroll
      for (unsigned u = 0; u < kQuads; ++u) v[u] = next[u];
    }
  }
}

}  // namespace aether::cuda::formats_rows
