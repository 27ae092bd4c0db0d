// CUDA store and read side of the cache formats (impl/cuda/formats.hpp): checking
// kernels put the first refusal in the model's order into the call's verdict; the
// writing kernels run only after the host has read it. Codes come from
// impl/formats_codes.hpp, the CPU backend's own rules, on the device.
#include <cuda_runtime.h>

#include <algorithm>

#include "impl/cuda/formats.hpp"
#include "impl/formats_codes.hpp"

namespace aether::cuda {

namespace {
namespace fe = formats_error;
using namespace formats_codes;

constexpr int kThreads = 256;

// Refusals as ordered codes: a bad slot (by row) before a non-finite value (by
// flat index), each the lowest.
__host__ __device__ constexpr unsigned long long refusal(unsigned kind, std::size_t index) {
  return (static_cast<unsigned long long>(kind) << 62) | index;
}

// Where a slot's data and scales start, and a group's bytes within them.
struct Layout {
  CacheFormat format;
  GroupFormat group;
  std::size_t dim, rows_per_block, row_bytes, slots;
  __device__ std::size_t data(std::size_t s, std::size_t g) const {
    const std::size_t data_bytes = group.element == Element::E4M3 ? group.group : group.group / 2;
    if (format != CacheFormat::IndexFp4) return s * row_bytes + g * (data_bytes + 1);
    const std::size_t block = s / rows_per_block * rows_per_block * row_bytes;
    return block + (s % rows_per_block) * (dim / 2) + g * data_bytes;
  }
  __device__ std::size_t scale(std::size_t s, std::size_t g) const {
    const std::size_t data_bytes = group.element == Element::E4M3 ? group.group : group.group / 2;
    if (format != CacheFormat::IndexFp4) return data(s, g) + data_bytes;
    const std::size_t block = s / rows_per_block * rows_per_block * row_bytes;
    return block + rows_per_block * (dim / 2) + (s % rows_per_block) * (dim / 32) + g;
  }
};

// first[s]: the lowest row storing at slot s; a slot outside the cache refused.
__global__ void first_rows(const std::int32_t* slots, std::size_t n, std::size_t capacity,
                           unsigned* first, unsigned long long* verdict) {
  for (std::size_t j = blockIdx.x * std::size_t(kThreads) + threadIdx.x; j < n;
       j += std::size_t(gridDim.x) * kThreads) {
    const std::int64_t s = slots[j];
    if (s == -1) continue;
    if (s < -1 || s >= std::int64_t(capacity))
      atomicMin(verdict, refusal(0, j));
    else
      atomicMin(first + s, unsigned(j));
  }
}

// A slot given twice (refused at the later row), and NaN/inf in a stored row.
__global__ void check_rows(const float* rows, const std::int32_t* slots, std::size_t n,
                           std::size_t dim, std::size_t capacity, const unsigned* first,
                           unsigned long long* verdict) {
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < n * dim;
       i += std::size_t(gridDim.x) * kThreads) {
    const std::size_t j = i / dim;
    const std::int64_t s = slots[j];
    if (s < 0 || s >= std::int64_t(capacity)) continue;
    if (i % dim == 0 && first[s] < j) atomicMin(verdict, refusal(0, j));
    if (!isfinite(rows[i])) atomicMin(verdict, refusal(1, i));
  }
}

// A warp a (row, group): the group's amax, scale byte and codes, written where the
// layout places them; placeholder rows skipped.
__global__ void store_kernel(const float* rows, const std::int32_t* slots, std::size_t n,
                             Layout lay, RoundingProfile profile, std::byte* cache) {
  const std::size_t groups = lay.dim / lay.group.group;
  const std::size_t warp = (blockIdx.x * std::size_t(kThreads) + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  const std::size_t j = warp / groups, g = warp % groups;
  if (j >= n || slots[j] == -1) return;  // the whole warp
  const std::size_t s = std::size_t(slots[j]);
  const bool mine = lane < lay.group.group;
  const float x = mine ? rows[j * lay.dim + g * lay.group.group + lane] : 0.0f;
  float amax = fabsf(x);
  for (int m = 16; m >= 1; m /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, m));
  const std::uint8_t scale = scale_byte(lay.group, double(amax), profile);
  const std::uint8_t code =
      encode(lay.group.element, double(x) / scale_of(lay.group.scale, scale), profile);
  const std::uint8_t odd = __shfl_down_sync(0xffffffffu, code, 1);
  std::byte* data = cache + lay.data(s, g);
  if (lay.group.element == Element::E4M3) {
    if (mine) data[lane] = std::byte(code);
  } else if (mine && lane % 2 == 0) {
    data[lane / 2] = std::byte(code | (odd << 4));
  }
  if (lane == 0) cache[lay.scale(s, g)] = std::byte(scale);
}

// Element e of the row at slot s: its code's value times its group's scale.
__device__ double value_at(const std::byte* cache, const Layout& lay, std::size_t s,
                           std::size_t e) {
  const std::size_t g = e / lay.group.group, k = e % lay.group.group;
  const std::byte* data = cache + lay.data(s, g);
  const std::uint8_t code = lay.group.element == Element::E4M3
                                ? std::uint8_t(data[k])
                                : std::uint8_t((std::uint8_t(data[k / 2]) >> (4 * (k % 2))) & 0xf);
  return value_of(lay.group.element, code) *
         scale_of(lay.group.scale, std::uint8_t(cache[lay.scale(s, g)]));
}

// A slot outside the cache (by output row), then a NaN element or scale byte (by
// output value).
__global__ void check_reads(const std::byte* cache, const std::int32_t* slots, std::size_t m,
                            Layout lay, unsigned long long* verdict) {
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < m * lay.dim;
       i += std::size_t(gridDim.x) * kThreads) {
    const std::size_t j = i / lay.dim, e = i % lay.dim;
    const std::int64_t s = slots[j];
    if (s == -1) continue;
    if (s < -1 || s >= std::int64_t(lay.slots)) {
      if (e == 0) atomicMin(verdict, refusal(0, j));
      continue;
    }
    if (isnan(value_at(cache, lay, std::size_t(s), e))) atomicMin(verdict, refusal(1, i));
  }
}

__global__ void gather_kernel(const std::byte* cache, const std::int32_t* slots, std::size_t m,
                              Layout lay, double* out) {
  for (std::size_t i = blockIdx.x * std::size_t(kThreads) + threadIdx.x; i < m * lay.dim;
       i += std::size_t(gridDim.x) * kThreads) {
    const std::int32_t s = slots[i / lay.dim];
    out[i] = s == -1 ? 0.0 : value_at(cache, lay, std::size_t(s), i % lay.dim);
  }
}

unsigned blocks_for(std::size_t n) {
  return unsigned(std::clamp<std::size_t>((n + kThreads - 1) / kThreads, 1, 4096));
}

Layout layout_of(const CacheGeometry& g) {
  return {g.format,         group_format(g.format),           g.dim,
          g.rows_per_block, cache_row_bytes(g.format, g.dim), g.slots()};
}

// The verdict as the model's error: BadSlot with the row's slot (read back), or
// NonFiniteInput.
Status<FormatsError> refusal_of(unsigned long long verdict, const std::int32_t* slots) {
  const std::size_t index = std::size_t(verdict & ~refusal(3, 0));
  if (verdict >> 62 == 1) return fe::NonFiniteInput{index};
  std::int32_t slot = 0;
  if (cudaError_t e = cudaMemcpy(&slot, slots + index, 4, cudaMemcpyDeviceToHost); e != cudaSuccess)
    return fe::DeviceFailure{int(e)};
  return fe::BadSlot{index, slot};
}

}  // namespace

Status<FormatsError> store_rows(const CacheGeometry& cache, device_span<const float> rows,
                                device_span<const std::int32_t> slots,
                                device_span<std::byte> cache_bytes, RoundingProfile profile,
                                Stream stream) {
  if (auto st = formats_codes::check_geometry(cache, cache_bytes.size()); !st.ok()) return st;
  if (rows.size() % cache.dim != 0)
    return fe::ShapeMismatch{rows.size() / cache.dim * cache.dim, rows.size()};
  const std::size_t n = rows.size() / cache.dim;
  if (slots.size() != n) return fe::ShapeMismatch{n, slots.size()};
  if (n == 0) return Ok{};
  const Layout lay = layout_of(cache);
  void* first = nullptr;  // the lowest row a slot, UINT_MAX for none
  if (cudaError_t e = cudaMallocAsync(&first, std::max<std::size_t>(1, lay.slots) * 4, stream);
      e != cudaSuccess)
    return fe::DeviceFailure{int(e)};
  cudaMemsetAsync(first, 0xff, lay.slots * 4, stream);
  Verdict v;
  if (int e = begin_verdict(v, stream)) return fe::DeviceFailure{e};
  first_rows<<<blocks_for(n), kThreads, 0, stream>>>(slots.data(), n, lay.slots,
                                                     static_cast<unsigned*>(first), v.word());
  check_rows<<<blocks_for(n * cache.dim), kThreads, 0, stream>>>(
      rows.data(), slots.data(), n, cache.dim, lay.slots, static_cast<unsigned*>(first), v.word());
  cudaFreeAsync(first, stream);
  if (int e = end_verdict(v, stream)) return fe::DeviceFailure{e};
  if (v.refusal() != kNoRefusal) return refusal_of(v.refusal(), slots.data());
  const std::size_t warps = n * (cache.dim / lay.group.group);
  store_kernel<<<unsigned((warps * 32 + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      rows.data(), slots.data(), n, lay, profile, cache_bytes.data());
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess)
    return fe::DeviceFailure{int(e)};
  return Ok{};
}

Status<FormatsError> gather_rows(const CacheGeometry& cache,
                                 device_span<const std::byte> cache_bytes,
                                 device_span<const std::int32_t> slots, device_span<double> out,
                                 Stream stream) {
  if (auto st = formats_codes::check_geometry(cache, cache_bytes.size()); !st.ok()) return st;
  const std::size_t m = slots.size();
  if (out.size() != m * cache.dim) return fe::ShapeMismatch{m * cache.dim, out.size()};
  if (m == 0) return Ok{};
  const Layout lay = layout_of(cache);
  Verdict v;
  if (int e = begin_verdict(v, stream)) return fe::DeviceFailure{e};
  check_reads<<<blocks_for(m * cache.dim), kThreads, 0, stream>>>(cache_bytes.data(), slots.data(),
                                                                  m, lay, v.word());
  if (int e = end_verdict(v, stream)) return fe::DeviceFailure{e};
  if (v.refusal() != kNoRefusal) return refusal_of(v.refusal(), slots.data());
  gather_kernel<<<blocks_for(m * cache.dim), kThreads, 0, stream>>>(
      cache_bytes.data(), slots.data(), m, lay, out.data());
  cudaStreamSynchronize(stream);
  return Ok{};
}

}  // namespace aether::cuda
