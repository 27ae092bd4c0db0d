// GPU timing of the witness merge (out of place) and serving scatter (in place)
// against a device-to-device copy of the same buffer, measured in the same run
// with CUDA events; plus CUDA-graph replays for the small, launch-bound sizes.
// SPEC section 4: merge <= 1.10x copy, scatter <= 0.60x copy. rows 32..32768,
// topk 2048, S 64. Every timing rotates through copies of the buffers that
// together exceed the L2 four times (timed from DRAM). Before timing, each size
// is checked against the CPU backend on a poisoned output buffer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "bench/cuda_timing.cuh"
#include "bench/witness_rows.hpp"
#include "impl/cpu/witness.hpp"
#include "impl/cuda/witness.hpp"

namespace {

using I = std::int32_t;
using aether::bench::kContext, aether::bench::kSegments, aether::bench::kTopk,
    aether::bench::learned_rows;
using aether::cuda::device_span;
using namespace aether::bench;
}  // namespace

int main() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("witness_bench_cuda: no CUDA device visible, nothing timed\n");
    return 0;
  }
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::printf("%7s %10s | %9s %9s %6s | %9s %6s %6s | %9s %9s %9s\n", "rows", "bytes", "copy_us",
              "merge_us", "ratio", "scat_us", "ratio", "read", "g_copy", "g_merge", "g_scat");
  const auto empty = [&] { empty_kernel<<<1, 32, 0, stream>>>(); };
  std::printf("launch floor: empty kernel %.2f us plain, %.2f us in a graph\n",
              median_us(stream, empty), graph_us(stream, empty));
  bool all_ok = true;
  // AETHER_BENCH_ROWS=N times one size only (for profilers).
  const char* only = std::getenv("AETHER_BENCH_ROWS");
  for (std::size_t rows = 32; rows <= 32768; rows *= 4) {
    if (only && std::strtoull(only, nullptr, 10) != rows) continue;
    const std::vector<I> host = learned_rows(rows), lens(rows, kContext);
    const std::size_t bytes = host.size() * sizeof(I);
    // Each set: rows in, rows out, lengths; the timings rotate through them so no
    // size is timed from what the launch before left in L2 (bench/cuda_timing.cuh).
    struct Set {
      I *in, *out, *lens;
    };
    std::vector<Set> sets(rotation_sets(2 * bytes + rows * sizeof(I)));
    for (Set& s : sets) {
      check(cudaMalloc(&s.in, bytes), "malloc");
      check(cudaMalloc(&s.out, bytes), "malloc");
      check(cudaMalloc(&s.lens, rows * sizeof(I)), "malloc");
      check(cudaMemcpy(s.in, host.data(), bytes, cudaMemcpyHostToDevice), "upload");
      check(cudaMemcpy(s.lens, lens.data(), rows * sizeof(I), cudaMemcpyHostToDevice), "upload");
    }
    std::size_t turn = 0;
    const auto next_set = [&]() -> const Set& { return sets[turn++ % sets.size()]; };
    I *d_in = sets[0].in, *d_out = sets[0].out, *d_lens = sets[0].lens;
    const device_span<const I> in(d_in, host.size()), dl(d_lens, rows);
    const device_span<I> out(d_out, host.size());
    const std::size_t keep = kTopk - kSegments;

    // correctness first: poisoned output, compared with the CPU backend
    std::vector<I> want(host.size()), got(host.size());
    (void)aether::cpu::apply_topology_witnesses(host, kTopk, lens, keep, kSegments, kSegments,
                                                want);
    check(cudaMemset(d_out, 0x5a, bytes), "poison");
    if (!aether::cuda::apply_topology_witnesses(in, kTopk, dl, keep, kSegments, kSegments, out))
      all_ok = false;
    check(cudaMemcpy(got.data(), d_out, bytes, cudaMemcpyDeviceToHost), "download");
    if (got != want) {
      std::printf("MISMATCH at rows=%zu\n", rows);
      all_ok = false;
    }

    auto copy = [&] {
      const Set& s = next_set();
      check(cudaMemcpyAsync(s.out, s.in, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
    };
    auto merge = [&] {
      const Set& s = next_set();
      (void)aether::cuda::apply_topology_witnesses(
          device_span<const I>(s.in, host.size()), kTopk, device_span<const I>(s.lens, rows), keep,
          kSegments, kSegments, device_span<I>(s.out, host.size()), stream);
    };
    auto scatter = [&] {
      const Set& s = next_set();
      (void)aether::cuda::scatter_topology_witnesses(device_span<I>(s.in, host.size()), kTopk,
                                                     device_span<const I>(s.lens, rows), kSegments,
                                                     stream);
    };
    int* d_sink;
    check(cudaMalloc(&d_sink, sizeof(int)), "malloc");
    auto read = [&] {
      read_only<<<prop.multiProcessorCount * 8, 256, 0, stream>>>(
          reinterpret_cast<const int4*>(next_set().in), host.size() / 4, d_sink);
    };
    const float t_read = median_us(stream, read);
    const float t_copy = median_us(stream, copy);
    const float t_merge = median_us(stream, merge);
    const float t_scat = median_us(stream, scatter);
    const float g_copy = graph_us(stream, copy, sets.size()),
                g_merge = graph_us(stream, merge, sets.size()),
                g_scat = graph_us(stream, scatter, sets.size());
    std::printf(
        "%7zu %10zu | %9.2f %9.2f %6.3f | %9.2f %6.3f %6.3f | %9.2f %9.2f %9.2f  (graph ratios "
        "%.3f %.3f; %zu sets)\n",
        rows, bytes, t_copy, t_merge, t_merge / t_copy, t_scat, t_scat / t_copy, t_read / t_copy,
        g_copy, g_merge, g_scat, g_merge / g_copy, g_scat / g_copy, sets.size());
    cudaFree(d_sink);
    for (const Set& s : sets)
      for (I* p : {s.in, s.out, s.lens}) cudaFree(p);
  }
  std::printf("copy bandwidth counts bytes read + written; ratios are time / copy time\n");
  std::printf(all_ok ? "witness_bench_cuda: all outputs matched the CPU backend\n"
                     : "witness_bench_cuda: FAILED correctness check\n");
  return all_ok ? 0 : 1;
}
