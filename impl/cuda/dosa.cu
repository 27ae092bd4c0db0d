// CUDA DoSA (impl/cuda/dosa.hpp): the host orchestration of the kernels in
// dosa_kernels.hpp. Scores come only from the scorer's own kernel (over every key,
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
// The most seed tile-keys scored beside the probe. H200, L 131072, 64 queries of 64
// heads (bench/dosa_bench_cuda): 4096 seeds (2^20 tile-keys) took 20-30 us off a
// pruned call; 12288 slowed a fallback by 45 us, their blocks holding the SMs the
// probe's kernels wait for.
constexpr double kSpeculateTiles = 1 << 20;

}  // namespace

#define AETHER_TRY AETHER_DOSA_TRY

Status<DosaError> dosa_topk(device_span<const std::uint16_t> queries,
                            device_span<const float> weights, std::size_t query_count,
                            const DeviceIndexKeys& keys, std::size_t k,
                            device_span<const std::int32_t> seeds, std::span<const DosaPlan> plans,
                            device_span<std::int32_t> out, const DosaOptions& options,
                            DosaStats* stats, Stream stream) {
  const std::size_t n = query_count, heads = n ? weights.size() / n : 0, dim = keys.dim;
  const std::size_t row_bytes = key_row_bytes(keys.format, dim);
  const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0;
  const std::size_t seed_count = seeds.size();
  // Screens are scored `pack` to a scorer query of at most 64 heads (each screen's
  // score its own: ScoreList::heads_per_score), the batch padded with zero screens.
  const std::size_t width = widest_screen(plans), pack = std::max<std::size_t>(1, 64 / width);
  const std::size_t padded = (n + pack - 1) / pack * pack;
  const auto pays = [&](double rho) {
    return !options.fall_back_when_unpaid ||
           pruning_pays(BatchShape{n, count, seed_count, heads, width}, rho);
  };
  const bool prune = count > k && pays(0);
  // The probe's keys: query 0 against the first kProbe, their norms queued first.
  const bool probing = prune && options.fall_back_when_unpaid;
  const std::size_t probe = probing ? std::min(count, kProbe) : 0;
  // The batch's seeds scored beside the probe (speculatively: the fallback discards
  // them) only where they fit beside it in one wave of the scorer.
  const bool speculate =
      probing && double(n) * double(seed_count) * double(tiles16(heads)) <= kSpeculateTiles;

  DosaStats local;
  Buffers b;
  const auto take_workspace = [&]() -> cudaError_t {
    return b.take(Buffers::Sizes{n, count, seed_count, k, width, dim, pack, probe, prune, plans});
  };

  // Full scoring's own lanes: the scorer over every key into `b.rows` (a workspace, so
  // it may run before the inputs' verdict), then the top-k into `out` (after it).
  const auto score_all = [&](const ScoreList& gated) -> cudaError_t {
    if (count == 0) return cudaSuccess;
    return launch_index_scores(queries, weights, n, keys, gated, 0,
                               device_span<float>(b.rows, n * count), stream);
  };
  const auto rank_rows = [&]() -> Status<DosaError> {
    AETHER_TRY(fill(b.ends, n, std::int32_t(count), stream));
    (void)valid_prefix_topk(device_span<const float>(b.rows, n * count), count,
                            device_span<const std::int32_t>(b.ends, n), k, out,
                            stream);  // scores finite: docs/dosa.md's contract
    return Ok{};
  };
  const auto rank_all = [&]() -> Status<DosaError> {
    local.full_queries = n;
    if (stats != nullptr) *stats = local;
    if (count == 0) {
      AETHER_TRY(fill(out.data(), n * k, -1, stream));
      AETHER_TRY(cudaStreamSynchronize(stream));
      return Ok{};
    }
    return rank_rows();
  };

  std::vector<std::int32_t> sorted;
  std::span<std::int32_t> host_counts;
  std::int32_t probe_pays_up_to = 0;
  // Queries [0, m) of pass p: their seeds' scores, tau and (when `top` is given) the
  // seeds' top-K lanes.
  const auto seeds_of = [&](Pass& p, std::size_t m, const std::int32_t* ids, std::int32_t* top,
                            Stream s, Gate gate) -> cudaError_t {
    if (cudaError_t e =
            launch_index_scores(queries.subspan(0, m * heads * dim), weights.subspan(0, m * heads),
                                m, keys, ScoreList{.ids = ids, .gate = gate}, seed_count,
                                device_span<float>(p.seed_scores, m * seed_count), s);
        e != cudaSuccess)
      return e;
    return select_seeds(p.seed_scores, seed_count, k, m, p.tau, top, s, gate);
  };
  // ... their screens (and survivor counts zeroed), then the screens against keys
  // [0, m_keys), scored, and the bound test.
  const auto prepare_of = [&](Pass& p, std::size_t m) -> cudaError_t {
    return prepare_screens(queries.data(), weights.data(), m, (m + pack - 1) / pack * pack, heads,
                           dim, p.plans, p.screen_rows, p.terms, p.counts, stream);
  };
  const auto screens_of = [&](Pass& p, std::size_t m, std::size_t m_keys) -> Status<DosaError> {
    const std::size_t packs = (m + pack - 1) / pack;
    AETHER_TRY(launch_index_scores(
        device_span<const std::uint16_t>(p.screen_rows, packs * pack * width * dim),
        device_span<const float>(p.plans.screen_weights, packs * pack * width), packs,
        DeviceIndexKeys{keys.format, keys.bytes.subspan(0, m_keys * row_bytes), dim},
        ScoreList{.heads_per_score = width}, 0, device_span<float>(b.rows, packs * pack * m_keys),
        stream));
    AETHER_TRY(screen_keys(b.rows, m_keys, m_keys, m, p.terms, p.tau, b.norms, b.scales, b.is_seed,
                           p.list, p.counts, stream));
    return Ok{};
  };

  // The batch's seeds: the keys' norms past the probe's, the seeds' scores and top-K.
  const auto batch_seeds = [&](Stream s, Gate gate) -> cudaError_t {
    if (probe > 0 && probe < count)
      if (cudaError_t e = key_norms(keys.bytes.data() + probe * row_bytes, keys.format, dim,
                                    count - probe, b.norms + probe, b.scales + probe, s);
          e != cudaSuccess)
        return e;
    return seeds_of(b.batch, n, b.seed_ids, b.lanes, s, gate);
  };

  // While the device checks the scorer's inputs for NaN and inf, device work that
  // writes only the workspace: on the scorer's checked shapes, full scoring's
  // scorer or the probe's keys' norms; then, once the seeds and plan 0 have passed
  // the host's checks, the seeds' marks and the probe, query 0 on the first kProbe
  // keys, whose survivor count the host reads after the verdict, the fallback's
  // full scoring queued behind it, and beside the probe on a second stream the
  // batch's seeds (the other plans are checked while they run).
  const auto early = [&]() -> cudaError_t {
    if (n == 0 || k == 0) return cudaSuccess;
    if (cudaError_t e = take_workspace(); e != cudaSuccess) return e;
    return prune ? key_norms(keys.bytes.data(), keys.format, dim, probing ? probe : count, b.norms,
                             b.scales, stream)
                 : score_all({});
  };
  // Plan 0 first when probing (the probe reads it), the others while the device probes.
  const std::size_t checked_first = probing && n > 0 ? 1 : n;
  const auto plans_ok = [&](const HostInputs& in, std::size_t from, std::size_t to) {
    for (std::size_t t = from; t < to; ++t)
      if (auto st =
              dosa_screen::check_plan(std::span(in.weights).subspan(t * heads, heads), plans[t]);
          !st.ok())
        return st;
    return Status<DosaError>(Ok{});
  };
  const auto checked_then_started = [&](const HostInputs& in) -> Status<DosaError> {
    if (plans.size() != n) return de::ShapeMismatch{n, plans.size()};
    if (auto st = plans_ok(in, 0, checked_first); !st.ok()) return st;
    const auto after_plans = [&](Status<DosaError> refusal) {
      auto st = plans_ok(in, checked_first, n);
      return st.ok() ? refusal : st;
    };
    if (count > k && seed_count < k) return after_plans(de::TooFewSeeds{seed_count, k});
    if (out.size() != n * k) return after_plans(de::ShapeMismatch{n * k, out.size()});
    if (n == 0 || k == 0 || !prune) return after_plans(Ok{});
    AETHER_TRY(cudaMemsetAsync(b.is_seed, 0, count, stream));
    AETHER_TRY(mark_seeds(seeds.data(), seed_count, b.is_seed, stream));
    host_counts = pinned_counts(n);
    if (host_counts.data() == nullptr) return de::DeviceFailure{int(cudaErrorMemoryAllocation)};
    if (probing) {  // its count, which gates the batch's seeds below, zeroed before them
      const PlanBlob first(plans.first(1), in.weights.first(heads), width, pack);
      AETHER_TRY(first.upload(b.probe.blob, stream, b.probe.plans));
      AETHER_TRY(prepare_of(b.probe, 1));
    }
    const Stream side = speculate ? fork_side(stream) : stream;
    if (probing) {  // query 0 against the first `probe` keys, on the caller's seeds
      AETHER_TRY(seeds_of(b.probe, 1, seeds.data(), nullptr, stream, {}));
      if (auto st = screens_of(b.probe, 1, probe); !st.ok()) return st;
      AETHER_TRY(
          cudaMemcpyAsync(host_counts.data(), b.probe.counts, 4, cudaMemcpyDeviceToHost, stream));
      AETHER_TRY(cudaEventRecord(probe_counted(), stream));
      // The most survivors of the probe's others (its keys not seeds) at which
      // pruning still pays.
      std::size_t others = probe;
      for (const std::int32_t id : in.seeds) others -= std::size_t(id) < probe;
      const auto pays_at = [&](std::size_t c) { return others == 0 || pays(double(c) / others); };
      std::size_t lo = 0, hi = others;  // pays_at(lo); pays falls as the survivors rise
      if (pays_at(hi)) lo = hi;
      while (hi - lo > 1) (pays_at((lo + hi) / 2) ? lo : hi) = (lo + hi) / 2;
      local.screened = others;
      // Full scoring, run by the device only when the probe's count says pruning does
      // not pay: a fallback waits for no host round trip.
      AETHER_TRY(score_all(ScoreList{.gate = {b.probe.counts, std::int32_t(lo) + 1}}));
      probe_pays_up_to = std::int32_t(lo);
    }
    // The batch's seeds ascending (their top-k's ties to the lower position are to the
    // lower id); when speculating, the rest of the keys' norms and the seeds' scores and
    // top-K beside the probe, joined back before whatever is queued next (the fallback's
    // top-k, or the batch's screens). Their blocks stop once the probe's count, rising
    // as it runs, rules pruning out: a count that rises past the limit ends past it, so
    // a pruned batch has them all.
    if (!std::is_sorted(in.seeds.begin(), in.seeds.end())) {
      sorted.assign(in.seeds.begin(), in.seeds.end());
      std::sort(sorted.begin(), sorted.end());
    }
    const std::span<const std::int32_t> ascending = sorted.empty() ? in.seeds : sorted;
    AETHER_TRY(cudaMemcpyAsync(b.seed_ids, ascending.data(), seed_count * 4, cudaMemcpyHostToDevice,
                               side));
    if (speculate) {
      AETHER_TRY(batch_seeds(side, Gate{b.probe.counts, 0, probe_pays_up_to}));
      AETHER_TRY(join_side(stream, side));
    }
    return after_plans(Ok{});
  };
  HostInputs host;
  if (auto st = check_inputs(queries, weights, query_count, keys, seeds, stream, host,
                             checked_then_started, early);
      !st.ok())
    return st;
  if (stats != nullptr) *stats = local;
  if (n == 0 || k == 0) return Ok{};
  if (!prune) return rank_all();
  // Without a probe the seeds wait for no decision: the device scores them while
  // the host builds the plans' blob.
  if (!probing) AETHER_TRY(batch_seeds(stream, {}));
  // Built while the device probes (a fallback's scoring, queued behind the probe,
  // outlasts it); uploaded only once pruning is decided.
  const PlanBlob all(plans, host.weights, width, padded);
  if (probing) {  // the probe's count, its fallback queued behind it
    AETHER_TRY(cudaEventSynchronize(probe_counted()));
    if (host_counts[0] > probe_pays_up_to) {
      local.survivors = std::size_t(host_counts[0]);  // of the probe's others
      return rank_all();
    }
    if (!speculate) AETHER_TRY(batch_seeds(stream, {}));
  }
  AETHER_TRY(all.upload(b.batch.blob, stream, b.batch.plans));
  AETHER_TRY(prepare_of(b.batch, n));
  if (auto st = screens_of(b.batch, n, count); !st.ok()) return st;
  AETHER_TRY(
      cudaMemcpyAsync(host_counts.data(), b.batch.counts, n * 4, cudaMemcpyDeviceToHost, stream));
  AETHER_TRY(cudaStreamSynchronize(stream));
  const std::size_t longest =
      std::size_t(*std::max_element(host_counts.begin(), host_counts.end()));
  if (longest > 0)
    AETHER_TRY(launch_index_scores(queries, weights, n, keys,
                                   ScoreList{b.batch.list, count, b.batch.counts}, longest,
                                   device_span<float>(b.list_scores, n * longest), stream));
  const Candidates candidates{.seed_scores = b.batch.seed_scores,
                              .seed_count = seed_count,
                              .lanes = b.lanes,
                              .seed_ids = b.seed_ids,
                              .k = k,
                              .list = b.batch.list,
                              .list_stride = count,
                              .list_scores = b.list_scores,
                              .score_stride = longest,
                              .counts = b.batch.counts,
                              .tau = b.batch.tau,
                              .id_bits = std::uint32_t(std::bit_width(count))};
  if (k + longest <= kMergeCapacity) {
    AETHER_TRY(merge_candidates(candidates, n, out.data(), stream));
    AETHER_TRY(cudaStreamSynchronize(stream));
  } else {  // the wide merge: candidates at their ids among kFiller, ranked by the top-k
    std::vector<float> host_tau(n);
    AETHER_TRY(
        cudaMemcpyAsync(host_tau.data(), b.batch.tau, n * 4, cudaMemcpyDeviceToHost, stream));
    AETHER_TRY(fill(b.rows, n * count, kFiller, stream));
    AETHER_TRY(place(candidates, n, longest, b.rows, count, stream));
    AETHER_TRY(cudaStreamSynchronize(stream));
    for (std::size_t t = 0; t < n; ++t)
      if (host_tau[t] == kFiller)  // kFiller would tie with its candidates: in full
        AETHER_TRY(launch_index_scores(queries.subspan(t * heads * dim, heads * dim),
                                       weights.subspan(t * heads, heads), 1, keys, {}, 0,
                                       device_span<float>(b.rows + t * count, count), stream));
    if (auto st = rank_rows(); !st.ok()) return st;
  }
  local.screened = n * (count - seed_count);
  local.seeds_scored = n * seed_count;
  for (std::int32_t c : host_counts) local.survivors += std::size_t(c);
  if (stats != nullptr) *stats = local;
  return Ok{};
}

}  // namespace aether::cuda
