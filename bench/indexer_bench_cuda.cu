// GPU timing of the exact top-k (256 rows x 262144 scores, K 2048, and one row of
// 131072) against reading the scores once (bench/cuda_timing.cuh's read-only kernel) in the same run.
// The scores are written to AETHER_TOPK_DUMP (if set) so that
// bench/indexer_topk_torch.py times torch.topk on the same data in the same job.
// Before timing, the GPU choice is checked against the CPU backend.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "bench/cuda_timing.cuh"
#include "impl/cpu/indexer.hpp"
#include "impl/cuda/indexer.hpp"

using namespace aether::bench;

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("indexer_bench_cuda: no CUDA device visible, nothing timed\n");
    return 0;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  bool ok = true;
  struct Shape { std::size_t rows, width; } shapes[] = {{1, 131072}, {256, 262144}};
  for (const auto& s : shapes) {
    const std::size_t k = 2048, n = s.rows * s.width;
    std::vector<float> host(n);
    std::mt19937 rng(11);
    std::normal_distribution<float> normal;
    for (float& x : host) x = normal(rng);
    const std::vector<std::int32_t> ends(s.rows, std::int32_t(s.width));
    float* d_scores;
    std::int32_t *d_ends, *d_out;
    int* d_sink;
    check(cudaMalloc(&d_scores, n * 4), "malloc");
    check(cudaMalloc(&d_ends, s.rows * 4), "malloc");
    check(cudaMalloc(&d_out, s.rows * k * 4), "malloc");
    check(cudaMalloc(&d_sink, 4), "malloc");
    check(cudaMemcpy(d_scores, host.data(), n * 4, cudaMemcpyHostToDevice), "upload");
    check(cudaMemcpy(d_ends, ends.data(), s.rows * 4, cudaMemcpyHostToDevice), "upload");
    const std::span<const float> scores(d_scores, n);
    const std::span<const std::int32_t> dends(d_ends, s.rows);
    const std::span<std::int32_t> out(d_out, s.rows * k);

    std::vector<std::int32_t> want(s.rows * k), got(s.rows * k);
    (void)aether::cpu::valid_prefix_topk(host, s.width, ends, k, want);
    check(cudaMemset(d_out, 0x5a, s.rows * k * 4), "poison");
    if (!aether::cuda::valid_prefix_topk(scores, s.width, dends, k, out)) ok = false;
    check(cudaMemcpy(got.data(), d_out, s.rows * k * 4, cudaMemcpyDeviceToHost), "download");
    if (got != want) {
      std::printf("MISMATCH rows=%zu width=%zu\n", s.rows, s.width);
      ok = false;
    }
    // one call per event pair: the call synchronises on its verdict anyway
    const float t_topk = median_us(nullptr, [&] { (void)aether::cuda::valid_prefix_topk(scores, s.width, dends, k, out); }, 1) / 1000;
    const float t_read = median_us(nullptr, [&] {
      read_only<<<prop.multiProcessorCount * 8, 256>>>(reinterpret_cast<const int4*>(d_scores), n / 4, d_sink);
    }) / 1000;
    std::printf("topk rows %zu x %zu, K %zu: %.3f ms; read once %.3f ms (%.2f TB/s); topk / read %.2f\n",
                s.rows, s.width, k, t_topk, t_read, double(n) * 4 / t_read / 1e9, t_topk / t_read);
    if (const char* dump = std::getenv("AETHER_TOPK_DUMP"); dump && s.rows == 256) {
      if (FILE* f = std::fopen(dump, "wb")) {
        std::fwrite(host.data(), 4, n, f);
        std::fclose(f);
      }
    }
    cudaFree(d_scores);
    cudaFree(d_ends);
    cudaFree(d_out);
    cudaFree(d_sink);
  }
  std::printf(ok ? "indexer_bench_cuda: GPU choices matched the CPU backend\n"
                 : "indexer_bench_cuda: FAILED correctness check\n");
  return ok ? 0 : 1;
}
