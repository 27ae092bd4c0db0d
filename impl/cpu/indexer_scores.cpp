#include <immintrin.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>

#include "impl/cpu/dispatch.hpp"
#include "impl/cpu/indexer.hpp"
#include "impl/cpu/key_rows.hpp"
#include "impl/cpu/parallel.hpp"

namespace aether::cpu {

namespace {
namespace ie = indexer_error;

constexpr std::size_t kTile = 16;  // keys per tile: two AVX2 vectors

// Row r of a call's keys: the store's row r, or its row ids[r] (index_scores_at,
// read in place).
struct KeyRows {
  const IndexKeys& keys;
  const std::int32_t* ids;
  std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  const std::byte* row(std::size_t r) const {
    return keys.bytes.data() + (ids != nullptr ? std::size_t(ids[r]) : r) * row_bytes;
  }
};

// Where a tile's keys are stored: the first `count` of kTile.
using TileRows = std::array<const std::byte*, kTile>;
TileRows tile_rows(const KeyRows& at, std::size_t first, std::size_t count) {
  TileRows rows{};
  for (std::size_t t = 0; t < count; ++t) rows[t] = at.row(first + t);
  return rows;
}

// A tile's keys decoded into tile[D][kTile]; lanes past count are 0.
template <KeyFormat kFormat>
void decode_tile(const IndexKeys& keys, const TileRows& rows, std::size_t count, float* tile) {
  for (std::size_t t = 0; t < kTile; ++t)
    for (std::size_t d = 0; d < keys.dim; ++d)
      tile[d * kTile + t] = t < count ? element<kFormat>(rows[t], d) : 0.0f;
}

// One key, the documented order, scalar.
float score_one(std::span<const float> queries, std::span<const float> weights,
                const IndexKeys& keys, const std::byte* row) {
  float score = 0;
  for (std::size_t h = 0; h < weights.size(); ++h) {
    float dot = 0;
    for (std::size_t d = 0; d < keys.dim; ++d)
      dot = std::fma(queries[h * keys.dim + d], element(keys, row, d), dot);
    score = std::fma(weights[h], dot > 0.0f ? dot : 0.0f, score);  // as max_ps(dot, 0)
  }
  return keys.format == KeyFormat::E4M3 ? score * row_scale(keys, row) : score;
}

// A full tile of F32 or BF16 keys with D a multiple of 8, as decode_tile gives it,
// by 8 x 8 register transposes: the scalar transpose cost a quarter of the FMA time.
__attribute__((target("avx2,fma"))) void transpose_tile_avx2(const IndexKeys& keys,
                                                             const TileRows& rows, float* tile) {
  const std::size_t dim = keys.dim;
  const bool f32 = keys.format == KeyFormat::F32;
  for (std::size_t t0 = 0; t0 < kTile; t0 += 8)
    for (std::size_t d0 = 0; d0 < dim; d0 += 8) {
      __m256 r[8];  // keys t0 + i, elements d0 .. d0 + 7
      for (int i = 0; i < 8; ++i) {
        const std::byte* row = rows[t0 + std::size_t(i)];
        r[i] = f32 ? _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d0)
                   : _mm256_castsi256_ps(_mm256_slli_epi32(
                         _mm256_cvtepu16_epi32(
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d0))),
                         16));
      }
      // 8 x 8 transpose: unpack pairs, then quads, then swap 128-bit halves
      const __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xee);
      const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xee);
      const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xee);
      const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xee);
      const __m256 c[8] = {
          _mm256_permute2f128_ps(b0, b4, 0x20), _mm256_permute2f128_ps(b1, b5, 0x20),
          _mm256_permute2f128_ps(b2, b6, 0x20), _mm256_permute2f128_ps(b3, b7, 0x20),
          _mm256_permute2f128_ps(b0, b4, 0x31), _mm256_permute2f128_ps(b1, b5, 0x31),
          _mm256_permute2f128_ps(b2, b6, 0x31), _mm256_permute2f128_ps(b3, b7, 0x31)};
      for (int i = 0; i < 8; ++i) _mm256_store_ps(tile + (d0 + std::size_t(i)) * kTile + t0, c[i]);
    }
}

// kN heads from h over a decoded [D][kTile] tile: every key-vector load feeds 2 kN
// FMAs (kN = 6 keeps 12 accumulators, the two key vectors and a query broadcast in
// the 16 ymm registers), then the heads' weighted ReLU in ascending order.
template <int kN>
__attribute__((target("avx2,fma"))) inline void score_heads(const float* queries,
                                                            const float* weights, std::size_t dim,
                                                            std::size_t h, const float* tile,
                                                            __m256& score0, __m256& score1) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 acc[kN][2];
  for (int i = 0; i < kN; ++i) acc[i][0] = acc[i][1] = zero;
  for (std::size_t d = 0; d < dim; ++d) {
    const __m256 k0 = _mm256_load_ps(tile + d * kTile), k1 = _mm256_load_ps(tile + d * kTile + 8);
    for (int i = 0; i < kN; ++i) {
      const __m256 q = _mm256_broadcast_ss(&queries[(h + std::size_t(i)) * dim + d]);
      acc[i][0] = _mm256_fmadd_ps(q, k0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(q, k1, acc[i][1]);
    }
  }
  for (int i = 0; i < kN; ++i) {
    const __m256 w = _mm256_broadcast_ss(&weights[h + std::size_t(i)]);
    score0 = _mm256_fmadd_ps(w, _mm256_max_ps(acc[i][0], zero), score0);
    score1 = _mm256_fmadd_ps(w, _mm256_max_ps(acc[i][1], zero), score1);
  }
}

// A tile's keys into the [D][kTile] tile.
__attribute__((target("avx2,fma"))) void load_tile_avx2(const IndexKeys& keys, const TileRows& rows,
                                                        std::size_t count, float* tile) {
  if (count == kTile && keys.dim % 8 == 0 && keys.format != KeyFormat::E4M3) {
    transpose_tile_avx2(keys, rows, tile);
    return;
  }
  switch (keys.format) {
    case KeyFormat::F32:
      decode_tile<KeyFormat::F32>(keys, rows, count, tile);
      break;
    case KeyFormat::BF16:
      decode_tile<KeyFormat::BF16>(keys, rows, count, tile);
      break;
    case KeyFormat::E4M3:
      decode_tile<KeyFormat::E4M3>(keys, rows, count, tile);
      break;
  }
}

// One query over a loaded tile, the same operations eight keys to a vector: six
// (then four) heads at a time share each tile load.
__attribute__((target("avx2,fma"))) void score_tile_avx2(std::span<const float> queries,
                                                         std::span<const float> weights,
                                                         const IndexKeys& keys,
                                                         const TileRows& rows, std::size_t count,
                                                         const float* tile, float* out) {
  const std::size_t dim = keys.dim, heads = weights.size();
  const __m256 zero = _mm256_setzero_ps();
  __m256 score0 = zero, score1 = zero;
  std::size_t h = 0;
  for (; h + 6 <= heads; h += 6)
    score_heads<6>(queries.data(), weights.data(), dim, h, tile, score0, score1);
  for (; h + 4 <= heads; h += 4)
    score_heads<4>(queries.data(), weights.data(), dim, h, tile, score0, score1);
  for (; h < heads; ++h)
    score_heads<1>(queries.data(), weights.data(), dim, h, tile, score0, score1);
  alignas(32) float scores[kTile];
  _mm256_store_ps(scores, score0);
  _mm256_store_ps(scores + 8, score1);
  for (std::size_t t = 0; t < count; ++t)
    out[t] = keys.format == KeyFormat::E4M3 ? scores[t] * row_scale(keys, rows[t]) : scores[t];
}

// Scores of T queries [T, H, D] for `rows` rows of `at` into out [T, rows] (inputs
// checked).
void score_batch(std::span<const float> queries, std::span<const float> weights,
                 std::size_t query_count, const KeyRows& at, std::size_t rows,
                 std::span<float> out) {
  const IndexKeys& keys = at.keys;
  const std::size_t heads = query_count ? weights.size() / query_count : 0, dim = keys.dim;
  const bool avx2 = use_avx2();
  const std::size_t tiles = (rows + kTile - 1) / kTile;
  // for_each_row's threshold counts elements of about a nanosecond each; a tile's
  // multiply-adds run about 32 to the nanosecond on AVX2 (16 keys x 64 heads x D 128:
  // about 4 us), so a call of a few tiles stays on the calling thread instead of
  // paying thread starts (about 50 us each on the CPU machine) for it.
  const std::size_t tile_work = kTile * dim * std::max<std::size_t>(weights.size(), 1) / 32;
  for_each_row(tiles, tile_work, [&](std::size_t t) {
    const std::size_t first = t * kTile, count = std::min(kTile, rows - first);
    if (avx2) {
      thread_local std::vector<float, std::allocator<float>> buffer;
      buffer.resize(dim * kTile + 8);
      float* tile = reinterpret_cast<float*>(
          (reinterpret_cast<std::uintptr_t>(buffer.data()) + 31) & ~std::uintptr_t(31));
      const TileRows in_tile = tile_rows(at, first, count);
      load_tile_avx2(keys, in_tile, count, tile);
      for (std::size_t q = 0; q < query_count; ++q)
        score_tile_avx2(queries.subspan(q * heads * dim, heads * dim),
                        weights.subspan(q * heads, heads), keys, in_tile, count, tile,
                        out.data() + q * rows + first);
    } else {
      for (std::size_t q = 0; q < query_count; ++q)
        for (std::size_t j = first; j < first + count; ++j)
          out[q * rows + j] = score_one(queries.subspan(q * heads * dim, heads * dim),
                                        weights.subspan(q * heads, heads), keys, at.row(j));
    }
  });
}
}  // namespace

Status<IndexerError> index_scores(std::span<const float> queries, std::span<const float> weights,
                                  const IndexKeys& keys, std::span<float> out) {
  if (auto e = check_score_inputs(queries, weights, keys)) return *e;
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  const std::size_t rows = row_bytes ? keys.bytes.size() / row_bytes : 0;
  if (out.size() != rows) return ie::ShapeMismatch{rows, out.size()};
  score_batch(queries, weights, 1, KeyRows{keys, nullptr}, rows, out);
  return Ok{};
}

std::size_t index_scores_paced_heads(std::size_t heads) {
  const std::size_t rest = heads % 6;  // after score_tile_avx2's blocks of six
  return heads + (rest == 2 || rest == 3 ? 4 - rest : rest == 5 ? 1 : 0);
}

Status<IndexerError> index_scores_batch(std::span<const float> queries,
                                        std::span<const float> weights, std::size_t query_count,
                                        const IndexKeys& keys, std::span<float> out) {
  const std::size_t heads = query_count ? weights.size() / query_count : 0;
  if (heads * query_count != weights.size())
    return ie::ShapeMismatch{heads * query_count, weights.size()};
  if (auto e = check_score_inputs(queries, weights, keys)) return *e;
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  const std::size_t rows = row_bytes ? keys.bytes.size() / row_bytes : 0;
  if (out.size() != query_count * rows) return ie::ShapeMismatch{query_count * rows, out.size()};
  score_batch(queries, weights, query_count, KeyRows{keys, nullptr}, rows, out);
  return Ok{};
}

void index_scores_at(std::span<const float> queries, std::span<const float> weights,
                     std::size_t query_count, const IndexKeys& keys,
                     std::span<const std::int32_t> ids, std::span<float> out) {
  score_batch(queries, weights, query_count, KeyRows{keys, ids.data()}, ids.size(), out);
}

}  // namespace aether::cpu
