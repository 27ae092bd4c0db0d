// Properties of DoSA (source 001): the model's bound is sound for every key and
// plan, the plan rule yields valid plans, and the pruned top-K is the top-K.
#include <algorithm>
#include <numeric>
#include <optional>

#include "impl/cpu/dosa.hpp"
#include "impl/cpu/indexer.hpp"
#include "model/dosa.hpp"
#include "model/indexer.hpp"
#include "props/support/agreement.hpp"
#include "props/support/cpu_threads.hpp"
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

// The CPU's float bound is at least the scorer's own score of every key (so no key
// that full scoring ranks is ever excluded), every format, every valid plan.
AETHER_PROP(DosaCpu, the_float_bound_is_at_least_the_scorers_score, "L2", ()) {
  const props::DosaCall c = *props::gen_dosa_call();
  std::vector<float> scores(c.key_count());
  RC_ASSERT(cpu::index_scores(c.queries, c.weights, c.stored(), scores).ok());
  std::vector<double> bounds(c.key_count());
  cpu::dosa_bounds(c.queries, c.weights, c.stored(), c.plan, bounds);
  for (std::size_t j = 0; j < c.key_count(); ++j) RC_ASSERT(bounds[j] >= double(scores[j]));
}

// One query's lanes by full scoring on the CPU: the scorer, then the top-k.
V cpu_full_topk(const std::vector<float>& q, const std::vector<float>& w, const IndexKeys& keys,
                std::size_t count, std::size_t k) {
  std::vector<float> scores(count);
  RC_ASSERT(cpu::index_scores(q, w, keys, scores).ok());
  V lanes(k);
  RC_ASSERT(cpu::valid_prefix_topk(scores, count, V{std::int32_t(count)}, k, lanes).ok());
  return lanes;
}

// L3: a batch of 1 to 3 queries sharing keys and seeds; every query's pruned lanes
// equal full scoring's, ids and order, bit for bit, on 1 to 3 threads taken even
// for the smallest work, or as a call's size decides.
AETHER_PROP(DosaCpu, the_pruned_topk_is_full_scorings_bit_for_bit, "L3", ()) {
  const props::DosaCall c = *props::gen_dosa_call();
  const std::size_t threads = *rc::gen::inRange<std::size_t>(0, 4);  // 0: as the size decides
  std::optional<props::ForcedThreads> forced;
  if (threads != 0) forced.emplace(threads);
  std::vector<float> queries = c.queries, weights = c.weights;
  std::vector<DosaPlan> plans{c.plan};
  const std::size_t extra = *rc::gen::inRange<std::size_t>(0, 3);
  for (std::size_t t = 0; t < extra; ++t) {  // more queries: the first one's heads rotated
    std::vector<float> q(c.queries.size());
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = c.queries[(i + (t + 1) * c.dim) % q.size()];
    queries.insert(queries.end(), q.begin(), q.end());
    weights.insert(weights.end(), c.weights.begin(), c.weights.end());
    plans.push_back(
        cpu::plan_heads(q, c.weights, c.stored(), *rc::gen::inRange<std::size_t>(0, c.heads() + 1),
                        model::plan_sample(c.seeds), *rc::gen::inRange<std::size_t>(1, 4)));
  }
  const std::size_t queries_count = plans.size();
  V out(queries_count * c.k, 77);
  cpu::DosaStats stats;
  const cpu::DosaOptions options{*rc::gen::inRange(0, 4) == 0};
  const auto st = cpu::dosa_topk(queries, weights, queries_count, c.stored(), c.k, c.seeds, plans,
                                 out, options, &stats);
  RC_ASSERT(st.ok());
  for (std::size_t t = 0; t < queries_count; ++t) {
    const std::vector<float> q(queries.begin() + std::ptrdiff_t(t * c.queries.size()),
                               queries.begin() + std::ptrdiff_t((t + 1) * c.queries.size()));
    RC_ASSERT(
        V(out.begin() + std::ptrdiff_t(t * c.k), out.begin() + std::ptrdiff_t((t + 1) * c.k)) ==
        cpu_full_topk(q, c.weights, c.stored(), c.key_count(), c.k));
  }
  // every pruned query scores at least K of its seeds and at most all of them
  const std::size_t pruned = queries_count - stats.full_queries;
  RC_ASSERT(stats.seeds_scored >= pruned * std::min(c.k, c.seeds.size()));
  RC_ASSERT(stats.seeds_scored <= pruned * c.seeds.size());
  RC_TAG(stats.full_queries == queries_count ? "every query scored in full" : "some query pruned");
  RC_TAG(stats.seeds_scored < pruned * c.seeds.size() ? "some seeds left unscored"
                                                      : "every seed scored");
}

// L1 on the integer grid, where every float operation is exact: the CPU's plan rule
// equals the model's, and the CPU's pruned lanes the model's.
AETHER_PROP(DosaCpu, agrees_with_the_model_on_the_grid, "L1", ()) {
  const props::DosaCall c =
      *rc::gen::suchThat(props::gen_dosa_call(), [](const props::DosaCall& d) { return d.grid; });
  const auto budget = *rc::gen::inRange<std::size_t>(0, c.heads() + 1);
  const auto sample = model::plan_sample(c.seeds);
  std::vector<R> sample_keys;
  for (std::int32_t s : sample)
    for (std::size_t d = 0; d < c.dim; ++d)
      sample_keys.push_back(model::exact(c.keys[std::size_t(s) * c.dim + d]));
  const DosaPlan plan = cpu::plan_heads(c.queries, c.weights, c.stored(), budget, sample);
  RC_ASSERT(plan == model::plan_heads(c.queries, c.weights, c.dim, budget, sample_keys));
  const std::vector<DosaPlan> plans{plan};
  props::check_pruned_topk_agreement(
      [&](auto query, auto weights, const IndexKeys& keys, std::size_t k, auto seeds, auto out) {
        return cpu::dosa_topk(query, weights, 1, keys, k, seeds, plans, out,
                              cpu::DosaOptions{false});
      },
      c, "cpu");
}

// The generator's promise (props/support/dosa_gen.hpp) that the L1 properties rest
// on: on the grid the CPU scorer's float scores are the model's exact ones.
AETHER_PROP(DosaGen, grid_scores_are_exact_in_float, "L1", ()) {
  const props::DosaCall c =
      *rc::gen::suchThat(props::gen_dosa_call(), [](const props::DosaCall& d) { return d.grid; });
  std::vector<float> scores(c.key_count());
  RC_ASSERT(cpu::index_scores(c.queries, c.weights, c.stored(), scores).ok());
  const auto exact = model::index_scores(c.queries, c.weights, c.keys, c.dim).value();
  for (std::size_t j = 0; j < c.key_count(); ++j) RC_ASSERT(model::exact(scores[j]) == exact[j]);
}

// L1 on the grid: the CPU's cold prior (representatives scored by the scorer and
// ranked by its top-k) picks the model's seeds.
AETHER_PROP(DosaCpu, the_cold_prior_is_the_models_on_the_grid, "L1", ()) {
  const props::DosaCall c =
      *rc::gen::suchThat(props::gen_dosa_call(), [](const props::DosaCall& d) { return d.grid; });
  const std::size_t batch = *rc::gen::inRange<std::size_t>(1, 9);
  std::vector<float> queries, weights;
  for (std::size_t t = 0; t < batch; ++t) {  // the first query's heads rotated
    for (std::size_t i = 0; i < c.queries.size(); ++i)
      queries.push_back(c.queries[(i + t * c.dim) % c.queries.size()]);
    weights.insert(weights.end(), c.weights.begin(), c.weights.end());
  }
  const auto seed_count = *rc::gen::inRange<std::size_t>(0, c.key_count() + 2);
  std::vector<std::vector<R>> rep_scores;
  for (std::size_t t : model::representative_queries(batch))
    rep_scores.push_back(
        model::index_scores(std::span(queries).subspan(t * c.queries.size(), c.queries.size()),
                            c.weights, c.stored())
            .value());
  RC_ASSERT(cpu::cold_prior_seeds(queries, weights, batch, c.stored(), c.k, seed_count) ==
            model::cold_prior_seeds(rep_scores, c.k, seed_count));
}

// L0: the CPU's decode path gives the model's lanes (the plain top-K) and its
// refusals, out untouched on a refusal (props::gen_decode_case: faults and ties).
AETHER_PROP(DosaCpu, decode_agrees_with_the_model, "L0", ()) {
  props::assert_decode_agrees(*props::gen_decode_case(), cpu::decode_topk);
}

// L0 refusals: the CPU refuses what the model refuses, with the same error, and
// leaves out untouched; where the model accepts, a wrong out length is refused.
AETHER_PROP(DosaCpu, refusals_agree_with_the_model, "L0", ()) {
  const props::DosaCall c = *props::gen_faulty_dosa_call();
  const auto want = model::dosa_topk(c.queries, c.weights, c.stored(), c.k, c.seeds, c.plan);
  const std::ptrdiff_t delta = want.ok() ? *rc::gen::element<std::ptrdiff_t>(-1, 1) : 0;
  V out(std::size_t(std::ptrdiff_t(c.k) + delta), 77);
  const std::vector<DosaPlan> plans{c.plan};
  const auto got = cpu::dosa_topk(c.queries, c.weights, 1, c.stored(), c.k, c.seeds, plans, out);
  if (!want.ok()) {
    RC_ASSERT(!got.ok());
    RC_ASSERT(got.error() == want.error());
  } else {
    RC_ASSERT(!got.ok());
    RC_ASSERT(got.error() == (DosaError{dosa_error::ShapeMismatch{c.k, out.size()}}));
  }
  RC_ASSERT(out == V(out.size(), 77));
}

}  // namespace
}  // namespace aether
