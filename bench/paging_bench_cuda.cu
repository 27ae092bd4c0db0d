// GPU timing of logical-row -> paged-slot conversion (the whole call: validation,
// verdict, conversion) against a device copy of the same rows in the same run
// (SPEC section 4: at least 70% of copy bandwidth). Requests x K 2048 lanes, rows
// uniform below 16384 with 5% -1 padding, B 64, r 4. Checked against the CPU first.
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <vector>

#include "bench/cuda_timing.cuh"
#include "impl/cpu/paging.hpp"
#include "impl/cuda/paging.hpp"

using namespace aether;
using namespace aether::bench;

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("paging_bench_cuda: no CUDA device visible, nothing timed\n");
    return 0;
  }
  const std::size_t k = 2048, per = 1024;  // 1024 blocks of 16 compressed rows
  const std::int64_t block_tokens = 64, ratio = 4;
  bool ok = true;
  for (std::size_t requests : {256, 4096, 16384}) {
    const std::size_t lanes = requests * k;
    std::mt19937 rng(3);
    std::uniform_int_distribution<std::int32_t> row(0, 16383), block(0, 1 << 20);
    std::bernoulli_distribution pad(0.05);
    std::vector<std::int32_t> rows(lanes), counts(requests, std::int32_t(k)), tables(requests * per);
    for (auto& r : rows) r = pad(rng) ? -1 : row(rng);
    for (auto& b : tables) b = block(rng);
    std::int32_t *d_rows, *d_counts, *d_tables, *d_out, *d_copy;
    check(cudaMalloc(&d_rows, lanes * 4), "malloc");
    check(cudaMalloc(&d_counts, requests * 4), "malloc");
    check(cudaMalloc(&d_tables, tables.size() * 4), "malloc");
    check(cudaMalloc(&d_out, lanes * 4), "malloc");
    check(cudaMalloc(&d_copy, lanes * 4), "malloc");
    check(cudaMemcpy(d_rows, rows.data(), lanes * 4, cudaMemcpyHostToDevice), "upload");
    check(cudaMemcpy(d_counts, counts.data(), requests * 4, cudaMemcpyHostToDevice), "upload");
    check(cudaMemcpy(d_tables, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice), "upload");
    const auto call = [&] {
      return cuda::paged_slots({d_rows, lanes}, k, {d_counts, requests}, {d_tables, tables.size()}, per,
                               block_tokens, ratio, {d_out, lanes});
    };
    std::vector<std::int32_t> want(lanes), got(lanes);
    (void)cpu::paged_slots(rows, k, counts, tables, per, block_tokens, ratio, want);
    if (!call()) ok = false;
    check(cudaMemcpy(got.data(), d_out, lanes * 4, cudaMemcpyDeviceToHost), "download");
    if (got != want) {
      std::printf("MISMATCH requests=%zu\n", requests);
      ok = false;
    }
    const float t_slots = median_us(nullptr, [&] { (void)call(); }, 1);
    const float t_copy = median_us(nullptr, [&] {
      check(cudaMemcpyAsync(d_copy, d_rows, lanes * 4, cudaMemcpyDeviceToDevice), "copy");
    });
    std::printf("slots %zu x %zu (%.1f MiB): %.1f us; device copy %.1f us (%.2f TB/s); copy / slots %.2f\n",
                requests, k, lanes * 4 / 1048576.0, t_slots, t_copy, 2.0 * lanes * 4 / t_copy / 1e6,
                t_copy / t_slots);
    cudaFree(d_rows);
    cudaFree(d_counts);
    cudaFree(d_tables);
    cudaFree(d_out);
    cudaFree(d_copy);
  }
  std::printf(ok ? "paging_bench_cuda: GPU slots matched the CPU backend\n"
                 : "paging_bench_cuda: FAILED correctness check\n");
  return ok ? 0 : 1;
}
