// The thresholds of CUDA DoSA (impl/cuda/dosa_kernels.hpp): each query's tau, the
// K-th greatest of its seed scores, and its seeds' top-K found with it.
#include "impl/cuda/dosa_kernels.hpp"
#include "impl/cuda/gate.cuh"
#include "impl/cuda/radix_select.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::dosa {

namespace {
constexpr int kSelectThreads = 1024;

// Block t: tau_t, the k-th greatest of scores[t n, t n + n) (1 <= k <= n, every score
// finite), by a radix select over the scores' order keys (topk::order_key: -0 ties
// with +0), a byte a round from the top; then, when lanes are asked for, the seeds'
// top-K as positions in the seed list: every key above tau's, and of those equal to
// it the first in list order (the seeds ascend, so the lower ids), as the top-k's
// tie order takes them. Positions [0, above) are in no order, the ties after them in
// list order. Nothing while the gate is shut.
__global__ void __launch_bounds__(kSelectThreads)
    select_kernel(const float* scores, std::size_t n, std::size_t k, float* tau,
                  std::int32_t* lanes, Gate gate) {
  if (!gate_open(gate)) return;
  __shared__ unsigned placed, before;  // keys above tau's placed; ties in earlier rounds
  __shared__ unsigned in_warp[kSelectThreads / 32];
  const std::size_t t = blockIdx.x;
  scores += t * n;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (threadIdx.x == 0) placed = 0, before = 0;
  unsigned taken = 0;
  const unsigned key_tau = kth_greatest_key<unsigned>(
      [&](auto f) {
        for (std::size_t i = threadIdx.x; i < n; i += kSelectThreads) f(topk::order_key(scores[i]));
      },
      unsigned(k), 32, taken);
  if (threadIdx.x == 0)
    tau[t] = __uint_as_float(key_tau & 0x80000000u ? key_tau & 0x7fffffffu : ~key_tau);
  if (lanes == nullptr) return;
  lanes += t * k;
  const unsigned above = unsigned(k) - taken;
  for (std::size_t base = 0; base < n; base += kSelectThreads) {
    const std::size_t i = base + threadIdx.x;
    const unsigned key = i < n ? topk::order_key(scores[i]) : 0;
    if (i < n && key > key_tau) lanes[atomicAdd(&placed, 1u)] = std::int32_t(i);
    const bool tie = i < n && key == key_tau;
    const unsigned ballot = __ballot_sync(0xffffffffu, tie);
    if (lane == 0) in_warp[warp] = __popc(ballot);
    __syncthreads();
    if (warp == 0) {  // exclusive prefix of the warps' ties
      const unsigned mine = lane < kSelectThreads / 32 ? in_warp[lane] : 0;
      unsigned sum = mine;
      for (unsigned m = 1; m < 32; m *= 2) {
        const unsigned x = __shfl_up_sync(0xffffffffu, sum, m);
        if (lane >= m) sum += x;
      }
      if (lane < kSelectThreads / 32) in_warp[lane] = sum - mine;
    }
    __syncthreads();
    const unsigned order = before + in_warp[warp] + __popc(ballot & ((1u << lane) - 1));
    if (tie && order < taken) lanes[above + order] = std::int32_t(i);
    __syncthreads();
    if (threadIdx.x == kSelectThreads - 1) before = order + tie;
    __syncthreads();
  }
}

}  // namespace

cudaError_t select_seeds(const float* seed_scores, std::size_t seed_count, std::size_t k,
                         std::size_t query_count, float* tau, std::int32_t* lanes,
                         cudaStream_t stream, Gate gate) {
  select_kernel<<<unsigned(query_count), kSelectThreads, 0, stream>>>(seed_scores, seed_count, k,
                                                                      tau, lanes, gate);
  return cudaGetLastError();
}
}  // namespace aether::cuda::dosa
