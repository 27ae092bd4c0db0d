// The read side's kernel (impl/cuda/formats.cu): a warp a batch of 32 output rows
// (impl/cuda/formats_rows.cuh), each row's chunk fetched into shared memory
// (cp.async, two images a warp) while the chunk before is decoded. CUDA source only.
#pragma once

#include "impl/cuda/formats_rows.cuh"

namespace aether::cuda::formats_rows {

// Item t's bytes into `image` (nothing for a slot outside the cache or -1).
__device__ inline void fetch_item(const std::byte* cache, const Layout& lay, const Batch& b,
                                  unsigned t, std::byte* image) {
  const std::int64_t s = b.slot_of(t);
  if (!inside(s, lay)) return;
  const std::size_t e0 = b.first(t);
  const unsigned size = chunk_size(lay, e0), lane = threadIdx.x % 32;
  auto* bytes = const_cast<std::byte*>(cache);
  fetch_bytes(image, lay.data_at(bytes, std::size_t(s), e0), lay.data_length(size), lane);
  if (lay.index)
    fetch_bytes(image + size / 2, lay.scales_at(bytes, std::size_t(s), e0), size / 32, lane);
}

// One chunk's values, two a lane at a time: a code pair's value times its group's
// scale, exact in double; a NaN element or scale refused at its output index (the
// values written anyway).
__device__ inline void decode_chunk(const std::byte* image, std::size_t j, std::size_t e0,
                                    unsigned size, const Layout& lay, const E2m1Tables& e2m1,
                                    unsigned long long* verdict, double* out) {
  const GroupFormat f = lay.group;
  const bool e4m3 = f.element == Element::E4M3;
  const bool pairs = reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  double* row = out + j * lay.dim + e0;
  for (unsigned e = 2 * (threadIdx.x % 32); e < size; e += 64) {
    const unsigned at = lay.image_data(e) + (e % unsigned(f.group)) / (e4m3 ? 1 : 2);
    const double scale = scale_of(f.scale, std::uint8_t(image[lay.image_scale(e, size)]));
    const float2 x = e4m3 ? __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(
                                __nv_fp8x2_storage_t(unsigned(image[at]) | unsigned(image[at + 1]) << 8),
                                __NV_E4M3)))
                          : e2m1.pair[unsigned(image[at])];
    const double a = double(x.x) * scale, b = double(x.y) * scale;
    if (isnan(a) || isnan(b)) atomicMin(verdict, refusal(1, j * lay.dim + e0 + e + (isnan(a) ? 0 : 1)));
    if (pairs)
      *reinterpret_cast<double2*>(row + e) = double2{a, b};
    else
      row[e] = a, row[e + 1] = b;
  }
}

// The read side: a -1 slot reads zeros; a slot outside the cache refused
// (batch_at), its row unwritten; values as decode_chunk gives them.
__global__ void __launch_bounds__(kThreads)
    gather_rows(const std::byte* cache, const std::int32_t* slots, std::size_t m,
                unsigned per_batch, Layout lay,
                unsigned long long* verdict, double* out) {
  __shared__ alignas(16) std::byte images[kWarps][2][kChunkBytes];
  __shared__ E2m1Tables e2m1;
  if (lay.group.element == Element::E2M1) fill_e2m1_tables(e2m1);
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  auto& image = images[threadIdx.x / 32];
  for (std::size_t base = first_batch(per_batch); base < m; base += batch_stride(per_batch)) {
    const Batch b = batch_at(base, per_batch, m, slots, lay, verdict);
    fetch_item(cache, lay, b, 0, image[0]);
    __pipeline_commit();
    for (unsigned t = 0; t < b.items(); ++t) {
      if (t + 1 < b.items()) fetch_item(cache, lay, b, t + 1, image[(t + 1) % 2]);
      __pipeline_commit();
      __pipeline_wait_prior(1);  // item t's fetch, not t + 1's
      __syncwarp();
      const std::int64_t s = b.slot_of(t);
      const std::size_t e0 = b.first(t);
      const unsigned size = chunk_size(lay, e0);
      if (s == -1)
        for (unsigned e = lane; e < size; e += 32) out[b.row(t) * lay.dim + e0 + e] = 0;
      else if (inside(s, lay))
        decode_chunk(image[t % 2], b.row(t), e0, size, lay, e2m1, verdict, out);
      __syncwarp();  // image[t % 2] is item t + 2's
    }
    __pipeline_wait_prior(0);
  }
}

}  // namespace aether::cuda::formats_rows
