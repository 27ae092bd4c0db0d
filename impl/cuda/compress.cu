#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "impl/compress_math.hpp"
#include "impl/compress_plan.hpp"
#include "impl/cuda/compress.hpp"

namespace aether::cuda {

namespace {
namespace ce = compress_error;
using impl::Step;

constexpr unsigned long long kNoError = kNoRefusal;

// A group input's source as one number: a float offset into projected (>= 0) or
// -(1 + offset) into the ring.
__host__ __device__ inline const float* source(std::int64_t code, const float* projected, const float* ring) {
  return code >= 0 ? projected + code : ring + (-1 - code);
}

struct RowTask {
  std::int32_t row, position;  // row -1: zeros (placeholder, or nothing completes)
  std::int64_t first_source;   // index of its r sources in the source list
};
struct Copy {
  std::int64_t from, to;  // float offsets: projected -> ring, 2 D floats
};

// The host-built description of one call, packed into the scratch buffer.
struct Meta {
  std::vector<RowTask> tasks;
  std::vector<std::int64_t> sources;  // r per completed row
  std::vector<Copy> copies;
  std::vector<std::int64_t> checks;   // ring float offsets of old entries read
};

__global__ void validate(const float* projected, std::size_t n, const float* ring, const std::int64_t* checks,
                         std::size_t check_count, std::size_t width, unsigned long long* error) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t i = first; i < n; i += stride)
    if (!isfinite(projected[i])) atomicMin(error, i);
  for (std::size_t i = first; i < check_count * width; i += stride) {
    const std::size_t at = std::size_t(checks[i / width]) + i % width;
    if (!isfinite(ring[at])) atomicMin(error, (1ull << 63) | at);
  }
}

// Block x: output row x, threads over channels.
__global__ void rows_kernel(const RowTask* tasks, const std::int64_t* sources, const float* projected,
                            const float* ring, unsigned dim, int ratio, std::uint16_t* rows,
                            std::int32_t* row_index, std::int32_t* positions) {
  const RowTask task = tasks[blockIdx.x];
  if (threadIdx.x == 0) {
    row_index[blockIdx.x] = task.row;
    positions[blockIdx.x] = task.position;
  }
  const std::int64_t* group = sources + task.first_source;
  for (unsigned d = threadIdx.x; d < dim; d += blockDim.x) {
    std::uint16_t out = 0;
    if (task.row >= 0) {
      const float z = impl::gated_mean([&](int t) { return source(group[t], projected, ring)[d]; },
                                       [&](int t) { return source(group[t], projected, ring)[dim + d]; }, ratio);
      out = impl::bf16_nearest(z);
    }
    rows[std::size_t(blockIdx.x) * dim + d] = out;
  }
}

// Block x: copy x, 2 D floats, 16 bytes at a time when aligned.
__global__ void copy_kernel(const Copy* copies, const float* projected, float* ring, unsigned width, bool vector) {
  const Copy c = copies[blockIdx.x];
  if (vector) {
    const float4* from = reinterpret_cast<const float4*>(projected + c.from);
    float4* to = reinterpret_cast<float4*>(ring + c.to);
    for (unsigned i = threadIdx.x; i < width / 4; i += blockDim.x) to[i] = from[i];
  } else {
    for (unsigned i = threadIdx.x; i < width; i += blockDim.x) ring[c.to + i] = projected[c.from + i];
  }
}

Meta describe(std::span<const CompressRequest> requests, const CompressShape& shape, Step step,
              const impl::CompressPlan& plan) {
  Meta m;
  const std::int64_t r = shape.ratio, S = std::int64_t(shape.ring), width = 2 * std::int64_t(shape.dim);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const CompressRequest& q = requests[i];
    const std::int64_t s = q.start, e = q.start + q.tokens;
    const auto ring_code = [&](std::int64_t p) { return -1 - (std::int64_t(q.state_slot) * S + p % S) * width; };
    const auto input = [&](std::int64_t p) { return (std::int64_t(plan.token_offset[i]) + p - s) * width; };
    const auto add_row = [&](std::int64_t j, auto&& code_of) {
      if (j < 0) {
        m.tasks.push_back({-1, 0, 0});
        return;
      }
      m.tasks.push_back({std::int32_t(j), std::int32_t(j * r), std::int64_t(m.sources.size())});
      for (std::int64_t p = j * r; p < (j + 1) * r; ++p) m.sources.push_back(code_of(p));
    };
    const auto [old_lo, old_hi] = impl::old_positions_read(q, r);
    for (std::int64_t p = old_lo; p < old_hi; ++p) m.checks.push_back(-1 - ring_code(p));
    if (step == Step::Prefill) {
      const auto code_of = [&](std::int64_t p) { return p < s ? ring_code(p) : input(p); };
      for (std::int64_t j = s / r; j < e / r; ++j) add_row(j, code_of);
      if (e / r == s / r) add_row(-1, code_of);
      for (std::int64_t p = std::max(s, e - S); p < e; ++p) m.copies.push_back({input(p), -1 - ring_code(p)});
    } else {
      for (std::int64_t p = s; p < e; ++p) m.copies.push_back({input(p), -1 - ring_code(p)});
      for (std::int64_t p = s; p < e; ++p) add_row(p % r == r - 1 ? p / r : -1, ring_code);
    }
  }
  return m;
}

template <class T>
void append(std::vector<unsigned char>& bytes, const std::vector<T>& v, std::size_t& offset) {
  offset = (bytes.size() + 15) / 16 * 16;
  bytes.resize(offset + v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(bytes.data() + offset, v.data(), v.size() * sizeof(T));
}

Status<CompressError> run(std::span<const CompressRequest> requests, std::span<const float> projected,
                          std::span<float> ring, const CompressShape& shape, std::span<std::uint16_t> rows,
                          std::span<std::int32_t> row_index, std::span<std::int32_t> positions, Step step,
                          Stream stream) {
  const auto planned = impl::plan_call(requests, shape, step, projected.size(), ring.size(), rows.size(),
                                       row_index.size(), positions.size());
  if (auto* e = std::get_if<CompressError>(&planned)) return *e;
  const Meta m = describe(requests, shape, step, std::get<impl::CompressPlan>(planned));
  std::vector<unsigned char> bytes;
  std::size_t at_tasks, at_sources, at_copies, at_checks;
  append(bytes, m.tasks, at_tasks);
  append(bytes, m.sources, at_sources);
  append(bytes, m.copies, at_copies);
  append(bytes, m.checks, at_checks);
  void* meta = nullptr;
  if (int e = upload_scratch(bytes.data(), bytes.size(), stream, &meta)) return ce::DeviceFailure{e};
  const auto* base = static_cast<const unsigned char*>(meta);
  const std::size_t width = 2 * shape.dim;

  Verdict v;
  if (int e = begin_verdict(v, stream)) return ce::DeviceFailure{e};
  const std::size_t work = std::max(projected.size(), m.checks.size() * width);
  const unsigned blocks = unsigned(std::min<std::size_t>((work + 255) / 256 + 1, 4096));
  validate<<<blocks, 256, 0, stream>>>(projected.data(), projected.size(), ring.data(),
                                       reinterpret_cast<const std::int64_t*>(base + at_checks), m.checks.size(),
                                       width, v.word);
  if (int e = end_verdict(v, stream)) return ce::DeviceFailure{e};
  if (*v.host != kNoError) {
    release_scratch(stream);
    const bool in_ring = *v.host >> 63;
    return ce::NonFiniteInput{in_ring ? 1 : 0, std::size_t(*v.host & ~(1ull << 63))};
  }
  const auto* tasks = reinterpret_cast<const RowTask*>(base + at_tasks);
  const auto* sources = reinterpret_cast<const std::int64_t*>(base + at_sources);
  const auto* copies = reinterpret_cast<const Copy*>(base + at_copies);
  const bool vector = width % 4 == 0 && reinterpret_cast<std::uintptr_t>(projected.data()) % 16 == 0 &&
                      reinterpret_cast<std::uintptr_t>(ring.data()) % 16 == 0;
  const unsigned threads = shape.dim >= 256 ? 256 : unsigned((shape.dim + 31) / 32 * 32);
  const auto launch_rows = [&] {
    if (!m.tasks.empty())
      rows_kernel<<<unsigned(m.tasks.size()), threads, 0, stream>>>(tasks, sources, projected.data(), ring.data(),
                                                                   unsigned(shape.dim), int(shape.ratio), rows.data(),
                                                                   row_index.data(), positions.data());
  };
  const auto launch_copies = [&] {
    if (!m.copies.empty())
      copy_kernel<<<unsigned(m.copies.size()), 128, 0, stream>>>(copies, projected.data(), ring.data(),
                                                                 unsigned(width), vector);
  };
  if (step == Step::Prefill) {  // old inputs are read before the chunk's writes
    launch_rows();
    launch_copies();
  } else {  // every new position is written before any is read
    launch_copies();
    launch_rows();
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
