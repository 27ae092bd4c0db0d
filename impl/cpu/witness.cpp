#include "impl/cpu/witness.hpp"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>

#include "impl/cpu/dispatch.hpp"
#include "impl/cpu/parallel.hpp"
#include "impl/witness_refusals.hpp"

namespace aether::cpu {

namespace {

// floor(x S_eff / L) for 0 <= x < L < 2^31 as floor(fma(x, S_eff/L, δ)): the
// quotient is below 64, so the two roundings err by < 2^-46 while a non-integer
// quotient sits >= 1/L > 2^-31 below the next integer; δ = 2^-40 lifts exact
// integers that the rounded reciprocal may have pushed just under.
constexpr double kLift = 0x1p-40;

// Bit min(σ(x), S - 1) for x >= 0. For x >= L the clamp is min(x, S - 1): when
// S_eff = S then L >= S, so min(floor(x S_eff / L), S - 1) = S - 1 = min(x, S - 1);
// when S_eff = L < S, floor(x L / L) = x.
inline std::uint64_t segment_bit(std::int32_t x, std::int32_t len, double ratio,
                                 std::int32_t last) {
  if (x < 0) return 0;
  const std::int32_t seg =
      x < len ? std::int32_t(std::fma(double(x), ratio, kLift)) : std::min(x, last);
  return std::uint64_t(1) << seg;
}

std::uint64_t occupancy_scalar(const std::int32_t* row, std::size_t topk, std::int32_t len,
                               double ratio, std::int32_t last) {
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < topk; ++i) mask |= segment_bit(row[i], len, ratio, last);
  return mask;
}

// Eight entries at a time, in float: q~ = fl(fl(x) fl(S_eff/L)) errs from the true
// quotient q = x S_eff / L by under 2^-15 while q < 2^6, so when frac(q~) lies in
// [2^-14, 1 - 2^-14] then floor(q~) = floor(q); a group with a non-negative entry
// closer to an integer goes through the exact scalar formula instead. With
// S_eff = L the ratio is 1 and q~ = x exactly (x < 2^24; larger x clamp anyway).
// min_epu32(q~, S - 1) is the clamp of every x >= 0, cvtt's 0x80000000 included
// (for x >= L, q >= S_eff, and min(q, S - 1) = min(floor(x S_eff / L), S - 1)).
// Padding becomes an all-ones count, and a 32-bit variable shift by >= 32 sets nothing.
__attribute__((target("avx2,fma"))) std::uint64_t occupancy_avx2(const std::int32_t* row,
                                                                 std::size_t topk, std::int32_t len,
                                                                 double ratio, std::int32_t last) {
  const bool check_edges = ratio != 1.0;
  const __m256 vratio = _mm256_set1_ps(float(ratio));
  const __m256 lo_edge = _mm256_set1_ps(0x1p-14f), hi_edge = _mm256_set1_ps(1.0f - 0x1p-14f);
  const __m256i vlast = _mm256_set1_epi32(last), one = _mm256_set1_epi32(1),
                k32 = _mm256_set1_epi32(32);
  __m256i acc_lo = _mm256_setzero_si256(), acc_hi = _mm256_setzero_si256();
  std::uint64_t exact = 0;
  std::size_t i = 0;
  for (; i + 8 <= topk; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i));
    const __m256 q = _mm256_mul_ps(_mm256_cvtepi32_ps(x), vratio);
    const __m256i q0 = _mm256_cvttps_epi32(q);
    if (check_edges) {
      const __m256 frac = _mm256_sub_ps(q, _mm256_cvtepi32_ps(q0));
      const __m256 near = _mm256_or_ps(_mm256_cmp_ps(frac, lo_edge, _CMP_LT_OQ),
                                       _mm256_cmp_ps(frac, hi_edge, _CMP_GT_OQ));
      const int negative = _mm256_movemask_ps(_mm256_castsi256_ps(x));
      if ((_mm256_movemask_ps(near) & ~negative) != 0) {
        exact |= occupancy_scalar(row + i, 8, len, ratio, last);
        continue;
      }
    }
    const __m256i seg = _mm256_or_si256(_mm256_min_epu32(q0, vlast), _mm256_srai_epi32(x, 31));
    acc_lo = _mm256_or_si256(acc_lo, _mm256_sllv_epi32(one, seg));
    acc_hi = _mm256_or_si256(acc_hi, _mm256_sllv_epi32(one, _mm256_sub_epi32(seg, k32)));
  }
  alignas(32) std::uint32_t lo[8], hi[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lo), acc_lo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(hi), acc_hi);
  for (int k = 0; k < 8; ++k) exact |= std::uint64_t(lo[k]) | std::uint64_t(hi[k]) << 32;
  return exact | occupancy_scalar(row + i, topk - i, len, ratio, last);
}

// Occupancy bit mask of one row (L > 0).
std::uint64_t occupancy(const std::int32_t* row, std::size_t topk, std::int32_t len,
                        std::int64_t s_eff, std::int64_t num_segments) {
  const bool avx2 = use_avx2();
  const double ratio = double(s_eff) / double(len);
  const auto last = std::int32_t(num_segments - 1);
  return avx2 ? occupancy_avx2(row, topk, len, ratio, last)
              : occupancy_scalar(row, topk, len, ratio, last);
}

// Segments of [0, S_eff) that the row leaves unoccupied; none when L <= 0.
std::uint64_t missing_segments(const std::int32_t* row, std::size_t topk, std::int32_t len,
                               std::size_t num_segments) {
  if (len <= 0) return 0;
  const std::int64_t s_eff = std::min<std::int64_t>(std::int64_t(num_segments), len);
  const std::uint64_t all = s_eff == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << s_eff) - 1;
  return all & ~occupancy(row, topk, len, s_eff, std::int64_t(num_segments));
}

// e_s = ceil(s L / S_eff); s L < 2^37 fits in 64 bits.
std::int32_t segment_edge(std::int64_t s, std::int64_t len, std::size_t num_segments) {
  const std::int64_t s_eff = std::min<std::int64_t>(std::int64_t(num_segments), len);
  return std::int32_t((s * len + s_eff - 1) / s_eff);
}
}  // namespace

Status<WitnessError> topology_witness_indices(std::span<const std::int32_t> learned,
                                              std::size_t topk,
                                              std::span<const std::int32_t> context_lens,
                                              std::size_t num_segments,
                                              std::span<std::int32_t> out) {
  const std::size_t rows = context_lens.size();
  if (auto e = impl::table_refusal(learned.size(), topk, rows, num_segments, out.size())) return *e;
  for_each_row(rows, topk, [&](std::size_t r) {
    std::int32_t* table = out.data() + r * num_segments;
    std::uint64_t missing =
        missing_segments(learned.data() + r * topk, topk, context_lens[r], num_segments);
    std::fill_n(table, num_segments, -1);
    for (; missing != 0; missing &= missing - 1) {
      const int s = std::countr_zero(missing);
      table[s] = segment_edge(s, context_lens[r], num_segments);
    }
  });
  return Ok{};
}

Status<WitnessError> apply_topology_witnesses(std::span<const std::int32_t> learned,
                                              std::size_t topk,
                                              std::span<const std::int32_t> context_lens,
                                              std::size_t learned_keep, std::size_t num_segments,
                                              std::size_t max_replacements,
                                              std::span<std::int32_t> out) {
  const std::size_t rows = context_lens.size();
  if (auto e =
          impl::merge_refusal(learned.size(), topk, rows, learned_keep, num_segments, out.size()))
    return *e;
  const std::size_t budget = std::min(max_replacements, topk - learned_keep);
  for_each_row(rows, topk, [&](std::size_t r) {
    const std::int32_t* row = learned.data() + r * topk;
    std::int32_t* dst = out.data() + r * topk;
    // Occupancy is read from the whole learned row before any slot is written.
    std::uint64_t missing = missing_segments(row, topk, context_lens[r], num_segments);
    if (dst != row) std::memcpy(dst, row, topk * sizeof(std::int32_t));
    for (std::size_t j = 0; missing != 0 && j < budget; ++j, missing &= missing - 1)
      dst[learned_keep + j] =
          segment_edge(std::countr_zero(missing), context_lens[r], num_segments);
  });
  return Ok{};
}

Status<WitnessError> scatter_topology_witnesses(std::span<std::int32_t> topk_indices,
                                                std::size_t topk,
                                                std::span<const std::int32_t> context_lens,
                                                std::size_t num_segments) {
  if (num_segments == 0) return Ok{};
  const std::size_t keep = topk - std::min(num_segments, topk);
  return apply_topology_witnesses(topk_indices, topk, context_lens, keep, num_segments,
                                  num_segments, topk_indices);
}

}  // namespace aether::cpu
