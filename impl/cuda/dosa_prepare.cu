// CUDA DoSA's screens (impl/cuda/dosa_kernels.hpp): each query's retained rows,
// a_A and its terms, prepared on the device as dosa_screen::prepare prepares them
// on the host.
#include <cuda_bf16.h>

#include "impl/cuda/device.hpp"
#include "impl/cuda/dosa_kernels.hpp"
#include "impl/cuda/key_rows.cuh"

namespace aether::cuda::dosa {

namespace {
__device__ __forceinline__ double warp_sum(double x) {
  for (int m = 16; m >= 1; m /= 2) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}

// The tensor cores' error index (model::tensor_core_score_error_bounds).
__host__ __device__ std::size_t error_index(std::size_t heads, std::size_t dim) {
  return 48 * ((dim + 15) / 16) + heads + 2;
}

// Block t: query t's screen, as dosa_screen::prepare computes it on the host (the
// same formulas; sums in another order, each covered for any order); blocks from
// query_count on zero their rows. A warp a head or anchor at a time: a query's
// preparation is a chain of short steps, so the block is as wide as it may be.
constexpr int kPrepareThreads = 1024, kPrepareWarps = kPrepareThreads / 32;
__global__ void __launch_bounds__(kPrepareThreads)
    prepare_kernel(const std::uint16_t* queries, const float* weights, std::size_t query_count,
                   std::size_t heads, std::size_t dim, DevicePlans plans, std::uint16_t* rows,
                   ScreenTerms* terms, std::int32_t* survivors) {
  __shared__ double head_norm[kMaxHeads], share[kMaxHeads], squares[kMaxDim], moved[kMaxDim];
  __shared__ double part[kPrepareWarps][2];
  __shared__ float w[kMaxHeads], screen_weights[kMaxHeads + 16];
  __shared__ std::uint32_t kept[kMaxHeads], pooled[kMaxHeads];
  extern __shared__ __align__(16) std::uint16_t q[];  // the query, staged: later reads are shared
  const std::size_t t = blockIdx.x, width = plans.width;
  if (survivors != nullptr && t < query_count && threadIdx.x == 0) survivors[t] = 0;
  if (t >= query_count) {
    for (std::size_t x = threadIdx.x; x < width * dim; x += kPrepareThreads)
      rows[t * width * dim + x] = 0;
    return;
  }
  const std::uint32_t r0 = plans.retained_first[t], retained = plans.retained_first[t + 1] - r0;
  const std::uint32_t g0 = plans.aggregated_first[t], pool = plans.aggregated_first[t + 1] - g0;
  // 16 bytes a load where the query allows it (a load a thread, all in flight together)
  const std::uint16_t* source = queries + t * heads * dim;
  if (heads * dim % 8 == 0 && reinterpret_cast<std::uintptr_t>(source) % 16 == 0) {
#pragma unroll 4
    for (std::size_t i = threadIdx.x; i < heads * dim / 8; i += kPrepareThreads)
      reinterpret_cast<uint4*>(q)[i] = reinterpret_cast<const uint4*>(source)[i];
  } else {
#pragma unroll 4
    for (std::size_t i = threadIdx.x; i < heads * dim; i += kPrepareThreads) q[i] = source[i];
  }
  for (std::size_t h = threadIdx.x; h < heads; h += kPrepareThreads) w[h] = weights[t * heads + h];
  for (std::size_t r = threadIdx.x; r < retained; r += kPrepareThreads)
    kept[r] = plans.retained[r0 + r];
  for (std::size_t g = threadIdx.x; g < pool; g += kPrepareThreads)
    pooled[g] = plans.aggregated[g0 + g];
  for (std::size_t r = threadIdx.x; r < width; r += kPrepareThreads)
    screen_weights[r] = plans.screen_weights[t * width + r];
  __syncthreads();
  const auto value = [&](std::size_t h, std::size_t i) { return bf16_value(q[h * dim + i]); };
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (std::size_t h = warp; h < heads; h += kPrepareWarps) {
    double s = 0;
    for (std::size_t i = lane; i < dim; i += 32) s += value(h, i) * value(h, i);
    s = warp_sum(s);
    if (lane == 0) head_norm[h] = dosa_screen::norm_from_squares(s, dim);
  }
  __syncthreads();
  const std::uint32_t a0 = plans.anchor_first[t], a1 = plans.anchor_first[t + 1];
  for (std::uint32_t e = a0 + warp; e < a1; e += kPrepareWarps) {
    const AnchorEntry a = plans.anchors[e];
    double s = 0;
    for (std::size_t i = lane; i < dim; i += 32) {
      double x = a.anchor == kNoAnchor ? value(a.head, i)
                                       : value(a.head, i) - double(a.beta) * value(a.anchor, i);
      for (std::uint32_t m = 0; m < a.more_count; ++m) {
        const DosaTerm term = plans.terms[a.more_first + m];
        x -= double(term.beta) * value(term.anchor, i);
      }
      s += x * x;
    }
    s = warp_sum(s);
    if (lane == 0) {
      double spread = a.anchor == kNoAnchor ? 0 : double(a.beta) * head_norm[a.anchor];
      for (std::uint32_t m = 0; m < a.more_count; ++m) {
        const DosaTerm term = plans.terms[a.more_first + m];
        spread += double(term.beta) * head_norm[term.anchor];
      }
      share[e - a0] =
          dosa_screen::anchor_share(w[a.head], s, dim, a.more_count, head_norm[a.head], spread);
    }
  }
  std::uint16_t* screen = rows + t * width * dim;
  for (std::size_t i = threadIdx.x; i < dim && pool > 0; i += kPrepareThreads) {
    double a = 0;
    for (std::uint32_t g = 0; g < pool; ++g) a += fabs(double(w[pooled[g]])) * value(pooled[g], i);
    const __nv_bfloat16 stored = __float2bfloat16_rn(float(a));
    const double v = double(__bfloat162float(stored));
    screen[retained * dim + i] = __bfloat16_as_ushort(stored);
    squares[i] = v * v;
    moved[i] = (v - a) * (v - a);
  }
  const std::size_t own = retained + (pool > 0 ? 1 : 0);
  for (std::size_t x = threadIdx.x; x < width * dim; x += kPrepareThreads) {
    const std::size_t r = x / dim, i = x - r * dim;
    if (r < retained)
      screen[x] = q[std::size_t(kept[r]) * dim + i];
    else if (r >= own)
      screen[x] = 0;
  }
  __syncthreads();
  // The sums, a warp each (lanes strided, then the warp's fixed tree).
  const auto sum_over = [&](std::size_t n, auto term) {
    double x = 0;
    for (std::size_t i = lane; i < n; i += 32) x += term(i);
    return warp_sum(x);
  };
  double first = 0, second = 0;
  switch (warp) {
    case 0:
      first = sum_over(heads, [&](std::size_t h) { return fabs(double(w[h])) * head_norm[h]; });
      second = sum_over(heads, [&](std::size_t h) { return fabs(double(w[h])); });
      break;
    case 1:
      first = sum_over(a1 - a0, [&](std::size_t e) { return share[e]; });
      break;
    case 2:
      first = sum_over(retained, [&](std::size_t r) {
        return fabs(double(screen_weights[r])) * head_norm[kept[r]];
      });
      second = sum_over(own, [&](std::size_t r) { return fabs(double(screen_weights[r])); });
      break;
    case 3:
      first = sum_over(
          pool, [&](std::size_t g) { return fabs(double(w[pooled[g]])) * head_norm[pooled[g]]; });
      break;
    case 4:
      if (pool > 0) {
        first = sum_over(dim, [&](std::size_t i) { return squares[i]; });
        second = sum_over(dim, [&](std::size_t i) { return moved[i]; });
      }
      break;
  }
  if (lane == 0) part[warp][0] = first, part[warp][1] = second;
  __syncthreads();
  if (threadIdx.x != 0) return;
  dosa_screen::ScreenSums sums;
  sums.heads = heads;
  sums.dim = dim;
  sums.screen_heads = own;
  sums.weighted_norms = part[0][0];
  sums.total_weight = part[0][1];
  sums.c = part[1][0];
  sums.screen_magnitude = part[2][0];
  sums.screen_weight = part[2][1];
  if (pool > 0) {
    sums.screen_magnitude += dosa_screen::norm_from_squares(part[4][0], dim);
    sums.aggregate_error =
        double(pool) * 0x1p-52 * part[3][0] + dosa_screen::norm_from_squares(part[4][1], dim);
  }
  terms[t] = dosa_screen::terms_of(sums, error_index(heads, dim), error_index(own, dim));
}
}  // namespace

cudaError_t prepare_screens(const std::uint16_t* queries, const float* weights,
                            std::size_t query_count, std::size_t padded, std::size_t heads,
                            std::size_t dim, const DevicePlans& plans, std::uint16_t* rows,
                            ScreenTerms* terms, std::int32_t* survivors, cudaStream_t stream) {
  const std::size_t shared = heads * dim * 2;
  if (shared > 48 * 1024)
    if (int e = allow_dynamic_shared(reinterpret_cast<const void*>(prepare_kernel)))
      return cudaError_t(e);
  prepare_kernel<<<unsigned(padded), kPrepareThreads, shared, stream>>>(
      queries, weights, query_count, heads, dim, plans, rows, terms, survivors);
  return cudaGetLastError();
}

}  // namespace aether::cuda::dosa
