#include "props/support/cuda_launch.hpp"

namespace aether::props {

std::string mode_name(Mode mode) {
  return mode == Mode::Waiting ? "waiting" : mode == Mode::Queued ? "queued" : "captured";
}

Graph::Graph(const std::function<bool(cudaStream_t)>& queue) {
  if (cudaStreamCreate(&stream_) != cudaSuccess ||
      cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal) != cudaSuccess)
    return;
  const bool queued = queue(stream_);
  cudaGraph_t graph;
  if (cudaStreamEndCapture(stream_, &graph) != cudaSuccess) return;
  ok_ = queued && cudaGraphInstantiate(&exec_, graph, 0) == cudaSuccess;
  cudaGraphDestroy(graph);
}

Graph::~Graph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

bool Graph::replay() {
  return cudaGraphLaunch(exec_, stream_) == cudaSuccess &&
         cudaStreamSynchronize(stream_) == cudaSuccess;
}

}  // namespace aether::props
