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

namespace aether::cuda {

namespace {
namespace de = dosa_error;
using namespace dosa;
constexpr int kThreads = 256;
// A bad id's refusal code: above every non-finite score's (its index), the model's order.
constexpr unsigned long long kBadId = 1ull << 62;

unsigned grid_for(std::size_t n) {
  return unsigned(std::clamp<std::size_t>((n + kThreads - 1) / kThreads, 1, 4096));
}

// Every score's finiteness (a refusal at the least non-finite index) and recent id
// i's place: outside [0, n) a refusal at i, else i in first[id], the least index
// holding it (first filled with ~0; indices clamped below 2^32 - 1: past n ids some
// earlier one is bad already, and n < 2^31).
__global__ void scan_scores_and_ids(const float* scores, std::size_t n, const std::int32_t* ids,
                                    std::size_t r, unsigned* first, unsigned long long* verdict) {
  const std::size_t stride = std::size_t(gridDim.x) * kThreads;
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < n || i < r;
       i += stride) {
    if (i < n && !isfinite(scores[i])) atomicMin(verdict, i);
    if (i >= r) continue;
    const std::int32_t id = ids[i];
    if (id < 0 || std::size_t(id) >= n)
      atomicMin(verdict, kBadId | i);
    else
      atomicMin(first + id, unsigned(i < 0xfffffffeu ? i : 0xfffffffeu));
  }
}

// Recent id i held at an earlier index refused at i (after scan_scores_and_ids);
// gathered[i] = scores[ids[i]] where the id is inside (else 0: the call is refused);
// *listed zeroed for list_above.
__global__ void gather_recent(const float* scores, std::size_t n, const std::int32_t* ids,
                              std::size_t r, const unsigned* first, unsigned long long* verdict,
                              float* gathered, std::int32_t* listed) {
  const std::size_t stride = std::size_t(gridDim.x) * kThreads;
  if (blockIdx.x == 0 && threadIdx.x == 0) *listed = 0;
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < r; i += stride) {
    const std::int32_t id = ids[i];
    const bool inside = id >= 0 && std::size_t(id) < n;
    if (inside && first[id] < i) atomicMin(verdict, kBadId | i);
    if (gathered != nullptr) gathered[i] = inside ? scores[id] : 0.0f;
  }
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

// Everything queued before the one wait: the checks report into the verdict, and
// the ranking, queued behind them when the shapes allow it, writes out only on a
// clean verdict (two waits, the checks' and the ranking's, took 0.078 ms at L
// 131072 against the top-k's 0.045: docs/performance.md).
Status<DosaError> decode_topk(device_span<const float> scores,
                              device_span<const std::int32_t> recent, std::size_t k,
                              device_span<std::int32_t> out, Stream stream) {
  const std::size_t count = scores.size(), r = recent.size();
  const bool prune = count > k;
  const bool ranked = !(prune && r < k) && out.size() == k && k > 0;  // the shapes' refusals
  Workspace ws;
  ws.reserve<unsigned>(count);
  ws.reserve<float>(r);
  ws.reserve<float>(1);
  ws.reserve<std::int32_t>(count);
  ws.reserve<std::int32_t>(2);
  AETHER_TRY(ws.allocate());
  auto* first = ws.take<unsigned>(count);
  float* gathered = ws.take<float>(r);
  float* tau = ws.take<float>(1);
  std::int32_t* list = ws.take<std::int32_t>(count);
  std::int32_t* listed = ws.take<std::int32_t>(2);  // the count, then the top-k's row end
  Verdict v;
  if (int e = begin_verdict(v, stream)) return de::DeviceFailure{e};
  if (r > 0) AETHER_TRY(cudaMemsetAsync(first, 0xff, count * sizeof(unsigned), stream));
  if (count > 0 || r > 0)
    scan_scores_and_ids<<<grid_for(std::max(count, r)), kThreads, 0, stream>>>(
        scores.data(), count, recent.data(), r, first, v.word());
  if (r > 0 || ranked)
    gather_recent<<<grid_for(r), kThreads, 0, stream>>>(
        scores.data(), count, recent.data(), r, first, v.word(),
        ranked && prune ? gathered : nullptr, listed);
  if (ranked) {
    if (prune)
      AETHER_TRY(select_seeds(gathered, r, k, 1, tau, nullptr, stream));
    else
      AETHER_TRY(fill(tau, 1, -std::numeric_limits<float>::infinity(), stream));
    list_above<<<grid_for(count), kThreads, 0, stream>>>(scores.data(), count, tau, list, listed);
    // one block, which writes nothing on a refusal or past its capacity, and puts
    // the listed count in the verdict's detail[1]
    if (k <= kMergeCapacity)
      AETHER_TRY(rank_listed(scores.data(), list, listed, k,
                             std::uint32_t(std::max<int>(1, std::bit_width(count))), v.device,
                             out.data(), stream));
  }
  if (int e = queue_verdict_copy(v, stream)) return de::DeviceFailure{e};
  if (int e = wait_verdict(v)) return de::DeviceFailure{e};
  // The model's order: non-finite scores, the ids, their number, out's length.
  const unsigned long long refusal = v.refusal();
  if (refusal != kNoRefusal && refusal < kBadId) return de::NonFiniteInput{3, std::size_t(refusal)};
  if (refusal != kNoRefusal) {
    const std::size_t i = std::size_t(refusal & ~kBadId);
    std::int32_t id = 0;
    AETHER_TRY(cudaMemcpy(&id, recent.data() + i, 4, cudaMemcpyDeviceToHost));
    return de::BadSeed{i, id};
  }
  if (prune && r < k) return de::TooFewSeeds{r, k};
  if (out.size() != k) return de::ShapeMismatch{k, out.size()};
  if (k == 0) return Ok{};
  if (k > kMergeCapacity || std::size_t(v.host->detail[1]) > kMergeCapacity) {  // the same lanes
    AETHER_TRY(fill(listed + 1, 1, std::int32_t(count), stream));
    if (auto st = valid_prefix_topk(scores, count, device_span<const std::int32_t>(listed + 1, 1),
                                    k, out, stream);
        !st.ok())
      return from_indexer(st.error());
  }
  return Ok{};
}

}  // namespace aether::cuda
