// The merges of CUDA DoSA (impl/cuda/dosa_kernels.hpp): each query's candidates
// (its seeds' top-K and its survivors at or above tau) selected in one block, or
// placed among kFiller for the top-k when they are too many; decode's listed keys
// ranked the same way.
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

// This block's keys (a candidate's order key, then mask - id over 32 + id_bits
// bits, mask = 2^id_bits - 1 being no id; 0 for no candidate), `candidates` of them
// not 0 (or at least K of them): the best min(K, candidates) by the K-th greatest
// key (keys are distinct), sorted by id into out [K], -1 after them.
__device__ void rank_keys(unsigned long long (&keys)[kMergeItems], std::size_t candidates,
                          std::size_t k, std::uint32_t id_bits, std::int32_t* out) {
  __shared__ IdSort::TempStorage storage;
  const std::uint32_t mask = (1u << id_bits) - 1;
  unsigned long long least = 1;  // every candidate, when there are at most K
  if (candidates > k) {
    unsigned ties = 0;  // one: keys are distinct
    least = kth_greatest_key<unsigned long long>(
        [&](auto f) {
          for (int i = 0; i < kMergeItems; ++i) f(keys[i]);
        },
        unsigned(k), 32 + int(id_bits), ties);
  }
  std::uint32_t ids[kMergeItems];
  for (int i = 0; i < kMergeItems; ++i)
    ids[i] = keys[i] >= least ? mask - std::uint32_t(keys[i] & mask) : mask;
  IdSort(storage).Sort(ids, 0, int(id_bits));
  const std::size_t n = candidates < k ? candidates : k;
  for (int i = 0; i < kMergeItems; ++i)
    if (const std::size_t rank = std::size_t(threadIdx.x) * kMergeItems + i; rank < k)
      out[rank] = rank < n ? std::int32_t(ids[i]) : -1;
}

__device__ unsigned long long key_of(float score, std::int32_t id, std::uint32_t id_bits) {
  return static_cast<unsigned long long>(topk::order_key(score)) << id_bits |
         ((1u << id_bits) - 1 - std::uint32_t(id));
}

// Block t: query t's candidates (at least K), ranked.
__global__ void merge_kernel(Candidates c, std::int32_t* out) {
  const std::size_t t = blockIdx.x;
  unsigned long long keys[kMergeItems];
  for (int i = 0; i < kMergeItems; ++i) {
    float score;
    std::int32_t id;
    keys[i] = candidate(c, t, std::size_t(threadIdx.x) * kMergeItems + i, score, id)
                  ? key_of(score, id, c.id_bits)
                  : 0;
  }
  rank_keys(keys, c.k + std::size_t(c.counts[t]), c.k, c.id_bits, out + t * c.k);
}

// One block: the listed keys (list [*listed], scored by scores), ranked; nothing
// on a refusal or when more are listed than the block holds. Their number goes to
// the verdict's detail[1].
__global__ void rank_listed_kernel(const float* scores, const std::int32_t* list,
                                   const std::int32_t* listed, std::size_t k, std::uint32_t id_bits,
                                   DeviceVerdict* verdict, std::int32_t* out) {
  const std::size_t n = std::size_t(*listed);
  if (threadIdx.x == 0) verdict->detail[1] = *listed;
  if (verdict->refusal != kNoRefusal || n > kMergeCapacity) return;
  unsigned long long keys[kMergeItems];
  for (int i = 0; i < kMergeItems; ++i) {
    const std::size_t at = std::size_t(threadIdx.x) * kMergeItems + i;
    keys[i] = at < n ? key_of(scores[list[at]], list[at], id_bits) : 0;
  }
  rank_keys(keys, n, k, id_bits, out);
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
cudaError_t rank_listed(const float* scores, const std::int32_t* list, const std::int32_t* listed,
                        std::size_t k, std::uint32_t id_bits, DeviceVerdict* verdict,
                        std::int32_t* out, cudaStream_t stream) {
  rank_listed_kernel<<<1, kThreads, 0, stream>>>(scores, list, listed, k, id_bits, verdict, out);
  return cudaGetLastError();
}
cudaError_t place(const Candidates& c, std::size_t query_count, std::size_t longest, float* rows,
                  std::size_t stride, cudaStream_t stream) {
  const auto blocks = unsigned((c.k + longest + kThreads - 1) / kThreads);
  place_kernel<<<dim3(blocks, unsigned(query_count)), kThreads, 0, stream>>>(c, rows, stride);
  return cudaGetLastError();
}

}  // namespace aether::cuda::dosa
