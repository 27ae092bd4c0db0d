// The store's kernel (impl/cuda/formats.cu): a warp a batch of 32 rows
// (impl/cuda/formats_rows.cuh), each row's chunk loaded while the chunk before is
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

// Item t's values (zeros past the row, none for a row not stored).
__device__ inline void load_item(const float* rows, const Layout& lay, const Batch& b, unsigned t,
                                 float4 (&v)[kQuads]) {
  const std::int64_t s = b.slot_of(t);
  const std::size_t e0 = b.first(t);
  const unsigned size = chunk_size(lay, e0), lane = threadIdx.x % 32;
#pragma unroll
  for (unsigned u = 0; u < kQuads; ++u) {
    const unsigned e = u * 128 + 4 * lane;
    v[u] = inside(s, lay) && e < size
               ? *reinterpret_cast<const float4*>(rows + b.row(t) * lay.dim + e0 + e)
               : float4{0, 0, 0, 0};
  }
}

// Four values' codes and their group's scale byte into the chunk's image, at
// element e of the chunk (n elements). Exact (docs/formats.md): with a UE8M0 scale
// and the Cuda profile, x times the scale's inverse (`inverse`, a power of two) is
// exact in float (a product that underflows is under 2^-126, whose code is +-0
// either way), so the paired E4M3 conversion and e2m1_pair give the double path's
// codes.
template <bool Fast>
__device__ void encode_quad(const float4& v, std::uint8_t scale, float inverse, const Layout& lay,
                            RoundingProfile profile, const E2m1Tables& e2m1, unsigned e,
                            unsigned n, std::byte* image) {
  const GroupFormat f = lay.group;
  const bool e4m3 = f.element == Element::E4M3;
  std::uint8_t codes[4];
  if constexpr (Fast) {
    const float2 lo{v.x * inverse, v.y * inverse}, hi{v.z * inverse, v.w * inverse};
    if (e4m3) {
      const unsigned a = __nv_cvt_float2_to_fp8x2(lo, __NV_SATFINITE, __NV_E4M3);
      const unsigned b = __nv_cvt_float2_to_fp8x2(hi, __NV_SATFINITE, __NV_E4M3);
      codes[0] = a & 0xff, codes[1] = a >> 8, codes[2] = b & 0xff, codes[3] = b >> 8;
    } else {
      codes[0] = e2m1_pair(lo, e2m1), codes[1] = e2m1_pair(hi, e2m1);
    }
  } else {
    const double s = scale_of(f.scale, scale);
    const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) codes[i] = encode(f.element, double(x[i]) / s, profile);
    if (!e4m3) codes[0] = codes[0] | codes[1] << 4, codes[1] = codes[2] | codes[3] << 4;
  }
  const unsigned at = lay.image_data(e) + (e % unsigned(f.group)) / (e4m3 ? 1 : 2);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    if (e4m3 || i < 2) image[at + i] = std::byte(codes[i]);
  if (e % unsigned(f.group) == 0) image[lay.image_scale(e, n)] = std::byte(scale);
}

// One chunk of row j (elements [e0, e0 + size)) into slot s: NaN/inf refused (the
// chunk written anyway), each group's amax by a shuffle over its lanes, each
// group's scale computed once, by lane g for group g, then the codes, the image
// and its copy into the cache.
template <bool Fast>
__device__ void store_chunk(const float4 (&v)[kQuads], std::size_t j, std::size_t e0,
                            unsigned size, std::size_t s, const Layout& lay,
                            RoundingProfile profile, const E2m1Tables& e2m1, std::byte* image,
                            unsigned long long* verdict, std::byte* cache) {
  const unsigned lane = threadIdx.x % 32, group = unsigned(lay.group.group);
  const unsigned group_lanes = group / 4, groups_a_quad = 128 / group;
  float amax[kQuads];
#pragma unroll
  for (unsigned u = 0; u < kQuads; ++u) {
    const float x[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (!isfinite(x[i])) atomicMin(verdict, refusal(1, j * lay.dim + e0 + u * 128 + 4 * lane + i));
    amax[u] = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
    for (unsigned m = 1; m < group_lanes; m *= 2)
      amax[u] = fmaxf(amax[u], __shfl_xor_sync(kAll, amax[u], int(m)));
  }
  // lane g: group g of the chunk (at most 32 groups: 512 / 16)
  float mine = 0;
#pragma unroll
  for (unsigned u = 0; u < kQuads; ++u) {
    const float a = __shfl_sync(kAll, amax[u], int(lane % groups_a_quad * group_lanes));
    if (lane / groups_a_quad == u) mine = a;
  }
  std::uint8_t scale = 0;
  float inverse = 0;
  if (lane < size / group) {
    scale = scale_byte(lay.group, double(mine), profile);
    if constexpr (Fast) inverse = float(1.0 / scale_of(lay.group.scale, scale));
  }
#pragma unroll
  for (unsigned u = 0; u < kQuads; ++u) {
    const unsigned e = u * 128 + 4 * lane;
    const int g = int(e / group % 32);
    const std::uint8_t b = std::uint8_t(__shfl_sync(kAll, unsigned(scale), g));
    const float inv = Fast ? __shfl_sync(kAll, inverse, g) : 0.0f;
    if (e < size) encode_quad<Fast>(v[u], b, inv, lay, profile, e2m1, e, size, image);
  }
  __syncwarp();
  copy_bytes(lay.data_at(cache, s, e0), image, lay.data_length(size), lane);
  if (lay.index) copy_bytes(lay.scales_at(cache, s, e0), image + size / 2, size / 32, lane);
  __syncwarp();
}

// The store: placeholders skipped (their values never read); a slot outside the
// cache refused (batch_at) and not written; a slot given twice refused at the later
// row (claim_slot), both rows written; a NaN/inf refused, its row written anyway.
template <bool Fast>
__global__ void __launch_bounds__(kThreads)
    store_rows(const float* rows, const std::int32_t* slots, std::size_t n, unsigned per_batch,
               Layout lay,
               RoundingProfile profile, Claims claims, unsigned long long* verdict,
               std::byte* cache) {
  __shared__ alignas(16) std::byte images[kWarps][kChunkBytes];
  __shared__ E2m1Tables e2m1;
  if (Fast && lay.group.element == Element::E2M1) fill_e2m1_tables(e2m1);
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  std::byte* image = images[threadIdx.x / 32];
  for (std::size_t base = first_batch(per_batch); base < n; base += batch_stride(per_batch)) {
    const Batch b = batch_at(base, per_batch, n, slots, lay, verdict);
    if (inside(b.slot, lay)) claim_slot(claims, std::int32_t(b.slot), unsigned(base + lane), verdict);
    float4 v[kQuads], next[kQuads];
    load_item(rows, lay, b, 0, v);
    for (unsigned t = 0; t < b.items(); ++t) {
      if (t + 1 < b.items()) load_item(rows, lay, b, t + 1, next);
      const std::int64_t s = b.slot_of(t);
      if (inside(s, lay))
        store_chunk<Fast>(v, b.row(t), b.first(t), chunk_size(lay, b.first(t)), std::size_t(s),
                          lay, profile, e2m1, image, verdict, cache);
#pragma unroll
      for (unsigned u = 0; u < kQuads; ++u) v[u] = next[u];
    }
  }
}

}  // namespace aether::cuda::formats_rows
