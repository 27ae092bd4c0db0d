// The read side's kernel (impl/cuda/formats.cu): a warp a batch of output rows
// (impl/cuda/formats_rows.cuh), each item fetched into shared memory (cp.async,
// two images a warp) while the item before is decoded. CUDA source only.
#pragma once

#include "impl/cuda/formats_rows.cuh"

namespace aether::cuda::formats_rows {

// Item t's bytes into `image` (main formats), the stored rows' parts where the
// item places them; the parts of rows read at -1 or refused zeros (which decode to
// zeros).
template <CacheFormat F>
__device__ void fetch_item(const std::byte* cache, const Layout<F>& lay, const Batch& b, unsigned t,
                           const LanePart& p, std::byte* image) {
  using L = Layout<F>;
  static_assert(!L::index);
  const unsigned lane = threadIdx.x % 32;
  for_each_row_part(b, t, p, lay,
                    [&](bool stored, std::size_t data, std::size_t e, unsigned i, unsigned n) {
                      if (stored)
                        fetch_bytes(image + L::image_data(i), cache + data + L::data_within(e),
                                    L::data_length(n), lane);
                      else
                        for (unsigned k = lane; k < L::data_length(n); k += 32)
                          image[L::image_data(i) + k] = std::byte{0};
                    });
}

// IndexFp4, whose item is several rows' data and scale sections: a lane's 8 bytes
// of data into the item's image (cp.async of 8 bytes where the address allows, of
// 4, else byte by byte), and, from the first lane of each group, the group's scale
// byte, returned (place_scales puts it in the image when the item's turn comes).
// A row read at -1 or refused gives zeros. No loop over the item's rows.
template <CacheFormat F>
__device__ std::uint8_t fetch_lane(const std::byte* cache, const Batch& b, const LanePart& p,
                                   std::byte* image) {
  static_assert(Layout<F>::index && Layout<F>::group == 2 * kLaneElems);
  const unsigned lane = threadIdx.x % 32;
  std::byte* to = image + kLaneElems / 2 * lane;
  if (!p.stored) {  // (past the batch, the item's scales may lie here)
    if (p.row < b.count) *reinterpret_cast<uint2*>(to) = uint2{0, 0};
    return 0;
  }
  const std::byte* from = cache + p.data + p.at / 2;
  const auto address = reinterpret_cast<std::uintptr_t>(from);
  if (address % 8 == 0) {
    __pipeline_memcpy_async(to, from, 8);
  } else if (address % 4 == 0) {
    __pipeline_memcpy_async(to, from, 4);
    __pipeline_memcpy_async(to + 4, from + 4, 4);
  } else {
    for (unsigned k = 0; k < kLaneElems / 2; ++k) to[k] = from[k];
  }
  return lane % 2 == 0 ? std::uint8_t(cache[p.scales + p.at / 32]) : 0;
}
__device__ inline void place_scales(std::uint8_t scale, unsigned size, std::byte* image) {
  const unsigned lane = threadIdx.x % 32;
  if (lane % 2 == 0 && kLaneElems * lane < size) image[size / 2 + lane / 2] = std::byte(scale);
}

// Item t's values, two a lane at a time (output stores in whole 512-byte runs): a
// code pair's values times its group's scale, exact in double; a NaN element or
// scale refused at its output index (the values written anyway). Rows read at -1
// decode to zeros from their zeroed image; a refused row's values are unspecified.
template <CacheFormat F>
__device__ void decode_item(const std::byte* image, const Batch& b, unsigned t,
                            const Layout<F>& lay, const E2m1Pairs& e2m1,
                            unsigned long long* verdict, double* out) {
  using L = Layout<F>;
  constexpr unsigned kPairs = kChunk / 64;  // a lane's pairs in an item
  const bool aligned = reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  const unsigned size = b.size(t), lane = threadIdx.x % 32;
  const std::size_t first = b.base * lay.dim + b.first(t);
  double* values = out + first;
#pragma unroll
  for (unsigned k = 0; k < kPairs; ++k) {
    const unsigned i = 2 * lane + 64 * k;
    if (i >= size) break;
    const unsigned at = L::image_data(i) + i % L::group / (L::e4m3 ? 1 : 2);
    const auto scale_code = std::uint8_t(image[L::image_scale(i, size)]);
    const double scale = L::format.scale == ScaleKind::UE8M0
                             ? ue8m0_value(scale_code)
                             : scale_of(L::format.scale, scale_code);
    float2 x;
    if constexpr (L::e4m3)
      x = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(
          __nv_fp8x2_storage_t(unsigned(image[at]) | unsigned(image[at + 1]) << 8), __NV_E4M3)));
    else
      x = e2m1.pair[unsigned(image[at])];
    const double a = double(x.x) * scale, c = double(x.y) * scale;
    if (isnan(a) || isnan(c))
      refuse<Layout<F>::read_beside_reset>(verdict, refusal(1, first + i + (isnan(a) ? 0 : 1)));
    if (aligned)
      *reinterpret_cast<double2*>(values + i) = double2{a, c};
    else
      values[i] = a, values[i + 1] = c;
  }
}

// The read side: a -1 slot reads zeros; a slot outside the cache refused
// (batch_at); values as decode_item gives them.
template <CacheFormat F>
__global__ void __launch_bounds__(kThreads, kGatherBlocksPerSm)
    gather_rows(const std::byte* cache, const std::int32_t* slots, std::size_t m,
                unsigned per_batch, Layout<F> lay, unsigned long long* verdict, double* out) {
  __shared__ alignas(16) std::byte images[kWarps][2][kChunkBytes];
  __shared__ E2m1Pairs e2m1;
  if constexpr (!Layout<F>::e4m3) fill_e2m1_pairs(e2m1);
  __syncthreads();
  auto& image = images[threadIdx.x / 32];
  constexpr bool index = Layout<F>::index;
  for (std::size_t base = first_batch(per_batch); base < m; base += batch_stride(per_batch)) {
    const Batch b = batch_at<Layout<F>::read_beside_reset>(base, per_batch, m, slots, lay, verdict);
    // the lane's part of the item ahead, and its scale byte (IndexFp4)
    LanePart ahead = first_lane_part(b, lay);
    std::uint8_t scale_ahead = 0;
    if constexpr (index)
      scale_ahead = fetch_lane<F>(cache, b, ahead, image[0]);
    else
      fetch_item(cache, lay, b, 0, ahead, image[0]);
    __pipeline_commit();
    for (unsigned t = 0; t < b.items(); ++t) {
      const std::uint8_t scale = scale_ahead;
      if (t + 1 < b.items()) {
        // (a division, where a batch is several items: D > 512)
        next_lane_part(ahead, lane_step(lay.dim), b, lay);
        if constexpr (index)
          scale_ahead = fetch_lane<F>(cache, b, ahead, image[(t + 1) % 2]);
        else
          fetch_item(cache, lay, b, t + 1, ahead, image[(t + 1) % 2]);
      }
      __pipeline_commit();
      __pipeline_wait_prior(1);  // item t's fetch, not t + 1's
      if constexpr (index) place_scales(scale, b.size(t), image[t % 2]);
      __syncwarp();
      decode_item(image[t % 2], b, t, lay, e2m1, verdict, out);
      __syncwarp();  // image[t % 2] is item t + 2's
    }
    __pipeline_wait_prior(0);
  }
  // ends after the verdict's reset: the kernel after it waits only for this one
  if constexpr (Layout<F>::read_beside_reset) wait_for_previous_kernel();
}

}  // namespace aether::cuda::formats_rows
