// The CPU's fallback rule for DoSA (impl/cpu/dosa.cpp, docs/dosa.md): a query is
// pruned only while pruning's estimated cost, in full-score heads, stays under
// kPays of scoring it in full; and its seeds are screened (dosa_seeds) only where
// that is estimated to cost less than scoring them all.
#pragma once

#include <cstddef>
#include <span>

#include "api/dosa.hpp"
#include "impl/cpu/dosa_seeds.hpp"

namespace aether::cpu::dosa_cost {

constexpr double kPays = 0.9;  // pruning must cost under this share of full scoring
// A key's screen, in full-score heads: each screen head about 1 (the batch's queries
// share each decoded tile) and the rest of it (gather, norm, bound) at most 9: timed
// stage by stage at 2 to 3 (bench/dosa_bench, docs/performance.md); the larger
// figure errs toward scoring in full, whose cost is known.
constexpr double kScreenHeadCost = 1, kBoundCost = 9;

struct CostRule {
  std::span<const DosaPlan> plans;
  std::size_t heads, keys, seeds, k;
  bool enforced;  // DosaOptions::fall_back_when_unpaid (off: always prune)

  double screen_cost(std::size_t t) const {
    return kScreenHeadCost * double(plans[t].retained.size() + !plans[t].aggregated.empty()) +
           kBoundCost;
  }
  // Seeds screened: every seed's screen against the seeds past the first round
  // that tight bounds spare.
  bool prunes_seeds(std::size_t t) const {
    const std::size_t first = dosa_seeds::first_round(k);
    return seeds > first &&
           (!enforced || double(seeds) * screen_cost(t) < double(seeds - first) * double(heads));
  }
  // The seeds scored, every key screened (the seeds too where they are screened),
  // the survivors of those that are not seeds (at `survivor_rate`).
  bool pays(std::size_t t, double survivor_rate, double seeds_scored) const {
    const std::size_t others = keys - seeds;
    const double screened = double(others + (prunes_seeds(t) ? seeds : 0));
    return !enforced || seeds_scored * double(heads) + screened * screen_cost(t) +
                                double(others) * survivor_rate * double(heads) <
                            kPays * double(keys) * double(heads);
  }
  // Before anything is scored: the seeds' first round only, or all of them.
  bool pays_at_first(std::size_t t) const {
    return pays(t, 0, double(prunes_seeds(t) ? dosa_seeds::first_round(k) : seeds));
  }
};

}  // namespace aether::cpu::dosa_cost
