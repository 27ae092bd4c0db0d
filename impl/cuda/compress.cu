#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "impl/compress_math.hpp"
#include "impl/compress_plan.hpp"
#include "impl/cuda/compress.hpp"

namespace aether::cuda {

namespace {
namespace ce = compress_error;
using impl::Step;

constexpr unsigned long long kNoError = kNoRefusal;

// One request as the kernels see it; rows and tokens of request i start at its
// offsets (the host's plan), so a block finds its request by binary search.
struct RequestMeta {
  std::int64_t start, token_offset, row_offset;
  std::int32_t slot, tokens;
};

struct Geometry {
  std::int64_t ratio, ring;  // r, S
  unsigned dim, width;       // D, 2 D
};

// The last request whose `offset` is <= x (requests with nothing at x come first).
template <class Offset>
__device__ std::size_t find_request(const RequestMeta* requests, std::size_t n, std::size_t x, Offset offset) {
  std::size_t lo = 0, hi = n;  // invariant: answer in [lo, hi)
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (std::size_t(offset(requests[mid])) <= x) lo = mid;
    else hi = mid;
  }
  return lo;
}

__device__ inline const float* ring_entry(const float* ring, const RequestMeta& q, std::int64_t p, const Geometry& g) {
  return ring + (std::size_t(q.slot) * std::size_t(g.ring) + std::size_t(p % g.ring)) * g.width;
}

// The model's refusal order: the first non-finite projected value (lowest index),
// else the lowest non-finite old ring entry a request reads (top bit set).
__global__ void validate(const float* projected, std::size_t n, const float* ring, const RequestMeta* requests,
                         std::size_t request_count, Geometry g, unsigned long long* error) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  // 16 bytes per load where aligned: this pass reads every input once
  const std::size_t vectors = reinterpret_cast<std::uintptr_t>(projected) % 16 == 0 ? n / 4 : 0;
  for (std::size_t v = first; v < vectors; v += stride) {
    const float4 x = __ldg(reinterpret_cast<const float4*>(projected) + v);
    if (!isfinite(x.x) || !isfinite(x.y) || !isfinite(x.z) || !isfinite(x.w))
      for (std::size_t i = 4 * v; i < 4 * v + 4; ++i)
        if (!isfinite(projected[i])) atomicMin(error, i);
  }
  for (std::size_t i = 4 * vectors + first; i < n; i += stride)
    if (!isfinite(projected[i])) atomicMin(error, i);
  const std::size_t per_request = std::size_t(g.ratio - 1) * g.width;  // at most r - 1 old inputs
  for (std::size_t i = first; i < request_count * per_request; i += stride) {
    const RequestMeta q = requests[i / per_request];
    const std::int64_t k = std::int64_t(i % per_request / g.width), c = std::int64_t(i % g.width);
    const std::int64_t p = q.start / g.ratio * g.ratio + k;  // old positions [r floor(s/r), s)
    const bool completes = (q.start + q.tokens) / g.ratio != q.start / g.ratio;
    if (!completes || p >= q.start) continue;
    const std::size_t at = std::size_t(ring_entry(ring, q, p, g) - ring) + std::size_t(c);
    if (!isfinite(ring[at])) atomicMin(error, (1ull << 63) | at);
  }
}

// Block x: output row x, threads over channels.
template <bool kDecode>
__global__ void rows_kernel(const RequestMeta* requests, std::size_t request_count, const float* projected,
                            const float* ring, Geometry g, std::uint16_t* rows, std::int32_t* row_index,
                            std::int32_t* positions) {
  __shared__ std::size_t request;
  const std::size_t row = blockIdx.x;
  if (threadIdx.x == 0)
    request = find_request(requests, request_count, row, [](const RequestMeta& q) { return q.row_offset; });
  __syncthreads();
  const RequestMeta q = requests[request];
  const std::int64_t r = g.ratio, s = q.start, local = std::int64_t(row) - q.row_offset;
  std::int64_t j;  // the completed row, or -1
  if (kDecode) {
    const std::int64_t p = s + local;
    j = p % r == r - 1 ? p / r : -1;
  } else {
    j = (s + q.tokens) / r == s / r ? -1 : s / r + local;
  }
  if (threadIdx.x == 0) {
    row_index[row] = std::int32_t(j);
    positions[row] = j < 0 ? 0 : std::int32_t(j * r);
  }
  // prefill reads old inputs from the ring, new ones from projected; decode reads
  // the ring, which already holds the step's positions
  const auto input = [&](int t) {
    const std::int64_t p = j * r + t;
    return kDecode || p < s ? ring_entry(ring, q, p, g)
                            : projected + std::size_t(q.token_offset + p - s) * g.width;
  };
  for (unsigned d = threadIdx.x; d < g.dim; d += blockDim.x) {
    std::uint16_t out = 0;
    if (j >= 0)
      out = impl::bf16_nearest(impl::gated_mean([&](int t) { return input(t)[d]; },
                                                [&](int t) { return input(t)[g.dim + d]; }, int(r)));
    rows[row * g.dim + d] = out;
  }
}

// Decode, block x: token x of the batch, every position written. Prefill, block
// (x, k): request x's k-th last position, if the chunk has one: a chunk keeps its
// last S positions. 16 bytes at a time when aligned.
template <bool kDecode>
__global__ void copy_kernel(const RequestMeta* requests, std::size_t request_count, const float* projected,
                            float* ring, Geometry g, bool vector) {
  __shared__ std::size_t request;
  if (threadIdx.x == 0)
    request = kDecode ? find_request(requests, request_count, blockIdx.x,
                                     [](const RequestMeta& q) { return q.token_offset; })
                      : blockIdx.x;
  __syncthreads();
  const RequestMeta q = requests[request];
  const std::int64_t kept = q.tokens < g.ring ? q.tokens : g.ring;
  for (std::int64_t k = blockIdx.y; k < (kDecode ? 1 : kept); k += gridDim.y) {
    const std::int64_t local = kDecode ? std::int64_t(blockIdx.x) - q.token_offset : q.tokens - 1 - k;
    const std::int64_t p = q.start + local;
    const float* from = projected + std::size_t(q.token_offset + local) * g.width;
    float* to = ring + (std::size_t(q.slot) * std::size_t(g.ring) + std::size_t(p % g.ring)) * g.width;
    if (vector) {
      for (unsigned i = threadIdx.x; i < g.width / 4; i += blockDim.x)
        reinterpret_cast<float4*>(to)[i] = reinterpret_cast<const float4*>(from)[i];
    } else {
      for (unsigned i = threadIdx.x; i < g.width; i += blockDim.x) to[i] = from[i];
    }
  }
}

Status<CompressError> run(std::span<const CompressRequest> requests, std::span<const float> projected,
                          std::span<float> ring, const CompressShape& shape, std::span<std::uint16_t> rows,
                          std::span<std::int32_t> row_index, std::span<std::int32_t> positions, Step step,
                          Stream stream) {
  const auto planned = impl::plan_call(requests, shape, step, projected.size(), ring.size(), rows.size(),
                                       row_index.size(), positions.size());
  if (auto* e = std::get_if<CompressError>(&planned)) return *e;
  const auto& plan = std::get<impl::CompressPlan>(planned);
  std::vector<RequestMeta> meta;
  for (std::size_t i = 0; i < requests.size(); ++i)
    meta.push_back({requests[i].start, std::int64_t(plan.token_offset[i]), std::int64_t(plan.row_offset[i]),
                    requests[i].state_slot, requests[i].tokens});
  void* device_meta = nullptr;
  if (int e = upload_scratch(meta.data(), meta.size() * sizeof(RequestMeta), stream, &device_meta))
    return ce::DeviceFailure{e};
  const auto* d_meta = static_cast<const RequestMeta*>(device_meta);
  const Geometry g{shape.ratio, std::int64_t(shape.ring), unsigned(shape.dim), unsigned(2 * shape.dim)};

  Verdict v;
  if (int e = begin_verdict(v, stream)) return ce::DeviceFailure{e};
  const std::size_t work = std::max(projected.size(), meta.size() * std::size_t(shape.ratio - 1) * g.width);
  const unsigned blocks = unsigned(std::min<std::size_t>((work + 255) / 256 + 1, 4096));
  validate<<<blocks, 256, 0, stream>>>(projected.data(), projected.size(), ring.data(), d_meta, meta.size(), g,
                                       v.word);
  if (int e = end_verdict(v, stream)) return ce::DeviceFailure{e};
  if (*v.host != kNoError) {
    release_scratch(stream);
    const bool in_ring = *v.host >> 63;
    return ce::NonFiniteInput{in_ring ? 1 : 0, std::size_t(*v.host & ~(1ull << 63))};
  }
  const bool vector = g.width % 4 == 0 && reinterpret_cast<std::uintptr_t>(projected.data()) % 16 == 0 &&
                      reinterpret_cast<std::uintptr_t>(ring.data()) % 16 == 0;
  const unsigned threads = shape.dim >= 256 ? 256 : unsigned((shape.dim + 31) / 32 * 32);
  const bool decode = step == Step::Decode;
  const auto launch_rows = [&] {
    if (plan.rows == 0) return;
    (decode ? rows_kernel<true> : rows_kernel<false>)<<<unsigned(plan.rows), threads, 0, stream>>>(
        d_meta, meta.size(), projected.data(), ring.data(), g, rows.data(), row_index.data(), positions.data());
  };
  const auto launch_copies = [&] {
    if (plan.tokens == 0) return;
    std::size_t most = 1;
    for (const auto& q : requests) most = std::max(most, std::size_t(q.tokens));
    const dim3 grid = decode ? dim3(unsigned(plan.tokens))
                             : dim3(unsigned(meta.size()), unsigned(std::min({shape.ring, most, std::size_t(65535)})));
    (decode ? copy_kernel<true> : copy_kernel<false>)<<<grid, 128, 0, stream>>>(d_meta, meta.size(), projected.data(),
                                                                             ring.data(), g, vector);
  };
  if (decode) {  // every new position is written before any is read
    launch_copies();
    launch_rows();
  } else {  // old inputs are read before the chunk's writes
    launch_rows();
    launch_copies();
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return ce::DeviceFailure{int(e)};
  if (int e = release_scratch(stream)) return ce::DeviceFailure{e};
  return Ok{};
}
}  // namespace

Status<CompressError> compress_prefill(std::span<const CompressRequest> requests,
                                       std::span<const float> projected, std::span<float> ring,
                                       const CompressShape& shape, std::span<std::uint16_t> rows,
                                       std::span<std::int32_t> row_index,
                                       std::span<std::int32_t> positions, Stream stream) {
  return run(requests, projected, ring, shape, rows, row_index, positions, Step::Prefill, stream);
}

Status<CompressError> compress_decode(std::span<const CompressRequest> requests,
                                      std::span<const float> projected, std::span<float> ring,
                                      const CompressShape& shape, std::span<std::uint16_t> rows,
                                      std::span<std::int32_t> row_index,
                                      std::span<std::int32_t> positions, Stream stream) {
  return run(requests, projected, ring, shape, rows, row_index, positions, Step::Decode, stream);
}

}  // namespace aether::cuda
