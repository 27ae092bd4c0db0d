#include "impl/cpu/dosa.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "impl/cpu/dosa_cost.hpp"
#include "impl/cpu/dosa_rows.hpp"
#include "impl/cpu/dosa_seeds.hpp"
#include "impl/cpu/indexer.hpp"
#include "impl/cpu/key_rows.hpp"
#include "impl/cpu/parallel.hpp"
#include "impl/dosa_ids.hpp"
#include "impl/dosa_screen.hpp"

namespace aether::cpu {

namespace {
namespace de = dosa_error;
using dosa_rows::key_norms;
using dosa_seeds::keep_best;
using dosa_seeds::Scored;

// The first kProbe keys screened that are not seeds are a probe: their survivor
// rate decides whether the rest is screened or the query scored in full (a small
// probe wastes little when it says "in full").
constexpr std::size_t kProbe = 2048, kScreenBlock = 8192;
// A key's bound test in for_each_row's elements (about a nanosecond each).
constexpr std::size_t kBoundElements = 2;

using dosa_screen::bound_of;
using dosa_screen::Screen;

// The CPU scorer's arithmetic (docs/dosa.md): D + H + 2 float roundings a key,
// a_A stored as floats.
Screen prepare(std::span<const float> q, std::span<const float> w, std::size_t dim,
               const DosaPlan& plan) {
  return dosa_screen::prepare(
      q, w, dim, plan, [](std::size_t heads, std::size_t d) { return d + heads + 2; },
      [](double x) { return float(x); });
}

// U of every stored key (their norms alongside).
void screen_bounds(const Screen& screen, const IndexKeys& block, std::span<const double> norms,
                   std::span<double> bound) {
  const std::size_t row_bytes = key_row_bytes(block.format, block.dim);
  std::vector<float> p(norms.size());
  (void)index_scores(screen.queries, screen.weights, block, p);
  for (std::size_t i = 0; i < norms.size(); ++i)
    bound[i] = bound_of(screen.terms, p[i], norms[i],
                        double(row_scale(block, block.bytes.data() + i * row_bytes)));
}

}  // namespace

Status<DosaError> dosa_topk(std::span<const float> queries, std::span<const float> weights,
                            std::size_t query_count, const IndexKeys& keys, std::size_t k,
                            std::span<const std::int32_t> seeds, std::span<const DosaPlan> plans,
                            std::span<std::int32_t> out, const DosaOptions& options,
                            DosaStats* stats) {
  const std::size_t heads = query_count ? weights.size() / query_count : 0, dim = keys.dim;
  if (heads * query_count != weights.size())
    return de::ShapeMismatch{heads * query_count, weights.size()};
  // the scorer's checks, in its order: shape, queries, weights (flat: a batch is
  // one long query for them), keys
  if (auto e = check_score_inputs(queries, weights, keys)) {
    if (auto* m = std::get_if<indexer_error::ShapeMismatch>(&*e)) return *m;
    return std::get<indexer_error::NonFiniteInput>(*e);
  }
  const std::size_t row_bytes = key_row_bytes(keys.format, dim);
  const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0;
  if (const std::size_t i = impl::first_bad_id(seeds, count); i < seeds.size())
    return de::BadSeed{i, seeds[i]};
  if (plans.size() != query_count) return de::ShapeMismatch{query_count, plans.size()};
  for (std::size_t t = 0; t < query_count; ++t)
    if (auto st = dosa_screen::check_plan(weights.subspan(t * heads, heads), plans[t]); !st.ok())
      return st;
  if (count > k && seeds.size() < k) return de::TooFewSeeds{seeds.size(), k};
  if (out.size() != query_count * k) return de::ShapeMismatch{query_count * k, out.size()};
  if (k == 0) {  // nothing to select (and no K-th seed to take tau from)
    if (stats != nullptr) *stats = {};
    return Ok{};
  }

  DosaStats local;
  // The seeds are screened or scored as a whole (choose_seeds); the screen reads the
  // other keys (ascending) in chunks. Every key is read where it is stored
  // (index_scores_at: no copy, no second scan for NaN; docs/performance.md). Norms
  // once for the batch.
  std::vector<char> is_seed(count, 0);
  for (const std::int32_t j : seeds) is_seed[std::size_t(j)] = 1;
  std::vector<std::int32_t> others;
  others.reserve(count - seeds.size());
  for (std::size_t i = 0; i < count; ++i)
    if (!is_seed[i]) others.push_back(std::int32_t(i));
  std::vector<double> norms(others.size());
  std::vector<char> normed(others.size() / kProbe + 2, 0);  // by chunk start / kProbe
  const auto norms_of = [&](std::size_t first, std::size_t n) {
    if (!normed[first / kProbe]) {
      const auto part = key_norms(keys, std::span<const std::int32_t>(others).subspan(first, n));
      std::copy(part.begin(), part.end(), norms.begin() + std::ptrdiff_t(first));
      normed[first / kProbe] = 1;
    }
    return std::span<const double>(norms).subspan(first, n);
  };
  const auto query = [&](std::size_t t) { return queries.subspan(t * heads * dim, heads * dim); };
  const auto weight = [&](std::size_t t) { return weights.subspan(t * heads, heads); };
  // Queries `ts` scored in full in one batched call (each tile decoded once for all
  // of them), over the keys at `ids` or, without them, every key, into out [|ts|, n].
  const auto score_in_full = [&](std::span<const std::size_t> ts,
                                 std::optional<std::span<const std::int32_t>> ids, std::size_t n,
                                 std::vector<float>& out) {
    std::vector<float> q, w;
    for (std::size_t t : ts) {
      q.insert(q.end(), query(t).begin(), query(t).end());
      w.insert(w.end(), weight(t).begin(), weight(t).end());
    }
    out.resize(ts.size() * n);
    if (ids)
      index_scores_at(q, w, ts.size(), keys, *ids, out);
    else
      (void)index_scores_batch(q, w, ts.size(), keys, out);
  };
  const dosa_cost::CostRule cost{plans,        heads, count,
                                 seeds.size(), k,     options.fall_back_when_unpaid};
  // A query's state through the screen. Its chunks of `others` (kProbe keys, then
  // kScreenBlock) are decoded once for every query due there (index_scores_batch);
  // after its first chunk (its probe) a query whose screen does not pay leaves, to
  // be scored in full.
  struct Member {
    std::size_t t;
    bool prunes_seeds;
    float tau = 0;
    std::vector<Scored> chosen;
    Screen screen;
    std::vector<std::int32_t> survivors;
    std::size_t screened = 0;  // keys of `others` screened: the next chunk's start
    std::size_t seeds_scored = 0;
    bool judged = false, paid = true;
  };
  // buffers reused by every step (a fresh one's pages fault in again)
  std::vector<float> seed_scores, p, sq, sw;
  // Screens of `active`, stacked and padded with zero heads (exact zeros) to one width
  // the scorer runs at its full pace (17 screen heads, budget 16 and a_A, run as 18).
  const auto stack_screens = [&](std::span<Member* const> active) {
    std::size_t widest = 0;
    for (const Member* q : active) widest = std::max(widest, q->screen.weights.size());
    widest = index_scores_paced_heads(widest);
    sq.assign(active.size() * widest * dim, 0.0f);
    sw.assign(active.size() * widest, 0.0f);
    for (std::size_t m = 0; m < active.size(); ++m) {
      std::ranges::copy(active[m]->screen.queries, sq.begin() + std::ptrdiff_t(m * widest * dim));
      std::ranges::copy(active[m]->screen.weights, sw.begin() + std::ptrdiff_t(m * widest));
    }
  };
  std::vector<double> seed_norms;
  // The group's seeds: scored in one batched call for the members that score them
  // all, screened in one for the others (dosa_seeds::seeds_top_k then scores those
  // the bounds keep); each member's seeds' top-K and tau on its own thread's share.
  const auto choose_seeds = [&](std::span<Member> group) {
    for_each_row(group.size(), heads * dim, [&](std::size_t m) {
      group[m].screen = prepare(query(group[m].t), weight(group[m].t), dim, plans[group[m].t]);
    });
    std::vector<std::size_t> scoring_all;  // their queries
    std::vector<Member*> screening;
    std::vector<std::size_t> row(group.size());  // a member's row in its call's output
    for (std::size_t m = 0; m < group.size(); ++m) {
      if (group[m].prunes_seeds) {
        row[m] = screening.size();
        screening.push_back(&group[m]);
      } else {
        row[m] = scoring_all.size();
        scoring_all.push_back(group[m].t);
      }
    }
    if (!scoring_all.empty()) score_in_full(scoring_all, seeds, seeds.size(), seed_scores);
    if (!screening.empty()) {
      if (seed_norms.empty()) seed_norms = key_norms(keys, seeds);
      stack_screens(screening);
      p.resize(screening.size() * seeds.size());
      index_scores_at(sq, sw, screening.size(), keys, seeds, p);
    }
    for_each_row(group.size(), seeds.size() + heads * dim, [&](std::size_t m) {
      Member& q = group[m];
      const std::size_t r = row[m] * seeds.size();
      if (!q.prunes_seeds) {
        q.chosen.clear();
        for (std::size_t i = 0; i < seeds.size(); ++i)
          q.chosen.emplace_back(seed_scores[r + i], seeds[i]);
        keep_best(q.chosen, k);
        q.seeds_scored = seeds.size();
      } else {
        thread_local std::vector<double> bounds;
        bounds.resize(seeds.size());
        for (std::size_t i = 0; i < seeds.size(); ++i)
          bounds[i] = bound_of(
              q.screen.terms, p[r + i], seed_norms[i],
              double(row_scale(keys, keys.bytes.data() + std::size_t(seeds[i]) * row_bytes)));
        const auto score = [&](std::span<const std::int32_t> ids, std::span<float> scores) {
          index_scores_at(query(q.t), weight(q.t), 1, keys, ids, scores);
        };
        q.seeds_scored = dosa_seeds::seeds_top_k(seeds, bounds, k, score, q.chosen);
      }
      q.tau = q.chosen.back().first;  // the K-th best seed score
    });
  };
  // The group's chunks starting before `until`, each for the members still paid
  // that stand at its start.
  const auto screen = [&](std::span<Member> group, std::size_t until) {
    for (std::size_t first = 0, n = 0; first < std::min(until, others.size()); first += n) {
      n = std::min(first == 0 ? kProbe : kScreenBlock, others.size() - first);
      std::vector<Member*> active;
      for (Member& q : group)
        if (q.paid && q.screened == first) active.push_back(&q);
      if (active.empty()) continue;
      stack_screens(active);
      const auto ids = std::span<const std::int32_t>(others).subspan(first, n);
      const auto chunk_norms = norms_of(first, n);
      p.resize(active.size() * n);
      index_scores_at(sq, sw, active.size(), keys, ids, p);
      // each member's bounds on its own thread's share (a member's state is its own)
      for_each_row(active.size(), n * kBoundElements, [&](std::size_t m) {
        Member& q = *active[m];
        q.screened += n;
        for (std::size_t i = 0; i < n; ++i) {
          const double scale =
              double(row_scale(keys, keys.bytes.data() + std::size_t(ids[i]) * row_bytes));
          if (bound_of(q.screen.terms, p[m * n + i], chunk_norms[i], scale) >= double(q.tau))
            q.survivors.push_back(ids[i]);
        }
        if (!q.judged && q.screened >= kProbe) {
          q.judged = true;
          q.paid = cost.pays(q.t, double(q.survivors.size()) / double(q.screened),
                             double(q.seeds_scored));
        }
      });
    }
  };
  // Each paid member's survivors rescored and merged with its seeds' top-K on its
  // own thread's share; the unpaid returned, to be scored in full.
  const auto finish = [&](std::span<Member> group) {
    std::vector<std::size_t> unpaid;
    for (const Member& q : group) {
      if (!q.paid) {
        unpaid.push_back(q.t);
        continue;
      }
      local.screened += q.screened;
      local.survivors += q.survivors.size();
      local.seeds_scored += q.seeds_scored;
    }
    for_each_row(group.size(), 2 * k, [&](std::size_t m) {
      Member& q = group[m];
      if (!q.paid) return;
      // a chunk of survivors at a time through a buffer the thread reuses: all of them
      // at once, fresh, took 60 MB a query zeroed page by page where most keys survive
      // (forced pruning at L 131072 and 92% survivors, 8.7 s against 0.8 s in full)
      thread_local std::vector<float> scores;
      for (std::size_t at = 0; at < q.survivors.size(); at += kScreenBlock) {
        const auto ids = std::span<const std::int32_t>(q.survivors)
                             .subspan(at, std::min(kScreenBlock, q.survivors.size() - at));
        scores.resize(ids.size());
        index_scores_at(query(q.t), weight(q.t), 1, keys, ids, scores);
        for (std::size_t i = 0; i < ids.size(); ++i)
          if (scores[i] >= q.tau) q.chosen.emplace_back(scores[i], ids[i]);
        keep_best(q.chosen, k);
      }
      const auto lanes = out.subspan(q.t * k, k);
      for (std::size_t i = 0; i < k; ++i) lanes[i] = q.chosen[i].second;
      std::sort(lanes.begin(), lanes.end());
    });
    return unpaid;
  };
  std::vector<std::size_t> in_full;
  std::vector<Member> members;
  for (std::size_t t = 0; t < query_count; ++t)
    if (count <= k || !cost.pays_at_first(t))
      in_full.push_back(t);
    else
      members.push_back({t, cost.prunes_seeds(t)});
  if (!members.empty()) {
    // the first query's first chunk alone, as the batch's probe: if its screen does
    // not pay, nor do the others' (their seeds are not scored for nothing); if it
    // does, it joins the others from its second chunk on
    choose_seeds(std::span(members).first(1));
    screen(std::span(members).first(1), kProbe);
    if (!members[0].paid) {
      for (const Member& q : members) in_full.push_back(q.t);
    } else {
      choose_seeds(std::span(members).subspan(1));
      screen(members, others.size());
      const auto unpaid = finish(members);
      in_full.insert(in_full.end(), unpaid.begin(), unpaid.end());
    }
  }
  if (!in_full.empty()) {  // scored in full, together
    std::vector<float> scores;
    score_in_full(in_full, std::nullopt, count, scores);
    for (std::size_t i = 0; i < in_full.size(); ++i)
      (void)valid_prefix_topk(std::span(scores).subspan(i * count, count), count,
                              std::vector<std::int32_t>{std::int32_t(count)}, k,
                              out.subspan(in_full[i] * k, k));
    local.full_queries += in_full.size();
  }
  if (stats != nullptr) *stats = local;
  return Ok{};
}

void dosa_bounds(std::span<const float> query, std::span<const float> weights,
                 const IndexKeys& keys, const DosaPlan& plan, std::span<double> out) {
  std::vector<std::int32_t> every(out.size());
  std::iota(every.begin(), every.end(), 0);
  screen_bounds(prepare(query, weights, keys.dim, plan), keys, key_norms(keys, every), out);
}

}  // namespace aether::cpu
