#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "impl/cuda/indexer.hpp"
#include "impl/cuda/indexer_read_once.hpp"
#include "impl/cuda/topk_rows.cuh"

namespace aether::cuda {

namespace {
namespace ie = indexer_error;
using namespace topk;

// Validation spreads each row over many blocks (one block per row would read a row
// of 131072 at a single SM's rate): block b checks chunk b mod chunks of row b / chunks.
constexpr int kValidateThreads = 256, kValidatePerThread = 8;
constexpr std::size_t kValidateChunk = std::size_t(kValidateThreads) * kValidatePerThread;

__global__ void __launch_bounds__(kValidateThreads)
    validate(const float* scores, std::size_t width, const std::int32_t* ends, unsigned chunks,
             DeviceVerdict* verdict) {
  const std::size_t r = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  unsigned long long* error = &verdict->refusal;
  if (blockIdx.x == 0 && threadIdx.x == 0)  // no read-once rows here
    verdict->detail[0] = 0, verdict->detail[1] = 0;
  const std::int32_t end = ends[r];
  if (bad_end(end, width)) {
    if (chunk == 0 && threadIdx.x == 0) atomicMin(error, end_refusal(r, end));
    return;
  }
  const std::size_t first = chunk * kValidateChunk;
  float v[kValidatePerThread];
#pragma unroll
  for (int i = 0; i < kValidatePerThread; ++i) {
    const std::size_t j = first + threadIdx.x + std::size_t(i) * kValidateThreads;
    v[i] = j < std::size_t(end) ? __ldg(scores + r * width + j) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < kValidatePerThread; ++i)
    if (!isfinite(v[i]))
      atomicMin(error,
                kNaNBit | (r * width + first + threadIdx.x + std::size_t(i) * kValidateThreads));
}

// Rows narrower than the read-once path's, when nothing was refused.
__global__ void __launch_bounds__(kThreads)
    select(const float* scores, std::size_t width, const std::int32_t* ends, std::size_t k,
           std::int32_t* out, const DeviceVerdict* verdict) {
  __shared__ unsigned hist[2048];
  if (verdict->refusal != kNoRefusal) return;
  const std::size_t r = blockIdx.x;
  select_row(scores + r * width, std::size_t(ends[r]), k, out + r * k, hist);
}

// Queues a call whose scores shape is right: the verdict's reset (by the sample
// kernel on the read-once path: one stream operation fewer), validation, and
// selection gated on the device's verdict (nothing is written to `out` when it
// holds a refusal, nor when out's shape is wrong). 0 or the cudaError_t.
int launch_topk(device_span<const float> scores, std::size_t width,
                device_span<const std::int32_t> ends, std::size_t k, device_span<std::int32_t> out,
                DeviceVerdict* verdict, Stream stream) {
  const std::size_t rows = ends.size();
  const bool shaped = out.size() == rows * k;
  if (shaped && topk::read_once_fits(width, k, rows))
    return topk::launch_read_once(scores.data(), width, ends.data(), rows, k, out.data(), verdict,
                                  stream);
  if (int e = reset_verdict(verdict, stream)) return e;
  const unsigned chunks =
      unsigned(std::max<std::size_t>(1, (width + kValidateChunk - 1) / kValidateChunk));
  validate<<<unsigned(rows) * chunks, kValidateThreads, 0, stream>>>(scores.data(), width,
                                                                     ends.data(), chunks, verdict);
  if (k > 0 && shaped)
    select<<<unsigned(rows), kThreads, 0, stream>>>(scores.data(), width, ends.data(), k,
                                                    out.data(), verdict);
  return cudaGetLastError();
}
}  // namespace

Status<IndexerError> valid_prefix_topk_verdict(const DeviceVerdict& verdict, std::size_t width) {
  if (verdict.refusal == kNoRefusal) return Ok{};
  if (verdict.refusal & kNaNBit) {
    const std::size_t at = std::size_t(verdict.refusal & ~kNaNBit);
    return ie::NonFiniteScore{at / width, at % width};
  }
  return ie::EndOutOfRange{std::size_t(verdict.refusal >> 32),
                           std::int32_t(std::uint32_t(verdict.refusal)), width};
}

Status<IndexerError> valid_prefix_topk(device_span<const float> scores, std::size_t width,
                                       device_span<const std::int32_t> ends, std::size_t k,
                                       device_span<std::int32_t> out, Stream stream) {
  const std::size_t rows = ends.size();
  if (scores.size() != rows * width) return ie::ShapeMismatch{rows * width, scores.size()};
  if (rows == 0)
    return out.size() == 0 ? Status<IndexerError>(Ok{}) : ie::ShapeMismatch{0, out.size()};
  Verdict v;
  if (int e = begin_verdict(v, stream)) return ie::DeviceFailure{e};
  if (int e = launch_topk(scores, width, ends, k, out, v.device, stream))
    return ie::DeviceFailure{e};
  if (int e = end_verdict(v, stream)) return ie::DeviceFailure{e};
  // the model's order: bad ends and scores, then out's shape
  if (auto st = valid_prefix_topk_verdict(*v.host, width); !st.ok()) return st;
  if (out.size() != rows * k) return ie::ShapeMismatch{rows * k, out.size()};
  return Ok{};
}

Status<IndexerError> enqueue_valid_prefix_topk(device_span<const float> scores, std::size_t width,
                                               device_span<const std::int32_t> ends, std::size_t k,
                                               device_span<std::int32_t> out,
                                               DeviceVerdict* verdict, Stream stream) {
  const std::size_t rows = ends.size();
  if (scores.size() != rows * width) return ie::ShapeMismatch{rows * width, scores.size()};
  if (out.size() != rows * k) return ie::ShapeMismatch{rows * k, out.size()};
  if (rows == 0) {
    if (int e = reset_verdict(verdict, stream)) return ie::DeviceFailure{e};
    return Ok{};
  }
  if (int e = launch_topk(scores, width, ends, k, out, verdict, stream))
    return ie::DeviceFailure{e};
  return Ok{};
}

}  // namespace aether::cuda
