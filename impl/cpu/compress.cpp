#include "impl/cpu/compress.hpp"

#include <immintrin.h>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "impl/compress_math.hpp"
#include "impl/compress_plan.hpp"
#include "impl/cpu/dispatch.hpp"
#include "impl/cpu/parallel.hpp"

namespace aether::cpu {

namespace {
namespace ce = compress_error;
using impl::Step;

struct Call {
  std::span<const CompressRequest> requests;
  std::span<const float> projected;
  std::span<float> ring;
  const CompressShape& shape;
  std::span<std::uint16_t> rows;
  std::span<std::int32_t> row_index, positions;
};

// Whether any value is NaN or infinite: a branch-free OR over the exponent bits, which
// the compiler vectorises (an early-exit search costs a third of a prefill's time).
bool any_non_finite(std::span<const float> xs) {
  std::uint32_t bad = 0;
  for (const float x : xs)
    bad |= std::uint32_t((std::bit_cast<std::uint32_t>(x) & 0x7f800000u) == 0x7f800000u);
  return bad != 0;
}

// The first non-finite input: projected (flat), else the old ring entries read.
std::optional<CompressError> non_finite(const Call& c) {
  const auto bad = !any_non_finite(c.projected)
                       ? c.projected.end()
                       : std::find_if(c.projected.begin(), c.projected.end(),
                                      [](float x) { return !std::isfinite(x); });
  if (bad != c.projected.end())
    return ce::NonFiniteInput{ce::Input::Projected, std::size_t(bad - c.projected.begin())};
  const std::size_t width = 2 * c.shape.dim, S = c.shape.ring;
  std::optional<std::size_t> first;
  for (const CompressRequest& q : c.requests) {
    const auto [lo, hi] = impl::old_positions_read(q, c.shape.ratio);
    for (std::int64_t p = lo; p < hi; ++p) {
      const std::size_t base = ring_entry_offset(q.state_slot, p, S, width);
      for (std::size_t i = base; i < base + width; ++i)
        if (!std::isfinite(c.ring[i]) && (!first || i < *first)) first = i;
    }
  }
  if (first) return ce::NonFiniteInput{ce::Input::Ring, *first};
  return std::nullopt;
}

// The channels of one completed group: g[t] is position t's entry (score row, latent
// row at +D), channels [from, D). The portable build (fmaf from libm, exact) and the
// CUDA kernels run exactly this.
[[gnu::always_inline]] inline void compress_channels(const float* const* g, int r, std::size_t from,
                                                     std::size_t D, std::uint16_t* row) {
  for (std::size_t d = from; d < D; ++d)
    row[d] = impl::bf16_nearest(
        impl::gated_mean([&](int t) { return g[t][d]; }, [&](int t) { return g[t][D + d]; }, r));
}
void compress_channels_portable(const float* const* g, int r, std::size_t D, std::uint16_t* row) {
  compress_channels(g, r, 0, D, row);
}

// 2^e on eight lanes, e in [-149, 0]: impl::scale_by_power_of_two's factor.
__attribute__((target("avx2,fma"))) inline __m256 power_of_two8(__m256i e) {
  const __m256i normal = _mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23);
  const __m256i tiny =
      _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_add_epi32(e, _mm256_set1_epi32(149)));
  const __m256i is_normal = _mm256_cmpgt_epi32(e, _mm256_set1_epi32(-127));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(tiny, normal, is_normal));
}

// impl::exp_nonpositive on eight lanes, operation for operation (the same fma, +, *
// and bit steps, each one IEEE rounding), so every lane has the scalar's bits; the
// three outcomes (0 below -104, one scaling, two scalings for k = -150) are blended.
__attribute__((target("avx2,fma"))) inline __m256 exp_nonpositive8(__m256 x) {
  const __m256 round = _mm256_set1_ps(12582912.0f);
  const __m256 k =
      _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), round), round);
  __m256 f = _mm256_fmadd_ps(k, _mm256_set1_ps(-0.693359375f), x);
  f = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f), f);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(f, f), f), _mm256_set1_ps(1.0f));
  const __m256i ki = _mm256_cvttps_epi32(k);
  const __m256 once =
      _mm256_mul_ps(y, power_of_two8(_mm256_max_epi32(ki, _mm256_set1_epi32(-149))));
  const __m256 twice = _mm256_mul_ps(_mm256_mul_ps(y, power_of_two8(_mm256_set1_epi32(-75))),
                                     power_of_two8(_mm256_add_epi32(ki, _mm256_set1_epi32(75))));
  const __m256i scaled_once = _mm256_cmpgt_epi32(ki, _mm256_set1_epi32(-150));
  const __m256 e = _mm256_blendv_ps(twice, once, _mm256_castsi256_ps(scaled_once));
  return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ), e);
}

// impl::bf16_nearest on eight lanes, packed to eight halves.
__attribute__((target("avx2,fma"))) inline __m128i bf16_nearest8(__m256 z) {
  const __m256i bits = _mm256_castps_si256(z);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i half = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd), 16);
  const __m256i packed =
      _mm256_packus_epi32(half, half);  // per 128-bit lane: h0..h3 h0..h3 | h4..h7 h4..h7
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
}

// Eight channels at a time: impl::gated_mean lane by lane (max, then e_t, num and den
// for t ascending, one division), the rest of the channels as the portable build.
// maxps and fmaxf may pick different zeros for +0 and -0; s - m is then +-0 and its
// exp 1 either way, so the rows agree.
__attribute__((target("avx2,fma"))) void compress_channels_avx2(const float* const* g, int r,
                                                                std::size_t D, std::uint16_t* row) {
  std::size_t d = 0;
  for (; d + 8 <= D; d += 8) {
    __m256 m = _mm256_loadu_ps(g[0] + d);
    for (int t = 1; t < r; ++t) m = _mm256_max_ps(m, _mm256_loadu_ps(g[t] + d));
    __m256 num = _mm256_setzero_ps(), den = _mm256_setzero_ps();
    for (int t = 0; t < r; ++t) {
      const __m256 e = exp_nonpositive8(_mm256_sub_ps(_mm256_loadu_ps(g[t] + d), m));
      num = _mm256_fmadd_ps(e, _mm256_loadu_ps(g[t] + D + d), num);
      den = _mm256_add_ps(den, e);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(row + d), bf16_nearest8(_mm256_div_ps(num, den)));
  }
  compress_channels(g, r, d, D, row);
}

// One output row: a completed group read through `entry(p)`, or zeros with row -1
// and position 0.
template <class Entry>
void write_row(const Call& c, std::size_t out, std::int64_t j, Entry entry) {
  const std::size_t D = c.shape.dim;
  const std::int64_t r = c.shape.ratio;
  std::uint16_t* row = c.rows.data() + out * D;
  if (j < 0) {
    std::fill(row, row + D, std::uint16_t(0));
    c.row_index[out] = -1;
    c.positions[out] = 0;
    return;
  }
  const float* few[16];
  std::vector<const float*> many(r > 16 ? std::size_t(r) : 0);
  const float** g = r > 16 ? many.data() : few;
  for (std::int64_t t = 0; t < r; ++t) g[t] = entry(j * r + t);
  (use_avx2() ? compress_channels_avx2 : compress_channels_portable)(g, int(r), D, row);
  c.row_index[out] = std::int32_t(j);
  c.positions[out] = std::int32_t(j * r);
}

void copy_to_ring(const Call& c, const CompressRequest& q, std::int64_t p, const float* from) {
  const std::size_t width = 2 * c.shape.dim, S = c.shape.ring;
  std::memcpy(c.ring.data() + ring_entry_offset(q.state_slot, p, S, width), from, width * 4);
}

const float* ring_entry(const Call& c, const CompressRequest& q, std::int64_t p) {
  const std::size_t width = 2 * c.shape.dim, S = c.shape.ring;
  return c.ring.data() + ring_entry_offset(q.state_slot, p, S, width);
}

Status<CompressError> run(const Call& c, Step step) {
  const auto planned = impl::plan_call(c.requests, c.shape, step, c.projected.size(), c.ring.size(),
                                       c.rows.size(), c.row_index.size(), c.positions.size());
  if (auto* e = std::get_if<CompressError>(&planned)) return *e;
  if (auto e = non_finite(c)) return *e;
  const auto& plan = std::get<impl::CompressPlan>(planned);
  const std::size_t width = 2 * c.shape.dim;
  const std::int64_t r = c.shape.ratio, S = std::int64_t(c.shape.ring);
  std::size_t most = 1;  // the largest request's positions: the work per "row" of for_each_row
  for (const CompressRequest& q : c.requests) most = std::max(most, std::size_t(q.tokens));
  for_each_row(c.requests.size(), most * width * 16, [&](std::size_t i) {
    const CompressRequest& q = c.requests[i];
    const float* chunk = c.projected.data() + plan.token_offset[i] * width;
    const std::int64_t s = q.start, e = q.start + q.tokens;
    const auto input = [&](std::int64_t p) { return chunk + std::size_t(p - s) * width; };
    if (step == Step::Prefill) {
      const auto read = [&](std::int64_t p) { return p < s ? ring_entry(c, q, p) : input(p); };
      std::size_t out = plan.row_offset[i];
      for (std::int64_t j = s / r; j < e / r; ++j) write_row(c, out++, j, read);
      if (out == plan.row_offset[i]) write_row(c, out, -1, read);  // placeholder
      for (std::int64_t p = std::max(s, e - S); p < e; ++p) copy_to_ring(c, q, p, input(p));
    } else {
      for (std::int64_t p = s; p < e; ++p) copy_to_ring(c, q, p, input(p));
      const auto read = [&](std::int64_t p) { return ring_entry(c, q, p); };
      for (std::int64_t p = s; p < e; ++p)
        write_row(c, plan.row_offset[i] + std::size_t(p - s), p % r == r - 1 ? p / r : -1, read);
    }
  });
  return Ok{};
}
}  // namespace

Status<CompressError> compress_prefill(std::span<const CompressRequest> requests,
                                       std::span<const float> projected, std::span<float> ring,
                                       const CompressShape& shape, std::span<std::uint16_t> rows,
                                       std::span<std::int32_t> row_index,
                                       std::span<std::int32_t> positions) {
  return run(Call{requests, projected, ring, shape, rows, row_index, positions}, Step::Prefill);
}

Status<CompressError> compress_decode(std::span<const CompressRequest> requests,
                                      std::span<const float> projected, std::span<float> ring,
                                      const CompressShape& shape, std::span<std::uint16_t> rows,
                                      std::span<std::int32_t> row_index,
                                      std::span<std::int32_t> positions) {
  return run(Call{requests, projected, ring, shape, rows, row_index, positions}, Step::Decode);
}

__attribute__((target("avx2,fma"))) static void exp_lanes(const float* x, float* out,
                                                          std::size_t n) {
  for (std::size_t i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, exp_nonpositive8(_mm256_loadu_ps(x + i)));
}

bool exp_nonpositive_avx2(const float* x, float* out, std::size_t n) {
  if (!use_avx2()) return false;
  exp_lanes(x, out, n);
  return true;
}

}  // namespace aether::cpu
