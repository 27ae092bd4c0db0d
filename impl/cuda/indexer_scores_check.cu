// The CUDA scorer's checks (impl/cuda/indexer_scores.hpp): shapes and what the
// device runs on the host, then one pass over queries, weights and keys for the
// first non-finite value in the model's order; and index_scores, the checks then
// the launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "impl/cuda/indexer.hpp"
#include "impl/cuda/indexer_scores.hpp"
#include "impl/cuda/indexer_scores_shape.cuh"
#include "impl/cuda/key_rows.cuh"

namespace aether::cuda {

namespace {
namespace ie = indexer_error;
using namespace score_tiles;

// Calls bad(i) for every byte offset i < n whose byte `suspect` flags, reading 16
// bytes per load where the buffer is aligned (the keys are the bulk of the reads).
template <class Suspect, class Bad>
__device__ __forceinline__ void scan_bytes(const std::byte* p, std::size_t n, Suspect suspect,
                                           Bad bad) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t vectors = reinterpret_cast<std::uintptr_t>(p) % 16 == 0 ? n / 16 : 0;
  for (std::size_t v = first; v < vectors; v += stride) {
    const uint4 chunk = __ldcs(reinterpret_cast<const uint4*>(p) + v);
    const std::uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
    for (int w = 0; w < 4; ++w)
      if (suspect(words[w])) {
#pragma unroll
        for (int b = 0; b < 4; ++b) bad(v * 16 + 4 * w + b);  // bad() re-checks the byte
      }
  }
  for (std::size_t i = vectors * 16 + first; i < n; i += stride) bad(i);
}

// The model's refusals as ordered codes, atomicMin'd: queries, weights, keys.
__global__ void validate(const std::uint16_t* queries, const float* weights, const std::byte* keys,
                         KeyFormat format, Shape s, unsigned long long* error) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t i = first; i < s.queries * s.heads * s.dim; i += stride)
    if ((queries[i] & 0x7f80u) == 0x7f80u) atomicMin(error, error_code(0, i));
  for (std::size_t i = first; i < s.queries * s.heads; i += stride)
    if (!isfinite(weights[i])) atomicMin(error, error_code(1, i));
  const std::size_t key_bytes = s.keys * s.row_bytes;
  if (format == KeyFormat::BF16) {  // rows are back to back: element e is row e / D
    scan_bytes(
        keys, key_bytes,
        [](std::uint32_t w) {
          return (w & 0x7f80u) == 0x7f80u || (w & 0x7f800000u) == 0x7f800000u;
        },
        [&](std::size_t i) {
          if (i % 2 == 0 &&
              (reinterpret_cast<const std::uint16_t*>(keys)[i / 2] & 0x7f80u) == 0x7f80u) {
            const std::size_t e = i / 2;
            atomicMin(error, error_code(2, e + e / s.dim + 1));
          }
        });
  } else {
    for (std::size_t j = first; j < s.keys; j += stride) {
      const float scale = row_scale(keys + j * s.row_bytes, s.dim);
      if (!isfinite(scale) || scale < 0) atomicMin(error, error_code(2, j * (s.dim + 1)));
    }
    const auto nan_byte = [](std::uint32_t w) {  // a byte with its low 7 bits set
      return (w & 0x7fu) == 0x7fu || (w & 0x7f00u) == 0x7f00u || (w & 0x7f0000u) == 0x7f0000u ||
             (w & 0x7f000000u) == 0x7f000000u;
    };
    scan_bytes(keys, key_bytes, nan_byte, [&](std::size_t i) {
      const std::size_t j = i / s.row_bytes, d = i - j * s.row_bytes;
      if (d < s.dim && (std::uint8_t(keys[i]) & 0x7f) == 0x7f)
        atomicMin(error, error_code(2, j * (s.dim + 1) + d + 1));
    });
  }
}

}  // namespace

Status<IndexerError> check_index_scores(device_span<const std::uint16_t> queries,
                                        device_span<const float> weights, std::size_t query_count,
                                        const DeviceIndexKeys& keys, Stream stream,
                                        const std::function<void()>& meanwhile) {
  // The model's order (model::index_scores_batch): shapes of queries and weights,
  // non-finite queries and weights, then the keys' shape and values. What the
  // device cannot run is refused before any data is read.
  const std::size_t heads = query_count ? weights.size() / query_count : 0;
  if (heads * query_count != weights.size())
    return ie::ShapeMismatch{heads * query_count, weights.size()};
  if (queries.size() != weights.size() * keys.dim)
    return ie::ShapeMismatch{weights.size() * keys.dim, queries.size()};
  const bool odd_bf16 =
      keys.format == KeyFormat::BF16 && reinterpret_cast<std::uintptr_t>(keys.bytes.data()) % 2;
  int device = 0, shared_limit = 0;  // a block's tiles must fit its shared memory
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return ie::DeviceFailure{int(e)};
  if (cudaError_t e =
          cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      e != cudaSuccess)
    return ie::DeviceFailure{int(e)};
  const bool too_big = Layout(Shape{query_count, heads, keys.dim, 0, 0, false, false, {}}).bytes() >
                       std::size_t(shared_limit);
  if (keys.format == KeyFormat::F32 || heads > MAX_DEVICE_SCORE_HEADS ||
      keys.dim > MAX_DEVICE_SCORE_DIM || odd_bf16 || too_big)
    return ie::UnsupportedOnDevice{keys.format, heads, keys.dim};
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  const bool keys_whole = row_bytes == 0 ? keys.bytes.empty() : keys.bytes.size() % row_bytes == 0;
  Shape s = shape_of(queries, query_count, heads, keys);
  if (!keys_whole) s.keys = 0;

  // With work of the caller's to run meanwhile, the check runs on a second stream
  // beside it, joined back once its verdict is in.
  const Stream check = meanwhile ? fork_side(stream) : stream;
  Verdict v;
  if (int e = begin_verdict(v, check)) return ie::DeviceFailure{e};
  const std::size_t work =
      std::max({queries.size(), weights.size(), s.keys * (s.dim + 1), std::size_t(1)});
  const unsigned blocks = unsigned(std::min<std::size_t>((work + 255) / 256, 4096));
  validate<<<blocks, 256, 0, check>>>(queries.data(), weights.data(), keys.bytes.data(),
                                      keys.format, s, v.word());
  if (int e = queue_verdict_copy(v, check)) return ie::DeviceFailure{e};
  if (meanwhile) meanwhile();
  if (int e = wait_verdict(v)) return ie::DeviceFailure{e};
  if (check != stream)
    if (cudaError_t e = cudaStreamWaitEvent(stream, v.copied, 0); e != cudaSuccess)
      return ie::DeviceFailure{int(e)};
  const unsigned long long verdict = v.refusal();
  if (verdict != kNoError) {
    const unsigned input = unsigned(verdict >> 62);
    const std::size_t at = std::size_t(verdict & ~error_code(3, 0));
    if (input < 2) return ie::NonFiniteInput{int(input), at};
    const std::size_t j = at / (s.dim + 1), pos = at % (s.dim + 1);
    return ie::NonFiniteInput{2, keys.format == KeyFormat::E4M3 && pos == 0 ? j * row_bytes + s.dim
                                                                            : j * s.dim + pos - 1};
  }
  if (!keys_whole)
    return ie::ShapeMismatch{row_bytes ? keys.bytes.size() / row_bytes * row_bytes : 0,
                             keys.bytes.size()};
  return Ok{};
}

Status<IndexerError> index_scores(device_span<const std::uint16_t> queries,
                                  device_span<const float> weights, std::size_t query_count,
                                  const DeviceIndexKeys& keys, device_span<float> out,
                                  Stream stream) {
  if (auto status = check_index_scores(queries, weights, query_count, keys, stream); !status.ok())
    return status;
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  const std::size_t rows = row_bytes ? keys.bytes.size() / row_bytes : 0;
  if (out.size() != query_count * rows) return ie::ShapeMismatch{query_count * rows, out.size()};
  if (cudaError_t e = launch_index_scores(queries, weights, query_count, keys, {}, 0, out, stream);
      e != cudaSuccess)
    return ie::DeviceFailure{int(e)};
  return Ok{};
}

}  // namespace aether::cuda
