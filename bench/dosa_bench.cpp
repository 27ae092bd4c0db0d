// DoSA on the CPU against full scoring (the scorer, then the top-k) in the same run,
// on the structured workload of props/support/dosa_workload.hpp, identical lanes
// asserted. Two tables:
// - `dosa_bench sweep`: survivor rates (survivors / keys screened) across the
//   workload's parameters, retained-head budgets, with and without the aggregated
//   negative deduction; L 32768, K 2048, 8 queries, the cold prior's seeds.
// - `dosa_bench` (default): time of a batch of 64 queries, H 64, D 128, K 2048, at
//   L 32768 and 131072, on the default workload and on parallel heads (one
//   direction, no noise: where one anchor is exact): full scoring, pruned with the
//   cost rule, their ratio, the survivor rate. Medians of 3 runs. `dosa_bench
//   parallel 32768` (or `default`, and either L) times that one case.
// - `dosa_bench breakeven [L [BUDGET [NOISE]]]` (L 0: both): pruning forced on (no
//   fallback) on parallel heads as the heads' noise grows, 4096 seeds, budget 16 or
//   BUDGET: the survivor rate at which pruned and full times cross. NOISE times that
//   one level alone (a case to profile).
// - `dosa_bench decode`: the decode path (source 001 §1) on one query's row of
//   L 131072 Gaussian scores, the recent keys the top-K of the row one step earlier
//   (each score moved by noise of the given scale), against the top-k over the row;
//   medians of 21 calls.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/breakeven_noise.hpp"
#include "bench/decode_rows.hpp"
#include "impl/cpu/dosa.hpp"
#include "impl/cpu/indexer.hpp"
#include "props/support/dosa_workload.hpp"

namespace {

using namespace aether;
using V = std::vector<std::int32_t>;

struct Setup {
  props::DosaWorkload w;
  props::DosaWorkloadParams p;
  IndexKeys keys() const { return {KeyFormat::F32, std::as_bytes(std::span(w.keys)), p.dim}; }
};

std::vector<DosaPlan> plans_for(const Setup& s, const V& seeds, std::size_t budget, bool aggregate,
                                std::size_t anchors = 1) {
  std::vector<DosaPlan> plans;
  const std::size_t h = s.p.heads, d = s.p.dim;
  for (std::size_t t = 0; t < s.p.queries; ++t) {
    plans.push_back(cpu::plan_heads(std::span(s.w.queries).subspan(t * h * d, h * d),
                                    std::span(s.w.weights).subspan(t * h, h), s.keys(), budget,
                                    cpu::plan_sample(seeds), anchors));
    if (!aggregate) plans.back().aggregated.clear();
  }
  return plans;
}

// Full scoring as fast as the scorer goes: the batch of queries in one call (each
// key tile decoded once for all of them), then each query's top-k.
V full_lanes(const Setup& s, std::size_t k) {
  const std::size_t n = s.p.keys;
  V out(s.p.queries * k);
  std::vector<float> scores(s.p.queries * n);
  (void)cpu::index_scores_batch(s.w.queries, s.w.weights, s.p.queries, s.keys(), scores);
  for (std::size_t t = 0; t < s.p.queries; ++t)
    (void)cpu::valid_prefix_topk(std::span(scores).subspan(t * n, n), n, V{std::int32_t(n)}, k,
                                 std::span(out).subspan(t * k, k));
  return out;
}

double seconds(auto&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int sweep() {
  constexpr std::size_t k = 2048, seed_count = 12288;
  struct Variant {
    const char* name;
    props::DosaWorkloadParams p;
  };
  std::vector<Variant> variants;
  const auto add = [&](const char* name, auto change) {
    props::DosaWorkloadParams p;
    p.queries = 8;
    change(p);
    variants.push_back({name, p});
  };
  add("default", [](auto&) {});
  add("parallel heads (1 direction, no noise)", [](auto& p) {
    p.head_directions = 1;
    p.head_noise = 0;
    p.query_drift = 0;
  });
  add("redundant heads (noise 0.1)", [](auto& p) { p.head_noise = 0.1f; });
  add("independent heads (noise 1.0)", [](auto& p) { p.head_noise = 1.0f; });
  add("16 head directions", [](auto& p) { p.head_directions = 16; });
  add("4 key directions", [](auto& p) { p.key_directions = 4; });
  add("32 key directions", [](auto& p) { p.key_directions = 32; });
  add("key noise 1.0", [](auto& p) { p.key_noise = 1.0f; });
  add("no sinks", [](auto& p) { p.sinks = 0; });
  add("30% negative heads", [](auto& p) { p.negative_heads = 0.3f; });
  add("70% negative heads", [](auto& p) { p.negative_heads = 0.7f; });
  add("32 heads", [](auto& p) { p.heads = 32; });
  std::printf("survivor rate (survivors / keys screened), L 32768, K %zu, %zu cold-prior seeds\n",
              k, seed_count);
  std::printf("%-32s %7s %12s %12s %14s\n", "workload", "budget", "aggregated", "no aggregate",
              "4 anchors, agg");
  for (const Variant& v : variants) {
    Setup s{props::make_dosa_workload(v.p), v.p};
    const V seeds =
        cpu::cold_prior_seeds(s.w.queries, s.w.weights, v.p.queries, s.keys(), k, seed_count);
    const std::vector<std::size_t> budgets = v.p.heads == 32 ? std::vector<std::size_t>{14, 16, 20}
                                                             : std::vector<std::size_t>{14, 16, 28};
    for (std::size_t budget : budgets) {
      double rate[3];
      for (int a = 0; a < 3; ++a) {
        const auto plans = plans_for(s, seeds, budget, a != 1, a == 2 ? 4 : 1);
        V out(v.p.queries * k);
        cpu::DosaStats stats;
        (void)cpu::dosa_topk(s.w.queries, s.w.weights, v.p.queries, s.keys(), k, seeds, plans, out,
                             cpu::DosaOptions{false}, &stats);
        rate[a] = double(stats.survivors) / double(std::max<std::size_t>(1, stats.screened));
      }
      std::printf("%-32s %7zu %11.1f%% %11.1f%% %13.1f%%\n", v.name, budget, 100 * rate[0],
                  100 * rate[1], 100 * rate[2]);
    }
  }
  return 0;
}

// One case timed: full scoring and DoSA (with `options`) three times each,
// alternated; the medians, their ratio, the survivor rate; false if the lanes differ.
bool compare(const char* name, const props::DosaWorkloadParams& p, std::size_t seed_count,
             std::size_t budget, const DosaOptions& options) {
  constexpr std::size_t k = 2048;
  Setup s{props::make_dosa_workload(p), p};
  const V seeds =
      cpu::cold_prior_seeds(s.w.queries, s.w.weights, p.queries, s.keys(), k, seed_count);
  const auto plans = plans_for(s, seeds, budget, true);
  V want, got(p.queries * k);
  cpu::DosaStats stats;
  std::vector<double> full, pruned;
  for (int rep = 0; rep < 3; ++rep) {
    full.push_back(seconds([&] { want = full_lanes(s, k); }));
    pruned.push_back(seconds([&] {
      (void)cpu::dosa_topk(s.w.queries, s.w.weights, p.queries, s.keys(), k, seeds, plans, got,
                           options, &stats);
    }));
  }
  std::sort(full.begin(), full.end());
  std::sort(pruned.begin(), pruned.end());
  std::printf(
      "dosa cpu %s L %6zu, T %zu, H %zu, D %zu, K %zu, %5zu seeds, budget %zu: full %.3f s, "
      "pruned %.3f s, full / pruned %.2fx; survivors %.2f%% of %zu screened, %zu of %zu "
      "queries in full, %.1f seeds scored a pruned query; lanes %s\n",
      name, p.keys, p.queries, p.heads, p.dim, k, seed_count, budget, full[1], pruned[1],
      full[1] / pruned[1],
      100 * double(stats.survivors) / double(std::max<std::size_t>(1, stats.screened)),
      stats.screened, stats.full_queries, p.queries,
      double(stats.seeds_scored) / double(std::max<std::size_t>(1, p.queries - stats.full_queries)),
      got == want ? "identical" : "DIFFER");
  return got == want;
}

// `workload` "parallel", "default" or empty (both); `only_keys` 0 for both lengths.
int timing(const std::string& workload, std::size_t only_keys) {
  bool ok = true;
  for (const bool parallel : {false, true})
    for (const std::size_t keys : {32768, 131072}) {
      if (!workload.empty() && (workload == "parallel") != parallel) continue;
      if (only_keys != 0 && only_keys != keys) continue;
      for (const std::size_t seed_count : {4096, 12288}) {
        props::DosaWorkloadParams p;
        p.keys = keys;
        if (parallel) p.head_directions = 1, p.head_noise = 0, p.query_drift = 0;
        ok = compare(parallel ? "parallel heads" : "default       ", p, seed_count, 16, {}) && ok;
      }
    }
  return ok ? 0 : 1;
}

// Pruning forced on (no fallback) on parallel heads as the heads' noise grows, so
// that the survivor rate rises: where pruned and full times cross.
int breakeven(std::size_t only_keys, std::size_t budget, float only_noise) {
  if (only_noise >= 0 &&
      std::ranges::find(bench::kBreakevenNoise, only_noise) == std::end(bench::kBreakevenNoise)) {
    std::fprintf(stderr, "dosa_bench breakeven: NOISE is one of");
    for (const float noise : bench::kBreakevenNoise) std::fprintf(stderr, " %g", double(noise));
    std::fprintf(stderr, "\n");
    return 2;
  }
  bool ok = true;
  for (const std::size_t keys : {32768, 131072}) {
    if (only_keys != 0 && only_keys != keys) continue;
    for (const float noise : bench::kBreakevenNoise) {
      if (only_noise >= 0 && noise != only_noise) continue;
      props::DosaWorkloadParams p;
      p.keys = keys;
      p.head_directions = 1, p.head_noise = noise, p.query_drift = 0;
      char name[32];
      std::snprintf(name, sizeof name, "noise %.3f   ", double(noise));
      ok = compare(name, p, 4096, budget, DosaOptions{false}) && ok;
    }
  }
  return ok ? 0 : 1;
}

int decode() {
  constexpr std::size_t L = 131072, K = 2048;
  const bench::DecodeRows rows = bench::decode_rows(L, K);
  const std::vector<float>& row = rows.row;
  const auto median_s = [](auto&& fn) {
    std::vector<double> t;
    for (int i = 0; i < 21; ++i) t.push_back(seconds(fn));
    std::nth_element(t.begin(), t.begin() + 10, t.end());
    return t[10];
  };
  bool ok = true;
  for (std::size_t n = 0; n < std::size(bench::kDecodeNoise); ++n) {
    const float noise = bench::kDecodeNoise[n];
    const V& recent = rows.recent[n];
    V plain(K), decoded(K);
    const double top_s = median_s([&] {
      if (!cpu::valid_prefix_topk(row, L, V{std::int32_t(L)}, K, plain).ok()) std::exit(1);
    });
    const double decode_s = median_s([&] {
      if (!cpu::decode_topk(row, recent, K, decoded).ok()) std::exit(1);
    });
    std::printf(
        "dosa cpu decode L %zu, K %zu, recent top-K moved by noise %.2f: top-k %.3f ms, decode "
        "%.3f ms, top-k / decode %.2fx; lanes %s\n",
        L, K, double(noise), top_s * 1e3, decode_s * 1e3, top_s / decode_s,
        plain == decoded ? "identical" : "DIFFER");
    ok = ok && plain == decoded;
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "sweep") == 0) return sweep();
  if (argc > 1 && std::strcmp(argv[1], "decode") == 0) return decode();
  if (argc > 1 && std::strcmp(argv[1], "breakeven") == 0)
    return breakeven(argc > 2 ? std::stoul(argv[2]) : 0, argc > 3 ? std::stoul(argv[3]) : 16,
                     argc > 4 ? std::stof(argv[4]) : -1.0f);
  return timing(argc > 1 ? argv[1] : "", argc > 2 ? std::stoul(argv[2]) : 0);
}
