// Timing shared by the GPU benchmarks (CUDA events, graphs, a read-once floor).
// Every CUDA error is fatal here: a benchmark on a broken device measures nothing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "impl/cuda/device.hpp"

namespace aether::bench {

// n elements at p, a cudaMalloc'd pointer, as the CUDA entry points take them.
template <class T>
cuda::device_span<T> on_device(T* p, std::size_t n) {
  return cuda::device_span<T>(p, n);
}

inline constexpr int kReps = 21, kBatch = 10, kGraphBatch = 20;

// Back-to-back launches an event pair times: kBatch, or AETHER_BENCH_BATCH (a
// diagnostic: whether a longer batch keeps the same pace).
inline int back_to_back_batch() {
  static const int batch = [] {
    const char* v = std::getenv("AETHER_BENCH_BATCH");
    const int n = v != nullptr ? std::atoi(v) : 0;
    return n > 0 ? n : kBatch;
  }();
  return batch;
}

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Where a timed batch's first event stands. `drained`: on an idle stream, so the
// figure includes the first launch's host latency (one call alone, timed the way
// torch's timings are). `behind_a_launch`: queued behind one more launch of fn,
// not timed, so the host enqueues the batch while the device runs that launch and
// the figure is the stream's steady pace; the host's own pace still shows where it
// is slower than the device's.
enum class BatchStart { drained, behind_a_launch };

// Median over kReps of the per-launch time of `batch` launches of fn between two
// events, in microseconds.
inline float timed_us(cudaStream_t stream, const std::function<void()>& fn, int batch,
                      BatchStart start) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 5; ++i) fn();
  std::vector<float> t;
  for (int i = 0; i < kReps; ++i) {
    if (start == BatchStart::behind_a_launch) fn();
    check(cudaEventRecord(a, stream), "record");
    for (int j = 0; j < batch; ++j) fn();
    check(cudaEventRecord(b, stream), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms * 1000 / float(batch));
  }
  check(cudaGetLastError(), "launch");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::nth_element(t.begin(), t.begin() + kReps / 2, t.end());
  return t[kReps / 2];
}

// Back to back (batch > 1): stream throughput, the batch behind a launch. One
// launch (batch 1): that launch from a drained stream.
inline float median_us(cudaStream_t stream, const std::function<void()>& fn,
                       int batch = back_to_back_batch()) {
  return timed_us(stream, fn, batch, batch > 1 ? BatchStart::behind_a_launch : BatchStart::drained);
}

// The host's time to enqueue one call of fn on `stream`, in microseconds: the mean
// of 20 calls, each made on a drained stream, so that no call waits for the device
// (a call that takes a buffer in use by an earlier one would): the host's own work.
// Where it reaches median_us's figure for the same calls, that figure measures the
// host.
inline double enqueue_us(cudaStream_t stream, const std::function<void()>& fn) {
  std::chrono::duration<double, std::micro> host{};
  for (int i = 0; i < 20; ++i) {
    check(cudaStreamSynchronize(stream), "sync");
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    host += std::chrono::steady_clock::now() - t0;
  }
  check(cudaStreamSynchronize(stream), "sync");
  return host.count() / 20;
}

// Median per-launch time of a graph of `calls` (at least kGraphBatch) launches of
// fn on `stream`: as many as the input sets fn rotates through, so a replay takes
// every set. Each timed replay follows another, so the graph's own launch is
// overlapped as a queued batch's launches are.
inline float graph_us(cudaStream_t stream, const std::function<void()>& fn,
                      std::size_t calls = kGraphBatch) {
  calls = std::max<std::size_t>(calls, kGraphBatch);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture");
  for (std::size_t i = 0; i < calls; ++i) fn();
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  const float us = timed_us(
      stream, [&] { check(cudaGraphLaunch(exec, stream), "graph launch"); }, 1,
      BatchStart::behind_a_launch);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return us / float(calls);
}

// How many copies of a call's buffers (`bytes` each) a benchmark rotates through
// so that no call finds its inputs in L2, left there by the call before
// (.library/device/METHOD.md: repeated runs over one buffer measure the cache):
// together at least four times the device's L2. A copy timed as the ceiling
// rotates the same way.
inline std::size_t rotation_sets(std::size_t bytes) {
  int device = 0, l2 = 0;
  check(cudaGetDevice(&device), "device");
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "L2 size");
  return std::max<std::size_t>(1,
                               (4 * std::size_t(l2) + bytes - 1) / std::max<std::size_t>(bytes, 1));
}

__global__ void empty_kernel() {}

// An empty kernel in a graph: the floor under any one-kernel call, launch-bound.
inline float empty_graph_us(cudaStream_t stream) {
  return graph_us(stream, [&] { empty_kernel<<<1, 32, 0, stream>>>(); });
}

// Reading a buffer once, nothing else: the floor under any pass that reads it.
__global__ void read_only(const int4* p, std::size_t n4, int* sink) {
  int acc = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n4;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int4 v = __ldcs(p + i);
    acc |= v.x | v.y | v.z | v.w;
  }
  if (acc == 0x7fffffff) *sink = acc;  // keeps the loads; never true for these rows
}

}  // namespace aether::bench
