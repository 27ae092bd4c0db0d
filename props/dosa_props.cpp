// Properties of DoSA (source 001): the model's bound is sound for every key and
// plan, the plan rule yields valid plans, and the pruned top-K is the top-K.
#include <algorithm>
#include <numeric>

#include "model/dosa.hpp"
#include "model/indexer.hpp"
#include "props/support/dosa_gen.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

using R = model::Rational;
using V = std::vector<std::int32_t>;

std::vector<R> exact_keys(const props::DosaCall& c) {
  std::vector<R> keys;
  for (float x : c.keys) keys.push_back(model::exact(x));
  return keys;
}

// The best min(K, L) of exact scores in the total order, ascending, -1 padded.
V plain_topk(const std::vector<R>& scores, std::size_t k) {
  V ids(scores.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    return scores[std::size_t(a)] > scores[std::size_t(b)] ||
           (scores[std::size_t(a)] == scores[std::size_t(b)] && a < b);
  });
  ids.resize(std::min(k, ids.size()));
  std::sort(ids.begin(), ids.end());
  ids.resize(k, -1);
  return ids;
}

// U >= s for every key, every valid plan: not (U < s).
AETHER_PROP(DosaModel, the_bound_is_at_least_the_score, "model", ()) {
  const props::DosaCall c = *props::gen_dosa_call();
  const auto keys = exact_keys(c);
  const auto scores = model::index_scores(c.queries, c.weights, c.keys, c.dim).value();
  const R residual = model::residual_coefficient(c.queries, c.weights, c.dim, c.plan);
  for (std::size_t j = 0; j < c.key_count(); ++j) {
    const auto u = model::upper_bound(
        c.queries, c.weights, std::span<const R>(keys).subspan(j * c.dim, c.dim), c.plan, residual);
    RC_ASSERT(!model::excluded(u, scores[j]));
  }
}

AETHER_PROP(DosaModel, the_plan_rule_splits_the_heads, "model", ()) {
  const props::DosaCall c = *props::gen_dosa_call();
  const auto keys = exact_keys(c);
  const auto budget = *rc::gen::inRange<std::size_t>(0, c.heads() + 2);
  const DosaPlan plan = model::plan_heads(c.queries, c.weights, c.dim, budget, keys);
  RC_ASSERT(model::check_plan(c.weights, plan).ok());
  RC_ASSERT(plan.retained.size() == std::min(budget, c.heads()));
}

// Exact: the pruned top-K is the top-K of the exact scores, ties included.
AETHER_PROP(DosaModel, the_pruned_topk_is_the_topk, "model", ()) {
  const props::DosaCall c = *props::gen_dosa_call();
  const auto pruned =
      model::dosa_topk(c.queries, c.weights, exact_keys(c), c.dim, c.k, c.seeds, c.plan);
  RC_ASSERT(pruned.ok());
  const auto scores = model::index_scores(c.queries, c.weights, c.keys, c.dim).value();
  RC_ASSERT(pruned.value() == plain_topk(scores, c.k));
}

// Decode: tau from recently selected keys ranks only keys at or above it, and the
// answer is the plain top-K.
AETHER_PROP(DosaModel, decode_ranks_only_keys_above_tau_and_agrees, "model", ()) {
  const props::DosaCall c = *props::gen_dosa_call();
  const auto exact_scores = model::index_scores(c.queries, c.weights, c.keys, c.dim).value();
  std::vector<float> scores;
  for (const R& s : exact_scores) scores.push_back(static_cast<float>(s.convert_to<double>()));
  const auto got = model::decode_topk(scores, c.seeds, c.k);
  RC_ASSERT(got.ok());
  const auto want =
      model::valid_prefix_topk(scores, scores.size(), V{std::int32_t(scores.size())}, c.k);
  RC_ASSERT(got.value() == want.value());
}

}  // namespace
}  // namespace aether
