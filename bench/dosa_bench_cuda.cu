// DoSA on the GPU against full scoring on the GPU (cuda::index_scores, then
// cuda::valid_prefix_topk) in the same run, identical lanes asserted, on the
// structured workload of props/support/dosa_workload.hpp (bf16 queries and keys).
// - `dosa_bench_cuda` (default): a batch of 64 queries, H 64, D 128, K 2048, at L
//   32768 and 131072: the default workload (every key survives: the cost rule's
//   fallback), Gaussian queries and keys (the same), and parallel heads (one
//   direction, no noise: one anchor is exact), budgets 15 and 16 (with a_A, one
//   or two 16-head tiles), 4096 and 12288 cold-prior seeds. Medians of 11 calls.
// - `dosa_bench_cuda costs`: pruning forced on (no probe, the seeds scored after
//   the decision) on parallel heads at L 32768 to 131072, both seed counts and both
//   budgets: the figures the cost rule (impl/cuda/dosa_host.cu: pruning_pays) is
//   fitted to.
// - `dosa_bench_cuda one [NOISE]`: parallel heads at L 131072, 4096 seeds, budget
//   15, two calls each (for a profiler); with a heads' noise, pruning forced on.
// - `dosa_bench_cuda breakeven`: pruning forced on (no fallback) as the heads'
//   noise grows (bench/breakeven_noise.hpp), L 32768 and 131072, 4096 seeds, budget
//   15: the survivor rate at which pruned and full times cross, each case forced
//   ("noise") and under the cost rule ("probed").
// - `dosa_bench_cuda decode`: the decode path (source 001 §1) on one query's row of
//   L 131072 Gaussian scores, the recent keys the top-K of the row one step earlier
//   (each score moved by noise of the given scale), against the top-k over the row.
// Both calls wait for the device (the pruned one reads its survivor counts), so
// each is timed on the host around the whole call.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/breakeven_noise.hpp"
#include "bench/cuda_timing.cuh"
#include "bench/decode_rows.hpp"
#include "impl/cuda/dosa.hpp"
#include "props/support/dosa_bf16_case.hpp"

namespace {

using namespace aether;
using V = std::vector<std::int32_t>;
using bench::check;

constexpr std::size_t kK = 2048;

template <class T>
T* upload(const std::vector<T>& host) {
  T* p = nullptr;
  check(cudaMalloc(&p, std::max<std::size_t>(1, host.size()) * sizeof(T)), "malloc");
  check(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return p;
}

double median_ms(int reps, const std::function<void()>& fn) {
  fn();  // warm: the workspace is allocated once
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    check(cudaDeviceSynchronize(), "sync");
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    check(cudaDeviceSynchronize(), "sync");
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[std::size_t(reps / 2)];
}

struct Result {
  double full_ms, pruned_ms, rate;
  DosaStats stats;
  bool identical;
};

// Full scoring and DoSA on one case, `reps` calls each (the seeds and plans: the CPU's
// cold prior and plan rule, props/support/dosa_bf16_case.hpp).
Result run(const props::Bf16DosaCase& c, bool fallback, int reps = 11) {
  const std::size_t n = c.p.queries, h = c.p.heads, d = c.p.dim, L = c.p.keys;
  const V& seeds = c.seeds;
  const std::vector<DosaPlan>& plans = c.plans;
  auto* q = upload(c.query_bits);
  auto* w = upload(c.weights);
  auto* k = upload(c.key_bits);
  auto* s = upload(seeds);
  float* scores = nullptr;
  std::int32_t *ends = nullptr, *full_out = nullptr, *pruned_out = nullptr;
  check(cudaMalloc(&scores, n * L * 4), "malloc");
  check(cudaMalloc(&full_out, n * kK * 4), "malloc");
  check(cudaMalloc(&pruned_out, n * kK * 4), "malloc");
  ends = upload(V(n, std::int32_t(L)));
  const cuda::DeviceIndexKeys keys{
      KeyFormat::BF16,
      cuda::device_span<const std::byte>(reinterpret_cast<const std::byte*>(k), L * d * 2), d};
  const auto queries = bench::on_device<const std::uint16_t>(q, n * h * d);
  const auto weights = bench::on_device<const float>(w, n * h);
  Result r{};
  r.full_ms = median_ms(reps, [&] {
    if (!cuda::index_scores(queries, weights, n, keys, bench::on_device(scores, n * L)).ok() ||
        !cuda::valid_prefix_topk(bench::on_device<const float>(scores, n * L), L,
                                 bench::on_device<const std::int32_t>(ends, n), kK,
                                 bench::on_device(full_out, n * kK))
             .ok())
      std::exit(1);
  });
  r.pruned_ms = median_ms(reps, [&] {
    if (!cuda::dosa_topk(queries, weights, n, keys, kK,
                         bench::on_device<const std::int32_t>(s, seeds.size()), plans,
                         bench::on_device(pruned_out, n * kK), DosaOptions{fallback}, &r.stats)
             .ok())
      std::exit(1);
  });
  V want(n * kK), got(n * kK);
  check(cudaMemcpy(want.data(), full_out, n * kK * 4, cudaMemcpyDeviceToHost), "download");
  check(cudaMemcpy(got.data(), pruned_out, n * kK * 4, cudaMemcpyDeviceToHost), "download");
  r.identical = want == got;
  r.rate = double(r.stats.survivors) / double(std::max<std::size_t>(1, r.stats.screened));
  for (void* p : {(void*)q, (void*)w, (void*)k, (void*)s, (void*)scores, (void*)ends,
                  (void*)full_out, (void*)pruned_out})
    cudaFree(p);
  return r;
}

void print(const char* name, const props::DosaWorkloadParams& p, std::size_t seed_count,
           std::size_t budget, const Result& r) {
  std::printf(
      "dosa cuda %-15s L %6zu, T %zu, H %zu, D %zu, K %zu, %5zu seeds, budget %zu: full %.3f ms, "
      "pruned %.3f ms, full / pruned %.2fx; survivors %.2f%% of %zu screened, %zu of %zu queries "
      "in full; lanes %s\n",
      name, p.keys, p.queries, p.heads, p.dim, kK, seed_count, budget, r.full_ms, r.pruned_ms,
      r.full_ms / r.pruned_ms, 100 * r.rate, r.stats.screened, r.stats.full_queries, p.queries,
      r.identical ? "identical" : "DIFFER");
}

props::DosaWorkloadParams gaussian(props::DosaWorkloadParams p) {
  p.key_directions = 0;
  p.key_noise = 1;
  p.head_directions = 0;
  p.head_noise = 1;
  return p;
}

int timing() {
  bool ok = true;
  for (const std::size_t keys : {32768, 131072}) {
    props::DosaWorkloadParams base;
    base.keys = keys;
    for (const auto& [name, p] : {std::pair{"default", base}, std::pair{"gaussian", gaussian(base)},
                                  std::pair{"parallel heads", props::parallel_heads(base)}})
      for (const std::size_t seed_count : {4096, 12288})
        for (const std::size_t budget : {15, 16}) {
          const Result r = run(props::bf16_dosa_case(p, kK, seed_count, budget), true);
          print(name, p, seed_count, budget, r);
          ok = ok && r.identical;
        }
  }
  return ok ? 0 : 1;
}

int breakeven() {
  bool ok = true;
  for (const std::size_t keys : {32768, 131072})
    for (const float noise : bench::kBreakevenNoise) {
      props::DosaWorkloadParams p = props::parallel_heads({});
      p.keys = keys;
      p.head_noise = noise;
      const props::Bf16DosaCase c = props::bf16_dosa_case(p, kK, 4096, 15);
      for (const bool probed : {false, true}) {
        const Result r = run(c, probed);
        char name[32];
        std::snprintf(name, sizeof name, "%s %.3f", probed ? "probed" : "noise", double(noise));
        print(name, p, 4096, 15, r);
        ok = ok && r.identical;
      }
    }
  return ok ? 0 : 1;
}

int costs() {
  bool ok = true;
  for (const std::size_t keys : {32768, 65536, 98304, 131072})
    for (const std::size_t seed_count : {4096, 12288})
      for (const std::size_t budget : {15, 16}) {
        props::DosaWorkloadParams p = props::parallel_heads({});
        p.keys = keys;
        const Result r = run(props::bf16_dosa_case(p, kK, seed_count, budget), false);
        print("forced", p, seed_count, budget, r);
        ok = ok && r.identical;
      }
  return ok ? 0 : 1;
}

// `noise` above 0: the heads' noise of the break-even sweep, pruning forced on.
int one(float noise) {
  props::DosaWorkloadParams p = props::parallel_heads({});
  p.keys = 131072;
  p.head_noise = noise;
  const Result r = run(props::bf16_dosa_case(p, kK, 4096, 15), noise == 0, 1);
  print(noise == 0 ? "parallel heads" : "forced", p, 4096, 15, r);
  return r.identical ? 0 : 1;
}

int decode() {
  constexpr std::size_t L = 131072;
  const bench::DecodeRows rows = bench::decode_rows(L, kK);
  const std::vector<float>& row = rows.row;
  bool ok = true;
  for (std::size_t n = 0; n < std::size(bench::kDecodeNoise); ++n) {
    const float noise = bench::kDecodeNoise[n];
    const V& recent = rows.recent[n];
    float* scores = upload(row);
    std::int32_t* ids = upload(recent);
    std::int32_t* ends = upload(V{std::int32_t(L)});
    std::int32_t *plain = nullptr, *decoded = nullptr;
    check(cudaMalloc(&plain, kK * 4), "malloc");
    check(cudaMalloc(&decoded, kK * 4), "malloc");
    const auto row_span = bench::on_device<const float>(scores, L);
    const double top_ms = median_ms(21, [&] {
      if (!cuda::valid_prefix_topk(row_span, L, bench::on_device<const std::int32_t>(ends, 1), kK,
                                   bench::on_device(plain, kK))
               .ok())
        std::exit(1);
    });
    const double decode_ms = median_ms(21, [&] {
      if (!cuda::decode_topk(row_span, bench::on_device<const std::int32_t>(ids, kK), kK,
                             bench::on_device(decoded, kK))
               .ok())
        std::exit(1);
    });
    V want(kK), got(kK);
    check(cudaMemcpy(want.data(), plain, kK * 4, cudaMemcpyDeviceToHost), "download");
    check(cudaMemcpy(got.data(), decoded, kK * 4, cudaMemcpyDeviceToHost), "download");
    std::printf(
        "dosa cuda decode L %zu, K %zu, recent top-K moved by noise %.2f: top-k %.3f ms, decode "
        "%.3f ms, top-k / decode %.2fx; lanes %s\n",
        L, kK, double(noise), top_ms, decode_ms, top_ms / decode_ms,
        want == got ? "identical" : "DIFFER");
    ok = ok && want == got;
    for (void* p : {(void*)scores, (void*)ids, (void*)ends, (void*)plain, (void*)decoded})
      cudaFree(p);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("dosa_bench_cuda: no CUDA device visible, nothing timed\n");
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "breakeven") == 0) return breakeven();
  if (argc > 1 && std::strcmp(argv[1], "costs") == 0) return costs();
  if (argc > 1 && std::strcmp(argv[1], "one") == 0) return one(argc > 2 ? std::stof(argv[2]) : 0);
  if (argc > 1 && std::strcmp(argv[1], "decode") == 0) return decode();
  return timing();
}
