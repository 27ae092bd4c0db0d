// The CUDA scorer (impl/cuda/indexer_scores.hpp): its tensor-core kernel and the
// launch that sizes its grid; the checks before it are in indexer_scores_check.cu,
// how a block fills its tiles in indexer_scores_tiles.cuh.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "impl/cuda/gate.cuh"
#include "impl/cuda/indexer.hpp"
#include "impl/cuda/indexer_scores.hpp"
#include "impl/cuda/indexer_scores_shape.cuh"
#include "impl/cuda/indexer_scores_tiles.cuh"

namespace aether::cuda {

namespace {
using namespace score_tiles;

// ldmatrix / mma.sync m16n8k16 (PTX ISA "warp-level matrix fragments"): lane l
// holds accumulator rows g = l / 4 and g + 8, columns 2 (l % 4) and 2 (l % 4) + 1.
__device__ __forceinline__ void load_x4(std::uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                    std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Block (x, y): keys [256 x, 256 x + 256) (of its first query's list, with a
// ScoreList) for queries [n y, n y + n), n = queries_per_block. Warp w owns
// keys 32 w .. 32 w + 31 (four 8-key mma tiles), keeps their B fragments in
// registers across the block's queries, and sums the heads in registers: lane l
// adds its heads h = l / 4 (mod 8) in ascending order, fma(w_h, max(dot_h, 0), ·),
// then lanes l, l ^ 4, l ^ 8, l ^ 16 combine pairwise in that order. A fixed tree:
// identical bits on every run.
template <KeyFormat kFormat, int kMaxSteps>
__global__ void __launch_bounds__(kThreads)
    score(const std::uint16_t* queries, const float* weights, const std::byte* keys, Shape s,
          float* out) {
  if (!gate_open(s.list.gate)) return;
  extern __shared__ __align__(128) unsigned char smem[];
  const Layout lay(s);
  bf16* key_tile = reinterpret_cast<bf16*>(smem);
  // query k's tiles: k % 2 of two (by address, not an indexed array: local memory)
  const auto query_tile = [&](std::size_t k) {
    return reinterpret_cast<bf16*>(smem + lay.keys_bytes() + k % 2 * lay.queries_bytes());
  };
  float* scale_tile = reinterpret_cast<float*>(smem + lay.keys_bytes() + 2 * lay.queries_bytes());
  const auto weight_tile = [&](std::size_t k) {
    return reinterpret_cast<float*>(smem + lay.weights_offset()) + k % 2 * lay.heads16;
  };
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const std::size_t key0 = std::size_t(blockIdx.x) * kTileKeys;
  const unsigned dim = unsigned(s.dim);
  const std::size_t t0 = std::size_t(blockIdx.y) * s.list.queries_per_block;
  const std::size_t t1 =
      t0 + s.list.queries_per_block < s.queries ? t0 + s.list.queries_per_block : s.queries;
  // With a list, this block's keys are list entries key0 ... of its first query's list.
  const std::int32_t* ids = s.list.ids == nullptr ? nullptr : s.list.ids + t0 * s.list.stride;
  const std::size_t count = s.list.counts == nullptr ? s.keys : std::size_t(s.list.counts[t0]);
  if (key0 >= count) return;  // the whole block: a list shorter than the grid
  const unsigned valid_keys = unsigned(count - key0 < kTileKeys ? count - key0 : kTileKeys);
  const auto key_row = [&](unsigned r) {
    return keys + (ids == nullptr ? key0 + r : std::size_t(ids[key0 + r])) * s.row_bytes;
  };
  // every E4M3 value and every bf16 is exactly a bf16
  load_tile(key_tile, lay.stride, kTileKeys, valid_keys, dim, lay.dim16, kFormat, s.vector_keys,
            key_row);
  for (unsigned t = threadIdx.x; t < kTileKeys; t += kThreads)
    scale_tile[t] =
        kFormat == KeyFormat::E4M3 && t < valid_keys ? row_scale(key_row(t), s.dim) : 1.0f;
  copy_async_commit();  // the key tile's asynchronous pieces, if load_tile issued any
  copy_async_wait<0>();
  __syncthreads();

  // b[k]: the warp's 32 keys' k-th 16-deep slice, four 8-key tiles (each ldmatrix
  // x4: lanes 0-15 one tile's two 8-column halves, lanes 16-31 the next tile's).
  const unsigned steps = lay.dim16 / 16;
  std::uint32_t b[kMaxSteps][8];
  const bf16* b_row =
      key_tile + (warp * 32 + (lane % 8) + (lane / 16) * 8) * lay.stride + ((lane / 8) % 2) * 8;
#pragma unroll
  for (int k = 0; k < kMaxSteps; ++k)
    if (k < int(steps)) {
      load_x4(reinterpret_cast<std::uint32_t(&)[4]>(b[k][0]), b_row + k * 16);
      load_x4(reinterpret_cast<std::uint32_t(&)[4]>(b[k][4]), b_row + 16 * lay.stride + k * 16);
    }
  const unsigned a_offset = (lane % 16) * lay.stride + (lane / 16) * 8;

  const unsigned g = lane / 4, col = 2 * (lane % 4);
  // A query's scores and the heads each sums: one over all its heads (none at H = 0:
  // a score of 0), or one for each ScoreList::heads_per_score of them.
  const unsigned group = s.list.heads_per_score ? unsigned(s.list.heads_per_score) : lay.heads16;
  const unsigned scores_per_query = s.list.heads_per_score ? lay.heads16 / group : 1;
  const QueryPieces pieces(lay);
  const auto issue = [&](std::size_t t) {
    issue_query(query_tile(t - t0), weight_tile(t - t0), queries, weights, t, s, lay, pieces);
  };
  if (t0 < t1) issue(t0);
  copy_async_commit();
  for (std::size_t t = t0; t < t1; ++t) {
    if (t + 1 < t1) {  // the other tiles were last read before the barrier ending t - 1
      issue(t + 1);
      copy_async_commit();
      copy_async_wait<1>();
    } else {
      copy_async_wait<0>();
    }
    __syncthreads();  // query t's tiles are complete for every warp
    const float* w = weight_tile(t - t0);
    const bf16* a_row = query_tile(t - t0) + a_offset;
    // The reduction across lanes and the store of one score a key, after each group
    // of heads. The column's eight lanes (xor 4, 8, 16) reduce-scatter their eight
    // values: each round adds the partner's half to the half a lane keeps, the same
    // pairs in the same rounds as summing all eight everywhere (so the same bits), in
    // 7 shuffles, not 24; lane (g, c) then holds key (2 g0 + g1) 8 + 2 c + g2 and
    // stores it.
    const unsigned g0 = g & 1, g1 = g >> 1 & 1, g2 = g >> 2;
    const auto flush = [&](float(&total)[4][2], std::size_t score) {
      float v[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = total[i / 2][i % 2];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float send = g0 ? v[j] : v[4 + j], keep = g0 ? v[4 + j] : v[j];
        v[j] = keep + __shfl_xor_sync(0xffffffffu, send, 4);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float send = g1 ? v[j] : v[2 + j], keep = g1 ? v[2 + j] : v[j];
        v[j] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
      }
      const float send = g2 ? v[0] : v[1], keep = g2 ? v[1] : v[0];
      const float sum = keep + __shfl_xor_sync(0xffffffffu, send, 16);
      const unsigned key = warp * 32 + (2 * g0 + g1) * 8 + col + g2;
      if (key < valid_keys)
        out[score * s.keys + key0 + key] = kFormat == KeyFormat::E4M3 ? sum * scale_tile[key] : sum;
    };
    // Score i sums heads [i group, (i + 1) group): no division a group (a runtime
    // divisor costs about twenty instructions beside a group's 32 MMAs).
    for (unsigned i = 0; i < scores_per_query; ++i) {
      const unsigned h0 = i * group;
      float total[4][2] = {};  // [key tile][column] over this lane's heads
      for (unsigned h16 = h0; h16 < h0 + group; h16 += 16) {
        float c[4][4] = {};  // [key tile][fragment]: four independent accumulator chains
#pragma unroll
        for (int k = 0; k < kMaxSteps; ++k)
          if (k < int(steps)) {
            std::uint32_t a[4];
            load_x4(a, a_row + h16 * lay.stride + k * 16);
#pragma unroll
            for (int n = 0; n < 4; ++n) mma(c[n], a, b[k][2 * n], b[k][2 * n + 1]);
          }
        const float w_lo = w[h16 + g], w_hi = w[h16 + g + 8];
#pragma unroll
        for (int n = 0; n < 4; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            total[n][e] = fmaf(w_lo, fmaxf(c[n][e], 0.0f), total[n][e]);
            total[n][e] = fmaf(w_hi, fmaxf(c[n][2 + e], 0.0f), total[n][e]);
          }
      }
      flush(total, t * scores_per_query + i);
    }
    __syncthreads();  // these tiles are free for query t + 2
  }
}

// kMaxSteps 16-deep slices of the keys stay in registers: 8 covers D <= 128 in 126
// registers a thread (two blocks an SM, as the shared tiles allow at 64 heads); 16
// covers D <= 256.
// A block takes up to 32 queries, fewer when the key tiles alone would leave the
// device without a full wave of blocks (few keys: seeds, a probe).
template <KeyFormat kFormat, int kMaxSteps>
cudaError_t launch_score(const std::uint16_t* queries, const float* weights, const std::byte* keys,
                         Shape s, float* out, cudaStream_t stream) {
  const Layout lay(s);
  const int bytes = int(lay.bytes());
  auto* kernel = score<kFormat, kMaxSteps>;
  if (int e = allow_dynamic_shared(reinterpret_cast<const void*>(kernel))) return cudaError_t(e);
  const std::size_t key_tiles = (s.keys + kTileKeys - 1) / kTileKeys;
  if (s.list.queries_per_block > 1) {
    const std::size_t wave =
        resident_blocks(reinterpret_cast<const void*>(kernel), kThreads, std::size_t(bytes));
    const std::size_t fit = wave ? (s.queries * key_tiles + wave - 1) / wave : 1;
    s.list.queries_per_block = std::clamp<std::size_t>(fit, 1, s.list.queries_per_block);
  }
  const dim3 grid(unsigned(key_tiles),
                  unsigned((s.queries + s.list.queries_per_block - 1) / s.list.queries_per_block));
  kernel<<<grid, kThreads, bytes, stream>>>(queries, weights, keys, s, out);
  return cudaGetLastError();
}

template <KeyFormat kFormat>
cudaError_t launch_score(const std::uint16_t* queries, const float* weights, const std::byte* keys,
                         const Shape& s, float* out, cudaStream_t stream) {
  return s.dim <= 128 ? launch_score<kFormat, 8>(queries, weights, keys, s, out, stream)
                      : launch_score<kFormat, 16>(queries, weights, keys, s, out, stream);
}
}  // namespace

cudaError_t launch_index_scores(device_span<const std::uint16_t> queries,
                                device_span<const float> weights, std::size_t query_count,
                                const DeviceIndexKeys& keys, const ScoreList& list,
                                std::size_t list_capacity, device_span<float> out, Stream stream) {
  const std::size_t heads = query_count ? weights.size() / query_count : 0;
  Shape s = shape_of(queries, query_count, heads, keys);
  s.list = list;
  if (list.ids != nullptr) {
    s.keys = list_capacity;
    if (list.stride != 0 || list.counts != nullptr) s.list.queries_per_block = 1;
  }
  if (s.queries == 0 || s.keys == 0) return cudaSuccess;
  return keys.format == KeyFormat::E4M3
             ? launch_score<KeyFormat::E4M3>(queries.data(), weights.data(), keys.bytes.data(), s,
                                             out.data(), stream)
             : launch_score<KeyFormat::BF16>(queries.data(), weights.data(), keys.bytes.data(), s,
                                             out.data(), stream);
}

}  // namespace aether::cuda
