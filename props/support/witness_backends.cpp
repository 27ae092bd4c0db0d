#include "props/support/witness_backends.hpp"

#include <algorithm>

#include "impl/cpu/witness.hpp"
#include "model/witness.hpp"
#include "props/support/model_adapter.hpp"
#include "props/support/property.hpp"

namespace aether::props {

WitnessBackend model_witness_backend() {
  namespace m = aether::model;
  const auto write = [](const auto& result, std::span<std::int32_t> out) {
    return write_into(result, out, [](std::size_t expected, std::size_t actual) {
      return WitnessError{witness_error::OutputSizeMismatch{expected, actual}};
    });
  };
  return {"model",
          [=](auto learned, auto topk, auto lens, auto s, auto out) {
            return write(m::topology_witness_indices(learned, topk, lens, s), out);
          },
          [=](auto learned, auto topk, auto lens, auto keep, auto s, auto b, auto out) {
            return write(m::apply_topology_witnesses(learned, topk, lens, keep, s, b), out);
          },
          [](auto buf, auto topk, auto lens, auto s) {
            return m::scatter_topology_witnesses(buf, topk, lens, s);
          }};
}

WitnessBackend cpu_witness_backend() {
  return {"cpu", [](auto... a) { return cpu::topology_witness_indices(a...); },
          [](auto... a) { return cpu::apply_topology_witnesses(a...); },
          [](auto... a) { return cpu::scatter_topology_witnesses(a...); }};
}

std::vector<WitnessBackend> impl_witness_backends() {
  std::vector<WitnessBackend> backends{cpu_witness_backend()};
#ifdef AETHER_HAVE_CUDA
  if (gpu_present()) backends.push_back(cuda_witness_backend());
#endif
  return backends;
}

std::vector<WitnessBackend> all_witness_backends() {
  std::vector<WitnessBackend> backends{model_witness_backend()};
  for (auto& b : impl_witness_backends()) backends.push_back(std::move(b));
  return backends;
}

}  // namespace aether::props
