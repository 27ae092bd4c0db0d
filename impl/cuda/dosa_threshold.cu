// The thresholds of CUDA DoSA (impl/cuda/dosa_kernels.hpp): each query's tau from
// its seeds' top-K, or one query's from its seed scores alone (the probe's).
#include "impl/cuda/dosa_kernels.hpp"

namespace aether::cuda::dosa {

namespace {
constexpr int kThreads = 256;

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

// tau of one query from its n seed scores alone: the k-th greatest (1 <= k <= n,
// every score finite), by a radix select over the scores' order-preserving bits, a
// byte a round from the top. The k-th greatest is the least of any top k, so this
// is the value seed_threshold finds from the seeds' top-k.
constexpr int kSelectThreads = 1024;
__global__ void __launch_bounds__(kSelectThreads)
    kth_greatest_kernel(const float* scores, std::size_t n, std::size_t k, float* tau) {
  __shared__ unsigned count[256];
  __shared__ unsigned prefix;  // the k-th greatest key's bytes so far
  const auto key_of = [](float x) {
    const unsigned u = __float_as_uint(x);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
  };
  const unsigned lane = threadIdx.x % 32;
  unsigned rank = unsigned(k);  // (warp 0) its rank among the keys that share `prefix`
  if (threadIdx.x == 0) prefix = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (unsigned d = threadIdx.x; d < 256; d += kSelectThreads) count[d] = 0;
    __syncthreads();
    const unsigned high = shift == 24 ? 0u : ~0u << (shift + 8), want = prefix;
    for (std::size_t i = threadIdx.x; i < n; i += kSelectThreads) {
      const unsigned key = key_of(scores[i]);
      if ((key & high) == want) atomicAdd(&count[key >> shift & 255], 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // lane l: bytes 255 - 8 l down to 248 - 8 l
      unsigned mine = 0;
      for (unsigned d = 0; d < 8; ++d) mine += count[255 - 8 * lane - d];
      unsigned above = mine;  // keys with a byte above this lane's last: lanes 0 .. l
      for (unsigned m = 1; m < 32; m *= 2) {
        const unsigned x = __shfl_up_sync(0xffffffffu, above, m);
        if (lane >= m) above += x;
      }
      const unsigned first = __ffs(__ballot_sync(0xffffffffu, above >= rank)) - 1;
      unsigned byte = 0, left = 0;
      if (lane == first) {
        unsigned seen = above - mine;
        for (byte = 255 - 8 * lane; seen + count[byte] < rank; --byte) seen += count[byte];
        left = rank - seen;
      }
      byte = __shfl_sync(0xffffffffu, byte, int(first));
      rank = __shfl_sync(0xffffffffu, left, int(first));
      if (lane == 0) prefix = want | byte << shift;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *tau = __uint_as_float(prefix & 0x80000000u ? prefix & 0x7fffffffu : ~prefix);
}

}  // namespace

cudaError_t seed_threshold(const float* seed_scores, std::size_t seed_count,
                           const std::int32_t* lanes, std::size_t k, std::size_t query_count,
                           float* tau, cudaStream_t stream) {
  threshold_kernel<<<unsigned(query_count), kThreads, 0, stream>>>(seed_scores, seed_count, lanes,
                                                                   k, tau);
  return cudaGetLastError();
}
cudaError_t kth_greatest(const float* scores, std::size_t n, std::size_t k, float* tau,
                         cudaStream_t stream) {
  kth_greatest_kernel<<<1, kSelectThreads, 0, stream>>>(scores, n, k, tau);
  return cudaGetLastError();
}
}  // namespace aether::cuda::dosa
