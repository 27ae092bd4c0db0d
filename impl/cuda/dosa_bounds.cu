// CUDA DoSA's per-key bounds (impl/cuda/dosa.hpp): one query's screen and bound
// test over every key, the float U the pruned top-k compares with tau.
#include <cuda_runtime.h>

#include "impl/cuda/dosa.hpp"
#include "impl/cuda/dosa_host.hpp"
#include "impl/cuda/dosa_kernels.hpp"
#include "impl/cuda/indexer_scores.hpp"

namespace aether::cuda {

namespace de = dosa_error;
using namespace dosa;

#define AETHER_TRY AETHER_DOSA_TRY

Status<DosaError> dosa_bounds(device_span<const std::uint16_t> query,
                              device_span<const float> weights, const DeviceIndexKeys& keys,
                              const DosaPlan& plan, device_span<double> out, Stream stream) {
  HostInputs host;
  if (auto st = check_inputs(
          query, weights, 1, keys, {}, stream, host,
          [&](const HostInputs& in) { return dosa_screen::check_plan(in.weights, plan); });
      !st.ok())
    return st;
  const std::size_t dim = keys.dim, row_bytes = key_row_bytes(keys.format, dim);
  const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0;
  if (out.size() != count) return de::ShapeMismatch{count, out.size()};
  if (count == 0) return Ok{};
  const std::span<const DosaPlan> plans(&plan, 1);
  const std::size_t width = widest_screen(plans);
  const PlanBlob blob(plans, host.weights, width, 1);
  Workspace ws;
  ws.reserve<std::byte>(blob.size());
  ws.reserve<float>(count);
  ws.reserve<double>(count);
  ws.reserve<float>(count);
  ws.reserve<std::uint16_t>(width * dim);
  ws.reserve<ScreenTerms>(1);
  AETHER_TRY(ws.allocate());
  auto* blob_bytes = ws.take<std::byte>(blob.size());
  float* p = ws.take<float>(count);
  double* norms = ws.take<double>(count);
  float* scales = ws.take<float>(count);
  auto* rows = ws.take<std::uint16_t>(width * dim);
  auto* terms = ws.take<ScreenTerms>(1);
  DevicePlans device_plans;
  AETHER_TRY(blob.upload(blob_bytes, stream, device_plans));
  AETHER_TRY(key_norms(keys.bytes.data(), keys.format, dim, count, norms, scales, stream));
  AETHER_TRY(prepare_screens(query.data(), weights.data(), 1, 1, weights.size(), dim, device_plans,
                             rows, terms, nullptr, stream));
  AETHER_TRY(launch_index_scores(device_span<const std::uint16_t>(rows, width * dim),
                                 device_span<const float>(device_plans.screen_weights, width), 1,
                                 keys, {}, 0, device_span<float>(p, count), stream));
  AETHER_TRY(key_bounds(p, count, terms, norms, scales, out.data(), stream));
  AETHER_TRY(cudaStreamSynchronize(stream));
  return Ok{};
}

}  // namespace aether::cuda
