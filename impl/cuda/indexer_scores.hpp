// The CUDA scorer's internal entry points (impl/cuda/indexer_scores.cu), for CUDA
// callers that score stored keys more than once per call (DoSA): the checks once,
// then scoring without them, over every key or over per-query lists of keys. A
// key's score is the same bits whichever way it is reached: its tile position and
// the other keys and queries of the launch never enter its arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#include "impl/cuda/indexer.hpp"

namespace aether::cuda {

// Keys to score by id (rows of the stored keys; ids nullptr: every key in order): query t scores
// ids[t stride ...], counts[t] of them (counts nullptr: the call's list capacity), writing its
// scores at out[t capacity + i]. stride 0: one list for every query.
struct ScoreList {
  const std::int32_t* ids = nullptr;
  std::size_t stride = 0;
  const std::int32_t* counts = nullptr;
  std::size_t queries_per_block = 32;  // a block's queries share its keys; 1 with per-query lists
  // 0: a query's heads make one score. Else each consecutive `heads_per_score` heads
  // (a multiple of 16 dividing the heads) make their own, out [T H / heads_per_score,
  // L]: several small queries scored as one, each score the bits it has alone.
  std::size_t heads_per_score = 0;
  // A block scores only while the gate is open (device.hpp): scoring queued before
  // the host knows whether it is needed (DoSA's fallback, queued behind the probe
  // that decides; DoSA's batch seeds, beside it, stopped once the probe's count rules
  // pruning out).
  Gate gate;
};

// index_scores' checks, in its order, waiting for the device's verdict: Ok when
// every query, weight and key is finite, the shapes of queries, weights and keys
// agree and the device runs the shape. `meanwhile`, when given, runs on the host
// while the device checks (once the check and the verdict's copy are queued, before
// the wait), so that a caller's own host checks cost no time of their own; the
// device check then runs on a second stream (fork_side), so that device work
// `meanwhile` queues on `stream` runs beside it and is not waited for (it must write
// only what the caller may change whatever the verdict, and read the inputs as
// possibly non-finite); `stream` waits for the check before later work. It is not
// run when a check decided on the host refuses first.
Status<IndexerError> check_index_scores(device_span<const std::uint16_t> queries,
                                        device_span<const float> weights, std::size_t query_count,
                                        const DeviceIndexKeys& keys, Stream stream,
                                        const std::function<void()>& meanwhile = {});

// Scores queued on `stream` for inputs check_index_scores passed: out [T, L] with
// no list (list.ids nullptr), else out [T, list_capacity] as ScoreList says (ids
// inside the keys, counts at most list_capacity).
cudaError_t launch_index_scores(device_span<const std::uint16_t> queries,
                                device_span<const float> weights, std::size_t query_count,
                                const DeviceIndexKeys& keys, const ScoreList& list,
                                std::size_t list_capacity, device_span<float> out, Stream stream);

}  // namespace aether::cuda
