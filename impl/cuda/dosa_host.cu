// Host-side pieces of CUDA DoSA (impl/cuda/dosa_host.hpp).
#include "impl/cuda/dosa_host.hpp"

#include <algorithm>
#include <functional>

#include "impl/cuda/indexer_scores.hpp"
#include "impl/dosa_ids.hpp"

namespace aether::cuda::dosa {

namespace de = dosa_error;

DosaError from_indexer(const IndexerError& e) {
  namespace ie = indexer_error;
  if (auto* p = std::get_if<ie::ShapeMismatch>(&e)) return *p;
  if (auto* p = std::get_if<ie::NonFiniteInput>(&e)) return *p;
  if (auto* p = std::get_if<ie::UnsupportedOnDevice>(&e)) return *p;
  if (auto* p = std::get_if<ie::DeviceFailure>(&e)) return *p;
  return de::DeviceFailure{int(cudaErrorUnknown)};
}

Status<DosaError> check_inputs(device_span<const std::uint16_t> queries,
                               device_span<const float> weights, std::size_t query_count,
                               const DeviceIndexKeys& keys, device_span<const std::int32_t> seeds,
                               Stream stream, HostInputs& host, const HostCheck& more,
                               const std::function<cudaError_t()>& early) {
  thread_local HeldBuffer pinned(true);
  thread_local HeldEvent landed;  // the downloads, ahead of the scorer's check
  const std::size_t weight_bytes = (weights.size_bytes() + 15) / 16 * 16;
  AETHER_DOSA_TRY(pinned.reserve(weight_bytes + seeds.size_bytes()));
  auto* w = static_cast<float*>(pinned.data());
  auto* s = reinterpret_cast<std::int32_t*>(static_cast<char*>(pinned.data()) + weight_bytes);
  if (!weights.empty())
    AETHER_DOSA_TRY(
        cudaMemcpyAsync(w, weights.data(), weights.size_bytes(), cudaMemcpyDeviceToHost, stream));
  if (!seeds.empty())
    AETHER_DOSA_TRY(
        cudaMemcpyAsync(s, seeds.data(), seeds.size_bytes(), cudaMemcpyDeviceToHost, stream));
  AETHER_DOSA_TRY(cudaEventRecord(landed.get(), stream));
  // The seeds, then the caller's checks, while the device reads every key for the
  // scorer's check; their verdicts come after the scorer's, in the model's order.
  Status<DosaError> seeds_ok = Ok{}, more_ok = Ok{};
  const auto on_host = [&] {
    if (cudaError_t e = early ? early() : cudaSuccess; e != cudaSuccess)
      return void(seeds_ok = de::DeviceFailure{int(e)});
    if (cudaError_t e = cudaEventSynchronize(landed.get()); e != cudaSuccess)
      return void(seeds_ok = de::DeviceFailure{int(e)});
    host = {{w, weights.size()}, {s, seeds.size()}};
    const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
    const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0;
    if (const std::size_t i = impl::first_bad_id(host.seeds, count); i < host.seeds.size())
      return void(seeds_ok = de::BadSeed{i, host.seeds[i]});
    if (more) more_ok = more(host);
  };
  if (auto st = check_index_scores(queries, weights, query_count, keys, stream, on_host);
      !st.ok()) {
    cudaStreamSynchronize(stream);  // the copies land before the buffer is reused
    return from_indexer(st.error());
  }
  if (!seeds_ok.ok() || !more_ok.ok()) cudaStreamSynchronize(stream);
  return !seeds_ok.ok() ? seeds_ok : more_ok;
}

namespace {
// Costs in tile-keys (one 16-head tile of one query against one key, as full scoring
// scores it: the H200 scores about 75 a nanosecond), fitted to forced and probed
// pruning on parallel heads (bench/dosa_bench_cuda costs, docs/dosa.md): a key's bound
// and list entry; a seed's tile (scored from the batch's one list of ids, then
// selected); a survivor's tile (each query's own list, no key tile shared), fitted
// where K and the longest list fit the merge's block (past it the wide merge adds a
// step of 70 to 100 us at L 131072, T 64: the rule's margin is spent before it); and
// the pipeline's fixed cost beyond full scoring's (the probe, the batch's norms, the
// merge, the host's queueing and three waits).
constexpr double kBoundTiles = 0.5, kSeedTiles = 2.5, kRescoreTiles = 4, kFixedTiles = 13e6;
}  // namespace

bool pruning_pays(const BatchShape& b, double rho) {
  const double h16 = double(tiles16(b.heads)), keys = double(b.keys), seeds = double(b.seeds);
  const double pruned = double(b.queries) * (kSeedTiles * seeds * h16 +
                                             keys * (double(tiles16(b.width)) + kBoundTiles) +
                                             kRescoreTiles * rho * (keys - seeds) * h16) +
                        kFixedTiles;
  return pruned < 0.9 * double(b.queries) * keys * h16;
}

std::span<std::int32_t> pinned_counts(std::size_t n) {
  thread_local HeldBuffer held(true);
  if (held.reserve(n * 4) != cudaSuccess) return {};
  return {static_cast<std::int32_t*>(held.data()), n};
}

cudaEvent_t probe_counted() {
  thread_local HeldEvent held;
  return held.get();
}

// The widest screen of a batch in whole 16-head tiles (zero rows and weights pad
// the others).
std::size_t widest_screen(std::span<const DosaPlan> plans) {
  std::size_t width = 1;
  for (const DosaPlan& p : plans)
    width = std::max(width, p.retained.size() + (p.aggregated.empty() ? 0 : 1));
  return tiles16(width) * 16;  // whole tiles: screens pack into one scorer query
}

cudaError_t Buffers::take(const Sizes& z) {
  const auto lay_out = [&](auto&& put) {  // one order to reserve and to take
    const std::size_t padded = (z.queries + z.pack - 1) / z.pack * z.pack;
    put(rows, padded * z.keys);  // screen values, or the wide merge's rows
    put(ends, z.queries);
    if (!z.prune) return;
    put(seed_ids, z.seeds);
    put(is_seed, z.keys);
    put(norms, z.keys);
    put(scales, z.keys);
    put(lanes, z.queries * z.k);
    put(list_scores, z.queries * z.keys);
    const auto pass = [&](Pass& p, std::size_t m, std::size_t m_keys,
                          std::span<const DosaPlan> its) {
      const std::size_t m_padded = (m + z.pack - 1) / z.pack * z.pack;
      put(p.blob, PlanBlob::bound(its, z.width, m_padded));
      put(p.seed_scores, m * z.seeds);
      put(p.tau, m);
      put(p.terms, m);
      put(p.screen_rows, m_padded * z.width * z.dim);
      put(p.list, m * m_keys);
      put(p.counts, m);
    };
    pass(batch, z.queries, z.keys, z.plans);
    if (z.probe > 0)
      pass(probe, 1, z.probe, z.plans.first(std::min<std::size_t>(1, z.plans.size())));
  };
  Workspace ws;
  lay_out([&](auto*& p, std::size_t m) { ws.reserve<std::remove_reference_t<decltype(*p)>>(m); });
  if (cudaError_t e = ws.allocate(); e != cudaSuccess) return e;
  lay_out([&](auto*& p, std::size_t m) { p = ws.take<std::remove_reference_t<decltype(*p)>>(m); });
  return cudaSuccess;
}

}  // namespace aether::cuda::dosa
