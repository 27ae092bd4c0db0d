#include "props/support/dosa_bf16_case.hpp"

#include <span>

#include "impl/cpu/dosa.hpp"
#include "props/support/dosa_backends.hpp"

namespace aether::props {

IndexKeys Bf16DosaCase::host_keys() const {
  return {KeyFormat::F32, std::as_bytes(std::span(keys)), p.dim};
}

Bf16DosaCase bf16_dosa_case(const DosaWorkloadParams& p, std::size_t k, std::size_t seed_count,
                            std::size_t budget) {
  const DosaWorkload w = make_dosa_workload(p);
  Bf16DosaCase c{.p = p, .weights = w.weights};
  c.query_bits = bf16_bits(w.queries);
  c.key_bits = bf16_bits(w.keys);
  c.queries = bf16_values(c.query_bits);
  c.keys = bf16_values(c.key_bits);
  const std::size_t n = p.queries, h = p.heads, d = p.dim;
  c.seeds = cpu::cold_prior_seeds(c.queries, c.weights, n, c.host_keys(), k, seed_count);
  for (std::size_t t = 0; t < n; ++t)
    c.plans.push_back(cpu::plan_heads(std::span(c.queries).subspan(t * h * d, h * d),
                                      std::span(c.weights).subspan(t * h, h), c.host_keys(), budget,
                                      cpu::plan_sample(c.seeds)));
  return c;
}

DosaWorkloadParams parallel_heads(DosaWorkloadParams p) {
  p.head_directions = 1;
  p.head_noise = 0;
  p.query_drift = 0;
  return p;
}

}  // namespace aether::props
