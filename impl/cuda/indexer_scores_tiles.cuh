// How a CUDA scorer block fills its shared tiles (impl/cuda/indexer_scores.cu): key
// rows decoded to bf16, each query's rows and weights copied asynchronously into the
// tiles of impl/cuda/indexer_scores_shape.cuh's Layout. CUDA source only.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "impl/cuda/indexer_scores_shape.cuh"
#include "impl/cuda/key_rows.cuh"

namespace aether::cuda::score_tiles {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return std::uint32_t(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ std::uint16_t key_bits(KeyFormat format, const std::byte* row,
                                                  unsigned d) {
  if (format == KeyFormat::E4M3)
    return __bfloat16_as_ushort(__float2bfloat16(e4m3_value(std::uint8_t(row[d]))));
  return reinterpret_cast<const std::uint16_t*>(row)[d];
}

// 16 bytes global -> shared without passing through registers; zero-filled when
// `bytes` is 0 (padding rows and columns).
__device__ __forceinline__ void copy_async(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(bytes));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// rows x dim16 bf16 into tile (row stride `stride`), zero past `valid` rows (at least
// one) and past `dim` columns. row(r) is the address of source row r. With `vector`, 8
// elements per step (16-byte bf16 loads, or two 4-byte E4M3 loads): the caller has
// checked that D is a multiple of 8 and the rows are aligned for that. BF16 rows so
// are copied asynchronously, every piece in flight at once: a piece loaded into
// registers and stored costs a round trip before the next, where a block that scores
// one query (DoSA's probe) would spend most of its time (docs/performance.md). The
// caller commits and waits.
template <class RowOf>
__device__ __forceinline__ void load_tile(bf16* tile, unsigned stride, unsigned rows,
                                          unsigned valid, unsigned dim, unsigned dim16,
                                          KeyFormat format, bool vector, RowOf row) {
  if (vector && format == KeyFormat::BF16) {
    const unsigned chunks = dim16 / 8;
    const std::byte* any = row(0);  // a readable address for the zero-filled pieces
#pragma unroll 4
    for (unsigned i = threadIdx.x; i < rows * chunks; i += kThreads) {
      const unsigned r = i / chunks, c = i - r * chunks;
      const bool real = r < valid && c * 8 < dim;
      copy_async(tile + r * stride + c * 8, real ? row(r) + 16 * c : any, real ? 16 : 0);
    }
    return;
  }
  if (vector) {  // E4M3 (BF16 is copied above): four pieces' words loaded before one converts
    const unsigned chunks = dim16 / 8, pieces = rows * chunks;
    for (unsigned i0 = threadIdx.x; i0 < pieces; i0 += 4 * kThreads) {
      std::uint32_t lo[4], hi[4];
#pragma unroll
      for (unsigned u = 0; u < 4; ++u) {
        const unsigned i = i0 + u * kThreads, r = i / chunks, c = i - r * chunks;
        const bool real = i < pieces && r < valid && c * 8 < dim;
        const auto* words = reinterpret_cast<const std::uint32_t*>(real ? row(r) : nullptr);
        lo[u] = real ? words[2 * c] : 0, hi[u] = real ? words[2 * c + 1] : 0;
      }
#pragma unroll
      for (unsigned u = 0; u < 4; ++u) {
        const unsigned i = i0 + u * kThreads, r = i / chunks, c = i - r * chunks;
        if (i >= pieces) break;
        std::uint16_t h[8];  // a zero code is +0, as a padding piece's zeros are
#pragma unroll
        for (int e = 0; e < 8; ++e)
          h[e] = __bfloat16_as_ushort(__float2bfloat16(
              e4m3_value(std::uint8_t(((e < 4 ? lo[u] : hi[u]) >> (8 * (e % 4))) & 0xff))));
        *reinterpret_cast<uint4*>(tile + r * stride + c * 8) =
            make_uint4(h[0] | std::uint32_t(h[1]) << 16, h[2] | std::uint32_t(h[3]) << 16,
                       h[4] | std::uint32_t(h[5]) << 16, h[6] | std::uint32_t(h[7]) << 16);
      }
    }
  } else {
    for (unsigned i = threadIdx.x; i < rows * dim16; i += kThreads) {
      const unsigned r = i / dim16, d = i - r * dim16;
      const std::uint16_t bits = r < valid && d < dim ? key_bits(format, row(r), d) : 0;
      tile[r * stride + d] = __ushort_as_bfloat16(bits);
    }
  }
}

// The 16-byte pieces of a query tile a thread copies: piece i = h chunks + c for i =
// threadIdx.x, + kThreads, ..., walked by a step found once a block (a division and
// 64-bit offsets a piece were 23% of full scoring's instructions, docs/performance.md).
struct QueryPieces {
  unsigned h, c, chunks, step_h, step_c;
  __device__ explicit QueryPieces(const Layout& lay) : chunks(lay.dim16 / 8) {
    // no pieces at D = 0 (and no division by its zero chunks)
    h = chunks ? threadIdx.x / chunks : lay.heads16;
    c = chunks ? threadIdx.x % chunks : 0;
    step_h = chunks ? kThreads / chunks : 0;
    step_c = chunks ? kThreads % chunks : 0;
  }
};

// Query t into its tiles: its [H, D] bf16 rows padded (asynchronously 16 bytes at a
// time when the rows allow it, else element by element) and its H weights, zero past
// H (4-byte copies), so that a head group reads its two weights unchecked.
__device__ __forceinline__ void issue_query(bf16* tile, float* weight_tile,
                                            const std::uint16_t* queries, const float* weights,
                                            std::size_t t, const Shape& s, const Layout& lay,
                                            const QueryPieces& p) {
  const unsigned heads = unsigned(s.heads), dim = unsigned(s.dim);
  for (unsigned h = threadIdx.x; h < lay.heads16; h += kThreads)
    asm volatile(
        "cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(weight_tile + h)),
        "l"(weights + t * s.heads + (h < heads ? h : 0)), "r"(h < heads ? 4 : 0));
  const auto* base = reinterpret_cast<const std::byte*>(queries + t * s.heads * s.dim);
  if (!s.vector_queries) {
    load_tile(tile, lay.stride, lay.heads16, heads, dim, lay.dim16, KeyFormat::BF16, false,
              [&](unsigned h) { return base + std::size_t(h) * s.dim * 2; });
    return;
  }
  for (unsigned h = p.h, c = p.c; h < lay.heads16;) {
    const bool real = h < heads && c * 8 < dim;
    copy_async(tile + h * lay.stride + c * 8, base + (real ? (h * dim + c * 8) * 2 : 0),
               real ? 16 : 0);
    h += p.step_h, c += p.step_c;
    if (c >= p.chunks) c -= p.chunks, ++h;
  }
}

}  // namespace aether::cuda::score_tiles
