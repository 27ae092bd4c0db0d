// The kernels of CUDA DoSA (impl/cuda/dosa_kernels.hpp) up to the survivors: norms,
// the screens' preparation and the bound test. The thresholds are in
// dosa_threshold.cu, the merges in dosa_merge.cu.
#include <cuda_bf16.h>

#include <algorithm>

#include "impl/cuda/device.hpp"
#include "impl/cuda/dosa_kernels.hpp"
#include "impl/cuda/key_rows.cuh"

namespace aether::cuda::dosa {

namespace {
constexpr int kThreads = 256;

// Blocks of kThreads for n items, at most 65535: every kernel launched with it
// strides over its items by the grid.
unsigned blocks_for(std::size_t n) {
  return unsigned(std::clamp<std::size_t>((n + kThreads - 1) / kThreads, 1, 65535));
}

__device__ __forceinline__ double bf16_value(std::uint16_t bits) {
  return double(__uint_as_float(std::uint32_t(bits) << 16));
}

__device__ __forceinline__ double warp_sum(double x) {
  for (int m = 16; m >= 1; m /= 2) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}

// The tensor cores' error index (model::tensor_core_score_error_bounds).
__host__ __device__ std::size_t error_index(std::size_t heads, std::size_t dim) {
  return 48 * ((dim + 15) / 16) + heads + 2;
}

template <class T>
__global__ void fill_kernel(T* p, std::size_t n, T value) {
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * kThreads)
    p[i] = value;
}

__global__ void mark_kernel(const std::int32_t* seeds, std::size_t n, std::uint8_t* is_seed) {
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * kThreads)
    is_seed[seeds[i]] = 1;
}

// Eight lanes a key: the raw row's norm from above, times its scale, plus 2^-66 for
// squares that underflow. `chunk`: elements a lane loads at once (8 bf16 in 16
// bytes, 4 E4M3 in 4, or 1 where D or the rows' alignment do not allow it).
__global__ void norms_kernel(const std::byte* keys, KeyFormat format, std::size_t dim,
                             std::size_t row_bytes, std::size_t count, unsigned chunk,
                             double* norms, float* scales) {
  const unsigned part = threadIdx.x % 8;
  // a warp's four keys from `first`: the trip count is uniform over the warp (shuffles)
  for (std::size_t first = (blockIdx.x * std::size_t(kThreads) + threadIdx.x) / 32 * 4;
       first < count; first += std::size_t(gridDim.x) * kThreads / 8) {
    const std::size_t j = first + threadIdx.x % 32 / 8;
    const bool real = j < count;
    const std::byte* row = keys + (real ? j : 0) * row_bytes;
    double squares = 0;
    for (std::size_t d = part * chunk; real && d < dim; d += 8 * chunk) {
      if (chunk == 8) {
        const uint4 b = *reinterpret_cast<const uint4*>(row + 2 * d);
        for (const std::uint32_t word : {b.x, b.y, b.z, b.w}) {
          const double lo = bf16_value(std::uint16_t(word));
          const double hi = bf16_value(std::uint16_t(word >> 16));
          squares += lo * lo + hi * hi;
        }
      } else if (chunk == 4) {
        const std::uint32_t b = *reinterpret_cast<const std::uint32_t*>(row + d);
        for (int i = 0; i < 4; ++i) {
          const double e = double(e4m3_value(std::uint8_t(b >> (8 * i))));
          squares += e * e;
        }
      } else {
        const double e = format == KeyFormat::E4M3
                             ? double(e4m3_value(std::uint8_t(row[d])))
                             : bf16_value(reinterpret_cast<const std::uint16_t*>(row)[d]);
        squares += e * e;
      }
    }
    for (int m = 4; m >= 1; m /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, m);
    if (part == 0 && real) {
      const float scale = format == KeyFormat::E4M3 ? row_scale(row, dim) : 1.0f;
      norms[j] =
          dosa_screen::up(dosa_screen::norm_from_squares(squares, dim) * double(scale)) + 0x1p-66;
      scales[j] = scale;
    }
  }
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

// Thread (key j, queries [8 y, 8 y + 8)), striding over the keys by the grid (at most
// 65535 blocks: blocks_for): key j is listed for a query when it is not a seed and
// U >= tau_t; a warp's finds take one atomicAdd a query. The eight screen values are
// loaded before the first test: the atomics and shuffles between the tests would
// otherwise keep one load in flight a thread.
constexpr std::size_t kScreenQueries = 8;
__global__ void screen_kernel(const float* __restrict__ p, std::size_t stride, std::size_t count,
                              std::size_t query_count, const ScreenTerms* __restrict__ terms,
                              const float* __restrict__ tau, const double* __restrict__ norms,
                              const float* __restrict__ scales,
                              const std::uint8_t* __restrict__ is_seed, std::int32_t* list,
                              std::int32_t* counts) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t t0 = blockIdx.y * kScreenQueries;
  for (std::size_t first = blockIdx.x * std::size_t(kThreads); first < count;
       first += std::size_t(gridDim.x) * kThreads) {  // uniform over the block: the ballots
    const std::size_t j = first + threadIdx.x;
    float values[kScreenQueries];  // loaded before the first test (see above)
#pragma unroll
    for (std::size_t i = 0; i < kScreenQueries; ++i)
      values[i] = j < count && t0 + i < query_count ? __ldcs(p + (t0 + i) * stride + j) : 0.0f;
    const bool live = j < count && !is_seed[j];
    const double norm = live ? norms[j] : 0, scale = live ? double(scales[j]) : 1;
#pragma unroll
    for (std::size_t i = 0; i < kScreenQueries; ++i) {
      const std::size_t t = t0 + i;
      if (t >= query_count) break;
      const bool survives =
          live && dosa_screen::bound_of(terms[t], values[i], norm, scale) >= double(tau[t]);
      const unsigned mask = __ballot_sync(0xffffffffu, survives);
      int base = 0;
      if (lane == 0 && mask != 0) base = atomicAdd(counts + t, __popc(mask));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (survives)
        list[t * stride + std::size_t(base) + __popc(mask & ((1u << lane) - 1))] = std::int32_t(j);
    }
  }
}

__global__ void bounds_kernel(const float* p, std::size_t count, const ScreenTerms* terms,
                              const double* norms, const float* scales, double* out) {
  for (std::size_t j = blockIdx.x * std::size_t(kThreads) + threadIdx.x; j < count;
       j += std::size_t(gridDim.x) * kThreads)
    out[j] = dosa_screen::bound_of(*terms, p[j], norms[j], double(scales[j]));
}

}  // namespace

cudaError_t fill(std::int32_t* p, std::size_t n, std::int32_t value, cudaStream_t stream) {
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, n, value);
  return cudaGetLastError();
}
cudaError_t fill(float* p, std::size_t n, float value, cudaStream_t stream) {
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, n, value);
  return cudaGetLastError();
}
cudaError_t mark_seeds(const std::int32_t* seeds, std::size_t n, std::uint8_t* is_seed,
                       cudaStream_t stream) {
  mark_kernel<<<blocks_for(n), kThreads, 0, stream>>>(seeds, n, is_seed);
  return cudaGetLastError();
}
cudaError_t key_norms(const std::byte* keys, KeyFormat format, std::size_t dim, std::size_t count,
                      double* norms, float* scales, cudaStream_t stream) {
  const auto aligned = [&](std::uintptr_t n) {
    return reinterpret_cast<std::uintptr_t>(keys) % n == 0;
  };
  const unsigned chunk = format == KeyFormat::BF16 ? (dim % 8 == 0 && aligned(16) ? 8 : 1)
                                                   : (dim % 4 == 0 && aligned(4) ? 4 : 1);
  norms_kernel<<<blocks_for(count * 8), kThreads, 0, stream>>>(
      keys, format, dim, key_row_bytes(format, dim), count, chunk, norms, scales);
  return cudaGetLastError();
}
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
cudaError_t screen_keys(const float* p, std::size_t stride, std::size_t count,
                        std::size_t query_count, const ScreenTerms* terms, const float* tau,
                        const double* norms, const float* scales, const std::uint8_t* is_seed,
                        std::int32_t* list, std::int32_t* counts, cudaStream_t stream) {
  const dim3 grid(blocks_for(count), unsigned((query_count + kScreenQueries - 1) / kScreenQueries));
  screen_kernel<<<grid, kThreads, 0, stream>>>(p, stride, count, query_count, terms, tau, norms,
                                               scales, is_seed, list, counts);
  return cudaGetLastError();
}
cudaError_t key_bounds(const float* p, std::size_t count, const ScreenTerms* terms,
                       const double* norms, const float* scales, double* out, cudaStream_t stream) {
  bounds_kernel<<<blocks_for(count), kThreads, 0, stream>>>(p, count, terms, norms, scales, out);
  return cudaGetLastError();
}
}  // namespace aether::cuda::dosa
