// The kernels of CUDA DoSA (impl/cuda/dosa_kernels.hpp): norms, the screens'
// preparation, the bound test, and the two merges.
#include <cuda_bf16.h>

#include <algorithm>
#include <cub/block/block_radix_sort.cuh>

#include "impl/cuda/dosa_kernels.hpp"
#include "impl/cuda/key_rows.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::dosa {

namespace {
constexpr int kThreads = 256, kWarps = kThreads / 32;

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

// A warp a key: the raw row's norm from above, times its scale, plus 2^-66 for
// squares that underflow.
__global__ void norms_kernel(const std::byte* keys, KeyFormat format, std::size_t dim,
                             std::size_t row_bytes, std::size_t count, double* norms,
                             float* scales) {
  const unsigned lane = threadIdx.x % 32;
  for (std::size_t j = (blockIdx.x * std::size_t(kThreads) + threadIdx.x) / 32; j < count;
       j += std::size_t(gridDim.x) * kWarps) {
    const std::byte* row = keys + j * row_bytes;
    double squares = 0;
    for (std::size_t d = lane; d < dim; d += 32) {
      const double e = format == KeyFormat::E4M3
                           ? double(e4m3_value(std::uint8_t(row[d])))
                           : bf16_value(reinterpret_cast<const std::uint16_t*>(row)[d]);
      squares += e * e;
    }
    squares = warp_sum(squares);
    if (lane == 0) {
      const float scale = format == KeyFormat::E4M3 ? row_scale(row, dim) : 1.0f;
      norms[j] =
          dosa_screen::up(dosa_screen::norm_from_squares(squares, dim) * double(scale)) + 0x1p-66;
      scales[j] = scale;
    }
  }
}

// Block t: query t's screen, as dosa_screen::prepare computes it on the host (the
// same formulas; sums in another order, each covered for any order).
__global__ void prepare_kernel(const std::uint16_t* queries, const float* weights,
                               std::size_t heads, std::size_t dim, DevicePlans plans,
                               std::uint16_t* rows, ScreenTerms* terms) {
  __shared__ double head_norm[kMaxHeads], share[kMaxHeads], squares[kMaxDim], moved[kMaxDim];
  const std::size_t t = blockIdx.x, width = plans.width;
  const std::uint16_t* q = queries + t * heads * dim;
  const float* w = weights + t * heads;
  const auto value = [&](std::size_t h, std::size_t i) { return bf16_value(q[h * dim + i]); };
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (std::size_t h = warp; h < heads; h += kWarps) {
    double s = 0;
    for (std::size_t i = lane; i < dim; i += 32) s += value(h, i) * value(h, i);
    s = warp_sum(s);
    if (lane == 0) head_norm[h] = dosa_screen::norm_from_squares(s, dim);
  }
  __syncthreads();
  const std::uint32_t a0 = plans.anchor_first[t], a1 = plans.anchor_first[t + 1];
  for (std::uint32_t e = a0 + warp; e < a1; e += kWarps) {
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
  const std::uint32_t r0 = plans.retained_first[t], retained = plans.retained_first[t + 1] - r0;
  const std::uint32_t g0 = plans.aggregated_first[t], g1 = plans.aggregated_first[t + 1];
  std::uint16_t* screen = rows + t * width * dim;
  for (std::size_t i = threadIdx.x; i < dim && g1 > g0; i += kThreads) {
    double a = 0;
    for (std::uint32_t g = g0; g < g1; ++g)
      a += fabs(double(w[plans.aggregated[g]])) * value(plans.aggregated[g], i);
    const __nv_bfloat16 stored = __float2bfloat16_rn(float(a));
    const double v = double(__bfloat162float(stored));
    screen[retained * dim + i] = __bfloat16_as_ushort(stored);
    squares[i] = v * v;
    moved[i] = (v - a) * (v - a);
  }
  const std::size_t own = retained + (g1 > g0 ? 1 : 0);
  for (std::size_t x = threadIdx.x; x < width * dim; x += kThreads) {
    const std::size_t r = x / dim, i = x - r * dim;
    if (r < retained)
      screen[x] = q[std::size_t(plans.retained[r0 + r]) * dim + i];
    else if (r >= own)
      screen[x] = 0;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  dosa_screen::ScreenSums sums;
  sums.heads = heads;
  sums.dim = dim;
  sums.screen_heads = own;
  for (std::size_t h = 0; h < heads; ++h) {
    sums.weighted_norms += fabs(double(w[h])) * head_norm[h];
    sums.total_weight += fabs(double(w[h]));
  }
  for (std::uint32_t e = 0; e < a1 - a0; ++e) sums.c += share[e];
  const float* screen_weights = plans.screen_weights + t * width;
  for (std::uint32_t r = 0; r < retained; ++r)
    sums.screen_magnitude += fabs(double(screen_weights[r])) * head_norm[plans.retained[r0 + r]];
  if (g1 > g0) {
    double spread = 0, s = 0, m = 0;
    for (std::uint32_t g = g0; g < g1; ++g)
      spread += fabs(double(w[plans.aggregated[g]])) * head_norm[plans.aggregated[g]];
    for (std::size_t i = 0; i < dim; ++i) s += squares[i], m += moved[i];
    sums.screen_magnitude += dosa_screen::norm_from_squares(s, dim);
    sums.aggregate_error =
        double(g1 - g0) * 0x1p-52 * spread + dosa_screen::norm_from_squares(m, dim);
  }
  for (std::size_t r = 0; r < own; ++r) sums.screen_weight += fabs(double(screen_weights[r]));
  terms[t] = dosa_screen::terms_of(sums, error_index(heads, dim), error_index(own, dim));
}

// tau_t: block t's least seed top-K score.
__global__ void threshold_kernel(const float* seed_scores, std::size_t seed_count,
                                 const std::int32_t* lanes, std::size_t k, float* tau) {
  __shared__ float least[kThreads];
  const std::size_t t = blockIdx.x;
  float m = 3.40282347e38f;
  for (std::size_t i = threadIdx.x; i < k; i += kThreads)
    m = fminf(m, seed_scores[t * seed_count + std::size_t(lanes[t * k + i])]);
  least[threadIdx.x] = m;
  __syncthreads();
  for (unsigned half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      least[threadIdx.x] = fminf(least[threadIdx.x], least[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) tau[t] = least[0];
}

// Thread (key j, query t = block y): listed when not a seed and U >= tau_t; a
// warp's finds take one atomicAdd.
__global__ void screen_kernel(const float* p, std::size_t stride, std::size_t count,
                              const ScreenTerms* terms, const float* tau, const double* norms,
                              const float* scales, const std::uint8_t* is_seed, std::int32_t* list,
                              std::int32_t* counts) {
  const std::size_t t = blockIdx.y, j = blockIdx.x * std::size_t(kThreads) + threadIdx.x;
  const bool survives = j < count && !is_seed[j] &&
                        dosa_screen::bound_of(terms[t], p[t * stride + j], norms[j],
                                              double(scales[j])) >= double(tau[t]);
  const unsigned mask = __ballot_sync(0xffffffffu, survives), lane = threadIdx.x % 32;
  int base = 0;
  if (lane == 0 && mask != 0) base = atomicAdd(counts + t, __popc(mask));
  base = __shfl_sync(0xffffffffu, base, 0);
  if (survives)
    list[t * stride + std::size_t(base) + __popc(mask & ((1u << lane) - 1))] = std::int32_t(j);
}

__global__ void bounds_kernel(const float* p, std::size_t count, ScreenTerms terms,
                              const double* norms, const float* scales, double* out) {
  for (std::size_t j = blockIdx.x * std::size_t(kThreads) + threadIdx.x; j < count;
       j += std::size_t(gridDim.x) * kThreads)
    out[j] = dosa_screen::bound_of(terms, p[j], norms[j], double(scales[j]));
}

// Candidate i of query t (i < K: seed lane i; then survivor i - K), or nothing.
__device__ __forceinline__ bool candidate(const Candidates& c, std::size_t t, std::size_t i,
                                          float& score, std::int32_t& id) {
  if (i < c.k) {
    const std::size_t lane = std::size_t(c.lanes[t * c.k + i]);
    score = c.seed_scores[t * c.seed_count + lane];
    id = c.seed_ids[lane];
    return true;
  }
  i -= c.k;
  if (i >= std::size_t(c.counts[t])) return false;
  score = c.list_scores[t * c.score_stride + i];
  id = c.list[t * c.list_stride + i];
  return score >= c.tau[t];
}

constexpr int kMergeItems = int(kMergeCapacity / kThreads);
using RankSort = cub::BlockRadixSort<unsigned long long, kThreads, kMergeItems>;
using IdSort = cub::BlockRadixSort<std::uint32_t, kThreads, kMergeItems>;

// Block t: the candidates as (order key, ~id) sorted descending, the first K ids
// sorted ascending. No candidate has key 0, the key of an empty place.
__global__ void merge_kernel(Candidates c, std::int32_t* out) {
  __shared__ union {
    RankSort::TempStorage rank;
    IdSort::TempStorage ids;
  } storage;
  const std::size_t t = blockIdx.x;
  unsigned long long keys[kMergeItems];
  for (int i = 0; i < kMergeItems; ++i) {
    float score;
    std::int32_t id;
    keys[i] = candidate(c, t, std::size_t(threadIdx.x) * kMergeItems + i, score, id)
                  ? (static_cast<unsigned long long>(topk::order_key(score)) << 32) |
                        (0xffffffffu - std::uint32_t(id))
                  : 0;
  }
  RankSort(storage.rank).SortDescending(keys);
  __syncthreads();
  std::uint32_t ids[kMergeItems];
  for (int i = 0; i < kMergeItems; ++i)
    ids[i] = std::size_t(threadIdx.x) * kMergeItems + i < c.k
                 ? 0xffffffffu - std::uint32_t(keys[i] & 0xffffffffu)
                 : 0xffffffffu;
  IdSort(storage.ids).Sort(ids);
  for (int i = 0; i < kMergeItems; ++i)
    if (const std::size_t rank = std::size_t(threadIdx.x) * kMergeItems + i; rank < c.k)
      out[t * c.k + rank] = std::int32_t(ids[i]);
}

__global__ void place_kernel(Candidates c, float* rows, std::size_t stride) {
  const std::size_t t = blockIdx.y, i = blockIdx.x * std::size_t(kThreads) + threadIdx.x;
  float score;
  std::int32_t id;
  if (candidate(c, t, i, score, id)) rows[t * stride + std::size_t(id)] = score;
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
  norms_kernel<<<blocks_for(count * 32), kThreads, 0, stream>>>(
      keys, format, dim, key_row_bytes(format, dim), count, norms, scales);
  return cudaGetLastError();
}
cudaError_t prepare_screens(const std::uint16_t* queries, const float* weights,
                            std::size_t query_count, std::size_t heads, std::size_t dim,
                            const DevicePlans& plans, std::uint16_t* rows, ScreenTerms* terms,
                            cudaStream_t stream) {
  prepare_kernel<<<unsigned(query_count), kThreads, 0, stream>>>(queries, weights, heads, dim,
                                                                 plans, rows, terms);
  return cudaGetLastError();
}
cudaError_t seed_threshold(const float* seed_scores, std::size_t seed_count,
                           const std::int32_t* lanes, std::size_t k, std::size_t query_count,
                           float* tau, cudaStream_t stream) {
  threshold_kernel<<<unsigned(query_count), kThreads, 0, stream>>>(seed_scores, seed_count, lanes,
                                                                   k, tau);
  return cudaGetLastError();
}
cudaError_t screen_keys(const float* p, std::size_t stride, std::size_t count,
                        std::size_t query_count, const ScreenTerms* terms, const float* tau,
                        const double* norms, const float* scales, const std::uint8_t* is_seed,
                        std::int32_t* list, std::int32_t* counts, cudaStream_t stream) {
  screen_kernel<<<dim3(blocks_for(count), unsigned(query_count)), kThreads, 0, stream>>>(
      p, stride, count, terms, tau, norms, scales, is_seed, list, counts);
  return cudaGetLastError();
}
cudaError_t key_bounds(const float* p, std::size_t count, ScreenTerms terms, const double* norms,
                       const float* scales, double* out, cudaStream_t stream) {
  bounds_kernel<<<blocks_for(count), kThreads, 0, stream>>>(p, count, terms, norms, scales, out);
  return cudaGetLastError();
}
cudaError_t merge_candidates(const Candidates& c, std::size_t query_count, std::int32_t* out,
                             cudaStream_t stream) {
  merge_kernel<<<unsigned(query_count), kThreads, 0, stream>>>(c, out);
  return cudaGetLastError();
}
cudaError_t place(const Candidates& c, std::size_t query_count, std::size_t longest, float* rows,
                  std::size_t stride, cudaStream_t stream) {
  place_kernel<<<dim3(blocks_for(c.k + longest), unsigned(query_count)), kThreads, 0, stream>>>(
      c, rows, stride);
  return cudaGetLastError();
}

}  // namespace aether::cuda::dosa
