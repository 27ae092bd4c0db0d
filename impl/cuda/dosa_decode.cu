// CUDA DoSA's decode path (impl/cuda/dosa.hpp, model::decode_topk): full scores
// stay; tau from the recently selected keys; only keys at or above it ranked.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <limits>

#include "impl/cuda/device.hpp"
#include "impl/cuda/dosa.hpp"
#include "impl/cuda/dosa_host.hpp"
#include "impl/cuda/dosa_kernels.hpp"
#include "impl/dosa_ids.hpp"

namespace aether::cuda {

namespace {
namespace de = dosa_error;
using namespace dosa;
constexpr int kThreads = 256;

unsigned grid_for(std::size_t n) {
  return unsigned(std::clamp<std::size_t>((n + kThreads - 1) / kThreads, 1, 4096));
}

// The least index of a non-finite score, atomicMin'd into *first.
__global__ void first_non_finite(const float* scores, std::size_t n, unsigned long long* first) {
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * kThreads)
    if (!isfinite(scores[i])) atomicMin(first, static_cast<unsigned long long>(i));
}

// gathered[i] = scores[ids[i]] (ids checked).
__global__ void gather(const float* scores, const std::int32_t* ids, std::size_t n,
                       float* gathered) {
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * kThreads)
    gathered[i] = scores[ids[i]];
}

// Keys scoring at least *tau appended to list (in no order), *listed their number
// (zeroed before); a warp's finds take one atomicAdd.
__global__ void list_above(const float* scores, std::size_t n, const float* tau, std::int32_t* list,
                           std::int32_t* listed) {
  const unsigned lane = threadIdx.x % 32;
  const float least = *tau;
  for (std::size_t first = blockIdx.x * std::size_t(kThreads); first < n;
       first += std::size_t(gridDim.x) * kThreads) {  // uniform over the block: the ballot
    const std::size_t j = first + threadIdx.x;
    const bool keep = j < n && scores[j] >= least;
    const unsigned mask = __ballot_sync(0xffffffffu, keep);
    int base = 0;
    if (lane == 0 && mask != 0) base = atomicAdd(listed, __popc(mask));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (keep) list[std::size_t(base) + __popc(mask & ((1u << lane) - 1))] = std::int32_t(j);
  }
}
}  // namespace

#define AETHER_TRY AETHER_DOSA_TRY

Status<DosaError> decode_topk(device_span<const float> scores,
                              device_span<const std::int32_t> recent, std::size_t k,
                              device_span<std::int32_t> out, Stream stream) {
  const std::size_t count = scores.size(), r = recent.size();
  // The ids read back (pinned: the copy rides on the scores' check), then the listed count.
  thread_local HeldBuffer pinned(true);
  AETHER_TRY(pinned.reserve((r + 1) * 4));
  auto* ids = static_cast<std::int32_t*>(pinned.data());
  Verdict v;
  if (int e = begin_verdict(v, stream)) return de::DeviceFailure{e};
  if (count > 0)
    first_non_finite<<<grid_for(count), kThreads, 0, stream>>>(scores.data(), count, v.word());
  if (r > 0) AETHER_TRY(cudaMemcpyAsync(ids, recent.data(), r * 4, cudaMemcpyDeviceToHost, stream));
  if (int e = queue_verdict_copy(v, stream)) return de::DeviceFailure{e};
  if (int e = wait_verdict(v)) return de::DeviceFailure{e};
  // The model's order: non-finite scores, the ids, their number, out's length.
  if (v.refusal() != kNoRefusal) return de::NonFiniteInput{3, std::size_t(v.refusal())};
  if (const std::size_t i = impl::first_bad_id({ids, r}, count); i < r)
    return de::BadSeed{i, ids[i]};
  const bool prune = count > k;
  if (prune && r < k) return de::TooFewSeeds{r, k};
  if (out.size() != k) return de::ShapeMismatch{k, out.size()};
  if (k == 0) return Ok{};

  Workspace ws;
  ws.reserve<float>(1);
  ws.reserve<float>(r);
  ws.reserve<std::int32_t>(k);
  ws.reserve<std::int32_t>(count);
  ws.reserve<std::int32_t>(2);
  AETHER_TRY(ws.allocate());
  float* tau = ws.take<float>(1);
  float* gathered = ws.take<float>(r);
  std::int32_t* recent_top = ws.take<std::int32_t>(k);  // the select's lanes (unread)
  std::int32_t* list = ws.take<std::int32_t>(count);
  std::int32_t* listed = ws.take<std::int32_t>(2);  // the count, then the top-k's row end
  if (prune) {
    gather<<<grid_for(r), kThreads, 0, stream>>>(scores.data(), recent.data(), r, gathered);
    AETHER_TRY(select_seeds(gathered, r, k, 1, tau, recent_top, stream));
  } else {
    AETHER_TRY(fill(tau, 1, -std::numeric_limits<float>::infinity(), stream));
  }
  AETHER_TRY(fill(listed, 1, 0, stream));
  list_above<<<grid_for(count), kThreads, 0, stream>>>(scores.data(), count, tau, list, listed);
  // Ranked in one block, queued before the host reads the count: the block writes
  // nothing when more keys are listed than it holds, and the top-k ranks the row.
  if (k <= kMergeCapacity)
    AETHER_TRY(rank_listed(scores.data(), list, listed, k,
                           std::uint32_t(std::max<int>(1, std::bit_width(count))), out.data(),
                           stream));
  AETHER_TRY(cudaMemcpyAsync(ids + r, listed, 4, cudaMemcpyDeviceToHost, stream));
  AETHER_TRY(cudaStreamSynchronize(stream));
  if (std::size_t(ids[r]) > kMergeCapacity || k > kMergeCapacity) {  // the same lanes
    AETHER_TRY(fill(listed + 1, 1, std::int32_t(count), stream));
    if (auto st = valid_prefix_topk(scores, count, device_span<const std::int32_t>(listed + 1, 1),
                                    k, out, stream);
        !st.ok())
      return from_indexer(st.error());
  }
  return Ok{};
}

}  // namespace aether::cuda
