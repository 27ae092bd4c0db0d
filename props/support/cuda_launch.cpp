#include "props/support/cuda_launch.hpp"

#include <future>
#include <mutex>

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

Held queue_while_held(const std::function<bool(cudaStream_t)>& queue, std::chrono::seconds limit) {
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return {};
  Held held;
  held.ok = queue(stream) && cudaStreamSynchronize(stream) == cudaSuccess;
  std::promise<void> let_go, done;
  std::shared_future<void> gate = let_go.get_future().share();
  std::once_flag once;
  const auto open = [&] { std::call_once(once, [&] { let_go.set_value(); }); };
  if (held.ok && cudaLaunchHostFunc(
                     stream, [](void* g) { static_cast<std::shared_future<void>*>(g)->wait(); },
                     &gate) == cudaSuccess) {
    auto watchdog = std::async(std::launch::async, [&, finished = done.get_future()] {
      if (finished.wait_for(limit) == std::future_status::ready) return true;
      open();  // a call waiting for the stream would wait for ever
      return false;
    });
    held.ok = queue(stream);
    done.set_value();
    held.returned = watchdog.get();
  }
  open();
  held.ok = cudaStreamSynchronize(stream) == cudaSuccess && held.ok;
  cudaStreamDestroy(stream);
  return held;
}

}  // namespace aether::props
