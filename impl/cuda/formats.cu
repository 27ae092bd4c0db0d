// CUDA store and read side of the cache formats (impl/cuda/formats.hpp): the host's
// refusals, then the verdict's reset, one kernel a call (impl/cuda/formats_store.cuh,
// impl/cuda/formats_gather.cuh; the store's reset also clears its claims' table),
// and, after it, a one-thread kernel that puts a refused row's slot in the verdict
// for the host.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>

#include "impl/cuda/formats.hpp"
#include "impl/cuda/formats_gather.cuh"
#include "impl/cuda/formats_store.cuh"
#include "impl/cuda/launch.cuh"

namespace aether::cuda {

namespace {
namespace fe = formats_error;
namespace fr = formats_rows;

// The slot count clamped into an int64: a slot is an int32, so every count past
// 2^31 admits the same slots.
template <CacheFormat F>
fr::Layout<F> layout_of(const CacheGeometry& g) {
  return {g.dim, g.rows_per_block, cache_row_bytes(g.format, g.dim),
          std::int64_t(std::min<std::size_t>(g.slots(), std::size_t(1) << 40))};
}

struct Grid {
  unsigned blocks, per_batch;
};
// A warp for each batch of `per_batch` rows (past 2^20 blocks, grid-stride).
Grid grid_of(std::size_t rows, unsigned per_batch) {
  const std::size_t batches = (rows + per_batch - 1) / per_batch;
  return {unsigned(std::min<std::size_t>((batches + fr::kWarps - 1) / fr::kWarps, 1u << 20)),
          per_batch};
}

// The store's grid for `rows` rows: batches small enough that every warp the
// device holds at once has one (a small call is spread out), at most 32 rows, a
// warp a batch (a large call's blocks run in waves).
Grid store_grid(const void* kernel, std::size_t rows, std::size_t dynamic_shared) {
  const std::size_t warps =
      std::max<std::size_t>(1, resident_blocks(kernel, fr::kThreads, dynamic_shared)) * fr::kWarps;
  return grid_of(rows, unsigned(std::clamp<std::size_t>((rows + warps - 1) / warps, 1, 32)));
}

// After the call's kernel (its programmatic dependent): a refused row's slot.
__global__ void describe_refusal(const std::int32_t* slots, DeviceVerdict* verdict) {
  wait_for_previous_kernel();
  const unsigned long long refusal = verdict->refusal;
  if (refusal != kNoRefusal && refusal >> 62 == 0)
    verdict->detail[0] = slots[refusal & fr::kIndexBits];
}

// The store's first kernel: the verdict reset (DeviceVerdict{}, as reset_verdict's)
// and the claims' table emptied (0xff bytes: fr::Claims), in one kernel, not a reset
// and a memset node, so that the store can follow it as a programmatic dependent:
// the store's blocks fetch their first items and slots and fill their E2M1 tables
// while it runs, and wait for it only before their first claim or refusal (a queued
// MainFp8 store of 65536 rows at 0.81 of the copy against 0.77-0.78 behind a memset;
// the reset in the same kernel, not one of its own, 1.0-1.7 us less a call:
// docs/performance.md). Launched `overlapped` itself, it starts its writes only once
// the kernel ahead of it (the previous call's) has finished, as a stream-ordered
// launch would.
__global__ void begin_store(DeviceVerdict* verdict, uint4* table, std::size_t words) {
  wait_for_previous_kernel();
  let_next_kernel_start();
  if (blockIdx.x == 0 && threadIdx.x == 0) *verdict = DeviceVerdict{};
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride)
    table[i] = uint4{~0u, ~0u, ~0u, ~0u};
}

template <CacheFormat F, bool Fast>
cudaError_t launch_store(const CacheGeometry& g, const float* rows, const std::int32_t* slots,
                         std::size_t n, std::byte* cache, RoundingProfile profile,
                         fr::Claims claims, DeviceVerdict* verdict, Stream stream) {
  const auto kernel = fr::store_rows<F, Fast>;
  // (resident_blocks allows the kernel its stages beside its static shared memory)
  const std::size_t shared = fr::kStoreStageBytes;
  const Grid grid = store_grid(reinterpret_cast<const void*>(kernel), n, shared);
  return overlapped(kernel, dim3(grid.blocks), fr::kThreads, shared, stream, rows, slots, n,
                    grid.per_batch, layout_of<F>(g), profile, claims, &verdict->refusal, cache);
}

// The store's kernels, the verdict's reset first among them. The claims' table is
// taken before them and given back after them, so that in a graph its allocation
// and release nodes stand outside the chain of programmatic dependents.
cudaError_t queue_store(const CacheGeometry& g, const float* rows, const std::int32_t* slots,
                        std::size_t n, std::byte* cache, RoundingProfile profile,
                        DeviceVerdict* verdict, Stream stream) {
  // the claims' table (fr::Claims): open-addressed, twice the distinct slots the call
  // can name, rounded up (at least two entries: a whole 16-byte word); direct, a
  // word a slot, where that is no larger
  const std::size_t names = std::min<std::size_t>(n, g.slots());
  const unsigned bits = std::clamp(unsigned(std::bit_width(2 * names - (names > 0))), 1u, 32u);
  const std::size_t entries = std::size_t(1) << bits;
  const bool direct = g.slots() <= 2 * entries;
  const std::size_t words = direct ? std::max<std::size_t>(1, (g.slots() + 3) / 4) : entries / 2;
  void* table = nullptr;
  if (int e = upload_scratch(nullptr, 16 * words, stream, &table)) return cudaError_t(e);
  const auto clear_blocks = unsigned(std::min<std::size_t>((words + 255) / 256, 1024));
  cudaError_t failure = overlapped(begin_store, dim3(clear_blocks), 256, 0, stream, verdict,
                                   static_cast<uint4*>(table), words);
  if (failure == cudaSuccess) {
    const fr::Claims claims =
        direct ? fr::Claims{static_cast<unsigned*>(table), nullptr, bits}
               : fr::Claims{nullptr, static_cast<unsigned long long*>(table), bits};
    // UE8M0 scales under the Cuda profile take the float path (formats_store.cuh)
    const bool fast = profile == RoundingProfile::Cuda;
    using enum CacheFormat;
    const auto launch = g.format == MainFp8
                            ? fast ? launch_store<MainFp8, true> : launch_store<MainFp8, false>
                        : g.format == MainFp4 ? launch_store<MainFp4, false>
                        : fast                ? launch_store<IndexFp4, true>
                                              : launch_store<IndexFp4, false>;
    failure = launch(g, rows, slots, n, cache, profile, claims, verdict, stream);
  }
  if (failure == cudaSuccess)
    failure = overlapped(describe_refusal, dim3(1), 32, 0, stream, slots, verdict);
  if (int e = release_scratch(stream); failure == cudaSuccess && e != 0) return cudaError_t(e);
  return failure;
}

// The read side's grid: a batch is one item's rows (one row from D 512 up, four
// at D 128), a warp each. Warps then hold neighbouring rows, so the output (8
// bytes an element, most of the traffic) is written as one stream, and the
// hardware deals the blocks out as SMs free up. The store's grid (each warp
// writing its own run of up to 128 KiB) reads at 0.80 of a copy's speed where
// this one reads at 0.88 to 0.92 (MainFp8, H200, docs/performance.md).
Grid gather_grid(std::size_t dim, std::size_t rows) {
  return grid_of(rows, unsigned(std::clamp<std::size_t>(fr::kChunk / dim, 1, 32)));
}

// A read side beside the verdict's reset (fr::Layout::read_beside_reset) is its
// programmatic dependent; the others follow it in stream order.
template <CacheFormat F>
cudaError_t launch_gather(const CacheGeometry& g, const std::byte* cache, const std::int32_t* slots,
                          std::size_t m, double* out, DeviceVerdict* verdict, Stream stream) {
  const Grid grid = gather_grid(g.dim, m);
  if constexpr (fr::Layout<F>::read_beside_reset)
    return overlapped(fr::gather_rows<F>, dim3(grid.blocks), fr::kThreads, 0, stream, cache, slots,
                      m, grid.per_batch, layout_of<F>(g), &verdict->refusal, out);
  fr::gather_rows<F><<<grid.blocks, fr::kThreads, 0, stream>>>(
      cache, slots, m, grid.per_batch, layout_of<F>(g), &verdict->refusal, out);
  return cudaGetLastError();
}

// The read side's kernels, the verdict's reset first.
cudaError_t queue_gather(const CacheGeometry& g, const std::byte* cache, const std::int32_t* slots,
                         std::size_t m, double* out, DeviceVerdict* verdict, Stream stream) {
  if (int e = reset_verdict(verdict, stream)) return cudaError_t(e);
  using enum CacheFormat;
  const auto launch = g.format == MainFp8   ? launch_gather<MainFp8>
                      : g.format == MainFp4 ? launch_gather<MainFp4>
                                            : launch_gather<IndexFp4>;
  if (cudaError_t e = launch(g, cache, slots, m, out, verdict, stream); e != cudaSuccess) return e;
  return overlapped(describe_refusal, dim3(1), 32, 0, stream, slots, verdict);
}

// The store reads its rows in 16-byte words (cudaMalloc's buffers start at 256):
// rows from elsewhere are refused before anything is queued (an empty call reads
// none).
Status<FormatsError> check_store(const CacheGeometry& cache, device_span<const float> rows,
                                 std::size_t slots, std::size_t cache_bytes) {
  if (auto st = formats_codes::check_geometry(cache, cache_bytes); !st.ok()) return st;
  const std::size_t n = rows.size();
  if (n % cache.dim != 0) return fe::ShapeMismatch{n / cache.dim * cache.dim, n};
  if (slots != n / cache.dim) return fe::ShapeMismatch{n / cache.dim, slots};
  if (n != 0 && reinterpret_cast<std::uintptr_t>(rows.data()) % 16 != 0)
    return fe::DeviceFailure{int(cudaErrorMisalignedAddress)};
  return Ok{};
}

Status<FormatsError> check_gather(const CacheGeometry& cache, std::size_t cache_bytes,
                                  std::size_t slots, std::size_t out) {
  if (auto st = formats_codes::check_geometry(cache, cache_bytes); !st.ok()) return st;
  if (out != slots * cache.dim) return fe::ShapeMismatch{slots * cache.dim, out};
  return Ok{};
}

// The waiting form of a queued call: the thread's verdict, the call queued (its
// reset first), the verdict read.
template <class Queue>
Status<FormatsError> wait_for(Stream stream, Queue queue) {
  Verdict v;
  if (int e = verdict_slot(v)) return fe::DeviceFailure{e};
  if (cudaError_t e = queue(v.device); e != cudaSuccess) return fe::DeviceFailure{int(e)};
  if (int e = end_verdict(v, stream)) return fe::DeviceFailure{e};
  return formats_verdict(*v.host);
}

}  // namespace

Status<FormatsError> formats_verdict(const DeviceVerdict& verdict) {
  if (verdict.refusal == kNoRefusal) return Ok{};
  const std::size_t index = std::size_t(verdict.refusal & fr::kIndexBits);
  if (verdict.refusal >> 62 == 1) return fe::NonFiniteInput{index};
  return fe::BadSlot{index, verdict.detail[0]};
}

Status<FormatsError> enqueue_store_rows(const CacheGeometry& cache, device_span<const float> rows,
                                        device_span<const std::int32_t> slots,
                                        device_span<std::byte> cache_bytes, DeviceVerdict* verdict,
                                        RoundingProfile profile, Stream stream) {
  if (auto st = check_store(cache, rows, slots.size(), cache_bytes.size()); !st.ok()) return st;
  if (slots.empty()) {  // nothing queued but the reset
    if (int e = reset_verdict(verdict, stream)) return fe::DeviceFailure{e};
    return Ok{};
  }
  if (cudaError_t e = queue_store(cache, rows.data(), slots.data(), slots.size(),
                                  cache_bytes.data(), profile, verdict, stream);
      e != cudaSuccess)
    return fe::DeviceFailure{int(e)};
  return Ok{};
}

Status<FormatsError> store_rows(const CacheGeometry& cache, device_span<const float> rows,
                                device_span<const std::int32_t> slots,
                                device_span<std::byte> cache_bytes, RoundingProfile profile,
                                Stream stream) {
  if (auto st = check_store(cache, rows, slots.size(), cache_bytes.size()); !st.ok()) return st;
  if (slots.empty()) return Ok{};
  return wait_for(stream, [&](DeviceVerdict* v) {
    return queue_store(cache, rows.data(), slots.data(), slots.size(), cache_bytes.data(), profile,
                       v, stream);
  });
}

Status<FormatsError> enqueue_gather_rows(const CacheGeometry& cache,
                                         device_span<const std::byte> cache_bytes,
                                         device_span<const std::int32_t> slots,
                                         device_span<double> out, DeviceVerdict* verdict,
                                         Stream stream) {
  if (auto st = check_gather(cache, cache_bytes.size(), slots.size(), out.size()); !st.ok())
    return st;
  if (slots.empty()) {  // nothing queued but the reset
    if (int e = reset_verdict(verdict, stream)) return fe::DeviceFailure{e};
    return Ok{};
  }
  if (cudaError_t e = queue_gather(cache, cache_bytes.data(), slots.data(), slots.size(),
                                   out.data(), verdict, stream);
      e != cudaSuccess)
    return fe::DeviceFailure{int(e)};
  return Ok{};
}

Status<FormatsError> gather_rows(const CacheGeometry& cache,
                                 device_span<const std::byte> cache_bytes,
                                 device_span<const std::int32_t> slots, device_span<double> out,
                                 Stream stream) {
  if (auto st = check_gather(cache, cache_bytes.size(), slots.size(), out.size()); !st.ok())
    return st;
  if (slots.empty()) return Ok{};
  return wait_for(stream, [&](DeviceVerdict* v) {
    return queue_gather(cache, cache_bytes.data(), slots.data(), slots.size(), out.data(), v,
                        stream);
  });
}

}  // namespace aether::cuda
