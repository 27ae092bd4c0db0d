// The kernels of CUDA DoSA (impl/cuda/dosa_kernels.hpp) up to the survivors: fills,
// seed marks, norms and the bound test. The screens' preparation is in
// dosa_prepare.cu, the thresholds in dosa_threshold.cu, the merges in dosa_merge.cu.

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
