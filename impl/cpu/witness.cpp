#include "impl/cpu/witness.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

#include "impl/cpu/parallel.hpp"

namespace aether::cpu {

namespace {
namespace we = witness_error;

std::optional<WitnessError> check_call(std::size_t learned_len, std::size_t topk,
                                       std::size_t rows, std::size_t num_segments) {
  if (static_cast<unsigned __int128>(topk) * rows != learned_len)
    return we::RowsMismatch{learned_len, topk, rows};
  if (num_segments == 0 || num_segments > MAX_TOPOLOGY_SEGMENTS)
    return we::SegmentsOutOfRange{num_segments};
  return std::nullopt;
}

// floor(x S_eff / L) for 0 <= x < L < 2^31 as floor(fma(x, S_eff/L, δ)): the
// quotient is below 64, so the two roundings err by < 2^-46 while a non-integer
// quotient sits >= 1/L > 2^-31 below the next integer; δ = 2^-40 lifts exact
// integers that the rounded reciprocal may have pushed just under.
constexpr double kLift = 0x1p-40;

// Occupancy bit mask of one row: bit min(σ(x), S - 1) for every x >= 0.
__attribute__((target_clones("avx2", "default")))
std::uint64_t occupancy(const std::int32_t* row, std::size_t topk, std::int32_t len,
                        std::int64_t s_eff, std::int64_t num_segments) {
  const double ratio = double(s_eff) / double(len);
  const bool full = s_eff == num_segments;
  std::uint64_t mask = 0;
  for (std::size_t i = 0; i < topk; ++i) {
    const std::int64_t x = row[i];
    const auto inside = std::int64_t(__builtin_fma(double(x), ratio, kLift));
    const std::int64_t outside = full ? num_segments - 1 : std::min(x, num_segments - 1);
    const std::int64_t seg = x < 0 ? 64 : (x < len ? inside : outside);
    mask |= seg < 64 ? std::uint64_t(1) << seg : 0;
  }
  return mask;
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
  if (auto e = check_call(learned.size(), topk, rows, num_segments)) return *e;
  if (out.size() != rows * num_segments) return we::OutputSizeMismatch{rows * num_segments, out.size()};
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
  if (auto e = check_call(learned.size(), topk, rows, num_segments)) return *e;
  if (learned_keep > topk) return we::LearnedKeepOutOfRange{learned_keep, topk};
  if (out.size() != learned.size()) return we::OutputSizeMismatch{learned.size(), out.size()};
  const std::size_t budget = std::min(max_replacements, topk - learned_keep);
  for_each_row(rows, topk, [&](std::size_t r) {
    const std::int32_t* row = learned.data() + r * topk;
    std::int32_t* dst = out.data() + r * topk;
    // Occupancy is read from the whole learned row before any slot is written.
    std::uint64_t missing = missing_segments(row, topk, context_lens[r], num_segments);
    if (dst != row) std::memcpy(dst, row, topk * sizeof(std::int32_t));
    for (std::size_t j = 0; missing != 0 && j < budget; ++j, missing &= missing - 1)
      dst[learned_keep + j] = segment_edge(std::countr_zero(missing), context_lens[r], num_segments);
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
