// The device helpers of impl/cuda/device.hpp: the device count, resident blocks and
// the shared-memory allowance, and the refusal protocol's verdicts. The upload
// scratch lives in device_scratch.cu.
#include <cuda_runtime.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "impl/cuda/device.hpp"
#include "impl/cuda/launch.cuh"

namespace aether::cuda {

Result<int, DeviceError> device_count() {
  int driver = 0, runtime = 0;
  if (cudaError_t e = cudaDriverGetVersion(&driver); e != cudaSuccess)
    return device_error::RuntimeFailure{int(e)};
  if (driver == 0) return 0;  // no driver installed
  if (cudaError_t e = cudaRuntimeGetVersion(&runtime); e != cudaSuccess)
    return device_error::RuntimeFailure{int(e)};
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  cudaGetLastError();  // a failed query leaves a sticky error behind
  if (e == cudaErrorNoDevice) return 0;
  if (e == cudaErrorInsufficientDriver || (e != cudaSuccess && driver < runtime))
    return device_error::DriverTooOld{driver, runtime};
  if (e != cudaSuccess) return device_error::RuntimeFailure{int(e)};
  return n;
}

int allow_dynamic_shared(const void* kernel) {
  thread_local std::vector<std::pair<const void*, int>> allowed;
  int device = 0, most = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (std::find(allowed.begin(), allowed.end(), std::pair{kernel, device}) != allowed.end())
    return 0;
  cudaFuncAttributes attributes{};
  if (cudaError_t e =
          cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      e != cudaSuccess)
    return e;
  if (cudaError_t e = cudaFuncGetAttributes(&attributes, kernel); e != cudaSuccess) return e;
  // a block's static shared memory counts against the same limit
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           most - int(attributes.sharedSizeBytes));
      e != cudaSuccess)
    return e;
  allowed.emplace_back(kernel, device);
  return 0;
}

std::size_t resident_blocks(const void* kernel, int threads, std::size_t dynamic_shared) {
  struct Known {
    const void* kernel;
    int device, threads;
    std::size_t dynamic_shared, blocks;
  };
  thread_local std::vector<Known> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  for (const Known& k : known)
    if (k.kernel == kernel && k.device == device && k.threads == threads &&
        k.dynamic_shared == dynamic_shared)
      return k.blocks;
  int sms = 0, per_sm = 0;
  if (dynamic_shared > 0 && allow_dynamic_shared(kernel) != 0) {
    cudaGetLastError();  // not sticky: the caller takes another path
    return 0;
  }
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_shared) !=
          cudaSuccess)
    return 0;
  known.push_back(
      {kernel, device, threads, dynamic_shared, std::size_t(sms) * std::size_t(per_sm)});
  return known.back().blocks;
}

namespace {
struct VerdictSlots {
  std::vector<std::pair<int, Verdict>> by_device;
  ~VerdictSlots() {
    for (auto& [device, v] : by_device) {
      cudaFree(v.device);
      cudaFreeHost(const_cast<DeviceVerdict*>(v.host));
      cudaEventDestroy(v.copied);
    }
  }
};
}  // namespace

int verdict_slot(Verdict& verdict) {
  thread_local VerdictSlots slots;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  auto it = slots.by_device.begin();
  while (it != slots.by_device.end() && it->first != device) ++it;
  if (it == slots.by_device.end()) {
    Verdict v;
    DeviceVerdict* host = nullptr;
    if (cudaError_t e = cudaMalloc(&v.device, sizeof *v.device); e != cudaSuccess) return e;
    if (cudaError_t e = cudaMallocHost(&host, sizeof *host); e != cudaSuccess) {
      cudaFree(v.device);
      return e;
    }
    v.host = host;
    if (cudaError_t e = cudaEventCreateWithFlags(&v.copied, cudaEventDisableTiming);
        e != cudaSuccess) {
      cudaFree(v.device);
      cudaFreeHost(host);
      return e;
    }
    slots.by_device.emplace_back(device, v);
    it = slots.by_device.end() - 1;
  }
  verdict = it->second;
  return 0;
}

namespace {
// A kernel, not a memset: a call's first kernel, launched `overlapped` behind it,
// starts while it runs (it waits for it before its first report). The reset is
// itself launched `overlapped`: it may be resident before the kernel ahead of it
// ends, and it lets the next start only once that kernel has finished, as a
// stream-ordered launch would.
__global__ void reset_whole_verdict(DeviceVerdict* verdict) {
  wait_for_previous_kernel();
  let_next_kernel_start();
  *verdict = DeviceVerdict{};
}
}  // namespace

int reset_verdict(DeviceVerdict* verdict, Stream stream) {
  if (cudaError_t e = overlapped(reset_whole_verdict, dim3(1), 1, 0, stream, verdict)) return e;
  return cudaGetLastError();
}

int begin_verdict(Verdict& verdict, Stream stream) {
  if (int e = verdict_slot(verdict)) return e;
  return reset_verdict(verdict.device, stream);
}

int queue_verdict_copy(const Verdict& verdict, Stream stream) {
  if (cudaError_t e = cudaMemcpyAsync(const_cast<DeviceVerdict*>(verdict.host), verdict.device,
                                      sizeof *verdict.device, cudaMemcpyDeviceToHost, stream);
      e != cudaSuccess)
    return e;
  return cudaEventRecord(verdict.copied, stream);
}

int wait_verdict(const Verdict& verdict) { return cudaEventSynchronize(verdict.copied); }

namespace {
// The calling thread's second stream on the current device and its two events
// (nullptr when it cannot have them).
struct Side {
  int device;
  cudaStream_t stream;
  cudaEvent_t forked, joined;
};
Side* side_slot() {
  struct Sides {
    std::vector<Side> by_device;
    ~Sides() {
      for (const Side& s : by_device) {
        cudaStreamDestroy(s.stream);
        cudaEventDestroy(s.forked);
        cudaEventDestroy(s.joined);
      }
    }
  };
  thread_local Sides sides;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return nullptr;
  for (Side& s : sides.by_device)
    if (s.device == device) return &s;
  Side s{device, nullptr, nullptr, nullptr};
  if (cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess ||
      cudaEventCreateWithFlags(&s.forked, cudaEventDisableTiming) != cudaSuccess ||
      cudaEventCreateWithFlags(&s.joined, cudaEventDisableTiming) != cudaSuccess) {
    if (s.stream != nullptr) cudaStreamDestroy(s.stream);
    if (s.forked != nullptr) cudaEventDestroy(s.forked);
    cudaGetLastError();  // not sticky: the caller's work runs on its one stream
    return nullptr;
  }
  sides.by_device.push_back(s);
  return &sides.by_device.back();
}
}  // namespace

Stream fork_side(Stream stream) {
  Side* s = side_slot();
  if (s == nullptr || cudaEventRecord(s->forked, stream) != cudaSuccess ||
      cudaStreamWaitEvent(s->stream, s->forked, 0) != cudaSuccess) {
    cudaGetLastError();
    return stream;
  }
  return s->stream;
}

int join_side(Stream stream, Stream side) {
  if (side == stream) return 0;
  Side* s = side_slot();
  if (s == nullptr || s->stream != side) return cudaErrorInvalidResourceHandle;
  if (cudaError_t e = cudaEventRecord(s->joined, side); e != cudaSuccess) return e;
  return cudaStreamWaitEvent(stream, s->joined, 0);
}

int end_verdict(const Verdict& verdict, Stream stream) {
  if (int e = queue_verdict_copy(verdict, stream)) return e;
  return cudaStreamSynchronize(stream);
}

}  // namespace aether::cuda
