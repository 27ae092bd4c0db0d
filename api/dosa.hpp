// Vocabulary shared by the DoSA model and backends (source 001): the plan that
// splits a query's heads for pruning, and the refusals of a pruned top-k.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <variant>
#include <vector>

#include "api/indexer.hpp"

namespace aether {

// How one query's heads are split (prepared once per query, source 001 §2.2, §3):
// - `retained`: heads whose exact activation enters every key's bound;
// - `anchors`: every omitted head of positive weight, bounded through a retained
//   anchor j as q_h = beta q_j + d_h with beta >= 0 (anchor kNoAnchor: beta 0,
//   d_h = q_h);
// - `aggregated`: omitted heads of negative weight whose |w_h| q_h are summed into
//   a_A; a key's bound deducts [a_A . k]_+. Other omitted negative or zero-weight
//   heads deduct nothing.
// Any plan is sound; the plan decides only how many keys survive.
// A head may also take further anchors (`more`, the joint bound the source points
// to): q_h = beta q_j + Σ_i beta_i q_{j_i} + d_h with every beta_i >= 0, bounded by
// beta [q_j.k]_+ + Σ_i beta_i [q_{j_i}.k]_+ + ||d_h|| ||k|| (ReLU is subadditive and
// positively homogeneous).
inline constexpr std::uint32_t kNoAnchor = 0xffffffffu;
struct DosaTerm {
  std::uint32_t anchor = 0;
  float beta = 0;
  friend bool operator==(const DosaTerm&, const DosaTerm&) = default;
};
struct DosaAnchor {
  std::uint32_t head = 0, anchor = kNoAnchor;
  float beta = 0;
  std::vector<DosaTerm> more;
  friend bool operator==(const DosaAnchor&, const DosaAnchor&) = default;
};
struct DosaPlan {
  std::vector<std::uint32_t> retained;
  std::vector<DosaAnchor> anchors;
  std::vector<std::uint32_t> aggregated;
  friend bool operator==(const DosaPlan&, const DosaPlan&) = default;
};

namespace dosa_error {
using indexer_error::DeviceFailure;   // CUDA: the runtime's error code
using indexer_error::NonFiniteInput;  // 0 queries, 1 weights, 2 keys, 3 scores (decode)
using indexer_error::ShapeMismatch;
using indexer_error::UnsupportedOnDevice;  // CUDA: keys or heads its scorer does not run
// A seed id outside the visible keys, or one given twice (position in the seed list).
struct BadSeed {
  std::size_t position;
  std::int64_t id;
  friend bool operator==(const BadSeed&, const BadSeed&) = default;
};
// Fewer distinct seeds than K while at least K keys are visible: no threshold.
struct TooFewSeeds {
  std::size_t seeds, k;
  friend bool operator==(const TooFewSeeds&, const TooFewSeeds&) = default;
};
// A plan that does not split the heads: a head out of range or placed twice, an
// omitted positive-weight head without an anchor entry, an anchor (or a further
// anchor) that is not retained, a negative or non-finite beta, an aggregated head
// whose weight is not negative.
struct BadPlan {
  std::uint32_t head;
  friend bool operator==(const BadPlan&, const BadPlan&) = default;
};
using DosaError = std::variant<ShapeMismatch, NonFiniteInput, BadSeed, TooFewSeeds, BadPlan,
                               UnsupportedOnDevice, DeviceFailure>;

inline std::ostream& operator<<(std::ostream& os, const DosaError& e) {
  if (auto* p = std::get_if<ShapeMismatch>(&e))
    return os << "ShapeMismatch{expected=" << p->expected << ", actual=" << p->actual << "}";
  if (auto* p = std::get_if<NonFiniteInput>(&e))
    return os << "NonFiniteInput{input=" << p->input << ", index=" << p->index << "}";
  if (auto* p = std::get_if<BadSeed>(&e))
    return os << "BadSeed{position=" << p->position << ", id=" << p->id << "}";
  if (auto* p = std::get_if<TooFewSeeds>(&e))
    return os << "TooFewSeeds{seeds=" << p->seeds << ", k=" << p->k << "}";
  if (auto* p = std::get_if<BadPlan>(&e)) return os << "BadPlan{head=" << p->head << "}";
  if (auto* p = std::get_if<UnsupportedOnDevice>(&e))
    return os << "UnsupportedOnDevice{heads=" << p->heads << ", dim=" << p->dim << "}";
  return os << "DeviceFailure{code=" << std::get<DeviceFailure>(e).code << "}";
}
}  // namespace dosa_error

using dosa_error::DosaError;

// What a backend's pruned call did, summed over its queries. (CUDA: when its probe
// sends the batch to full scoring, screened and survivors are the probe's counts.)
struct DosaStats {
  std::size_t screened = 0;      // keys bounded (neither seeds nor fully scored)
  std::size_t survivors = 0;     // of those, bounded at or above tau: scored
  std::size_t full_queries = 0;  // queries scored in full (nothing to prune, or it did not pay)
  std::size_t seeds_scored = 0;  // seeds scored for the pruned queries (all, or those bounds keep)
};

struct DosaOptions {
  // Score a query in full when the backend's cost rule says pruning will not pay.
  // The lanes are the same either way; properties turn it off to screen small
  // inputs too.
  bool fall_back_when_unpaid = true;
};

}  // namespace aether
