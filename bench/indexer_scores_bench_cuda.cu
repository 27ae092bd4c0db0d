// GPU timing of the indexer scorer at the SPEC's shape (T 64 queries, L 131072
// keys, H 64, D 128) with bf16 and E4M3 keys: the whole call (validation, verdict,
// scoring). bench/indexer_scores_torch.py times the torch baseline (bf16 matmul,
// relu, weighted sum over heads) on the same shape in the same job. Before timing,
// sampled scores are checked against the exact model and its tensor-core bound.
#include <cuda_runtime.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "bench/cuda_timing.cuh"
#include "impl/cuda/indexer.hpp"
#include "model/indexer.hpp"

using namespace aether;
using namespace aether::bench;

namespace {

std::uint16_t bf16_bits(float f) { return std::uint16_t(std::bit_cast<std::uint32_t>(f) >> 16); }
float bf16_value(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t(b) << 16); }

// Keys of `format`, random normal values (E4M3: random finite codes, scale 2^-4).
std::vector<std::byte> make_keys(KeyFormat format, std::size_t rows, std::size_t dim,
                                 std::mt19937& rng) {
  std::vector<std::byte> bytes(rows * key_row_bytes(format, dim));
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> code(0, 255);
  for (std::size_t j = 0; j < rows; ++j) {
    std::byte* row = bytes.data() + j * key_row_bytes(format, dim);
    for (std::size_t d = 0; d < dim; ++d) {
      if (format == KeyFormat::BF16) {
        const std::uint16_t b = bf16_bits(normal(rng));
        std::memcpy(row + 2 * d, &b, 2);
      } else {
        int c;
        do c = code(rng);
        while ((c & 0x7f) == 0x7f);
        row[d] = std::byte(c);
      }
    }
    if (format == KeyFormat::E4M3) {
      const float scale = 1.0f / 16;
      std::memcpy(row + dim, &scale, 4);
    }
  }
  return bytes;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("indexer_scores_bench_cuda: no CUDA device visible, nothing timed\n");
    return 0;
  }
  const std::size_t T = 64, L = 131072, H = 64, D = 128;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> queries(T * H * D);
  std::vector<float> query_values(T * H * D), weights(T * H);
  for (std::size_t i = 0; i < queries.size(); ++i) {
    queries[i] = bf16_bits(normal(rng));
    query_values[i] = bf16_value(queries[i]);
  }
  for (float& w : weights) w = normal(rng);
  bool ok = true;
  for (KeyFormat format : {KeyFormat::BF16, KeyFormat::E4M3}) {
    const auto keys = make_keys(format, L, D, rng);
    std::uint16_t* d_queries;
    float *d_weights, *d_out;
    std::byte* d_keys;
    check(cudaMalloc(&d_queries, queries.size() * 2), "malloc");
    check(cudaMalloc(&d_weights, weights.size() * 4), "malloc");
    check(cudaMalloc(&d_keys, keys.size()), "malloc");
    check(cudaMalloc(&d_out, T * L * 4), "malloc");
    check(cudaMemcpy(d_queries, queries.data(), queries.size() * 2, cudaMemcpyHostToDevice),
          "upload");
    check(cudaMemcpy(d_weights, weights.data(), weights.size() * 4, cudaMemcpyHostToDevice),
          "upload");
    check(cudaMemcpy(d_keys, keys.data(), keys.size(), cudaMemcpyHostToDevice), "upload");
    const cuda::DeviceIndexKeys d_index{format,
                                        cuda::device_span<const std::byte>(d_keys, keys.size()), D};
    const auto call = [&] {
      return cuda::index_scores(cuda::device_span<const std::uint16_t>(d_queries, queries.size()),
                                cuda::device_span<const float>(d_weights, weights.size()), T,
                                d_index, cuda::device_span<float>(d_out, T * L));
    };
    if (!call()) ok = false;
    std::vector<float> out(T * L);
    check(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost), "download");
    // 8 queries x 16 keys spread over the row, exact scores and bounds from the model.
    const std::size_t row_bytes = key_row_bytes(format, D);
    for (std::size_t t = 0; t < T; t += T / 8)
      for (std::size_t j = 5; j < L; j += L / 16) {
        const IndexKeys one{format, std::span(keys).subspan(j * row_bytes, row_bytes), D};
        const std::span<const float> q(query_values.data() + t * H * D, H * D),
            w(weights.data() + t * H, H);
        const auto exact = model::index_scores(q, w, one).value()[0];
        const auto bound = model::tensor_core_score_error_bounds(q, w, one).value()[0];
        if (abs(model::exact(out[t * L + j]) - exact) > bound) {
          std::printf("OUTSIDE BOUND query %zu key %zu: %g\n", t, j, double(out[t * L + j]));
          ok = false;
        }
      }
    const float ms = median_us(
                         nullptr, [&] { (void)call(); }, 1) /
                     1000;
    const double flops = 2.0 * T * H * D * L;
    std::printf("scores %s T %zu L %zu H %zu D %zu: %.3f ms (%.0f TFLOP/s on the dot products)\n",
                format == KeyFormat::BF16 ? "bf16" : "e4m3", T, L, H, D, ms, flops / ms / 1e9);
    cudaFree(d_queries);
    cudaFree(d_weights);
    cudaFree(d_keys);
    cudaFree(d_out);
  }
  std::printf(ok ? "indexer_scores_bench_cuda: sampled scores inside the certified bound\n"
                 : "indexer_scores_bench_cuda: FAILED correctness check\n");
  return ok ? 0 : 1;
}
