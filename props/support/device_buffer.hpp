// The public device buffer (impl/cuda/device_buffer.hpp) for test support: a
// broken device is not a property failure, so a failed allocation, copy or
// download aborts with the runtime's message.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <span>
#include <sstream>

#include "impl/cuda/device_buffer.hpp"

namespace aether::props {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
  std::abort();
}

inline void abort_on(const Status<cuda::DeviceError>& status, const char* what) {
  if (status.ok()) return;
  std::ostringstream os;
  os << status.error();
  std::fprintf(stderr, "CUDA error in %s: %s\n", what, os.str().c_str());
  std::abort();
}

template <class T>
class DeviceBuffer : public cuda::DeviceBuffer<T> {
 public:
  explicit DeviceBuffer(std::span<const T> host) : cuda::DeviceBuffer<T>(host) {
    abort_on(this->status(), "upload");
  }
  void download(std::span<T> host) const {
    abort_on(cuda::DeviceBuffer<T>::download(host), "download");
  }
};

}  // namespace aether::props
