// A DoSA query's seeds on the CPU (impl/cpu/dosa.cpp): their top-K in the total
// order and tau, the K-th best seed score, either from every seed scored in full
// or from the seeds their bounds cannot rule out.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace aether::cpu::dosa_seeds {

using Scored = std::pair<float, std::int32_t>;  // (score, id)

// The total order: higher score first, then lower id.
constexpr auto before = [](const Scored& a, const Scored& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
};

// The k best of `chosen` in the total order, in any order, the k-th best last (the
// order is total, so the set is the one a sort would keep; linear, not k log k).
inline void keep_best(std::vector<Scored>& chosen, std::size_t k) {
  std::nth_element(chosen.begin(), chosen.begin() + std::ptrdiff_t(k - 1), chosen.end(), before);
  chosen.resize(k);
}

// Seeds scored first when the bounds order them: K and an eighth more, so that a
// few seeds whose bounds overrate them leave the K best in the first round.
inline std::size_t first_round(std::size_t k) { return k + k / 8; }

// The seeds' top-K into `chosen` (the K-th best last), scoring only the seeds the
// bounds cannot rule out: the first_round(k) of highest bound U, whose K-th best
// score is t, then every other seed with U >= t. A seed left out has s <= U < t,
// and at least K scored seeds score >= t: it is outside the seeds' top-K, ties
// included, and every seed scoring >= t was scored, so the K-th best of the scored
// seeds, tau, is the K-th best of all of them (docs/dosa.md). `score(ids, out)`
// scores seeds in full. Returns the number of seeds scored.
template <class ScoreFn>
std::size_t seeds_top_k(std::span<const std::int32_t> seeds, std::span<const double> bounds,
                        std::size_t k, ScoreFn&& score, std::vector<Scored>& chosen) {
  thread_local std::vector<std::size_t> order;
  thread_local std::vector<std::int32_t> ids;
  thread_local std::vector<float> scores;
  order.resize(seeds.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  const std::size_t first = std::min(first_round(k), seeds.size());
  std::nth_element(order.begin(), order.begin() + std::ptrdiff_t(first - 1), order.end(),
                   [&](std::size_t a, std::size_t b) { return bounds[a] > bounds[b]; });
  chosen.clear();
  const auto score_into_chosen = [&](std::span<const std::size_t> positions) {
    ids.clear();
    for (std::size_t i : positions) ids.push_back(seeds[i]);
    scores.resize(ids.size());
    score(std::span<const std::int32_t>(ids), std::span<float>(scores));
    for (std::size_t i = 0; i < ids.size(); ++i) chosen.emplace_back(scores[i], ids[i]);
    keep_best(chosen, k);
  };
  score_into_chosen(std::span(order).first(first));
  const float t = chosen.back().first;
  const auto rest = std::partition(order.begin() + std::ptrdiff_t(first), order.end(),
                                   [&](std::size_t i) { return bounds[i] >= double(t); });
  const auto again = std::span(order).subspan(first, std::size_t(rest - order.begin()) - first);
  if (!again.empty()) score_into_chosen(again);
  return first + again.size();
}

}  // namespace aether::cpu::dosa_seeds
