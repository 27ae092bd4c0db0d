// The upload scratch of impl/cuda/device.hpp: per-thread, per-device rings of
// device buffers with pinned mirrors, and the pieces a captured call's table is
// carried in.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "impl/cuda/device.hpp"
#include "impl/cuda/launch.cuh"

namespace aether::cuda {

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
// Streams a captured call's table pieces fan out over (a 4096-request prefill table has five).
constexpr std::size_t kFanStreams = 4;
struct ScratchRing {
  Scratch slots[kScratchSlots];
  std::size_t current = 0;   // the slot of the call between upload and release
  void* captured = nullptr;  // that call's own buffer, when it is captured in a graph
  Stream fan[kFanStreams] =
      {};  // store_pieces' streams for a captured table's pieces, made at first use
  cudaEvent_t fan_forked = nullptr, fan_joined = nullptr;
};
struct ScratchRings {
  std::vector<std::pair<int, ScratchRing>> by_device;
  ~ScratchRings() {
    for (auto& [device, ring] : by_device) {
      for (Scratch& s : ring.slots) {
        cudaFree(s.buffer);
        cudaFreeHost(s.pinned);
        if (s.done) cudaEventDestroy(s.done);
      }
      for (Stream st : ring.fan)
        if (st) cudaStreamDestroy(st);
      for (cudaEvent_t e : {ring.fan_forked, ring.fan_joined})
        if (e) cudaEventDestroy(e);
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
    if (cudaError_t e = cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming); e != cudaSuccess)
      return e;
  rings.by_device.emplace_back(device, ring);
  *out = &rings.by_device.back().second;
  return 0;
}

// A piece of a call's metadata, carried by its kernel's parameters: a graph keeps
// them, where a copy node would read the pinned mirror that later calls
// overwrite, and a queued call needs no copy engine (whose copy the next kernel
// waits for). At most 32000 bytes, under the 32764 that CUDA 12.1 and later
// accept (with 4 KiB pieces a 4096-request table would be 33 kernels in a row);
// the smallest of 4, 8 and 16 KiB that holds the table where one does, since a
// launch copies every parameter byte (a launch's host time grows with its
// parameters, docs/performance.md).
template <std::size_t Words>
struct Piece {
  uint4 words[Words];
};
constexpr std::size_t kSmallPiece = 256, kLargePiece = 2000;
// A piece's bytes are spread over blocks of 64 threads, 1 KiB a block: the lanes of
// a warp read 32 different words of the parameters, which the constant cache
// serves one at a time, so one block of 256 threads would store 8 KiB slowly;
// each SM has a constant cache of its own.
constexpr std::size_t kPieceBlockBytes = 1024;
static_assert(sizeof(Piece<kLargePiece>) == kKernelCarriedBytes);
template <std::size_t Words>
__global__ void store_piece(const __grid_constant__ Piece<Words> piece, std::size_t count,
                            unsigned char* to) {
  let_next_kernel_start();  // a kernel launched `overlapped` after it waits for it anyway
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t whole = reinterpret_cast<std::uintptr_t>(to) % 16 == 0 ? count / 16 : 0;
  for (std::size_t i = first; i < whole; i += stride)
    reinterpret_cast<uint4*>(to)[i] = piece.words[i];
  const auto* bytes = reinterpret_cast<const unsigned char*>(piece.words);
  for (std::size_t i = 16 * whole + first; i < count; i += stride) to[i] = bytes[i];
}

// `ring`'s fan streams and events, made at first use.
int make_fan(ScratchRing* ring) {
  if (ring->fan_joined != nullptr) return 0;
  for (Stream& st : ring->fan)
    if (cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking); e != cudaSuccess)
      return e;
  if (cudaError_t e = cudaEventCreateWithFlags(&ring->fan_forked, cudaEventDisableTiming);
      e != cudaSuccess)
    return e;
  return cudaEventCreateWithFlags(&ring->fan_joined, cudaEventDisableTiming);
}

// `bytes` from `host` into `device` by kernels. With `fan` (a captured call) the pieces after the
// first go on its fan streams, so the graph runs them side by side (one after another, a
// 4096-request prefill table's five pieces would add up in each replay); `stream`
// then waits for all of them.
template <std::size_t Words>
int store_pieces(const void* host, std::size_t bytes, Stream stream, void* device,
                 ScratchRing* fan) {
  Piece<Words> piece;
  const std::size_t pieces = (bytes + sizeof piece.words - 1) / sizeof piece.words;
  const std::size_t fanned =
      fan != nullptr && pieces > 1 ? std::min<std::size_t>(pieces - 1, kFanStreams) : 0;
  if (fanned > 0) {
    if (int e = make_fan(fan)) return e;
    if (cudaError_t e = cudaEventRecord(fan->fan_forked, stream); e != cudaSuccess) return e;
    for (std::size_t i = 0; i < fanned; ++i)
      if (cudaError_t e = cudaStreamWaitEvent(fan->fan[i], fan->fan_forked, 0); e != cudaSuccess)
        return e;
  }
  for (std::size_t p = 0; p < pieces; ++p) {
    const std::size_t at = p * sizeof piece.words, count = std::min(bytes - at, sizeof piece.words);
    std::memcpy(piece.words, static_cast<const unsigned char*>(host) + at, count);
    const Stream on = fanned > 0 && p > 0 ? fan->fan[(p - 1) % fanned] : stream;
    store_piece<<<unsigned((count + kPieceBlockBytes - 1) / kPieceBlockBytes), 64, 0, on>>>(
        piece, count, static_cast<unsigned char*>(device) + at);
  }
  for (std::size_t i = 0; i < fanned; ++i) {
    if (cudaError_t e = cudaEventRecord(fan->fan_joined, fan->fan[i]); e != cudaSuccess) return e;
    if (cudaError_t e = cudaStreamWaitEvent(stream, fan->fan_joined, 0); e != cudaSuccess) return e;
  }
  return cudaGetLastError();
}
int store_pieces(const void* host, std::size_t bytes, Stream stream, void* device,
                 ScratchRing* fan = nullptr) {
  if (bytes <= sizeof(Piece<kSmallPiece>))
    return store_pieces<kSmallPiece>(host, bytes, stream, device, fan);
  if (bytes <= sizeof(Piece<2 * kSmallPiece>))
    return store_pieces<2 * kSmallPiece>(host, bytes, stream, device, fan);
  if (bytes <= sizeof(Piece<4 * kSmallPiece>))
    return store_pieces<4 * kSmallPiece>(host, bytes, stream, device, fan);
  return store_pieces<kLargePiece>(host, bytes, stream, device, fan);
}

// `bytes` from `host` into slot s's buffer on `stream`: a table that fits one
// kernel's parameters goes with a kernel (a copy from the host is a copy engine's
// operation the next kernel waits for), a longer one from the slot's pinned mirror.
int copy_into(Scratch* s, const void* host, std::size_t bytes, Stream stream) {
  if (bytes <= kKernelCarriedBytes) return store_pieces(host, bytes, stream, s->buffer);
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

// The captured call's buffer: a stream-ordered allocation (the graph's own memory,
// freed by release_scratch in the same graph), its metadata stored by kernels.
int upload_captured(ScratchRing* ring, const void* host, std::size_t bytes, Stream stream,
                    void** device, std::size_t reserve) {
  const std::size_t used = std::max<std::size_t>({bytes, reserve, 1});
  if (cudaError_t e = cudaMallocAsync(device, used, stream); e != cudaSuccess) return e;
  ring->captured = *device;
  if (host != nullptr && bytes > 0) return store_pieces(host, bytes, stream, *device, ring);
  return 0;
}
}  // namespace

int upload_scratch(const void* host, std::size_t bytes, Stream stream, void** device,
                   std::size_t reserve) {
  ScratchRing* ring = nullptr;
  if (int e = current_ring(&ring)) return e;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) return e;
  if (capture == cudaStreamCaptureStatusActive)
    return upload_captured(ring, host, bytes, stream, device, reserve);
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
  return copy_into(s, host, bytes, stream);
}

int release_scratch(Stream stream) {
  ScratchRing* ring = nullptr;
  if (int e = current_ring(&ring)) return e;
  if (void* captured = std::exchange(ring->captured, nullptr))
    return cudaFreeAsync(captured, stream);
  return cudaEventRecord(ring->slots[ring->current].done, stream);
}

}  // namespace aether::cuda
