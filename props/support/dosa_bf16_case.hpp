// A DoSA workload (props/support/dosa_workload.hpp) as the device takes it, with
// the seeds and plans the CPU's rules give it: the batch bench/dosa_bench_cuda times
// and tests/dosa_cuda_test.cpp checks the probe on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "api/dosa.hpp"
#include "api/indexer.hpp"
#include "props/support/dosa_workload.hpp"

namespace aether::props {

// Queries and keys cut to bf16 by truncation (their bits, and the floats they hold,
// which the plan rule and the cold prior read), the cold prior's `seed_count` seeds
// for top-`k`, and each query's plan of `budget` retained heads.
struct Bf16DosaCase {
  DosaWorkloadParams p;
  std::vector<std::uint16_t> query_bits, key_bits;
  std::vector<float> queries, keys, weights;
  std::vector<std::int32_t> seeds;
  std::vector<DosaPlan> plans;
  IndexKeys host_keys() const;  // the keys' bf16 values as F32 rows
};
Bf16DosaCase bf16_dosa_case(const DosaWorkloadParams& p, std::size_t k, std::size_t seed_count,
                            std::size_t budget);

// One head direction, no head noise, no drift: one anchor bounds every omitted
// head exactly, so nearly every key is pruned.
DosaWorkloadParams parallel_heads(DosaWorkloadParams p);

}  // namespace aether::props
