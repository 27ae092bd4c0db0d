#include "impl/cpu/dosa.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "impl/cpu/indexer.hpp"
#include "impl/cpu/key_rows.hpp"

namespace aether::cpu {

namespace {
namespace de = dosa_error;

// The first kProbe keys screened that are not seeds are a probe: their survivor
// rate decides whether the rest is screened or the query scored in full (a small
// probe wastes little when it says "in full").
constexpr std::size_t kProbe = 2048, kScreenBlock = 8192;
constexpr double kPays = 0.9;  // pruning must cost under this share of full scoring
// A key's screen, in full-score heads: each screen head about 1 (the batch's queries
// share each decoded tile) and the bound's own arithmetic about 9 (measured:
// bench/dosa_bench, docs/performance.md).
constexpr double kScreenHeadCost = 1, kBoundCost = 9;

// γ_n = n u / (1 - n u), u = 2^-24: n float roundings (docs/dosa.md)
double gamma(std::size_t n) { return double(n) * 0x1p-24 / (1 - double(n) * 0x1p-24); }
// x raised past the error of a few double roundings of quantities no larger than |x|
double up(double x) { return x + std::abs(x) * 0x1p-50; }
// ||v|| from above for a row of floats: squares and sum in double, then the sqrt
double norm_up(std::span<const float> v) {
  double s = 0;
  for (float x : v) s += double(x) * double(x);
  return std::sqrt(s) * (1 + double(v.size() + 4) * 0x1p-52);
}

// The keys of rows `ids`, contiguous, in keys' format.
struct Rows {
  std::vector<std::byte> bytes;
  IndexKeys view;
};
Rows gather(const IndexKeys& keys, std::span<const std::int32_t> ids) {
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  Rows rows;
  rows.bytes.resize(ids.size() * row_bytes);
  for (std::size_t i = 0; i < ids.size(); ++i)
    std::memcpy(rows.bytes.data() + i * row_bytes,
                keys.bytes.data() + std::size_t(ids[i]) * row_bytes, row_bytes);
  rows.view = {keys.format, rows.bytes, keys.dim};
  return rows;
}

// A query's screen (source 001 §2.2): the retained heads with their anchored heads'
// w_h beta_h folded into their weights (rounded up: each multiplies a ReLU), and
// a_A with weight -1, scored by the scorer; U = P + residual ||k|| + slack.
struct Screen {
  std::vector<float> queries, weights;
  double residual = 0, slack = 0;
};
Screen prepare(std::span<const float> q, std::span<const float> w, std::size_t dim,
               const DosaPlan& plan) {
  const std::size_t heads = w.size();
  const auto row = [&](std::size_t h) { return q.subspan(h * dim, dim); };
  Screen s;
  std::vector<double> folded(heads, 0);
  for (std::uint32_t j : plan.retained) folded[j] = w[j];
  double c = 0;  // Σ w_h ||d_h||, each from above
  for (const DosaAnchor& a : plan.anchors) {
    std::vector<float> d(row(a.head).begin(), row(a.head).end());
    // d_h in double, each product beta q exact, one rounding a subtraction (relative
    // to the running value): the error of ||d_h|| grows by 2^-52 a further anchor
    double dd = 0;
    for (std::size_t i = 0; i < dim; ++i) {
      double x =
          a.anchor == kNoAnchor ? double(d[i]) : double(d[i]) - double(a.beta) * row(a.anchor)[i];
      for (const DosaTerm& m : a.more) x -= double(m.beta) * row(m.anchor)[i];
      dd += x * x;
    }
    double spread = a.anchor == kNoAnchor ? 0 : double(a.beta) * norm_up(row(a.anchor));
    for (const DosaTerm& m : a.more) {
      spread += double(m.beta) * norm_up(row(m.anchor));
      folded[m.anchor] += double(w[a.head]) * double(m.beta);
    }
    c +=
        double(w[a.head]) * (std::sqrt(dd) * (1 + double(dim + 4) * 0x1p-52) +
                             double(a.more.size() + 2) * 0x1p-52 * (norm_up(row(a.head)) + spread));
    if (a.anchor != kNoAnchor) folded[a.anchor] += double(w[a.head]) * double(a.beta);
  }
  double total_weight = 0, error = 0, screen_magnitude = 0;  // Σ|w_h|, then the margins
  for (std::size_t h = 0; h < heads; ++h) {
    total_weight += std::abs(double(w[h]));
    error += std::abs(double(w[h])) * norm_up(row(h));
  }
  error *= gamma(dim + heads + 2);  // the scorer's own error on this key (full scoring)
  for (std::uint32_t j : plan.retained) {
    float f = float(folded[j]);
    if (double(f) < folded[j]) f = std::nextafter(f, std::numeric_limits<float>::infinity());
    s.queries.insert(s.queries.end(), row(j).begin(), row(j).end());
    s.weights.push_back(f);
    screen_magnitude += std::abs(double(f)) * norm_up(row(j));
  }
  if (!plan.aggregated.empty()) {
    std::vector<double> a(dim, 0);
    double spread = 0;  // Σ |w_h| ||q_h||, the scale of a_A's rounding
    for (std::uint32_t h : plan.aggregated) {
      for (std::size_t i = 0; i < dim; ++i) a[i] += std::abs(double(w[h])) * row(h)[i];
      spread += std::abs(double(w[h])) * norm_up(row(h));
    }
    for (double x : a) s.queries.push_back(float(x));
    s.weights.push_back(-1.0f);
    screen_magnitude += norm_up(std::span<const float>(s.queries).last(dim));
    // a rounded a_A deducts at most ||delta|| ||k|| more than the exact one
    error += (double(plan.aggregated.size()) * 0x1p-52 + 0x1p-24) * spread;
  }
  const std::size_t screen_heads = s.weights.size();
  error += gamma(dim + screen_heads + 2) * screen_magnitude;  // the screen's scorer error
  s.residual = up(up(up(c) * (1 + double(heads) * 0x1p-52)) + up(error));
  double screen_weight = 0;
  for (float f : s.weights) screen_weight += std::abs(double(f));
  // products and sums that underflow: at most 2^-149 each, times the weights after them
  s.slack = double((dim + 2) * (heads + screen_heads + 2)) * 0x1p-148 *
            (1 + total_weight + screen_weight);
  return s;
}

// ||k|| from above for every key (E4M3: the raw row's norm times its scale).
std::vector<double> key_norms(const IndexKeys& keys, std::size_t count) {
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  std::vector<double> norms(count);
  std::vector<float> e(keys.dim);
  for (std::size_t j = 0; j < count; ++j) {
    const std::byte* row = keys.bytes.data() + j * row_bytes;
    for (std::size_t d = 0; d < keys.dim; ++d) e[d] = element(keys, row, d);
    // plus 2^-66: elements whose squares underflow in the sum
    norms[j] = up(norm_up(e) * double(row_scale(keys, row))) + 0x1p-66;
  }
  return norms;
}

// U of one key from the screen's scorer value p: plus the residual term and the
// slacks, each rounding of the sum covered (docs/dosa.md).
double bound_of(const Screen& screen, float p, double norm, double scale) {
  const double term = up(screen.residual * norm) + screen.slack * std::max(1.0, scale);
  return double(p) + term + 0x1p-148 + (std::abs(double(p)) + term) * 0x1p-50;
}

// U of every row of `block` (contiguous stored keys, their norms alongside).
void screen_bounds(const Screen& screen, const IndexKeys& block, std::span<const double> norms,
                   std::span<double> bound) {
  const std::size_t row_bytes = key_row_bytes(block.format, block.dim);
  std::vector<float> p(norms.size());
  (void)index_scores(screen.queries, screen.weights, block, p);
  for (std::size_t i = 0; i < norms.size(); ++i)
    bound[i] = bound_of(screen, p[i], norms[i],
                        double(row_scale(block, block.bytes.data() + i * row_bytes)));
}

// Rows [first, first + n) of contiguous stored keys.
IndexKeys rows_of(const IndexKeys& keys, std::size_t first, std::size_t n) {
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  return {keys.format, keys.bytes.subspan(first * row_bytes, n * row_bytes), keys.dim};
}

Status<DosaError> check_plan(std::span<const float> w, const DosaPlan& plan) {
  const std::size_t heads = w.size();
  std::vector<char> placed(heads, 0), retained(heads, 0);
  const auto place = [&](std::uint32_t h) -> bool {
    if (h >= heads || placed[h]) return false;
    return placed[h] = 1;
  };
  for (std::uint32_t h : plan.retained)
    if (!place(h))
      return de::BadPlan{h};
    else
      retained[h] = 1;
  const auto anchored = [&](std::uint32_t j, float beta) {
    return beta >= 0 && std::isfinite(beta) && j < heads && retained[j];
  };
  for (const DosaAnchor& a : plan.anchors) {
    if (!place(a.head) || !(w[a.head] > 0) || !(a.beta >= 0) || !std::isfinite(a.beta) ||
        (a.anchor != kNoAnchor && !anchored(a.anchor, a.beta)))
      return de::BadPlan{a.head};
    for (const DosaTerm& m : a.more)
      if (!anchored(m.anchor, m.beta)) return de::BadPlan{a.head};
  }
  for (std::uint32_t h : plan.aggregated)
    if (!place(h) || !(w[h] < 0)) return de::BadPlan{h};
  for (std::uint32_t h = 0; h < heads; ++h)
    if (w[h] > 0 && !placed[h]) return de::BadPlan{h};
  return Ok{};
}

// (score, id) in the total order: higher score first, then lower id
bool before(const std::pair<float, std::int32_t>& a, const std::pair<float, std::int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
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
  std::vector<char> is_seed(count, 0);
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (seeds[i] < 0 || std::size_t(seeds[i]) >= count || is_seed[std::size_t(seeds[i])])
      return de::BadSeed{i, seeds[i]};
    is_seed[std::size_t(seeds[i])] = 1;
  }
  if (plans.size() != query_count) return de::ShapeMismatch{query_count, plans.size()};
  for (std::size_t t = 0; t < query_count; ++t)
    if (auto st = check_plan(weights.subspan(t * heads, heads), plans[t]); !st.ok()) return st;
  if (count > k && seeds.size() < k) return de::TooFewSeeds{seeds.size(), k};
  if (out.size() != query_count * k) return de::ShapeMismatch{query_count * k, out.size()};

  DosaStats local;
  const std::size_t others = count - seeds.size();
  // The screen reads the keys in place, in contiguous blocks, seeds included (their
  // bounds unused: less than gathering the others); norms once for the batch.
  const Rows seed_rows = gather(keys, seeds);
  std::vector<double> norms(count);
  std::vector<char> normed(count / kProbe + 2, 0);  // by block start / kProbe
  const auto norms_of = [&](std::size_t first, std::size_t n) {
    if (!normed[first / kProbe]) {
      const auto part = key_norms(rows_of(keys, first, n), n);
      std::copy(part.begin(), part.end(), norms.begin() + std::ptrdiff_t(first));
      normed[first / kProbe] = 1;
    }
    return std::span<const double>(norms).subspan(first, n);
  };
  const auto query = [&](std::size_t t) { return queries.subspan(t * heads * dim, heads * dim); };
  const auto weight = [&](std::size_t t) { return weights.subspan(t * heads, heads); };
  const auto pays = [&](std::size_t t, double survivor_rate) {
    const double screen_heads = double(plans[t].retained.size() + !plans[t].aggregated.empty());
    return !options.fall_back_when_unpaid ||
           double(seeds.size()) * double(heads) +
                   double(count) * (kScreenHeadCost * screen_heads + kBoundCost) +
                   double(others) * survivor_rate * double(heads) <
               kPays * double(count) * double(heads);
  };
  // A group of queries screened together: the seeds scored in one batched call, each
  // block of keys decoded once for all of them (index_scores_batch). A query whose
  // probe (its first kProbe screened keys that are not seeds) says the screen does
  // not pay leaves the group; it is returned, to be scored in full.
  struct Member {
    std::size_t t;
    float tau = 0;
    std::vector<std::pair<float, std::int32_t>> chosen;
    Screen screen;
    std::vector<std::int32_t> survivors;
    std::size_t screened = 0;
    bool judged = false, paid = true;
  };
  const auto screen_group = [&](std::span<const std::size_t> group) {
    std::vector<Member> members;
    std::vector<float> group_queries, group_weights;
    for (std::size_t t : group) {
      members.push_back({t});
      group_queries.insert(group_queries.end(), query(t).begin(), query(t).end());
      group_weights.insert(group_weights.end(), weight(t).begin(), weight(t).end());
    }
    std::vector<float> seed_scores(group.size() * seeds.size());
    (void)index_scores_batch(group_queries, group_weights, group.size(), seed_rows.view,
                             seed_scores);
    std::size_t widest = 0;  // screens padded to one width with zero heads (exact zeros)
    for (std::size_t m = 0; m < members.size(); ++m) {
      Member& q = members[m];
      for (std::size_t i = 0; i < seeds.size(); ++i)
        q.chosen.emplace_back(seed_scores[m * seeds.size() + i], seeds[i]);
      std::partial_sort(q.chosen.begin(), q.chosen.begin() + std::ptrdiff_t(k), q.chosen.end(),
                        before);
      q.chosen.resize(k);
      q.tau = q.chosen.back().first;  // the K-th best seed score
      q.screen = prepare(query(q.t), weight(q.t), dim, plans[q.t]);
      widest = std::max(widest, q.screen.weights.size());
    }
    std::vector<float> p;
    for (std::size_t first = 0, n = 0; first < count; first += n) {
      n = std::min(first == 0 ? kProbe : kScreenBlock, count - first);
      std::vector<Member*> active;
      std::vector<float> sq, sw;
      for (Member& q : members) {
        if (!q.paid) continue;
        active.push_back(&q);
        sq.insert(sq.end(), q.screen.queries.begin(), q.screen.queries.end());
        sq.resize(active.size() * widest * dim, 0.0f);
        sw.insert(sw.end(), q.screen.weights.begin(), q.screen.weights.end());
        sw.resize(active.size() * widest, 0.0f);
      }
      if (active.empty()) break;
      const IndexKeys block = rows_of(keys, first, n);
      const auto block_norms = norms_of(first, n);
      p.resize(active.size() * n);
      (void)index_scores_batch(sq, sw, active.size(), block, p);
      for (std::size_t m = 0; m < active.size(); ++m) {
        Member& q = *active[m];
        for (std::size_t i = 0; i < n; ++i) {
          if (is_seed[first + i]) continue;
          ++q.screened;
          const double scale = double(row_scale(block, block.bytes.data() + i * row_bytes));
          if (bound_of(q.screen, p[m * n + i], block_norms[i], scale) >= double(q.tau))
            q.survivors.push_back(std::int32_t(first + i));
        }
        if (!q.judged && q.screened >= kProbe) {
          q.judged = true;
          q.paid = pays(q.t, double(q.survivors.size()) / double(q.screened));
        }
      }
    }
    std::vector<std::size_t> unpaid;
    for (Member& q : members) {
      if (!q.paid) {
        unpaid.push_back(q.t);
        continue;
      }
      local.screened += q.screened;
      local.survivors += q.survivors.size();
      const Rows survivor_rows = gather(keys, q.survivors);
      std::vector<float> scores(q.survivors.size());
      (void)index_scores(query(q.t), weight(q.t), survivor_rows.view, scores);
      for (std::size_t i = 0; i < q.survivors.size(); ++i)
        if (scores[i] >= q.tau) q.chosen.emplace_back(scores[i], q.survivors[i]);
      std::partial_sort(q.chosen.begin(), q.chosen.begin() + std::ptrdiff_t(k), q.chosen.end(),
                        before);
      const auto lanes = out.subspan(q.t * k, k);
      for (std::size_t i = 0; i < k; ++i) lanes[i] = q.chosen[i].second;
      std::sort(lanes.begin(), lanes.end());
    }
    return unpaid;
  };
  std::vector<std::size_t> screened_queries, in_full;
  for (std::size_t t = 0; t < query_count; ++t)
    (count <= k || !pays(t, 0) ? in_full : screened_queries).push_back(t);
  if (!screened_queries.empty()) {
    // the first query alone, as the batch's probe: if its screen does not pay, nor
    // do the others' (their seeds are not scored for nothing)
    const auto first_unpaid = screen_group(std::span(screened_queries).first(1));
    const auto rest = std::span<const std::size_t>(screened_queries).subspan(1);
    if (!first_unpaid.empty()) {
      in_full.push_back(screened_queries[0]);
      in_full.insert(in_full.end(), rest.begin(), rest.end());
    } else {
      const auto unpaid = screen_group(rest);
      in_full.insert(in_full.end(), unpaid.begin(), unpaid.end());
    }
  }
  if (!in_full.empty()) {  // scored in full, together
    std::vector<float> full_queries, full_weights, scores(in_full.size() * count);
    for (std::size_t t : in_full) {
      full_queries.insert(full_queries.end(), query(t).begin(), query(t).end());
      full_weights.insert(full_weights.end(), weight(t).begin(), weight(t).end());
    }
    (void)index_scores_batch(full_queries, full_weights, in_full.size(), keys, scores);
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
  screen_bounds(prepare(query, weights, keys.dim, plan), keys, key_norms(keys, out.size()), out);
}

}  // namespace aether::cpu
