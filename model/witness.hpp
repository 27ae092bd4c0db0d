// Exact reference model of segment witnesses (source 000, "Segment Witnesses").
// Literal transcription of the math: no masks, no vector tricks, sets and
// 128-bit integer products so nothing can overflow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "api/witness.hpp"
#include "model/rational.hpp"

namespace aether::model {

// S_eff = min(S, L)
std::size_t effective_segments(std::size_t context_len, std::size_t num_segments);

// σ(x) = floor(x S_eff / L), with L read as max(L, 1) (the source's clamp_min(1)).
std::size_t segment_of(std::size_t token, std::size_t context_len, std::size_t num_segments);

// e_s = ceil(s L / S_eff)
std::size_t segment_edge(std::size_t s, std::size_t context_len, std::size_t num_segments);

// O(K) = { min(σ(x), S - 1) : x ∈ K, x ≥ 0 }, as S flags; -1 (any negative) marks
// nothing, and an out-of-range x ≥ L marks min(floor(x S_eff / L), S - 1).
std::vector<bool> occupied_segments(std::span<const std::int32_t> row, std::int32_t context_len,
                                    std::size_t num_segments);

// W(K) = { e_s : s < S_eff, s ∉ O(K) }, as S slots (slot s holds e_s or -1).
// A row with L <= 0 gets no witnesses.
std::vector<std::int32_t> row_witnesses(std::span<const std::int32_t> row, std::int32_t context_len,
                                        std::size_t num_segments);

// Row-major [rows, S] witness table; rows = context_lens.size().
Result<std::vector<std::int32_t>, WitnessError> topology_witness_indices(
    std::span<const std::int32_t> learned, std::size_t topk,
    std::span<const std::int32_t> context_lens, std::size_t num_segments);

// Slots [0, keep) verbatim; witnesses in ascending segment order overwrite
// slots keep, keep+1, ... up to B = min(max_replacements, topk - keep).
Result<std::vector<std::int32_t>, WitnessError> apply_topology_witnesses(
    std::span<const std::int32_t> learned, std::size_t topk,
    std::span<const std::int32_t> context_lens, std::size_t learned_keep, std::size_t num_segments,
    std::size_t max_replacements);

// Serving entry, in place: keep = topk - S (saturating), max_replacements = S;
// S = 0 is the off switch. A refusal leaves the buffer untouched.
Status<WitnessError> scatter_topology_witnesses(std::span<std::int32_t> topk_indices,
                                                std::size_t topk,
                                                std::span<const std::int32_t> context_lens,
                                                std::size_t num_segments);

// The policy budget k = |{slots holding a token of [0, L)}|.
std::size_t valid_slot_count(std::span<const std::int32_t> row, std::int32_t context_len);

// Row L-1 of attention::Random(budget, seed) and attention::Local(budget).
std::vector<std::int32_t> random_null(std::size_t context_len, std::size_t budget,
                                      std::uint64_t seed);
std::vector<std::int32_t> locality_null(std::size_t context_len, std::size_t budget);

// coverage(C) = |{σ(x) : x ∈ C ∩ [0, L)}| / S_eff; 1 when S_eff = 0.
Rational segment_coverage_exact(std::span<const std::int32_t> candidates, std::size_t context_len,
                                std::size_t num_segments);
double segment_coverage(std::span<const std::int32_t> candidates, std::size_t context_len,
                        std::size_t num_segments);

// recall(C; a) = Σ_{x ∈ C ∩ [0, L)} a_x / Σ_{x < L} a_x with L = |a|; C read as a set.
// No value (NaN in the double form) when the row has no mass or a weight is not finite.
std::optional<Rational> attention_mass_recall_exact(std::span<const std::int32_t> candidates,
                                                    std::span<const double> attention_row);
double attention_mass_recall(std::span<const std::int32_t> candidates,
                             std::span<const double> attention_row);

}  // namespace aether::model
