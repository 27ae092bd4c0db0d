// GPU timing of the exact top-k, K 2048, against reading the scores once
// (bench/cuda_timing.cuh's read-only kernel) in the same run: rows 1, 16, 256 and
// 2048 at L 131072 (prefixes of one 2048-row array) and 256 rows at L 262144 (the
// bar's shape). With AETHER_TOPK_DUMP=DIR the scores go to DIR/scores_L.bin and
// the times to DIR/aether_times.txt, so that bench/indexer_topk_torch.py times
// torch.topk on the same data in the same job and prints the ratios. Before
// timing, the GPU's choices are checked against the CPU backend, lane for lane.
// `indexer_bench_cuda distributions` times instead the table of score
// distributions (bench/topk_distributions.hpp) at 16 x 131072, 256 x 262144,
// 2048 x 131072 (the read-once path) and 256 x 8192 (the one-block kernel), each
// against the Gaussian of its shape and one read of its scores;
// the times go to DIR/distribution_times.txt for the torch script.
// `indexer_bench_cuda distributions NAME` only checks distribution NAME at each
// shape, one call each, for a profiler (ncu -k regex:wide_).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "bench/cuda_timing.cuh"
#include "bench/topk_distributions.hpp"
#include "impl/cpu/indexer.hpp"
#include "impl/cuda/indexer.hpp"

using namespace aether::bench;
namespace cuda = aether::cuda;
namespace cpu = aether::cpu;

namespace {
// One shape's device buffers: the scores, every row's end at its width, K lanes a
// row, a verdict and the read's sink; freed with it.
struct TopkBuffers {
  float* scores = nullptr;
  std::int32_t *ends = nullptr, *out = nullptr;
  int* sink = nullptr;
  cuda::DeviceVerdict* verdict = nullptr;
  TopkBuffers(std::size_t rows, std::size_t width, std::size_t k) {
    check(cudaMalloc(&scores, rows * width * 4), "malloc");
    check(cudaMalloc(&ends, rows * 4), "malloc");
    check(cudaMalloc(&out, rows * k * 4), "malloc");
    check(cudaMalloc(&sink, 4), "malloc");
    check(cudaMalloc(&verdict, sizeof *verdict), "malloc");
    const std::vector<std::int32_t> host_ends(rows, std::int32_t(width));
    check(cudaMemcpy(ends, host_ends.data(), rows * 4, cudaMemcpyHostToDevice), "upload");
  }
  TopkBuffers(const TopkBuffers&) = delete;
  TopkBuffers& operator=(const TopkBuffers&) = delete;
  ~TopkBuffers() {
    cudaFree(scores);
    cudaFree(ends);
    cudaFree(out);
    cudaFree(sink);
    cudaFree(verdict);
  }
};

// The distributions' table: per shape and distribution the waiting and queued call, their ratio to
// the Gaussian of that shape and to one read of the scores, and the rows the
// one-block fallback took. 0 if every choice matched the CPU backend. With `only`
// (a distribution's name), that distribution at each shape is checked by one call
// and not timed: three kernel launches per shape for a profiler to look at.
int time_distributions(const cudaDeviceProp& prop, const char* dump, const char* only) {
  constexpr std::size_t k = 2048;
  struct Shape {
    std::size_t rows, width;
  } shapes[] = {{16, 131072}, {256, 262144}, {2048, 131072}, {256, 8192}};
  FILE* times =
      dump ? std::fopen((std::string(dump) + "/distribution_times.txt").c_str(), "w") : nullptr;
  bool ok = true;
  for (const Shape& s : shapes) {
    const std::size_t n = s.rows * s.width;
    std::vector<float> host(n);
    const std::vector<std::int32_t> ends(s.rows, std::int32_t(s.width));
    const TopkBuffers b(s.rows, s.width, k);
    float* d_scores = b.scores;
    std::int32_t *d_ends = b.ends, *d_out = b.out;
    int* d_sink = b.sink;
    cuda::DeviceVerdict* d_verdict = b.verdict;
    const cuda::device_span<const float> scores(d_scores, n);
    const cuda::device_span<const std::int32_t> dends(d_ends, s.rows);
    const cuda::device_span<std::int32_t> out(d_out, s.rows * k);
    float gaussian_wait = 0, gaussian_queued = 0;
    for (const TopkDistribution& d : topk_distributions()) {
      if (only != nullptr && std::string(only) != d.name) continue;
      std::mt19937 rng(11);
      for (std::size_t r = 0; r < s.rows; ++r) d.fill(host.data() + r * s.width, s.width, k, rng);
      check(cudaMemcpy(d_scores, host.data(), n * 4, cudaMemcpyHostToDevice), "upload");
      std::vector<std::int32_t> want(s.rows * k), got(s.rows * k);
      (void)cpu::valid_prefix_topk(host, s.width, ends, k, want);
      check(cudaMemset(d_out, 0x5a, s.rows * k * 4), "poison");
      if (!cuda::valid_prefix_topk(scores, s.width, dends, k, out)) ok = false;
      check(cudaMemcpy(got.data(), d_out, s.rows * k * 4, cudaMemcpyDeviceToHost), "download");
      if (got != want) {
        std::printf("MISMATCH %s rows=%zu width=%zu\n", d.name, s.rows, s.width);
        ok = false;
      }
      if (only != nullptr) continue;
      const float wait =
          median_us(
              nullptr, [&] { (void)cuda::valid_prefix_topk(scores, s.width, dends, k, out); }, 1) /
          1000;
      const float queued =
          median_us(
              nullptr,
              [&] {
                (void)cuda::enqueue_valid_prefix_topk(scores, s.width, dends, k, out, d_verdict);
              },
              1) /
          1000;
      cuda::DeviceVerdict verdict;
      check(cudaMemcpy(&verdict, d_verdict, sizeof verdict, cudaMemcpyDeviceToHost), "download");
      const float read = median_us(nullptr,
                                   [&] {
                                     read_only<<<prop.multiProcessorCount * 8, 256>>>(
                                         reinterpret_cast<const int4*>(d_scores), n / 4, d_sink);
                                   }) /
                         1000;
      if (gaussian_wait == 0) gaussian_wait = wait, gaussian_queued = queued;
      std::printf(
          "distribution %-22s %4zu x %6zu: waiting %.3f ms (%.2fx gaussian), queued %.3f ms "
          "(%.2fx gaussian, %.2fx one read of %.3f ms), rows from their scores %lld, refined or "
          "tied %lld\n",
          d.name, s.rows, s.width, wait, wait / gaussian_wait, queued, queued / gaussian_queued,
          queued / read, read, verdict.detail[0], verdict.detail[1]);
      if (times)
        std::fprintf(times, "%s\t%zu\t%zu\t%.6f\t%.6f\n", d.name, s.rows, s.width, wait, queued);
    }
  }
  if (times) std::fclose(times);
  std::printf(ok ? "indexer_bench_cuda distributions: GPU choices matched the CPU backend\n"
                 : "indexer_bench_cuda distributions: FAILED correctness check\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("indexer_bench_cuda: no CUDA device visible, nothing timed\n");
    return 0;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const char* dump = std::getenv("AETHER_TOPK_DUMP");
  if (argc > 1 && std::string(argv[1]) == "distributions")
    return time_distributions(prop, dump, argc > 2 ? argv[2] : nullptr);
  FILE* times = dump ? std::fopen((std::string(dump) + "/aether_times.txt").c_str(), "w") : nullptr;
  constexpr std::size_t k = 2048;
  bool ok = true;
  struct Shape {
    std::size_t width;
    std::vector<std::size_t> rows;  // timed on prefixes of the largest
  } shapes[] = {{131072, {1, 16, 256, 2048}}, {262144, {256}}};
  for (const auto& s : shapes) {
    const std::size_t most = s.rows.back(), n = most * s.width;
    std::vector<float> host(n);
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    for (float& x : host) x = normal(rng);
    const std::vector<std::int32_t> ends(most, std::int32_t(s.width));
    const TopkBuffers b(most, s.width, k);
    float* d_scores = b.scores;
    std::int32_t *d_ends = b.ends, *d_out = b.out;
    int* d_sink = b.sink;
    aether::cuda::DeviceVerdict* d_verdict = b.verdict;
    check(cudaMemcpy(d_scores, host.data(), n * 4, cudaMemcpyHostToDevice), "upload");
    std::vector<std::int32_t> want(most * k), got(most * k);
    (void)aether::cpu::valid_prefix_topk(host, s.width, ends, k, want);
    for (const std::size_t rows : s.rows) {
      const aether::cuda::device_span<const float> scores(d_scores, rows * s.width);
      const aether::cuda::device_span<const std::int32_t> dends(d_ends, rows);
      const aether::cuda::device_span<std::int32_t> out(d_out, rows * k);
      check(cudaMemset(d_out, 0x5a, rows * k * 4), "poison");
      if (!aether::cuda::valid_prefix_topk(scores, s.width, dends, k, out)) ok = false;
      check(cudaMemcpy(got.data(), d_out, rows * k * 4, cudaMemcpyDeviceToHost), "download");
      if (!std::equal(got.begin(), got.begin() + std::ptrdiff_t(rows * k), want.begin())) {
        std::printf("MISMATCH rows=%zu width=%zu\n", rows, s.width);
        ok = false;
      }
      // one call per event pair: the call synchronises on its verdict anyway
      const float t_topk =
          median_us(
              nullptr,
              [&] { (void)aether::cuda::valid_prefix_topk(scores, s.width, dends, k, out); }, 1) /
          1000;
      // queued, timed like torch.topk: events around the call, no host wait inside;
      // and back to back, timed the way the read below is (median_us's batch)
      const auto queue = [&] {
        if (!aether::cuda::enqueue_valid_prefix_topk(scores, s.width, dends, k, out, d_verdict))
          std::exit(1);
      };
      const float t_queued = median_us(nullptr, queue, 1) / 1000;
      const float t_back_to_back = median_us(nullptr, queue) / 1000;
      aether::cuda::DeviceVerdict verdict;
      check(cudaMemcpy(&verdict, d_verdict, sizeof verdict, cudaMemcpyDeviceToHost), "download");
      if (!aether::cuda::valid_prefix_topk_verdict(verdict, s.width)) ok = false;
      const float t_read =
          median_us(nullptr,
                    [&] {
                      read_only<<<prop.multiProcessorCount * 8, 256>>>(
                          reinterpret_cast<const int4*>(d_scores), rows * s.width / 4, d_sink);
                    }) /
          1000;
      std::printf(
          "topk rows %zu x %zu, K %zu: %.3f ms, queued %.3f ms, back to back %.3f ms (rows from "
          "their scores %lld, refined or tied %lld); read once %.3f ms back to back (%.2f TB/s); "
          "topk / read %.2f, queued / read %.2f, back to back / read %.2f\n",
          rows, s.width, k, t_topk, t_queued, t_back_to_back, verdict.detail[0], verdict.detail[1],
          t_read, double(rows * s.width) * 4 / t_read / 1e9, t_topk / t_read, t_queued / t_read,
          t_back_to_back / t_read);
      if (times) std::fprintf(times, "%zu %zu %.6f %.6f\n", rows, s.width, t_topk, t_queued);
    }
    if (dump) {
      const std::string path = std::string(dump) + "/scores_" + std::to_string(s.width) + ".bin";
      FILE* f = std::fopen(path.c_str(), "wb");
      if (!f || std::fwrite(host.data(), 4, n, f) != n) {
        std::printf("indexer_bench_cuda: cannot write %s\n", path.c_str());
        ok = false;
      }
      if (f) std::fclose(f);
    }
  }
  if (times) std::fclose(times);
  std::printf(ok ? "indexer_bench_cuda: GPU choices matched the CPU backend\n"
                 : "indexer_bench_cuda: FAILED correctness check\n");
  return ok ? 0 : 1;
}
