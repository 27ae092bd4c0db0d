// CPU indexer scoring against the machine's FMA peak measured in the same run
// (SPEC section 4: fp32 full scoring, H 64, D 128, >= 50% of peak), and the exact
// top-k against a full std::sort of the same row. Peak: every hardware thread
// runs 12 independent AVX2 FMA chains in registers.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "bench/topk_distributions.hpp"
#include "impl/cpu/indexer.hpp"

namespace {

constexpr std::size_t kHeads = 64, kDim = 128;
double g_peak_flops = 0;  // fp32 FLOP/s, all hardware threads, measured in main()

__attribute__((target("avx2,fma"))) float fma_chains(std::size_t iterations) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-3f);
  for (std::size_t n = 0; n < iterations; ++n)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0];
}

double measure_peak() {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t iterations = 40'000'000;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> pool;
    std::vector<float> sink(threads);
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { sink[t] = fma_chains(iterations); });
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(sink.data());
    best = std::max(best, double(threads) * double(iterations) * 12 * 8 * 2 / s);
  }
  return best;
}

std::vector<std::byte> random_keys(aether::KeyFormat format, std::size_t rows) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<std::byte> bytes(rows * aether::key_row_bytes(format, kDim));
  for (std::size_t j = 0; j < rows; ++j) {
    std::byte* row = bytes.data() + j * aether::key_row_bytes(format, kDim);
    for (std::size_t d = 0; d < kDim; ++d) {
      const float v = normal(rng);
      if (format == aether::KeyFormat::F32) std::memcpy(row + 4 * d, &v, 4);
      if (format == aether::KeyFormat::BF16) {
        const auto half = std::uint16_t(std::bit_cast<std::uint32_t>(v) >> 16);
        std::memcpy(row + 2 * d, &half, 2);
      }
      if (format == aether::KeyFormat::E4M3) row[d] = std::byte(rng() % 0x7e);  // finite codes
    }
    if (format == aether::KeyFormat::E4M3) {
      const float scale = 0.01f;
      std::memcpy(row + kDim, &scale, 4);
    }
  }
  return bytes;
}

void BM_index_scores(benchmark::State& state) {
  const auto format = aether::KeyFormat(state.range(0));
  const std::size_t rows = std::size_t(state.range(1));
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> queries(kHeads * kDim), weights(kHeads), out(rows);
  for (float& q : queries) q = normal(rng);
  for (float& w : weights) w = normal(rng);
  const auto bytes = random_keys(format, rows);
  const aether::IndexKeys keys{format, bytes, kDim};
  for (auto _ : state) {
    auto st = aether::cpu::index_scores(queries, weights, keys, out);
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 2.0 * kHeads * kDim * double(rows) * double(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.counters["peak_GFLOPs"] = g_peak_flops / 1e9;
  state.counters["fraction_of_peak"] =
      benchmark::Counter(flops / g_peak_flops, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_index_scores)
    ->ArgsProduct({{int(aether::KeyFormat::F32), int(aether::KeyFormat::BF16),
                    int(aether::KeyFormat::E4M3)},
                   {4096, 32768}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_topk_vs_sort(benchmark::State& state) {
  const std::size_t n = std::size_t(state.range(0)), k = 2048;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> scores(n);
  for (float& s : scores) s = normal(rng);
  std::vector<std::int32_t> out(k), order(n);
  const std::vector<std::int32_t> ends{std::int32_t(n)};
  double topk_s = 0, sort_s = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto st = aether::cpu::valid_prefix_topk(scores, n, ends, k, out);
    const auto t1 = std::chrono::steady_clock::now();
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return scores[std::size_t(a)] > scores[std::size_t(b)] ||
             (scores[std::size_t(a)] == scores[std::size_t(b)] && a < b);
    });
    const auto t2 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(order.data());
    topk_s += std::chrono::duration<double>(t1 - t0).count();
    sort_s += std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  state.counters["ratio_to_full_sort"] = topk_s / sort_s;
}
BENCHMARK(BM_topk_vs_sort)
    ->Arg(131072)
    ->Arg(262144)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// 16 rows of 262144 scores from one of bench/topk_distributions.hpp's distributions,
// timed beside the same call on Gaussian rows (ratio_to_gaussian): the radix
// selection's cost must not depend on the scores.
void BM_topk_distribution(benchmark::State& state) {
  constexpr std::size_t rows = 16, n = 262144, k = 2048;
  const auto distributions = aether::bench::topk_distributions();
  const auto& d = distributions[std::size_t(state.range(0))];
  state.SetLabel(d.name);
  std::vector<float> scores(rows * n), gaussian(rows * n);
  std::mt19937 rng(11);
  for (std::size_t r = 0; r < rows; ++r) d.fill(scores.data() + r * n, n, k, rng);
  for (std::size_t r = 0; r < rows; ++r) distributions[0].fill(gaussian.data() + r * n, n, k, rng);
  std::vector<std::int32_t> out(rows * k);
  const std::vector<std::int32_t> ends(rows, std::int32_t(n));
  double own = 0, base = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto st = aether::cpu::valid_prefix_topk(scores, n, ends, k, out);
    const auto t1 = std::chrono::steady_clock::now();
    auto st_base = aether::cpu::valid_prefix_topk(gaussian, n, ends, k, out);
    const auto t2 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(st_base);
    own += std::chrono::duration<double>(t1 - t0).count();
    base += std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  state.counters["ratio_to_gaussian"] = own / base;
}
BENCHMARK(BM_topk_distribution)
    ->DenseRange(0, int(aether::bench::topk_distributions().size()) - 1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  g_peak_flops = measure_peak();
  std::printf("fp32 FMA peak, %u threads: %.1f GFLOP/s\n",
              std::max(1u, std::thread::hardware_concurrency()), g_peak_flops / 1e9);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
