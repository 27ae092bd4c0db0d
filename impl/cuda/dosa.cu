// CUDA DoSA (impl/cuda/dosa.hpp): the host orchestration of the kernels in
// dosa_kernels.cu. Scores come only from the scorer's own kernel (over every key,
// or over per-query lists of keys), so a rescored key's value is the bits full
// scoring gives it.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "impl/cuda/dosa.hpp"
#include "impl/cuda/dosa_host.hpp"
#include "impl/cuda/dosa_kernels.hpp"
#include "impl/cuda/indexer_scores.hpp"

namespace aether::cuda {

namespace {
namespace de = dosa_error;
using namespace dosa;

// The first query's first kProbe keys are the batch's probe (see dosa.hpp).
constexpr std::size_t kProbe = 16384;
constexpr double kPays = 0.9;  // pruning must cost under this share of full scoring
// Costs in tile-keys (one 16-head tile of one query against one key; the H200 scores
// about 60 of them a nanosecond): a key's bound and list entry, and the pipeline's
// fixed launches and waits (measured: bench/dosa_bench_cuda, docs/performance.md).
constexpr double kBoundTiles = 0.5, kFixedTiles = 4e6;

}  // namespace

#define AETHER_TRY AETHER_DOSA_TRY

Status<DosaError> dosa_topk(device_span<const std::uint16_t> queries,
                            device_span<const float> weights, std::size_t query_count,
                            const DeviceIndexKeys& keys, std::size_t k,
                            device_span<const std::int32_t> seeds, std::span<const DosaPlan> plans,
                            device_span<std::int32_t> out, const DosaOptions& options,
                            DosaStats* stats, Stream stream) {
  HostInputs host;
  if (auto st = check_inputs(queries, weights, query_count, keys, seeds, stream, host); !st.ok())
    return st;
  const std::size_t n = query_count, heads = n ? weights.size() / n : 0, dim = keys.dim;
  const std::size_t row_bytes = key_row_bytes(keys.format, dim);
  const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0;
  const std::size_t seed_count = seeds.size();
  if (plans.size() != n) return de::ShapeMismatch{n, plans.size()};
  for (std::size_t t = 0; t < n; ++t)
    if (auto st =
            dosa_screen::check_plan(std::span(host.weights).subspan(t * heads, heads), plans[t]);
        !st.ok())
      return st;
  if (count > k && seed_count < k) return de::TooFewSeeds{seed_count, k};
  if (out.size() != n * k) return de::ShapeMismatch{n * k, out.size()};
  DosaStats local;
  if (stats != nullptr) *stats = local;
  if (n == 0 || k == 0) return Ok{};

  // Screens are scored `pack` to a scorer query of at most 64 heads (each screen's
  // score its own: ScoreList::heads_per_score), the batch padded with zero screens.
  const std::size_t width = widest_screen(plans), pack = std::max<std::size_t>(1, 64 / width);
  const std::size_t padded = (n + pack - 1) / pack * pack;
  const double full_tiles = double(n) * double(count) * double(tiles16(heads));
  const auto pays = [&](double rho) {
    return !options.fall_back_when_unpaid ||
           double(n) * (double(seed_count) * double(tiles16(heads)) +
                        double(count) * (double(tiles16(width)) + kBoundTiles) +
                        rho * double(count - seed_count) * double(tiles16(heads))) +
                   kFixedTiles <
               kPays * full_tiles;
  };
  const bool prune = count > k && pays(0);

  Workspace ws;
  ws.reserve<float>(padded * count);  // screen values, or the wide merge's rows
  ws.reserve<std::int32_t>(n);        // ends
  if (prune) {
    ws.reserve<std::byte>(PlanBlob::bound(plans, width, padded));
    ws.reserve<std::int32_t>(seed_count);
    ws.reserve<std::uint8_t>(count);
    ws.reserve<double>(count);
    ws.reserve<float>(count);
    ws.reserve<float>(n * seed_count);
    ws.reserve<std::int32_t>(n * k);
    ws.reserve<float>(n);
    ws.reserve<ScreenTerms>(n);
    ws.reserve<std::uint16_t>(padded * width * dim);
    ws.reserve<std::int32_t>(n * count);  // survivor lists
    ws.reserve<std::int32_t>(n);          // their lengths
    ws.reserve<float>(n * count);         // their scores
    ws.reserve<DeviceVerdict>(1);
  }
  AETHER_TRY(ws.allocate());
  float* rows = ws.take<float>(padded * count);
  std::int32_t* ends = ws.take<std::int32_t>(n);
  const device_span<float> all_rows(rows, n * count);

  // The scorer over every key, then the top-k: full scoring's own lanes.
  const auto rank_rows = [&]() -> Status<DosaError> {
    AETHER_TRY(fill(ends, n, std::int32_t(count), stream));
    (void)valid_prefix_topk(all_rows, count, device_span<const std::int32_t>(ends, n), k, out,
                            stream);  // scores finite: docs/dosa.md's contract
    return Ok{};
  };
  const auto in_full = [&]() -> Status<DosaError> {
    local.full_queries = n;
    if (stats != nullptr) *stats = local;
    if (count == 0) {
      AETHER_TRY(fill(out.data(), n * k, -1, stream));
      AETHER_TRY(cudaStreamSynchronize(stream));
      return Ok{};
    }
    AETHER_TRY(launch_index_scores(queries, weights, n, keys, {}, 0, all_rows, stream));
    return rank_rows();
  };
  if (!prune) return in_full();

  auto* blob_bytes = ws.take<std::byte>(PlanBlob::bound(plans, width, padded));
  std::int32_t* seed_ids = ws.take<std::int32_t>(seed_count);
  std::uint8_t* is_seed = ws.take<std::uint8_t>(count);
  double* norms = ws.take<double>(count);
  float* scales = ws.take<float>(count);
  float* seed_scores = ws.take<float>(n * seed_count);
  std::int32_t* lanes = ws.take<std::int32_t>(n * k);
  float* tau = ws.take<float>(n);
  ScreenTerms* terms = ws.take<ScreenTerms>(n);
  std::uint16_t* screen_rows = ws.take<std::uint16_t>(padded * width * dim);
  std::int32_t* list = ws.take<std::int32_t>(n * count);
  std::int32_t* counts = ws.take<std::int32_t>(n);
  float* list_scores = ws.take<float>(n * count);
  auto* verdict = ws.take<DeviceVerdict>(1);

  // the seeds ascending: their top-k's ties to the lower position are to the lower id
  std::vector<std::int32_t> sorted;
  if (!std::is_sorted(host.seeds.begin(), host.seeds.end())) {
    sorted.assign(host.seeds.begin(), host.seeds.end());
    std::sort(sorted.begin(), sorted.end());
  }
  const std::span<const std::int32_t> ascending = sorted.empty() ? host.seeds : sorted;
  AETHER_TRY(
      cudaMemcpyAsync(seed_ids, ascending.data(), seed_count * 4, cudaMemcpyHostToDevice, stream));
  DevicePlans device_plans;
  AETHER_TRY(cudaMemsetAsync(is_seed, 0, count, stream));
  AETHER_TRY(cudaMemsetAsync(screen_rows, 0, padded * width * dim * 2, stream));
  AETHER_TRY(mark_seeds(seed_ids, seed_count, is_seed, stream));
  // Queries [0, m) against keys [0, m_keys): the keys' norms, the queries' screens,
  // their seeds' scores, top-K and tau, then the screen and the bound test.
  const auto screen = [&](std::size_t m, std::size_t m_keys) -> Status<DosaError> {
    AETHER_TRY(key_norms(keys.bytes.data(), keys.format, dim, m_keys, norms, scales, stream));
    AETHER_TRY(prepare_screens(queries.data(), weights.data(), m, heads, dim, device_plans,
                               screen_rows, terms, stream));
    AETHER_TRY(launch_index_scores(queries.subspan(0, m * heads * dim),
                                   weights.subspan(0, m * heads), m, keys,
                                   ScoreList{seed_ids, 0, nullptr}, seed_count,
                                   device_span<float>(seed_scores, m * seed_count), stream));
    AETHER_TRY(fill(ends, m, std::int32_t(seed_count), stream));
    (void)enqueue_valid_prefix_topk(device_span<const float>(seed_scores, m * seed_count),
                                    seed_count, device_span<const std::int32_t>(ends, m), k,
                                    device_span<std::int32_t>(lanes, m * k), verdict, stream);
    AETHER_TRY(seed_threshold(seed_scores, seed_count, lanes, k, m, tau, stream));
    const std::size_t packs = (m + pack - 1) / pack;
    AETHER_TRY(launch_index_scores(
        device_span<const std::uint16_t>(screen_rows, packs * pack * width * dim),
        device_span<const float>(device_plans.screen_weights, packs * pack * width), packs,
        DeviceIndexKeys{keys.format, keys.bytes.subspan(0, m_keys * row_bytes), dim},
        ScoreList{.heads_per_score = width}, 0, device_span<float>(rows, packs * pack * m_keys),
        stream));
    AETHER_TRY(cudaMemsetAsync(counts, 0, m * 4, stream));
    AETHER_TRY(screen_keys(rows, m_keys, m_keys, m, terms, tau, norms, scales, is_seed, list,
                           counts, stream));
    return Ok{};
  };
  std::vector<std::int32_t> host_counts(n);
  if (options.fall_back_when_unpaid) {  // the probe: query 0 on the first kProbe keys
    const std::size_t probe = std::min(count, kProbe);
    const PlanBlob first(plans.first(1), host.weights.first(heads), width, pack);
    AETHER_TRY(first.upload(blob_bytes, stream, device_plans));
    if (auto st = screen(1, probe); !st.ok()) return st;
    AETHER_TRY(cudaMemcpyAsync(host_counts.data(), counts, 4, cudaMemcpyDeviceToHost, stream));
    AETHER_TRY(cudaStreamSynchronize(stream));
    const auto seeds_in_probe =
        std::size_t(std::lower_bound(ascending.begin(), ascending.end(), std::int32_t(probe)) -
                    ascending.begin());
    const std::size_t others = probe - seeds_in_probe;
    if (!pays(others ? double(host_counts[0]) / double(others) : 0)) return in_full();
  }
  const PlanBlob all(plans, host.weights, width, padded);  // after the probe's wait
  AETHER_TRY(all.upload(blob_bytes, stream, device_plans));
  if (auto st = screen(n, count); !st.ok()) return st;
  AETHER_TRY(cudaMemcpyAsync(host_counts.data(), counts, n * 4, cudaMemcpyDeviceToHost, stream));
  AETHER_TRY(cudaStreamSynchronize(stream));
  const std::size_t longest =
      std::size_t(*std::max_element(host_counts.begin(), host_counts.end()));
  if (longest > 0)
    AETHER_TRY(launch_index_scores(queries, weights, n, keys, ScoreList{list, count, counts},
                                   longest, device_span<float>(list_scores, n * longest), stream));
  const Candidates candidates{.seed_scores = seed_scores,
                              .seed_count = seed_count,
                              .lanes = lanes,
                              .seed_ids = seed_ids,
                              .k = k,
                              .list = list,
                              .list_stride = count,
                              .list_scores = list_scores,
                              .score_stride = longest,
                              .counts = counts,
                              .tau = tau,
                              .id_bits = std::uint32_t(std::bit_width(count))};
  if (k + longest <= kMergeCapacity) {
    AETHER_TRY(merge_candidates(candidates, n, out.data(), stream));
    AETHER_TRY(cudaStreamSynchronize(stream));
  } else {  // the wide merge: candidates at their ids among kFiller, ranked by the top-k
    std::vector<float> host_tau(n);
    AETHER_TRY(cudaMemcpyAsync(host_tau.data(), tau, n * 4, cudaMemcpyDeviceToHost, stream));
    AETHER_TRY(fill(rows, n * count, kFiller, stream));
    AETHER_TRY(place(candidates, n, longest, rows, count, stream));
    AETHER_TRY(cudaStreamSynchronize(stream));
    for (std::size_t t = 0; t < n; ++t)
      if (host_tau[t] == kFiller)  // kFiller would tie with its candidates: in full
        AETHER_TRY(launch_index_scores(queries.subspan(t * heads * dim, heads * dim),
                                       weights.subspan(t * heads, heads), 1, keys, {}, 0,
                                       all_rows.subspan(t * count, count), stream));
    if (auto st = rank_rows(); !st.ok()) return st;
  }
  local.screened = n * (count - seed_count);
  local.seeds_scored = n * seed_count;
  for (std::int32_t c : host_counts) local.survivors += std::size_t(c);
  if (stats != nullptr) *stats = local;
  return Ok{};
}

Status<DosaError> dosa_bounds(device_span<const std::uint16_t> query,
                              device_span<const float> weights, const DeviceIndexKeys& keys,
                              const DosaPlan& plan, device_span<double> out, Stream stream) {
  HostInputs host;
  if (auto st = check_inputs(query, weights, 1, keys, {}, stream, host); !st.ok()) return st;
  if (auto st = dosa_screen::check_plan(host.weights, plan); !st.ok()) return st;
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
  AETHER_TRY(prepare_screens(query.data(), weights.data(), 1, weights.size(), dim, device_plans,
                             rows, terms, stream));
  AETHER_TRY(launch_index_scores(device_span<const std::uint16_t>(rows, width * dim),
                                 device_span<const float>(device_plans.screen_weights, width), 1,
                                 keys, {}, 0, device_span<float>(p, count), stream));
  AETHER_TRY(key_bounds(p, count, terms, norms, scales, out.data(), stream));
  AETHER_TRY(cudaStreamSynchronize(stream));
  return Ok{};
}

}  // namespace aether::cuda
