// A host vector mirrored in device memory, for staging test data through CUDA.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

namespace aether::props {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::abort();  // test support: a broken device is not a property failure
  }
}

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::span<const T> host) : size_(host.size()) {
    cuda_check(cudaMalloc(&ptr_, std::max<std::size_t>(size_, 1) * sizeof(T)), "cudaMalloc");
    if (size_)
      cuda_check(cudaMemcpy(ptr_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice),
                 "upload");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }

  std::span<T> span() { return {ptr_, size_}; }
  void download(std::span<T> host) const {
    cuda_check(cudaDeviceSynchronize(), "synchronize");
    if (size_)
      cuda_check(cudaMemcpy(host.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost),
                 "download");
  }

 private:
  T* ptr_ = nullptr;
  std::size_t size_;
};

}  // namespace aether::props
