// GPU timing of the formats' store and read side (impl/cuda/formats.hpp) against a
// device copy of the same bytes in the same run (SPEC section 4: at least 80% of
// copy bandwidth where that copy takes at least 10 us; smaller calls are
// launch-bound, their graph times shown beside an empty kernel's).
// Rows of D 512 into a MainFp8 cache and of D 128 into an IndexFp4 cache (64 rows a
// block, twice the slots the rows need) at distinct random slots; the read side
// gathers them back. Bytes moved: rows read and cache rows written (store); cache
// rows read and doubles written (read side). Four timings a call: waiting (one
// wait for the verdict, events around the call), queued (back to back, like the
// copy), queued in a CUDA graph, and the copy. Calls and copies rotate through
// input sets that together exceed the L2 four times. Each result is checked
// against the CPU backend first.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda_timing.cuh"
#include "impl/cpu/formats.hpp"
#include "impl/cuda/formats.hpp"

using namespace aether;
using namespace aether::bench;

namespace {

template <class T>
T* device(std::size_t n) {
  T* p = nullptr;
  check(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)), "malloc");
  return p;
}

struct Set {
  float* rows;
  std::int32_t* slots;
  std::byte* cache;
  double* out;
  std::byte *copy_from, *copy_to;
};

// One call's four timings and its verdict on the bar.
void report(const char* what, double bytes, float waiting, float queued, double enqueue,
            float graph, float copy, float empty) {
  const double copy_bw = bytes / copy;
  std::printf(
      "  %s: %.1f MB; waiting %.1f us, queued %.1f us (%.2f of copy; host enqueue %.1f us), graph "
      "%.1f us (%.2f); copy %.1f us (%.2f TB/s); %s; empty-kernel graph %.1f us\n",
      what, bytes / 1e6, waiting, queued, copy / queued, enqueue, graph, copy / graph, copy,
      copy_bw / 1e6,
      copy < 10                                     ? "launch-bound, no ratio bar"
      : copy / queued >= 0.8 && copy / graph >= 0.8 ? "bar (0.80 queued and in a graph) met"
                                                    : "bar (0.80 queued and in a graph) NOT met",
      empty);
}

bool run(CacheFormat format, std::size_t dim, std::size_t rows, cudaStream_t stream) {
  const CacheGeometry g{format, dim, 64, rows * 2 / 64 + 1};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> host_rows(rows * dim);
  for (float& x : host_rows) x = normal(rng);
  std::vector<std::int32_t> slots(g.slots());
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(rows);
  const std::size_t row_bytes = cache_row_bytes(format, dim);
  const std::size_t store_bytes = rows * (dim * 4 + row_bytes);
  const std::size_t gather_bytes = rows * (row_bytes + dim * 8);
  const std::size_t copy_bytes = std::max(store_bytes, gather_bytes) / 2;
  std::vector<Set> sets(rotation_sets(store_bytes + gather_bytes));
  for (Set& s : sets) {
    s = {device<float>(rows * dim),  device<std::int32_t>(rows),    device<std::byte>(g.bytes()),
         device<double>(rows * dim), device<std::byte>(copy_bytes), device<std::byte>(copy_bytes)};
    check(cudaMemcpy(s.rows, host_rows.data(), rows * dim * 4, cudaMemcpyHostToDevice), "up");
    check(cudaMemcpy(s.slots, slots.data(), rows * 4, cudaMemcpyHostToDevice), "up");
    check(cudaMemset(s.cache, 0, g.bytes()), "memset");
  }
  auto* verdict = device<cuda::DeviceVerdict>(1);
  std::size_t turn = 0;
  const auto next = [&]() -> const Set& { return sets[turn++ % sets.size()]; };
  const auto store = [&](const Set& s, cuda::DeviceVerdict* v) {
    const auto in = on_device<const float>(s.rows, rows * dim);
    const auto at = on_device<const std::int32_t>(s.slots, rows);
    const auto cache = on_device(s.cache, g.bytes());
    return v == nullptr
               ? cuda::store_rows(g, in, at, cache, RoundingProfile::Cuda, stream)
               : cuda::enqueue_store_rows(g, in, at, cache, v, RoundingProfile::Cuda, stream);
  };
  const auto gather = [&](const Set& s, cuda::DeviceVerdict* v) {
    const auto cache = on_device<const std::byte>(s.cache, g.bytes());
    const auto at = on_device<const std::int32_t>(s.slots, rows);
    const auto out = on_device(s.out, rows * dim);
    return v == nullptr ? cuda::gather_rows(g, cache, at, out, stream)
                        : cuda::enqueue_gather_rows(g, cache, at, out, v, stream);
  };
  // Checked against the CPU: the cache's bytes, and the values read back.
  std::vector<std::byte> want(g.bytes(), std::byte{0}), got(g.bytes());
  if (!cpu::store_rows(g, host_rows, slots, want, RoundingProfile::Cuda).ok()) return false;
  if (!store(sets[0], nullptr).ok() || !gather(sets[0], nullptr).ok()) return false;
  check(cudaMemcpy(got.data(), sets[0].cache, g.bytes(), cudaMemcpyDeviceToHost), "down");
  std::vector<double> values(rows * dim);
  check(cudaMemcpy(values.data(), sets[0].out, values.size() * 8, cudaMemcpyDeviceToHost), "down");
  const auto want_values = cpu::gather_rows(g, want, slots);
  if (got != want || !want_values.ok() || values != want_values.value()) {
    std::printf("MISMATCH %zu rows\n", rows);
    return false;
  }
  for (Set& s : sets) check(cudaMemcpy(s.cache, sets[0].cache, g.bytes(), cudaMemcpyDefault), "c");
  const auto must = [](const Status<FormatsError>& st) {
    if (!st.ok()) std::exit(1);
  };
  const float empty = empty_graph_us(stream);
  const auto copy = [&](std::size_t bytes) {
    return median_us(stream, [&] {
      const Set& s = next();
      check(cudaMemcpyAsync(s.copy_to, s.copy_from, bytes / 2, cudaMemcpyDeviceToDevice, stream),
            "copy");
    });
  };
  std::printf("formats cuda %s D %zu, %zu rows (%zu input sets)\n",
              format == CacheFormat::MainFp8 ? "MainFp8" : "IndexFp4", dim, rows, sets.size());
  report("store", double(store_bytes),
         median_us(
             stream, [&] { must(store(next(), nullptr)); }, 1),
         median_us(stream, [&] { must(store(next(), verdict)); }),
         enqueue_us(stream, [&] { must(store(next(), verdict)); }),
         graph_us(
             stream, [&] { must(store(next(), verdict)); }, sets.size()),
         copy(store_bytes), empty);
  report("read side", double(gather_bytes),
         median_us(
             stream, [&] { must(gather(next(), nullptr)); }, 1),
         median_us(stream, [&] { must(gather(next(), verdict)); }),
         enqueue_us(stream, [&] { must(gather(next(), verdict)); }),
         graph_us(
             stream, [&] { must(gather(next(), verdict)); }, sets.size()),
         copy(gather_bytes), empty);
  for (const Set& s : sets)
    for (void* p : {(void*)s.rows, (void*)s.slots, (void*)s.cache, (void*)s.out, (void*)s.copy_from,
                    (void*)s.copy_to})
      cudaFree(p);
  cudaFree(verdict);
  return true;
}

}  // namespace

// Arguments: `main` or `index` (one format only), then row counts (default 4096,
// 65536, 262144).
int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("formats_bench_cuda: no CUDA device visible, nothing timed\n");
    return 0;
  }
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  bool main_format = true, index_format = true;
  std::vector<std::size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "main" || arg == "index")
      main_format = arg == "main", index_format = arg == "index";
    else
      sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  }
  if (sizes.empty()) sizes = {4096, 65536, 262144};
  bool ok = true;
  for (const std::size_t rows : sizes) {
    if (main_format) ok = run(CacheFormat::MainFp8, 512, rows, stream) && ok;
    if (index_format) ok = run(CacheFormat::IndexFp4, 128, rows, stream) && ok;
  }
  return ok ? 0 : 1;
}
