#include "model/witness.hpp"

#include <algorithm>
#include <cmath>

#include "model/attention.hpp"

namespace aether::model {

namespace {
using Wide = unsigned __int128;  // s*L and x*S_eff of two size_t never overflow it
namespace we = witness_error;

std::optional<WitnessError> check_rows(std::span<const std::int32_t> learned, std::size_t topk,
                                       std::span<const std::int32_t> context_lens) {
  if (Wide(topk) * context_lens.size() != learned.size())
    return we::RowsMismatch{learned.size(), topk, context_lens.size()};
  return std::nullopt;
}

std::optional<WitnessError> check_segments(std::size_t num_segments) {
  if (num_segments == 0 || num_segments > MAX_TOPOLOGY_SEGMENTS)
    return we::SegmentsOutOfRange{num_segments};
  return std::nullopt;
}
}  // namespace

// S_eff = min(S, L)
std::size_t effective_segments(std::size_t context_len, std::size_t num_segments) {
  return std::min(num_segments, context_len);
}

// σ(x) = floor(x S_eff / L), L read as max(L, 1)
std::size_t segment_of(std::size_t token, std::size_t context_len, std::size_t num_segments) {
  const std::size_t L = std::max<std::size_t>(context_len, 1);
  return static_cast<std::size_t>(Wide(token) * effective_segments(L, num_segments) / L);
}

// e_s = ceil(s L / S_eff), L read as max(L, 1) like σ
std::size_t segment_edge(std::size_t s, std::size_t context_len, std::size_t num_segments) {
  const std::size_t L = std::max<std::size_t>(context_len, 1);
  const Wide n = Wide(s) * L;
  const Wide d = std::max<std::size_t>(effective_segments(L, num_segments), 1);
  return static_cast<std::size_t>((n + d - 1) / d);
}

// O(K) = { min(floor(x S_eff / L), S - 1) : x ∈ K, x ≥ 0 }
std::vector<bool> occupied_segments(std::span<const std::int32_t> row, std::int32_t context_len,
                                    std::size_t num_segments) {
  std::vector<bool> occupied(num_segments, false);
  if (context_len <= 0 || num_segments == 0) return occupied;
  for (std::int32_t x : row)
    if (x >= 0)
      occupied[std::min(segment_of(std::size_t(x), std::size_t(context_len), num_segments),
                        num_segments - 1)] = true;
  return occupied;
}

// W(K) = { e_s : s < S_eff, s ∉ O(K) }
std::vector<std::int32_t> row_witnesses(std::span<const std::int32_t> row, std::int32_t context_len,
                                        std::size_t num_segments) {
  std::vector<std::int32_t> witnesses(num_segments, -1);
  if (context_len <= 0) return witnesses;
  const std::vector<bool> occupied = occupied_segments(row, context_len, num_segments);
  const std::size_t L = std::size_t(context_len);
  for (std::size_t s = 0; s < effective_segments(L, num_segments); ++s)
    if (!occupied[s]) witnesses[s] = std::int32_t(segment_edge(s, L, num_segments));
  return witnesses;
}

Result<std::vector<std::int32_t>, WitnessError> topology_witness_indices(
    std::span<const std::int32_t> learned, std::size_t topk,
    std::span<const std::int32_t> context_lens, std::size_t num_segments) {
  if (auto e = check_rows(learned, topk, context_lens)) return *e;
  if (auto e = check_segments(num_segments)) return *e;
  std::vector<std::int32_t> table;
  for (std::size_t r = 0; r < context_lens.size(); ++r) {
    const auto w = row_witnesses(learned.subspan(r * topk, topk), context_lens[r], num_segments);
    table.insert(table.end(), w.begin(), w.end());
  }
  return table;
}

// B = min(max_replacements, topk - keep); witness j (ascending segment order) -> slot keep + j
Result<std::vector<std::int32_t>, WitnessError> apply_topology_witnesses(
    std::span<const std::int32_t> learned, std::size_t topk,
    std::span<const std::int32_t> context_lens, std::size_t learned_keep, std::size_t num_segments,
    std::size_t max_replacements) {
  if (auto e = check_rows(learned, topk, context_lens)) return *e;
  if (auto e = check_segments(num_segments)) return *e;
  if (learned_keep > topk) return we::LearnedKeepOutOfRange{learned_keep, topk};
  std::vector<std::int32_t> out(learned.begin(), learned.end());
  const std::size_t budget = std::min(max_replacements, topk - learned_keep);
  for (std::size_t r = 0; r < context_lens.size(); ++r) {
    std::size_t j = 0;
    for (std::int32_t w :
         row_witnesses(learned.subspan(r * topk, topk), context_lens[r], num_segments))
      if (w != -1 && j < budget) out[r * topk + learned_keep + j++] = w;
  }
  return out;
}

Status<WitnessError> scatter_topology_witnesses(std::span<std::int32_t> topk_indices,
                                                std::size_t topk,
                                                std::span<const std::int32_t> context_lens,
                                                std::size_t num_segments) {
  if (num_segments == 0) return Ok{};
  const std::size_t keep = topk - std::min(num_segments, topk);
  auto merged =
      apply_topology_witnesses(topk_indices, topk, context_lens, keep, num_segments, num_segments);
  if (!merged) return merged.error();
  std::copy(merged.value().begin(), merged.value().end(), topk_indices.begin());
  return Ok{};
}

// k = |{slots holding x with 0 <= x < L}|
std::size_t valid_slot_count(std::span<const std::int32_t> row, std::int32_t context_len) {
  return std::size_t(std::count_if(row.begin(), row.end(),
                                   [&](std::int32_t x) { return x >= 0 && x < context_len; }));
}

std::vector<std::int32_t> random_null(std::size_t context_len, std::size_t budget,
                                      std::uint64_t seed) {
  if (context_len == 0) return {};
  return select_row(Random{budget, seed}, context_len - 1).value();
}

std::vector<std::int32_t> locality_null(std::size_t context_len, std::size_t budget) {
  if (context_len == 0) return {};
  return select_row(Local{budget}, context_len - 1).value();
}

// coverage(C) = |{σ(x) : x ∈ C ∩ [0, L)}| / S_eff
Rational segment_coverage_exact(std::span<const std::int32_t> candidates, std::size_t context_len,
                                std::size_t num_segments) {
  const std::size_t s_eff = effective_segments(context_len, num_segments);
  if (s_eff == 0) return Rational(1);
  std::set<std::size_t> covered;
  for (std::int32_t x : candidates)
    if (x >= 0 && std::size_t(x) < context_len)
      covered.insert(segment_of(std::size_t(x), context_len, num_segments));
  return Rational(covered.size(), s_eff);
}

double segment_coverage(std::span<const std::int32_t> candidates, std::size_t context_len,
                        std::size_t num_segments) {
  return segment_coverage_exact(candidates, context_len, num_segments).convert_to<double>();
}

// recall(C; a) = Σ_{x ∈ C ∩ [0, L)} a_x / Σ_{x < L} a_x
std::optional<Rational> attention_mass_recall_exact(std::span<const std::int32_t> candidates,
                                                    std::span<const double> attention_row) {
  Rational mass = 0;
  for (double a : attention_row) {
    if (!std::isfinite(a)) return std::nullopt;
    mass += exact(a);
  }
  if (mass == 0) return std::nullopt;
  std::set<std::size_t> chosen;
  for (std::int32_t x : candidates)
    if (x >= 0 && std::size_t(x) < attention_row.size()) chosen.insert(std::size_t(x));
  Rational hit = 0;
  for (std::size_t x : chosen) hit += exact(attention_row[x]);
  return Rational(hit / mass);
}

double attention_mass_recall(std::span<const std::int32_t> candidates,
                             std::span<const double> attention_row) {
  const auto r = attention_mass_recall_exact(candidates, attention_row);
  return r ? r->convert_to<double>() : std::nan("");
}

}  // namespace aether::model
