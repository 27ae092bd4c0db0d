// The upload scratch of impl/cuda/device.hpp: each call's buffer allocated in
// stream order (from a per-thread, per-device pool, or, in a captured call, from
// the graph's own memory), its copied part stored by kernels that carry it in
// their parameters.
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
// Streams a captured call's table pieces fan out over (a 4096-request prefill table has five).
constexpr std::size_t kFanStreams = 4;
// What the pool keeps across synchronisations: 16 claims' tables of a 262144-row
// store (4 MiB each); memory past it goes back to the device when a stream or the
// device is synchronised.
constexpr std::uint64_t kPoolKeeps = std::uint64_t(64) << 20;
struct Scratch {
  // A queued call's buffers, allocated and freed in stream order: no call waits on
  // the host for an earlier one to finish with its buffer, however many are queued.
  // A pool of its own, so the process's default pool keeps its settings.
  cudaMemPool_t pool = nullptr;  // made by make_pool
  void* current = nullptr;       // the call's buffer, between upload and release
  // store_pieces' streams for a captured table's pieces, made at first use
  Stream fan[kFanStreams] = {};
  cudaEvent_t fan_forked = nullptr, fan_joined = nullptr;
};
struct Scratches {
  std::vector<std::pair<int, Scratch>> by_device;
  ~Scratches() {
    for (auto& [device, s] : by_device) {
      if (s.pool) cudaMemPoolDestroy(s.pool);  // its memory goes once its frees have run
      for (Stream st : s.fan)
        if (st) cudaStreamDestroy(st);
      for (cudaEvent_t e : {s.fan_forked, s.fan_joined})
        if (e) cudaEventDestroy(e);
    }
  }
};

// Made at a thread's first queued call on a device, never inside a capture (a
// captured call takes the graph's memory; a pool made there would end the capture).
int make_pool(cudaMemPool_t* pool) {
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  if (cudaError_t e = cudaMemPoolCreate(pool, &props); e != cudaSuccess) return e;
  std::uint64_t keeps = kPoolKeeps;
  if (cudaError_t e = cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &keeps);
      e != cudaSuccess) {
    cudaMemPoolDestroy(std::exchange(*pool, nullptr));
    return e;
  }
  return 0;
}

int current_scratch(Scratch** out) {
  thread_local Scratches scratches;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  for (auto& [d, s] : scratches.by_device)
    if (d == device) {
      *out = &s;
      return 0;
    }
  scratches.by_device.emplace_back(device, Scratch{});
  *out = &scratches.by_device.back().second;
  return 0;
}

// A piece of a call's metadata, carried by its kernel's parameters: a graph keeps
// them, where a copy node would read host memory that later calls overwrite, and a
// queued call keeps no host memory alive until the device has read it, nor waits
// for a copy engine (whose copy the next kernel would wait for). At most 32000
// bytes, under the 32764 that CUDA 12.1 and later accept (with 4 KiB pieces a
// 4096-request table would be 33 kernels in a row); the smallest of 4, 8 and 16 KiB
// that holds the table where one does, since a launch copies every parameter byte
// (a launch's host time grows with its parameters, docs/performance.md).
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

// `s`'s fan streams and events, made at first use.
int make_fan(Scratch* s) {
  if (s->fan_joined != nullptr) return 0;
  for (Stream& st : s->fan)
    if (cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking); e != cudaSuccess)
      return e;
  if (cudaError_t e = cudaEventCreateWithFlags(&s->fan_forked, cudaEventDisableTiming);
      e != cudaSuccess)
    return e;
  return cudaEventCreateWithFlags(&s->fan_joined, cudaEventDisableTiming);
}

// `bytes` from `host` into `device` by kernels. With `fan` (a captured call) the pieces after the
// first go on its fan streams, so the graph runs them side by side (one after another, a
// 4096-request prefill table's five pieces would add up in each replay); `stream`
// then waits for all of them.
template <std::size_t Words>
int store_pieces(const void* host, std::size_t bytes, Stream stream, void* device, Scratch* fan) {
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
                 Scratch* fan = nullptr) {
  if (bytes <= sizeof(Piece<kSmallPiece>))
    return store_pieces<kSmallPiece>(host, bytes, stream, device, fan);
  if (bytes <= sizeof(Piece<2 * kSmallPiece>))
    return store_pieces<2 * kSmallPiece>(host, bytes, stream, device, fan);
  if (bytes <= sizeof(Piece<4 * kSmallPiece>))
    return store_pieces<4 * kSmallPiece>(host, bytes, stream, device, fan);
  return store_pieces<kLargePiece>(host, bytes, stream, device, fan);
}

}  // namespace

int upload_scratch(const void* host, std::size_t bytes, Stream stream, void** device,
                   std::size_t reserve) {
  Scratch* s = nullptr;
  if (int e = current_scratch(&s)) return e;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) return e;
  const bool captured = capture == cudaStreamCaptureStatusActive;
  if (!captured && s->pool == nullptr)
    if (int e = make_pool(&s->pool)) return e;
  const std::size_t used = std::max<std::size_t>({bytes, reserve, 1});
  // captured: an allocation node, its memory the graph's, freed by release_scratch's
  // node in the same graph, so each replay reads the bytes stored below
  const cudaError_t allocated = captured ? cudaMallocAsync(device, used, stream)
                                         : cudaMallocFromPoolAsync(device, used, s->pool, stream);
  if (allocated != cudaSuccess) return allocated;
  s->current = *device;
  if (host == nullptr || bytes == 0) return 0;
  return store_pieces(host, bytes, stream, *device, captured ? s : nullptr);
}

int release_scratch(Stream stream) {
  Scratch* s = nullptr;
  if (int e = current_scratch(&s)) return e;
  if (void* buffer = std::exchange(s->current, nullptr)) return cudaFreeAsync(buffer, stream);
  return 0;
}

}  // namespace aether::cuda
