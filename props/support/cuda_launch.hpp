// The launch modes every CUDA test body runs in, declared once (as CCCL's tests
// declare their launch wrapper): the waiting call; the queued call, its verdict
// read after the stream; the queued call captured in a CUDA graph and replayed.
// CUDA builds only.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <string>

namespace aether::props {

enum class Mode { Waiting, Queued, Captured };
std::string mode_name(Mode mode);

// The calls `queue` makes on a stream of its own, captured into an instantiated
// CUDA graph; ok() is false if a call or the capture failed.
class Graph {
 public:
  explicit Graph(const std::function<bool(cudaStream_t)>& queue);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();
  bool ok() const { return ok_; }
  cudaStream_t stream() const { return stream_; }
  bool replay();

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  bool ok_ = false;
};

// The calls `queue` makes on a stream of its own, twice: once as they are (their
// kernels loaded and this thread's scratch pool made, either of which may wait for
// the device once), then while a host function holds the stream (nothing queued on
// it runs until it lets go). `returned` says whether the second `queue` came back
// within `limit`, as queued calls that never wait for the device do (a watchdog
// lets the stream go at `limit` otherwise); `ok`, whether both `queue`s and the
// stream's work succeeded. `queue` must be one that can run twice (calls whose
// second run writes what the first wrote).
struct Held {
  bool returned = false, ok = false;
};
Held queue_while_held(const std::function<bool(cudaStream_t)>& queue,
                      std::chrono::seconds limit = std::chrono::seconds(30));

}  // namespace aether::props
