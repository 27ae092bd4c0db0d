#include <cuda_runtime.h>

#include "impl/cuda/device.hpp"

namespace aether::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" state
    return 0;
  }
  return n;
}

}  // namespace aether::cuda
