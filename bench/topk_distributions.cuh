// Score distributions a top-k must not slow down on, timed beside the Gaussian of
// the same shape: rows offset far from zero (the K-th score then sits among keys
// that share their top bits), few distinct values, all equal, a ReLU plateau of
// exact zeros with fewer than K positive scores, half a row tied at its K-th
// value, and sorted rows. Each is checked against the CPU backend lane for lane
// before it is timed; the one-block fallback's row count is printed beside.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_timing.cuh"
#include "impl/cpu/indexer.hpp"
#include "impl/cuda/indexer.hpp"

namespace aether::bench {

struct TopkDistribution {
  const char* name;
  // Fills one row of `width` scores; K is the top-k's K (for the rows built around it).
  std::function<void(float* row, std::size_t width, std::size_t k, std::mt19937& rng)> fill;
};

inline std::vector<TopkDistribution> topk_distributions() {
  const auto normal_plus = [](float offset) {
    return [offset](float* row, std::size_t width, std::size_t, std::mt19937& rng) {
      std::normal_distribution<float> normal;
      for (std::size_t j = 0; j < width; ++j) row[j] = normal(rng) + offset;
    };
  };
  return {
      {"gaussian", normal_plus(0)},
      {"gaussian+100", normal_plus(100)},
      {"gaussian-10000", normal_plus(-10000)},
      {"16 distinct",
       [](float* row, std::size_t width, std::size_t, std::mt19937& rng) {
         for (std::size_t j = 0; j < width; ++j) row[j] = float(rng() % 16);
       }},
      {"all equal", [](float* row, std::size_t width, std::size_t,
                       std::mt19937&) { std::fill(row, row + width, 1.0f); }},
      {"relu, K/2 positive",
       [](float* row, std::size_t width, std::size_t k, std::mt19937& rng) {
         std::fill(row, row + width, 0.0f);
         std::exponential_distribution<float> positive;
         for (std::size_t i = 0; i < k / 2; ++i) row[rng() % width] = positive(rng) + 1e-3f;
       }},
      {"half tied at the K-th",
       [](float* row, std::size_t width, std::size_t k, std::mt19937& rng) {
         std::normal_distribution<float> normal;
         for (std::size_t j = 0; j < width; ++j) row[j] = normal(rng);
         std::vector<float> sorted(row, row + width);
         std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(k - 1), sorted.end(),
                          std::greater<float>());
         const float kth = sorted[k - 1];
         for (std::size_t j = 0; j < width; ++j)
           if (row[j] < kth && rng() % 2) row[j] = kth;
       }},
      {"ascending",
       [](float* row, std::size_t width, std::size_t, std::mt19937&) {
         for (std::size_t j = 0; j < width; ++j) row[j] = float(j);
       }},
      {"descending",
       [](float* row, std::size_t width, std::size_t, std::mt19937&) {
         for (std::size_t j = 0; j < width; ++j) row[j] = float(width - j);
       }},
  };
}

// The table: per shape and distribution the waiting and queued call, their ratio to
// the Gaussian of that shape and to one read of the scores, and the rows the
// one-block fallback took. 0 if every choice matched the CPU backend.
inline int time_distributions(const cudaDeviceProp& prop, const char* dump) {
  constexpr std::size_t k = 2048;
  struct Shape {
    std::size_t rows, width;
  } shapes[] = {{16, 131072}, {256, 262144}, {2048, 131072}};
  FILE* times =
      dump ? std::fopen((std::string(dump) + "/distribution_times.txt").c_str(), "w") : nullptr;
  bool ok = true;
  for (const Shape& s : shapes) {
    const std::size_t n = s.rows * s.width;
    std::vector<float> host(n);
    const std::vector<std::int32_t> ends(s.rows, std::int32_t(s.width));
    float* d_scores;
    std::int32_t *d_ends, *d_out;
    int* d_sink;
    cuda::DeviceVerdict* d_verdict;
    check(cudaMalloc(&d_scores, n * 4), "malloc");
    check(cudaMalloc(&d_ends, s.rows * 4), "malloc");
    check(cudaMalloc(&d_out, s.rows * k * 4), "malloc");
    check(cudaMalloc(&d_sink, 4), "malloc");
    check(cudaMalloc(&d_verdict, sizeof *d_verdict), "malloc");
    check(cudaMemcpy(d_ends, ends.data(), s.rows * 4, cudaMemcpyHostToDevice), "upload");
    const cuda::device_span<const float> scores(d_scores, n);
    const cuda::device_span<const std::int32_t> dends(d_ends, s.rows);
    const cuda::device_span<std::int32_t> out(d_out, s.rows * k);
    float gaussian_wait = 0, gaussian_queued = 0;
    for (const TopkDistribution& d : topk_distributions()) {
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
          "(%.2fx gaussian, %.2fx one read of %.3f ms), %lld rows by the one-block method\n",
          d.name, s.rows, s.width, wait, wait / gaussian_wait, queued, queued / gaussian_queued,
          queued / read, read, verdict.detail[0]);
      if (times)
        std::fprintf(times, "%s\t%zu\t%zu\t%.6f\t%.6f\n", d.name, s.rows, s.width, wait, queued);
    }
    cudaFree(d_scores);
    cudaFree(d_ends);
    cudaFree(d_out);
    cudaFree(d_sink);
    cudaFree(d_verdict);
  }
  if (times) std::fclose(times);
  std::printf(ok ? "indexer_bench_cuda distributions: GPU choices matched the CPU backend\n"
                 : "indexer_bench_cuda distributions: FAILED correctness check\n");
  return ok ? 0 : 1;
}

}  // namespace aether::bench
