// Host-side pieces of CUDA DoSA (impl/cuda/dosa.cu): the checks that run on the
// host, the per-thread device workspace, and the plans flattened for the device.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <vector>

#include "api/dosa.hpp"
#include "impl/cuda/dosa_kernels.hpp"
#include "impl/cuda/indexer.hpp"

namespace aether::cuda::dosa {

// A 16-head tile count: the tensor cores' unit of work.
inline std::size_t tiles16(std::size_t heads) { return (heads + 15) / 16; }

// The cost rule (docs/dosa.md): whether pruning `queries` queries of `heads` heads
// over `keys` keys, with `seeds` seeds and screens `width` heads wide, costs under
// 0.9 of full scoring when a share `rho` of the keys not seeds survives.
struct BatchShape {
  std::size_t queries, keys, seeds, heads, width;
};
bool pruning_pays(const BatchShape& b, double rho);

// The scorer's refusals as DoSA's.
DosaError from_indexer(const IndexerError& e);

// A CUDA runtime call whose failure the caller returns as DosaError.
// (an empty branch, then `else return`: an `else` after the macro's use belongs to
// the caller's `if`, not to the macro's)
#define AETHER_DOSA_TRY(call)                                          \
  if (const cudaError_t aether_e = cudaError_t(call); aether_e == 0) { \
  } else                                                               \
    return dosa_error::DeviceFailure { int(aether_e) }

// Memory the calling thread keeps from call to call, grown as needed (its contents
// are lost when it grows) and freed when the thread ends: device memory, or pinned
// host memory for copies the host must not wait on (a copy from or into pageable
// memory holds the host).
class HeldBuffer {
 public:
  explicit HeldBuffer(bool pinned) : pinned_(pinned) {}
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  ~HeldBuffer() { release(); }
  // At least `bytes`; the cudaError_t of the allocation.
  cudaError_t reserve(std::size_t bytes) {
    if (bytes <= bytes_) return cudaSuccess;
    release();
    const cudaError_t e = pinned_ ? cudaMallocHost(&p_, bytes) : cudaMalloc(&p_, bytes);
    if (e == cudaSuccess) bytes_ = bytes;
    return e;
  }
  void* data() const { return p_; }

 private:
  void release() {
    pinned_ ? cudaFreeHost(p_) : cudaFree(p_);
    p_ = nullptr;
    bytes_ = 0;
  }
  bool pinned_;
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// An event the calling thread keeps (created on first use; nullptr if it cannot be).
class HeldEvent {
 public:
  HeldEvent() = default;
  HeldEvent(const HeldEvent&) = delete;
  HeldEvent& operator=(const HeldEvent&) = delete;
  ~HeldEvent() {
    if (e_ != nullptr) cudaEventDestroy(e_);
  }
  cudaEvent_t get() {
    if (e_ == nullptr) cudaEventCreateWithFlags(&e_, cudaEventDisableTiming);
    return e_;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

// The calling thread's device memory for a call's intermediates (a HeldBuffer; a
// call waits for the device before it returns, so the next call may reuse it),
// carved in 256-byte aligned pieces in the order reserved.
class Workspace {
 public:
  template <class T>
  void reserve(std::size_t n) {
    bytes_ += (n * sizeof(T) + 255) / 256 * 256;
  }
  cudaError_t allocate() {
    thread_local HeldBuffer held(false);
    if (cudaError_t e = held.reserve(bytes_); e != cudaSuccess) return e;
    base_ = static_cast<char*>(held.data());
    return cudaSuccess;
  }
  template <class T>
  T* take(std::size_t n) {
    T* p = reinterpret_cast<T*>(base_ + used_);
    used_ += (n * sizeof(T) + 255) / 256 * 256;
    return p;
  }

 private:
  std::size_t bytes_ = 0, used_ = 0;
  char* base_ = nullptr;
};

// The host's copies of weights (for the plan check and the screens' weights) and
// seeds, in the calling thread's pinned memory (grown as needed), so that their
// downloads ride on the scorer check's one wait. While the device checks the
// scorer's inputs, `early` queues device work that needs only the scorer's shapes
// (checked by then on the host), then the seeds are checked in the model's order,
// then `more` (the plans); the first refusal in the model's order is returned.
// The wait covers the check alone: work `early` and `more` queue may still run
// (on a refusal the stream is drained first, the workspace being reused).
struct HostInputs {
  std::span<const float> weights;
  std::span<const std::int32_t> seeds;
};
using HostCheck = std::function<Status<DosaError>(const HostInputs&)>;
Status<DosaError> check_inputs(device_span<const std::uint16_t> queries,
                               device_span<const float> weights, std::size_t query_count,
                               const DeviceIndexKeys& keys, device_span<const std::int32_t> seeds,
                               Stream stream, HostInputs& host, const HostCheck& more = {},
                               const std::function<cudaError_t()>& early = {});

// The calling thread's pinned host memory for n survivor counts (grown as needed;
// empty if it cannot be had): a download into pageable memory holds the host until
// the device gets there, and the probe's count is followed by more work to queue.
std::span<std::int32_t> pinned_counts(std::size_t n);
// The calling thread's event recorded behind the probe's count, so that the host
// waits for the count and not for the fallback's full scoring queued after it.
cudaEvent_t probe_counted();

// A batch's plans flattened into one buffer (DevicePlans' sections, each 16-byte
// aligned), uploaded in one copy to `device`; returns the device view.
class PlanBlob {
 public:
  // Screen weights for `padded` >= plans.size() queries (zero past the plans).
  PlanBlob(std::span<const DosaPlan> plans, std::span<const float> weights, std::size_t width,
           std::size_t padded) {
    const std::size_t heads = plans.empty() ? 0 : weights.size() / plans.size();
    std::vector<std::uint32_t> retained_first{0}, retained, anchor_first{0}, aggregated_first{0},
        aggregated;
    std::vector<AnchorEntry> anchors;
    std::vector<DosaTerm> terms;
    std::vector<float> screen(padded * width, 0.0f);
    std::size_t retained_total = 0, anchors_total = 0;  // one allocation each
    for (const DosaPlan& p : plans) {
      retained_total += p.retained.size();
      anchors_total += p.anchors.size();
    }
    retained.reserve(retained_total);
    anchors.reserve(anchors_total);
    for (std::size_t t = 0; t < plans.size(); ++t) {
      const DosaPlan& p = plans[t];
      retained.insert(retained.end(), p.retained.begin(), p.retained.end());
      retained_first.push_back(std::uint32_t(retained.size()));
      for (const DosaAnchor& a : p.anchors) {
        anchors.push_back(
            {a.head, a.anchor, a.beta, std::uint32_t(terms.size()), std::uint32_t(a.more.size())});
        terms.insert(terms.end(), a.more.begin(), a.more.end());
      }
      anchor_first.push_back(std::uint32_t(anchors.size()));
      aggregated.insert(aggregated.end(), p.aggregated.begin(), p.aggregated.end());
      aggregated_first.push_back(std::uint32_t(aggregated.size()));
      (void)dosa_screen::screen_weights(
          weights.subspan(t * heads, heads), p,
          screen.data() + t * width);  // width: the widest screen, so it fits
    }
    offsets_ = {add(retained_first), add(retained),         add(anchor_first), add(anchors),
                add(terms),          add(aggregated_first), add(aggregated),   add(screen)};
    width_ = width;
  }
  std::size_t size() const { return bytes_.size(); }
  // At least size() for these plans, before building them.
  static std::size_t bound(std::span<const DosaPlan> plans, std::size_t width, std::size_t padded) {
    std::size_t bytes = 8 * 16 + 3 * 4 * (plans.size() + 1) + 4 * padded * width;
    for (const DosaPlan& p : plans) {
      bytes +=
          4 * (p.retained.size() + p.aggregated.size()) + sizeof(AnchorEntry) * p.anchors.size();
      for (const DosaAnchor& a : p.anchors) bytes += sizeof(DosaTerm) * a.more.size();
    }
    return bytes;
  }
  // Queues the copy (pageable: it returns once the bytes are staged).
  cudaError_t upload(std::byte* device, Stream stream, DevicePlans& view) const {
    const auto at = [&](int i) { return device + offsets_[std::size_t(i)]; };
    view = {reinterpret_cast<const std::uint32_t*>(at(0)),
            reinterpret_cast<const std::uint32_t*>(at(1)),
            reinterpret_cast<const std::uint32_t*>(at(2)),
            reinterpret_cast<const AnchorEntry*>(at(3)),
            reinterpret_cast<const DosaTerm*>(at(4)),
            reinterpret_cast<const std::uint32_t*>(at(5)),
            reinterpret_cast<const std::uint32_t*>(at(6)),
            reinterpret_cast<const float*>(at(7)),
            width_};
    return cudaMemcpyAsync(device, bytes_.data(), bytes_.size(), cudaMemcpyHostToDevice, stream);
  }

 private:
  template <class T>
  std::size_t add(const std::vector<T>& v) {
    const std::size_t at = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(at + v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(bytes_.data() + at, v.data(), v.size() * sizeof(T));
    return at;
  }
  std::vector<std::byte> bytes_;
  std::vector<std::size_t> offsets_;
  std::size_t width_ = 0;
};

// The widest screen of a batch in whole 16-head tiles (zero rows and weights pad
// the others).
std::size_t widest_screen(std::span<const DosaPlan> plans);

// One screening pass's buffers (its queries' plans, screens, seed scores, tau,
// survivor lists and counts): a call's probe has its own, apart from the batch's,
// so that the batch's seeds may be scored while the probe runs.
struct Pass {
  std::byte* blob;
  DevicePlans plans;
  float *seed_scores, *tau;
  ScreenTerms* terms;
  std::uint16_t* screen_rows;
  std::int32_t *list, *counts;
};
// A dosa_topk call's intermediates, taken from the calling thread's Workspace: full
// scoring's rows and ends always, the rest when pruning, the probe's pass when it
// probes.
struct Buffers {
  struct Sizes {
    std::size_t queries, keys, seeds, k, width, dim, pack, probe;  // probe: 0 for none
    bool prune;
    std::span<const DosaPlan> plans;  // their count not checked yet
  };
  float *rows = nullptr, *scales = nullptr, *list_scores = nullptr;
  std::int32_t *ends = nullptr, *seed_ids = nullptr, *lanes = nullptr;
  std::uint8_t* is_seed = nullptr;
  double* norms = nullptr;
  Pass probe{}, batch{};
  cudaError_t take(const Sizes& z);
};

}  // namespace aether::cuda::dosa
