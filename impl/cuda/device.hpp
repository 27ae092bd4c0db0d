// What every CUDA backend header needs without pulling in the CUDA headers, so
// host-only translation units (tests built by g++) can include them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <span>
#include <type_traits>
#include <variant>

#include "api/result.hpp"

struct CUstream_st;
struct CUevent_st;

namespace aether::cuda {

using Stream = CUstream_st*;  // cudaStream_t; nullptr is the default stream

// `size` elements of device memory at `data`: what every CUDA entry point takes
// for its tensors, so that host memory cannot reach a kernel unnoticed. Made only
// explicitly (from a pointer and a length, or from a std::span the caller knows to
// be device memory); device_span<T> converts to device_span<const T>. The host
// never dereferences it.
template <class T>
class device_span {
 public:
  using element_type = T;
  device_span() = default;
  explicit device_span(T* data, std::size_t size) : data_(data), size_(size) {}
  explicit device_span(std::span<T> device_memory)
      : data_(device_memory.data()), size_(device_memory.size()) {}
  template <class U>
  requires(std::is_convertible_v<U (*)[], T (*)[]> && !std::is_same_v<U, T>)
      device_span(device_span<U> other)
      : data_(other.data()), size_(other.size()) {}

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t size_bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }
  // Elements [offset, offset + count) (to the end by default); offset <= size().
  device_span subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const {
    return device_span(data_ + offset, count == std::size_t(-1) ? size_ - offset : count);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

namespace device_error {
// A driver is installed but older than the CUDA runtime aether was built with
// (versions as 1000 major + 10 minor: 13000 is CUDA 13.0).
struct DriverTooOld {
  int driver_version, runtime_version;
  friend bool operator==(const DriverTooOld&, const DriverTooOld&) = default;
};
// The runtime reported another error (cudaError_t value).
struct RuntimeFailure {
  int code;
  friend bool operator==(const RuntimeFailure&, const RuntimeFailure&) = default;
};
}  // namespace device_error
using DeviceError = std::variant<device_error::DriverTooOld, device_error::RuntimeFailure>;
namespace device_error {
inline std::ostream& operator<<(std::ostream& os, const DeviceError& e) {
  if (const auto* p = std::get_if<DriverTooOld>(&e))
    return os << "DriverTooOld{driver_version=" << p->driver_version
              << ", runtime_version=" << p->runtime_version << "}";
  return os << "RuntimeFailure{code=" << std::get<RuntimeFailure>(e).code << "}";
}
}  // namespace device_error

// Number of usable CUDA devices: 0 when no driver is installed or no GPU is
// visible; a DeviceError when a driver is there but cannot serve this runtime.
Result<int, DeviceError> device_count();

// The one refusal protocol of every CUDA call: validation on the device, verdict on
// the host. A call's verdict (a DeviceVerdict in device memory) is set to
// kNoRefusal, all of it, before its first report (reset_verdict, a kernel, or the
// call's first kernel itself, as the formats store's; a captured call does so at
// every replay, the reset being in the graph; a kernel launched `overlapped` behind
// the reset may read before it is done and waits for it before its first report);
// its kernels atomicMin the code of every refusal they find into `refusal`, so the
// lowest, the first in the component's order, stays; kernels whose writes must wait
// for a clean word (a top-k or slot conversion writing nothing on refusal; the ring
// writes of a prefill that land on its pending inputs) read it after the checks;
// and the host reads it once, after the stream (the waiting calls), or the caller
// does (the enqueue_ forms). `detail` holds what a call records for the host (a
// refused lane's row and block; the top-k's count of rows finished the slow way).
// The waiting calls' verdict and its pinned host mirror are allocated once per
// thread and device (an allocation per call cost tens of microseconds: the default
// pool hands memory back at every synchronize).
inline constexpr unsigned long long kNoRefusal = ~0ull;
// A default DeviceVerdict is the reset one: no refusal, detail all ones.
struct DeviceVerdict {
  unsigned long long refusal = kNoRefusal;
  long long detail[2] = {-1, -1};
};
struct Verdict {
  DeviceVerdict* device = nullptr;
  const DeviceVerdict* host = nullptr;
  CUevent_st* copied = nullptr;  // a cudaEvent_t, recorded behind the host copy
  unsigned long long* word() const { return &device->refusal; }
  unsigned long long refusal() const { return host->refusal; }
};
// Every byte of *verdict set to DeviceVerdict{} on `stream`.
int reset_verdict(DeviceVerdict* verdict, Stream stream);
// The calling thread's verdict on the current device, as the last call left it, for
// a call whose first kernel resets it itself; 0 or the cudaError_t.
int verdict_slot(Verdict& verdict);
// The calling thread's verdict, reset on `stream`; 0 or the cudaError_t.
int begin_verdict(Verdict& verdict, Stream stream);
// Copies the device verdict to *verdict.host and waits for `stream`; 0 or the cudaError_t.
int end_verdict(const Verdict& verdict, Stream stream);
// The same in two steps, so that work queued between them runs after the copy and
// is not waited for: queue the copy (and an event behind it), then wait for that event.
int queue_verdict_copy(const Verdict& verdict, Stream stream);
int wait_verdict(const Verdict& verdict);

// A gate: a word in device memory that decides, on the device, whether work queued
// before the host knew it was needed runs. Open when there is no word or low <= *word
// <= high (gate_open in gate.cuh, read by each block as it starts).
struct Gate {
  const std::int32_t* word = nullptr;
  std::int32_t low = 0, high = 0x7fffffff;
};

// The calling thread's second stream on the current device (non-blocking, made on
// first use), made to wait for everything queued on `stream` so far: work queued
// on it runs beside what is queued on `stream` next. `stream` itself when the
// thread cannot have one (the caller's work then runs in order, as before).
Stream fork_side(Stream stream);
// `stream` made to wait for everything queued on `side` so far (nothing when side is
// stream); 0 or the cudaError_t.
int join_side(Stream stream, Stream side);

// Blocks of `kernel` (a __global__ function's address) with `threads` threads
// and `dynamic_shared` bytes of dynamic shared memory each that the current
// device holds at once: a persistent or cooperative grid's size. A kernel with
// dynamic shared memory is first allowed the opt-in maximum (allow_dynamic_shared):
// its static shared memory counts against the 48 KiB default too. Asked once per kernel,
// size and device (the queries cost microseconds per call); 0 if the runtime
// cannot say or the device cannot hold one such block.
std::size_t resident_blocks(const void* kernel, int threads, std::size_t dynamic_shared = 0);
// Lets `kernel` take as much dynamic shared memory as the current device's opt-in
// maximum leaves beside its static shared memory, once per kernel and device (the attribute costs
// microseconds a call, and one value for every caller never lowers what another launch needs); 0 or
// the cudaError_t.
int allow_dynamic_shared(const void* kernel);

// The most metadata one upload kernel carries in its parameters (under the 32764
// bytes CUDA 12.1 and later accept).
inline constexpr std::size_t kKernelCarriedBytes = 32000;

// A call's metadata, built on the host, in a device buffer of its own: upload_scratch
// allocates max(bytes, reserve) bytes in stream order on `stream` (from a
// per-thread, per-device pool; a call captured in a CUDA graph, from the graph's
// memory) and stores `bytes` from `host` there by kernels that carry them in their
// parameters (32000 bytes a kernel; host nullptr: nothing stored, the buffer is
// only reserved, room for device-only work). release_scratch frees it in stream
// order after the call's last kernel. So the host never waits for the device to
// finish with an earlier call's buffer, however many calls are queued, and a
// captured call's replays read what the call was given. (A thread's first queued
// call may still wait once: its pool is made then, and CUDA loads a kernel at its
// first launch, which can wait for the device.) Every upload_scratch is
// followed by its release_scratch before the next. 0 or the cudaError_t.
int upload_scratch(const void* host, std::size_t bytes, Stream stream, void** device,
                   std::size_t reserve = 0);
int release_scratch(Stream stream);

}  // namespace aether::cuda
