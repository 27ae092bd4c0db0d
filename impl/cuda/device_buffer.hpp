// An owning buffer of device memory for host programs that stage data through
// the CUDA backends: allocated and filled from host memory in one step, read back
// with download(). Nothing throws: a failed allocation or copy leaves an empty
// buffer and says why in status(). Needs the CUDA runtime's headers (CUDA::cudart).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <span>
#include <utility>

#include "impl/cuda/device.hpp"

namespace aether::cuda {

template <class T>
class DeviceBuffer {
 public:
  // A copy of `host` in device memory (at least one element is allocated, so an
  // empty buffer still has a distinct address).
  explicit DeviceBuffer(std::span<const T> host) {
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, std::max<std::size_t>(host.size(), 1) * sizeof(T));
        e != cudaSuccess) {
      status_ = device_error::RuntimeFailure{int(e)};
      return;
    }
    ptr_ = static_cast<T*>(p);
    size_ = host.size();
    if (size_ == 0) return;
    if (cudaError_t e = cudaMemcpy(ptr_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice);
        e != cudaSuccess)
      fail(e);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : ptr_(std::exchange(other.ptr_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        status_(other.status_) {}
  ~DeviceBuffer() { cudaFree(ptr_); }

  // Ok, or why the buffer is empty.
  const Status<DeviceError>& status() const { return status_; }
  device_span<T> span() const { return device_span<T>(ptr_, size_); }
  std::size_t size() const { return size_; }

  // Waits for the device, then copies the buffer into `host` (its size()).
  Status<DeviceError> download(std::span<T> host) const {
    if (host.size() != size_) return device_error::RuntimeFailure{int(cudaErrorInvalidValue)};
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
      return device_error::RuntimeFailure{int(e)};
    if (size_ == 0) return Ok{};
    if (cudaError_t e = cudaMemcpy(host.data(), ptr_, size_ * sizeof(T), cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      return device_error::RuntimeFailure{int(e)};
    return Ok{};
  }

 private:
  void fail(cudaError_t e) {
    cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
    status_ = device_error::RuntimeFailure{int(e)};
  }
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
  Status<DeviceError> status_ = Ok{};
};

}  // namespace aether::cuda
