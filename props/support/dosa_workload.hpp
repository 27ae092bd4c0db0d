// A DoSA workload with the structure indexer activations are known to have, each
// feature a parameter that the survivor-rate sweep (bench/dosa_bench.cpp) varies
// and docs/dosa.md justifies. Built from a seed; nothing in it looks at a bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aether::props {

struct DosaWorkloadParams {
  std::size_t heads = 64, dim = 128, keys = 32768, queries = 64;
  // Keys: a few dominant directions (energy 1/(i+1) on direction i) plus isotropic
  // noise of this relative size.
  std::size_t key_directions = 8;
  float key_noise = 0.3f;
  // Heads: combinations of a few shared directions (redundant heads) plus their own
  // noise; queries of one batch differ from the first by query_drift.
  std::size_t head_directions = 4;
  float head_noise = 0.3f, query_drift = 0.1f;
  // Sink tokens: the first `sinks` keys, `sink_scale` times the main key direction.
  std::size_t sinks = 4;
  float sink_scale = 8;
  // About this share of the heads weighs negatively; |w| is uniform in [0.5, 1.5].
  float negative_heads = 0.5f;
  std::uint32_t seed = 1;
};

struct DosaWorkload {
  std::vector<float> queries, weights, keys;  // [T, H, D], [T, H], [L, D]
};

DosaWorkload make_dosa_workload(const DosaWorkloadParams& p);

}  // namespace aether::props
