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

// Four values a 16-byte store where p is aligned to 16 (the wide merge fills every
// key's slot of every query: 32 MB at T 64, L 131072), the rest one at a time.
template <class T>
__global__ void fill_kernel(T* p, std::size_t n, T value) {
  static_assert(sizeof(T) == 4);
  const std::size_t first = blockIdx.x * std::size_t(kThreads) + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * kThreads;
  std::size_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(p) % 16 == 0) {
    unsigned bits;
    memcpy(&bits, &value, sizeof bits);
    for (std::size_t i = first; i < n / 4; i += stride)
      reinterpret_cast<uint4*>(p)[i] = make_uint4(bits, bits, bits, bits);
    done = n / 4 * 4;
  }
  for (std::size_t i = done + first; i < n; i += stride) p[i] = value;
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

// Thread (keys first + k kThreads + threadIdx.x for k < Keys, queries [8 y, 8 y + 8)),
// striding over the keys by the grid (at most 65535 blocks: blocks_for): a key is
// listed for a query when it is not a seed and U >= tau_t. A block's finds take one
// atomicAdd a query (its kThreads Keys keys counted by warp scans, then across its
// warps): the queries' counters are the only words every block writes, and one
// atomicAdd a warp and 32 keys held each block's warps behind them (the test at 2.7%
// survivors, L 131072, took 119 us that way against 30 with four keys a thread so).
// A key's eight screen values are loaded before its first test. A list's order is
// the blocks' arrival order; nothing after the lists depends on it.
constexpr std::size_t kScreenQueries = 8;
// the bits of query 0's finds, one a key
template <std::size_t Keys>
__host__ __device__ constexpr unsigned query_bits() {
  static_assert(kScreenQueries * Keys <= 32, "a thread's finds are one word");
  unsigned bits = 0;
  for (std::size_t k = 0; k < Keys; ++k) bits |= 1u << (kScreenQueries * k);
  return bits;
}
template <std::size_t Keys>
__global__ void screen_kernel(const float* __restrict__ p, std::size_t stride, std::size_t count,
                              std::size_t query_count, const ScreenTerms* __restrict__ terms,
                              const float* __restrict__ tau, const double* __restrict__ norms,
                              const float* __restrict__ scales,
                              const std::uint8_t* __restrict__ is_seed, std::int32_t* list,
                              std::int32_t* counts) {
  constexpr int kWarps = kThreads / 32;
  __shared__ int warp_base[kScreenQueries][kWarps];  // a warp's finds, then their offset
  __shared__ int block_base[kScreenQueries];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const std::size_t t0 = blockIdx.y * kScreenQueries, span = std::size_t(kThreads) * Keys;
  for (std::size_t first = blockIdx.x * span; first < count; first += gridDim.x * span) {
    unsigned found = 0;  // bit kScreenQueries k + i: key k for query t0 + i
#pragma unroll
    for (std::size_t k = 0; k < Keys; ++k) {
      const std::size_t j = first + k * kThreads + threadIdx.x;
      float values[kScreenQueries];
#pragma unroll
      for (std::size_t i = 0; i < kScreenQueries; ++i)
        values[i] = j < count && t0 + i < query_count ? __ldcs(p + (t0 + i) * stride + j) : 0.0f;
      const bool live = j < count && !is_seed[j];
      const double norm = live ? norms[j] : 0, scale = live ? double(scales[j]) : 1;
#pragma unroll
      for (std::size_t i = 0; i < kScreenQueries; ++i)
        if (live && t0 + i < query_count &&
            dosa_screen::bound_of(terms[t0 + i], values[i], norm, scale) >= double(tau[t0 + i]))
          found |= 1u << (kScreenQueries * k + i);
    }
    // a query's finds before this thread's in its warp, and the warp's total
    int mine[kScreenQueries], before[kScreenQueries];
#pragma unroll
    for (std::size_t i = 0; i < kScreenQueries; ++i) {
      mine[i] = __popc(found & (query_bits<Keys>() << i));
      int sum = mine[i];
      if (__any_sync(0xffffffffu, sum != 0))
        for (unsigned d = 1; d < 32; d *= 2) {
          const int up = __shfl_up_sync(0xffffffffu, sum, d);
          if (lane >= d) sum += up;
        }
      before[i] = sum - mine[i];
      if (lane == 31) warp_base[i][warp] = sum;
    }
    if (!__syncthreads_or(found != 0)) continue;
    if (threadIdx.x < kScreenQueries && t0 + threadIdx.x < query_count) {
      int total = 0;
      for (int w = 0; w < kWarps; ++w) {
        const int n = warp_base[threadIdx.x][w];
        warp_base[threadIdx.x][w] = total;
        total += n;
      }
      block_base[threadIdx.x] = total != 0 ? atomicAdd(counts + t0 + threadIdx.x, total) : 0;
    }
    __syncthreads();
#pragma unroll
    for (std::size_t i = 0; i < kScreenQueries; ++i) {
      if (mine[i] == 0) continue;
      std::int32_t* to = list + (t0 + i) * stride + block_base[i] + warp_base[i][warp] + before[i];
#pragma unroll
      for (std::size_t k = 0; k < Keys; ++k)
        if (found >> (kScreenQueries * k + i) & 1u)
          *to++ = std::int32_t(first + k * kThreads + threadIdx.x);
    }
    __syncthreads();  // warp_base and block_base are the next round's
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
  fill_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, stream>>>(p, n, value);
  return cudaGetLastError();
}
cudaError_t fill(float* p, std::size_t n, float value, cudaStream_t stream) {
  fill_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, stream>>>(p, n, value);
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
  // four keys a thread where that grid still fills every block the device holds at
  // once (the batch's test), else one (the probe's 16384 keys: 16 blocks of four
  // took 8.9 us, 64 blocks of one 4.8)
  const auto groups = unsigned((query_count + kScreenQueries - 1) / kScreenQueries);
  const bool four = std::size_t(blocks_for((count + 3) / 4)) * groups >=
                    resident_blocks(reinterpret_cast<const void*>(screen_kernel<4>), kThreads);
  const dim3 grid(blocks_for(four ? (count + 3) / 4 : count), groups);
  if (four)
    screen_kernel<4><<<grid, kThreads, 0, stream>>>(p, stride, count, query_count, terms, tau,
                                                    norms, scales, is_seed, list, counts);
  else
    screen_kernel<1><<<grid, kThreads, 0, stream>>>(p, stride, count, query_count, terms, tau,
                                                    norms, scales, is_seed, list, counts);
  return cudaGetLastError();
}
cudaError_t key_bounds(const float* p, std::size_t count, const ScreenTerms* terms,
                       const double* norms, const float* scales, double* out, cudaStream_t stream) {
  bounds_kernel<<<blocks_for(count), kThreads, 0, stream>>>(p, count, terms, norms, scales, out);
  return cudaGetLastError();
}
}  // namespace aether::cuda::dosa
