// CUDA backend of DoSA (model/dosa.hpp): a batch of queries' pruned top-K over the
// same stored keys in device memory. Each query's lanes equal, bit for bit, full
// scoring by cuda::index_scores followed by cuda::valid_prefix_topk; docs/dosa.md
// proves the float bound's margin for the tensor cores' arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "api/dosa.hpp"
#include "impl/cuda/indexer.hpp"

namespace aether::cuda {

// queries [T, H, D] as bf16 bits, weights [T, H], keys [L] (BF16 or E4M3), seeds
// [S] shared by the batch (distinct, visible; device memory), plans [T] (host: a
// plan is prepared on the host), out [T, K]: per query the best min(K, L) keys in
// the total order, ascending, -1 padded. Refusals, in this order: the scorer's
// (shapes, NaN/inf queries, weights, keys, what the device cannot run); a bad
// seed; plans' length and a bad plan; fewer than K seeds while L > K; out's
// length. Nothing is written on a refusal. The call waits for the device.
//
// All queries are scored in full when L <= K, or when the cost rule
// (impl/cuda/dosa_host.hpp: pruning_pays; its formula and fitted weights in
// docs/dosa.md) says the screen cannot pay: before screening, at no survivors, then
// at the survivor rate of the first query on the first 16384 keys (its probe).
// Else tau_t = the K-th best seed score; every key's float bound (the retained
// heads with folded weights and a_A as a bf16 row, scored by the scorer, plus the
// residual term and the margin) is compared with tau_t; survivors are scored by
// the scorer, those below tau_t dropped, the rest ranked with the seeds' top-K in
// the total order. docs/dosa.md has the details.
Status<DosaError> dosa_topk(device_span<const std::uint16_t> queries,
                            device_span<const float> weights, std::size_t query_count,
                            const DeviceIndexKeys& keys, std::size_t k,
                            device_span<const std::int32_t> seeds, std::span<const DosaPlan> plans,
                            device_span<std::int32_t> out, const DosaOptions& options = {},
                            DosaStats* stats = nullptr, Stream stream = nullptr);

// The float bound U of every key for one query [H, D] (bf16 bits) under a plan,
// out [L]: what dosa_topk compares with tau. U >= cuda::index_scores' score of the
// key (the properties check it). Refuses what the scorer refuses, then a bad plan
// and out's length.
Status<DosaError> dosa_bounds(device_span<const std::uint16_t> query,
                              device_span<const float> weights, const DeviceIndexKeys& keys,
                              const DosaPlan& plan, device_span<double> out,
                              Stream stream = nullptr);

// Decode (source 001 §1, model::decode_topk): one query's full scores [L] (device
// memory) stay; tau is the K-th best score among the recently selected keys
// `recent` [R] (distinct ids, at least K when L > K; device memory), and only keys
// scoring at least tau are ranked. out [K]: the lanes valid_prefix_topk gives for
// the row (ascending, -1 padded). Refusals, in this order: a non-finite score
// (NonFiniteInput{3, i}, the first), a bad id (BadSeed), fewer than K ids while
// L > K, out's length. Nothing is written on a refusal. The call waits for the
// device.
Status<DosaError> decode_topk(device_span<const float> scores,
                              device_span<const std::int32_t> recent, std::size_t k,
                              device_span<std::int32_t> out, Stream stream = nullptr);

}  // namespace aether::cuda
