// CPU C2 compression (r 2, D 512, ring 7) against memcpy of the projected input,
// timed interleaved in one run (SPEC section 4 asks the CPU against memcpy):
// prefill of requests x 512 tokens, and a decode step of 6 positions per request.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "impl/cpu/compress.hpp"

namespace {

using namespace aether;
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void run(benchmark::State& state, bool decode) {
  const auto requests_n = std::size_t(state.range(0));
  const std::int32_t tokens = decode ? 6 : 512;
  const CompressShape shape{2, 512, 7, requests_n};
  const std::size_t width = 2 * shape.dim;
  std::vector<CompressRequest> requests;
  for (std::size_t i = 0; i < requests_n; ++i)
    requests.push_back({std::int32_t(i), decode ? 1001 : 0, tokens});
  const std::size_t rows = requests_n * std::size_t(decode ? tokens : tokens / 2);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> projected(requests_n * std::size_t(tokens) * width), copy(projected.size());
  std::vector<float> ring(shape.state_slots * shape.ring * width);
  for (float& x : projected) x = normal(rng);
  for (float& x : ring) x = normal(rng);
  std::vector<std::uint16_t> out(rows * shape.dim);
  std::vector<std::int32_t> index(rows), positions(rows);
  double ours = 0, memcpy_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    std::memcpy(copy.data(), projected.data(), projected.size() * 4);
    const auto t1 = Clock::now();
    const auto st = (decode ? cpu::compress_decode : cpu::compress_prefill)(
        requests, projected, ring, shape, out, index, positions);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(st);
    benchmark::DoNotOptimize(copy.data());
    benchmark::ClobberMemory();
    memcpy_s += seconds(t0, t1);
    ours += seconds(t1, t2);
    state.SetIterationTime(seconds(t1, t2));
  }
  state.counters["projected_MiB"] = double(projected.size()) * 4 / 1048576;
  state.counters["ratio_to_memcpy"] = ours / memcpy_s;
}

void BM_prefill_vs_memcpy(benchmark::State& state) { run(state, false); }
void BM_decode_vs_memcpy(benchmark::State& state) { run(state, true); }
BENCHMARK(BM_prefill_vs_memcpy)->Arg(1)->Arg(8)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_decode_vs_memcpy)->Arg(16)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
