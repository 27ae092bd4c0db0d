// Properties of the causal selectors (model only: they are baselines, not kernels).
#include <algorithm>
#include <set>

#include "model/attention.hpp"
#include "props/support/property.hpp"

namespace aether::model {
namespace {

namespace gen = rc::gen;
using V = std::vector<std::int32_t>;

void check_causal_distinct_sorted(const V& v, std::size_t row) {
  RC_ASSERT(std::is_sorted(v.begin(), v.end()));
  RC_ASSERT(std::adjacent_find(v.begin(), v.end()) == v.end());
  for (auto x : v) RC_ASSERT(x >= 0 && std::size_t(x) <= row);
}

AETHER_PROP(AttentionModel, random_draws_exactly_min_budget_row_plus_one_keys, "model", ()) {
  const auto row = *gen::inRange<std::size_t>(0, 3000);
  const auto budget = *gen::inRange<std::size_t>(0, 400);
  const auto seed = *gen::arbitrary<std::uint64_t>();
  const V v = select_row(Random{budget, seed}, row).value();
  check_causal_distinct_sorted(v, row);
  RC_ASSERT(v.size() == std::min(budget, row + 1));
  RC_ASSERT(v == select_row(Random{budget, seed}, row).value());
}

AETHER_PROP(AttentionModel, local_is_the_suffix_of_dense, "model", ()) {
  const auto row = *gen::inRange<std::size_t>(0, 3000);
  const auto window = *gen::inRange<std::size_t>(0, 4000);
  const V local = select_row(Local{window}, row).value();
  const V dense = select_row(Dense{}, row).value();
  check_causal_distinct_sorted(local, row);
  RC_ASSERT(local.size() == std::min(window, row + 1));
  RC_ASSERT(std::equal(local.begin(), local.end(), dense.end() - std::ptrdiff_t(local.size())));
}

AETHER_PROP(AttentionModel, learned_top_k_keeps_every_key_at_least_as_good, "model", ()) {
  const auto n = *gen::inRange<std::size_t>(1, 24);
  const auto k = *gen::inRange<std::size_t>(0, 30);
  const auto scores = *gen::container<std::vector<double>>(
      n * n, gen::map(gen::inRange(-4, 5), [](int x) { return double(x); }));
  const auto row = *gen::inRange<std::size_t>(0, n);
  const V v = select_row(LearnedTopK{k, n, scores}, row).value();
  check_causal_distinct_sorted(v, row);
  RC_ASSERT(v.size() == std::min(k, row + 1));
  const std::set<std::int32_t> chosen(v.begin(), v.end());
  for (std::size_t j = 0; j <= row; ++j)
    if (!chosen.contains(std::int32_t(j)))
      for (auto i : v) {
        const double si = scores[row * n + std::size_t(i)], sj = scores[row * n + j];
        RC_ASSERT(si > sj || (si == sj && std::size_t(i) < j));  // total order
      }
}

}  // namespace
}  // namespace aether::model
