// The launch modes every CUDA test body runs in, declared once (as CCCL's tests
// declare their launch wrapper): the waiting call; the queued call, its verdict
// read after the stream; the queued call captured in a CUDA graph and replayed.
// CUDA builds only.
#pragma once

#include <cuda_runtime.h>

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

}  // namespace aether::props
