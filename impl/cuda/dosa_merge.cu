// The merges of CUDA DoSA (impl/cuda/dosa_kernels.hpp): each query's candidates
// (its seeds' top-K and its survivors at or above tau) selected in one block, or
// placed among kFiller for the top-k when they are too many.
#include <cub/block/block_radix_sort.cuh>

#include "impl/cuda/dosa_kernels.hpp"
#include "impl/cuda/radix_select.cuh"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda::dosa {

namespace {
constexpr int kThreads = 512;  // 8 candidates a thread: short radix passes

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
using IdSort = cub::BlockRadixSort<std::uint32_t, kThreads, kMergeItems>;

// Block t: each candidate as an order key (score's order key, then mask - id, over
// 32 + id_bits bits; mask = 2^id_bits - 1 is no id), the K-th greatest of them
// selected, and the K candidates at or above it (keys are distinct) sorted by id.
// No candidate has key 0, the key of an empty place.
__global__ void merge_kernel(Candidates c, std::int32_t* out) {
  __shared__ IdSort::TempStorage storage;
  const std::size_t t = blockIdx.x;
  const std::uint32_t mask = (1u << c.id_bits) - 1;
  unsigned long long keys[kMergeItems];
  for (int i = 0; i < kMergeItems; ++i) {
    float score;
    std::int32_t id;
    keys[i] = candidate(c, t, std::size_t(threadIdx.x) * kMergeItems + i, score, id)
                  ? (static_cast<unsigned long long>(topk::order_key(score)) << c.id_bits) |
                        (mask - std::uint32_t(id))
                  : 0;
  }
  unsigned ties = 0;  // one: keys are distinct
  const unsigned long long kth = kth_greatest_key<unsigned long long>(
      [&](auto f) {
        for (int i = 0; i < kMergeItems; ++i) f(keys[i]);
      },
      unsigned(c.k), 32 + int(c.id_bits), ties);
  std::uint32_t ids[kMergeItems];
  for (int i = 0; i < kMergeItems; ++i)
    ids[i] = keys[i] >= kth ? mask - std::uint32_t(keys[i] & mask) : mask;
  IdSort(storage).Sort(ids, 0, int(c.id_bits));
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

cudaError_t merge_candidates(const Candidates& c, std::size_t query_count, std::int32_t* out,
                             cudaStream_t stream) {
  merge_kernel<<<unsigned(query_count), kThreads, 0, stream>>>(c, out);
  return cudaGetLastError();
}
cudaError_t place(const Candidates& c, std::size_t query_count, std::size_t longest, float* rows,
                  std::size_t stride, cudaStream_t stream) {
  const auto blocks = unsigned((c.k + longest + kThreads - 1) / kThreads);
  place_kernel<<<dim3(blocks, unsigned(query_count)), kThreads, 0, stream>>>(c, rows, stride);
  return cudaGetLastError();
}

}  // namespace aether::cuda::dosa
