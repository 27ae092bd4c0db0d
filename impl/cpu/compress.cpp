#include "impl/cpu/compress.hpp"

#include <algorithm>
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

// The first non-finite input: projected (flat), else the old ring entries read.
std::optional<CompressError> non_finite(const Call& c) {
  const auto bad = std::find_if(c.projected.begin(), c.projected.end(), [](float x) { return !std::isfinite(x); });
  if (bad != c.projected.end()) return ce::NonFiniteInput{0, std::size_t(bad - c.projected.begin())};
  const std::size_t width = 2 * c.shape.dim, S = c.shape.ring;
  std::optional<std::size_t> first;
  for (const CompressRequest& q : c.requests) {
    const auto [lo, hi] = impl::old_positions_read(q, c.shape.ratio);
    for (std::int64_t p = lo; p < hi; ++p) {
      const std::size_t base = (std::size_t(q.state_slot) * S + std::size_t(p) % S) * width;
      for (std::size_t i = base; i < base + width; ++i)
        if (!std::isfinite(c.ring[i]) && (!first || i < *first)) first = i;
    }
  }
  if (first) return ce::NonFiniteInput{1, *first};
  return std::nullopt;
}

// The channels of one completed group: g[t] is position t's entry (score row, latent
// row at +D). Compiled twice: with AVX2 + FMA (fmaf one instruction) and portable
// (fmaf from libm); fmaf is exact either way, so both give the same bits.
[[gnu::always_inline]] inline void compress_channels(const float* const* g, int r, std::size_t D,
                                                      std::uint16_t* row) {
  for (std::size_t d = 0; d < D; ++d)
    row[d] = impl::bf16_nearest(impl::gated_mean([&](int t) { return g[t][d]; },
                                                 [&](int t) { return g[t][D + d]; }, r));
}
__attribute__((target("avx2,fma"))) void compress_channels_avx2(const float* const* g, int r, std::size_t D,
                                                                std::uint16_t* row) {
  compress_channels(g, r, D, row);
}
void compress_channels_portable(const float* const* g, int r, std::size_t D, std::uint16_t* row) {
  compress_channels(g, r, D, row);
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
  std::memcpy(c.ring.data() + (std::size_t(q.state_slot) * S + std::size_t(p) % S) * width, from, width * 4);
}

const float* ring_entry(const Call& c, const CompressRequest& q, std::int64_t p) {
  const std::size_t width = 2 * c.shape.dim, S = c.shape.ring;
  return c.ring.data() + (std::size_t(q.state_slot) * S + std::size_t(p) % S) * width;
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

}  // namespace aether::cpu
