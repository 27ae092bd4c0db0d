#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "impl/cuda/indexer.hpp"

namespace aether::cuda {

namespace {
namespace ie = indexer_error;
using bf16 = __nv_bfloat16;

constexpr unsigned long long kNoError = ~0ull;

// The first refusal in the model's order, as one ordered code: input (queries,
// weights, keys) in the top bits, then the flat index; a key's position is
// row * (D + 1) + (0 for its E4M3 scale, d + 1 for element d): the model checks a
// row's scale before its elements.
__host__ __device__ constexpr unsigned long long error_code(unsigned input, std::size_t at) {
  return (static_cast<unsigned long long>(input) << 62) | at;
}

__device__ __forceinline__ float e4m3_value(std::uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float magnitude = e == 0 ? ldexpf(float(m), -9) : ldexpf(float(8 + m), e - 10);
  return b & 0x80 ? -magnitude : magnitude;
}

__device__ __forceinline__ float row_scale(const std::byte* row, std::size_t dim) {
  std::uint32_t bits = 0;
  for (int i = 0; i < 4; ++i) bits |= std::uint32_t(row[dim + i]) << (8 * i);
  return __uint_as_float(bits);
}

struct Shape {
  std::size_t queries, heads, dim, keys;  // T, H, D, L
  std::size_t row_bytes;                  // key_row_bytes(format, D)
};

__global__ void validate(const std::uint16_t* queries, const float* weights,
                         const std::byte* keys, KeyFormat format, Shape s,
                         unsigned long long* error) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t first = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::size_t i = first; i < s.queries * s.heads * s.dim; i += stride)
    if ((queries[i] & 0x7f80u) == 0x7f80u) atomicMin(error, error_code(0, i));
  for (std::size_t i = first; i < s.queries * s.heads; i += stride)
    if (!isfinite(weights[i])) atomicMin(error, error_code(1, i));
  for (std::size_t i = first; i < s.keys * (s.dim + 1); i += stride) {
    const std::size_t j = i / (s.dim + 1), pos = i % (s.dim + 1);
    const std::byte* row = keys + j * s.row_bytes;
    bool bad;
    if (format == KeyFormat::E4M3) {
      if (pos == 0) {
        const float scale = row_scale(row, s.dim);
        bad = !isfinite(scale) || scale < 0;
      } else {
        bad = (std::uint8_t(row[pos - 1]) & 0x7f) == 0x7f;
      }
    } else {
      bad = pos > 0 && (reinterpret_cast<const std::uint16_t*>(row)[pos - 1] & 0x7f80u) == 0x7f80u;
    }
    if (bad) atomicMin(error, error_code(2, i));
  }
}

constexpr int kWarps = 8, kThreads = 32 * kWarps, kTileKeys = 16 * kWarps;
constexpr int kQueriesPerBlock = 16, kMaxSteps = int(MAX_DEVICE_SCORE_DIM / 16);

// Padded sizes: heads and dims rounded up to 16 (zero rows and columns add exact
// zeros); shared-memory rows strided D + 8 so fragment loads hit distinct banks.
struct Layout {
  unsigned heads16, dim16, stride;
  __host__ __device__ Layout(const Shape& s)
      : heads16(unsigned((s.heads + 15) / 16 * 16)),
        dim16(unsigned((s.dim + 15) / 16 * 16)),
        stride(dim16 + 8) {}
  __host__ __device__ std::size_t keys_bytes() const { return std::size_t(kTileKeys) * stride * 2; }
  __host__ __device__ std::size_t queries_bytes() const { return std::size_t(heads16) * stride * 2; }
  __host__ __device__ std::size_t bytes() const {
    return keys_bytes() + queries_bytes() + 4 * (heads16 + kTileKeys) +
           4 * std::size_t(kWarps) * heads16 * 16;
  }
};

// Block (x, y): keys [128 x, 128 x + 128) for queries [16 y, 16 y + 16). Warp w
// keeps its 16 keys' B fragments in registers across all queries of the block.
template <KeyFormat kFormat>
__global__ void __launch_bounds__(kThreads) score(const std::uint16_t* queries,
                                                  const float* weights, const std::byte* keys,
                                                  Shape s, const unsigned long long* error,
                                                  float* out) {
  using namespace nvcuda;
  if (*error != kNoError) return;  // refused: write nothing
  extern __shared__ __align__(128) unsigned char smem[];
  const Layout lay(s);
  bf16* key_tile = reinterpret_cast<bf16*>(smem);
  bf16* query_tile = reinterpret_cast<bf16*>(smem + lay.keys_bytes());
  float* weight_tile = reinterpret_cast<float*>(smem + lay.keys_bytes() + lay.queries_bytes());
  float* scale_tile = weight_tile + lay.heads16;
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* dots = scale_tile + kTileKeys + std::size_t(warp) * lay.heads16 * 16;  // [heads16][16]

  const std::size_t key0 = std::size_t(blockIdx.x) * kTileKeys;
  for (std::size_t i = threadIdx.x; i < std::size_t(kTileKeys) * lay.dim16; i += kThreads) {
    const std::size_t t = i / lay.dim16, d = i % lay.dim16, j = key0 + t;
    float v = 0;
    if (j < s.keys && d < s.dim) {
      const std::byte* row = keys + j * s.row_bytes;
      v = kFormat == KeyFormat::E4M3 ? e4m3_value(std::uint8_t(row[d]))
                                     : __uint_as_float(std::uint32_t(reinterpret_cast<const std::uint16_t*>(row)[d]) << 16);
    }
    key_tile[t * lay.stride + d] = __float2bfloat16(v);  // exact: every value is a bf16
  }
  for (std::size_t t = threadIdx.x; t < kTileKeys; t += kThreads)
    scale_tile[t] = kFormat == KeyFormat::E4M3 && key0 + t < s.keys
                        ? row_scale(keys + (key0 + t) * s.row_bytes, s.dim)
                        : 1.0f;
  __syncthreads();

  const unsigned steps = lay.dim16 / 16;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b[kMaxSteps];
#pragma unroll
  for (int k = 0; k < kMaxSteps; ++k)
    if (k < int(steps)) wmma::load_matrix_sync(b[k], key_tile + warp * 16 * lay.stride + k * 16, lay.stride);

  const std::size_t t0 = std::size_t(blockIdx.y) * kQueriesPerBlock;
  const std::size_t t1 = t0 + kQueriesPerBlock < s.queries ? t0 + kQueriesPerBlock : s.queries;
  const std::size_t j = key0 + warp * 16 + lane;  // this lane's key in the epilogue
  for (std::size_t t = t0; t < t1; ++t) {
    __syncthreads();  // the previous query's tiles are no longer read
    for (std::size_t i = threadIdx.x; i < std::size_t(lay.heads16) * lay.dim16; i += kThreads) {
      const std::size_t h = i / lay.dim16, d = i % lay.dim16;
      const std::uint16_t bits = h < s.heads && d < s.dim ? queries[(t * s.heads + h) * s.dim + d] : 0;
      query_tile[h * lay.stride + d] = __ushort_as_bfloat16(bits);
    }
    for (std::size_t h = threadIdx.x; h < lay.heads16; h += kThreads)
      weight_tile[h] = h < s.heads ? weights[t * s.heads + h] : 0.0f;
    __syncthreads();
    for (unsigned h16 = 0; h16 < lay.heads16; h16 += 16) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::fill_fragment(c, 0.0f);
#pragma unroll
      for (int k = 0; k < kMaxSteps; ++k)
        if (k < int(steps)) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
          wmma::load_matrix_sync(a, query_tile + h16 * lay.stride + k * 16, lay.stride);
          wmma::mma_sync(c, a, b[k], c);
        }
      wmma::store_matrix_sync(dots + h16 * 16, c, 16, wmma::mem_row_major);
    }
    __syncwarp();
    if (lane < 16 && j < s.keys) {
      float total = 0;
      for (std::size_t h = 0; h < s.heads; ++h)
        total = fmaf(weight_tile[h], fmaxf(dots[h * 16 + lane], 0.0f), total);
      out[t * s.keys + j] = kFormat == KeyFormat::E4M3 ? total * scale_tile[warp * 16 + lane] : total;
    }
    __syncwarp();
  }
}

template <KeyFormat kFormat>
cudaError_t launch_score(const std::uint16_t* queries, const float* weights, const std::byte* keys,
                         const Shape& s, const unsigned long long* error, float* out,
                         cudaStream_t stream) {
  const Layout lay(s);
  const int bytes = int(lay.bytes());
  if (cudaError_t e = cudaFuncSetAttribute(score<kFormat>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      e != cudaSuccess)
    return e;
  const dim3 grid(unsigned((s.keys + kTileKeys - 1) / kTileKeys),
                  unsigned((s.queries + kQueriesPerBlock - 1) / kQueriesPerBlock));
  score<kFormat><<<grid, kThreads, bytes, stream>>>(queries, weights, keys, s, error, out);
  return cudaGetLastError();
}
}  // namespace

Status<IndexerError> index_scores(std::span<const std::uint16_t> queries,
                                  std::span<const float> weights, std::size_t query_count,
                                  const IndexKeys& keys, std::span<float> out, Stream stream) {
  // The model's order (model::index_scores_batch): shapes of queries and weights,
  // non-finite queries and weights, then the keys' shape and values. What the
  // device cannot run is refused before any data is read.
  const std::size_t heads = query_count ? weights.size() / query_count : 0;
  if (heads * query_count != weights.size()) return ie::ShapeMismatch{heads * query_count, weights.size()};
  if (queries.size() != weights.size() * keys.dim)
    return ie::ShapeMismatch{weights.size() * keys.dim, queries.size()};
  if (keys.format == KeyFormat::F32 || heads > MAX_DEVICE_SCORE_HEADS || keys.dim > MAX_DEVICE_SCORE_DIM)
    return ie::UnsupportedOnDevice{keys.format, heads, keys.dim};
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  const bool keys_whole = row_bytes == 0 ? keys.bytes.empty() : keys.bytes.size() % row_bytes == 0;
  const Shape s{query_count, heads, keys.dim, keys_whole && row_bytes ? keys.bytes.size() / row_bytes : 0,
                row_bytes};

  unsigned long long* error = nullptr;
  if (cudaError_t e = cudaMallocAsync(&error, sizeof *error, stream); e != cudaSuccess)
    return ie::DeviceFailure{int(e)};
  cudaMemsetAsync(error, 0xff, sizeof *error, stream);
  const std::size_t work = std::max({queries.size(), weights.size(), s.keys * (s.dim + 1), std::size_t(1)});
  const unsigned blocks = unsigned(std::min<std::size_t>((work + 255) / 256, 4096));
  validate<<<blocks, 256, 0, stream>>>(queries.data(), weights.data(), keys.bytes.data(), keys.format, s, error);
  unsigned long long verdict = kNoError;
  cudaMemcpyAsync(&verdict, error, sizeof verdict, cudaMemcpyDeviceToHost, stream);
  Status<IndexerError> status = Ok{};
  if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    status = ie::DeviceFailure{int(e)};
  } else if (verdict != kNoError) {
    const unsigned input = unsigned(verdict >> 62);
    const std::size_t at = std::size_t(verdict & ~error_code(3, 0));
    if (input < 2) {
      status = ie::NonFiniteInput{int(input), at};
    } else {
      const std::size_t j = at / (s.dim + 1), pos = at % (s.dim + 1);
      status = ie::NonFiniteInput{2, keys.format == KeyFormat::E4M3 && pos == 0
                                         ? j * row_bytes + s.dim
                                         : j * s.dim + pos - 1};
    }
  } else if (!keys_whole) {
    status = ie::ShapeMismatch{row_bytes ? keys.bytes.size() / row_bytes * row_bytes : 0, keys.bytes.size()};
  } else if (out.size() != s.queries * s.keys) {
    status = ie::ShapeMismatch{s.queries * s.keys, out.size()};
  } else if (s.queries > 0 && s.keys > 0) {
    const cudaError_t e =
        keys.format == KeyFormat::E4M3
            ? launch_score<KeyFormat::E4M3>(queries.data(), weights.data(), keys.bytes.data(), s, error, out.data(), stream)
            : launch_score<KeyFormat::BF16>(queries.data(), weights.data(), keys.bytes.data(), s, error, out.data(), stream);
    if (e != cudaSuccess) status = ie::DeviceFailure{int(e)};
  }
  cudaFreeAsync(error, stream);
  return status;
}

}  // namespace aether::cuda
