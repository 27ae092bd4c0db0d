// GPU timing of the formats' store and read side (impl/cuda/formats.hpp): rows of
// D 512 into a MainFp8 cache and D 128 into an IndexFp4 cache at distinct random
// slots, and the read side gathering them back, against a device copy of the same
// bytes (rows read plus cache rows written; cache rows read plus values written) in
// the same run. Each call waits for its verdict, so both are timed on the host
// around whole calls (the copy too, with a synchronize). Medians of 21.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "bench/cuda_timing.cuh"
#include "impl/cuda/formats.hpp"

using namespace aether;
using bench::check;

namespace {

double median_us(const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < 21; ++i) {
    check(cudaDeviceSynchronize(), "sync");
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    check(cudaDeviceSynchronize(), "sync");
    t.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + 10, t.end());
  return t[10];
}

template <class T>
T* device(std::size_t n) {
  T* p = nullptr;
  check(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)), "malloc");
  return p;
}

void run(CacheFormat format, std::size_t dim, std::size_t rows) {
  const CacheGeometry g{format, dim, 64, rows * 2 / 64 + 1};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> host_rows(rows * dim);
  for (float& x : host_rows) x = normal(rng);
  std::vector<std::int32_t> slots(g.slots());
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(rows);
  auto* d_rows = device<float>(host_rows.size());
  auto* d_slots = device<std::int32_t>(rows);
  auto* d_cache = device<std::byte>(g.bytes());
  auto* d_out = device<double>(rows * dim);
  check(cudaMemcpy(d_rows, host_rows.data(), host_rows.size() * 4, cudaMemcpyHostToDevice), "up");
  check(cudaMemcpy(d_slots, slots.data(), rows * 4, cudaMemcpyHostToDevice), "up");
  const std::size_t row_bytes = cache_row_bytes(format, dim);
  const std::size_t store_bytes = rows * (dim * 4 + row_bytes);
  const std::size_t gather_bytes = rows * (row_bytes + dim * 8);
  auto* copy_from = device<std::byte>(std::max(store_bytes, gather_bytes));
  auto* copy_to = device<std::byte>(std::max(store_bytes, gather_bytes));
  const auto copy = [&](std::size_t bytes) {  // reads and writes half the bytes each
    return median_us([&] {
      check(cudaMemcpyAsync(copy_to, copy_from, bytes / 2, cudaMemcpyDeviceToDevice), "copy");
    });
  };
  const double store = median_us([&] {
    if (!cuda::store_rows(g, cuda::device_span<const float>(d_rows, rows * dim),
                          cuda::device_span<const std::int32_t>(d_slots, rows),
                          cuda::device_span<std::byte>(d_cache, g.bytes()))
             .ok())
      std::exit(1);
  });
  const double gather = median_us([&] {
    if (!cuda::gather_rows(g, cuda::device_span<const std::byte>(d_cache, g.bytes()),
                           cuda::device_span<const std::int32_t>(d_slots, rows),
                           cuda::device_span<double>(d_out, rows * dim))
             .ok())
      std::exit(1);
  });
  const double store_copy = copy(store_bytes), gather_copy = copy(gather_bytes);
  std::printf(
      "formats cuda %s D %zu, %zu rows: store %.1f us, copy of its bytes %.1f us: %.2f of copy; "
      "gather %.1f us, copy %.1f us: %.2f of copy\n",
      format == CacheFormat::MainFp8 ? "MainFp8 " : "IndexFp4", dim, rows, store, store_copy,
      store_copy / store, gather, gather_copy, gather_copy / gather);
  for (void* p : {(void*)d_rows, (void*)d_slots, (void*)d_cache, (void*)d_out, (void*)copy_from,
                  (void*)copy_to})
    cudaFree(p);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("formats_bench_cuda: no CUDA device visible, nothing timed\n");
    return 0;
  }
  for (const std::size_t rows : {4096, 65536, 262144}) {
    run(CacheFormat::MainFp8, 512, rows);
    run(CacheFormat::IndexFp4, 128, rows);
  }
  return 0;
}
