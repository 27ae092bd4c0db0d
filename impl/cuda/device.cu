#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

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
    if (k.kernel == kernel && k.device == device && k.threads == threads && k.dynamic_shared == dynamic_shared)
      return k.blocks;
  int sms = 0, per_sm = 0;
  if (dynamic_shared > 48 * 1024 &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(dynamic_shared)) != cudaSuccess) {
    cudaGetLastError();  // not sticky: the caller takes another path
    return 0;
  }
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_shared) != cudaSuccess)
    return 0;
  known.push_back({kernel, device, threads, dynamic_shared, std::size_t(sms) * std::size_t(per_sm)});
  return known.back().blocks;
}

namespace {
struct VerdictSlots {
  std::vector<std::pair<int, Verdict>> by_device;
  ~VerdictSlots() {
    for (auto& [device, v] : by_device) {
      cudaFree(v.device);
      cudaFreeHost(const_cast<DeviceVerdict*>(v.host));
    }
  }
};
}  // namespace

int begin_verdict(Verdict& verdict, Stream stream) {
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
    slots.by_device.emplace_back(device, v);
    it = slots.by_device.end() - 1;
  }
  verdict = it->second;
  return cudaMemsetAsync(verdict.word(), 0xff, sizeof(unsigned long long), stream);
}

int end_verdict(const Verdict& verdict, Stream stream) {
  if (cudaError_t e = cudaMemcpyAsync(const_cast<DeviceVerdict*>(verdict.host), verdict.device,
                                      sizeof *verdict.device, cudaMemcpyDeviceToHost, stream);
      e != cudaSuccess)
    return e;
  return cudaStreamSynchronize(stream);
}

namespace {
struct Scratch {
  void* buffer = nullptr;
  std::size_t bytes = 0;
  cudaEvent_t done = nullptr;
  // Pinned mirror of the copied part: a copy from pageable memory blocks the host
  // for several microseconds per call, from pinned memory it is queued.
  void* pinned = nullptr;
  std::size_t pinned_bytes = 0;
};
// Calls take the slots in turn, so the host prepares a call while the device still
// runs the previous one (with one slot it waited for that call to finish reading).
constexpr std::size_t kScratchSlots = 2;
struct ScratchRing {
  Scratch slots[kScratchSlots];
  std::size_t current = 0;  // the slot of the call between upload and release
};
struct ScratchRings {
  std::vector<std::pair<int, ScratchRing>> by_device;
  ~ScratchRings() {
    for (auto& [device, ring] : by_device)
      for (Scratch& s : ring.slots) {
        cudaFree(s.buffer);
        cudaFreeHost(s.pinned);
        if (s.done) cudaEventDestroy(s.done);
      }
  }
};

int current_ring(ScratchRing** out) {
  thread_local ScratchRings rings;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  for (auto& [d, ring] : rings.by_device)
    if (d == device) {
      *out = &ring;
      return 0;
    }
  ScratchRing ring;
  for (Scratch& s : ring.slots)
    if (cudaError_t e = cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming); e != cudaSuccess) return e;
  rings.by_device.emplace_back(device, ring);
  *out = &rings.by_device.back().second;
  return 0;
}
}  // namespace

int upload_scratch(const void* host, std::size_t bytes, Stream stream, void** device, std::size_t reserve) {
  ScratchRing* ring = nullptr;
  if (int e = current_ring(&ring)) return e;
  ring->current = (ring->current + 1) % kScratchSlots;
  Scratch* s = &ring->slots[ring->current];
  if (cudaError_t e = cudaEventSynchronize(s->done); e != cudaSuccess) return e;
  if (const std::size_t needed = std::max(bytes, reserve); needed > s->bytes) {
    cudaFree(s->buffer);
    s->buffer = nullptr;
    s->bytes = 0;
    if (cudaError_t e = cudaMalloc(&s->buffer, needed); e != cudaSuccess) return e;
    s->bytes = needed;
  }
  *device = s->buffer;
  if (bytes == 0 || host == nullptr) return 0;
  if (bytes > s->pinned_bytes) {  // the previous copy out of it finished before `done`
    cudaFreeHost(s->pinned);
    s->pinned = nullptr;
    s->pinned_bytes = 0;
    if (cudaError_t e = cudaMallocHost(&s->pinned, bytes); e != cudaSuccess) return e;
    s->pinned_bytes = bytes;
  }
  std::memcpy(s->pinned, host, bytes);
  return cudaMemcpyAsync(s->buffer, s->pinned, bytes, cudaMemcpyHostToDevice, stream);
}

int release_scratch(Stream stream) {
  ScratchRing* ring = nullptr;
  if (int e = current_ring(&ring)) return e;
  return cudaEventRecord(ring->slots[ring->current].done, stream);
}

}  // namespace aether::cuda
