// CPU serving scatter against memcpy of the same buffer, timed interleaved in one
// run (SPEC section 4: scatter <= 1.10x memcpy). rows x topk 2048, S 64.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "bench/witness_rows.hpp"
#include "impl/cpu/witness.hpp"

namespace {

using I = std::int32_t;
using aether::bench::kContext, aether::bench::kSegments, aether::bench::kTopk,
    aether::bench::learned_rows;

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void BM_scatter_vs_memcpy(benchmark::State& state) {
  const auto rows = std::size_t(state.range(0));
  std::vector<I> buf = learned_rows(rows), copy(buf.size());
  const std::vector<I> lens(rows, kContext);
  double scatter_s = 0, memcpy_s = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    std::memcpy(copy.data(), buf.data(), buf.size() * sizeof(I));
    auto t1 = Clock::now();
    auto st = aether::cpu::scatter_topology_witnesses(buf, kTopk, lens, kSegments);
    auto t2 = Clock::now();
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
    memcpy_s += seconds(t0, t1);
    scatter_s += seconds(t1, t2);
    state.SetIterationTime(seconds(t1, t2));
  }
  state.counters["bytes"] = double(buf.size() * sizeof(I));
  state.counters["memcpy_GBps"] =
      double(state.iterations()) * double(buf.size() * sizeof(I)) * 2 / memcpy_s / 1e9;
  state.counters["ratio_to_memcpy"] = scatter_s / memcpy_s;
}
BENCHMARK(BM_scatter_vs_memcpy)
    ->RangeMultiplier(4)
    ->Range(32, 32768)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
