// DoSA's preparation and decode on the CPU (impl/cpu/dosa.hpp): the plan rule, its
// sample, the cold prior, and the decode path over full scores. The screen and the
// pruned top-k are in dosa.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "impl/cpu/dosa.hpp"
#include "impl/cpu/indexer.hpp"
#include "impl/cpu/key_rows.hpp"
#include "impl/dosa_ids.hpp"

namespace aether::cpu {

namespace {
namespace de = dosa_error;

// (score, id) in the total order: higher score first, then lower id
bool before(const std::pair<float, std::int32_t>& a, const std::pair<float, std::int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// The largest float beta with beta n <= p (p >= 0, n > 0), each test exact (fma).
float beta_below(double p, double n) {
  float beta = float(p / n);
  while (std::fma(double(beta), n, -p) > 0) beta = std::nextafter(beta, 0.0f);
  for (float next = std::nextafter(beta, std::numeric_limits<float>::max());
       std::fma(double(next), n, -p) <= 0;
       next = std::nextafter(next, std::numeric_limits<float>::max()))
    beta = next;
  return beta;
}

// out: the row's top-k lanes (finite scores, K lanes: nothing it refuses). Kept out
// of decode_topk's body, whose list path ran 0.025 ms slower with it inlined there.
[[gnu::noinline]] Status<DosaError> rank_the_row(std::span<const float> scores, std::size_t k,
                                                 std::span<std::int32_t> out) {
  const std::int32_t end[] = {std::int32_t(scores.size())};
  (void)valid_prefix_topk(scores, scores.size(), end, k, out);
  return Ok{};
}
}  // namespace

Status<DosaError> decode_topk(std::span<const float> scores, std::span<const std::int32_t> recent,
                              std::size_t k, std::span<std::int32_t> out) {
  for (std::size_t i = 0; i < scores.size(); ++i)
    if (!std::isfinite(scores[i])) return de::NonFiniteInput{3, i};
  if (const std::size_t i = impl::first_bad_id(recent, scores.size()); i < recent.size())
    return de::BadSeed{i, recent[i]};
  const bool prune = scores.size() > k;
  if (prune && recent.size() < k) return de::TooFewSeeds{recent.size(), k};
  if (out.size() != k) return de::ShapeMismatch{k, out.size()};
  float tau = -std::numeric_limits<float>::infinity();
  if (prune) {
    std::vector<float> recent_scores;
    for (std::int32_t j : recent) recent_scores.push_back(scores[std::size_t(j)]);
    std::nth_element(recent_scores.begin(), recent_scores.begin() + std::ptrdiff_t(k - 1),
                     recent_scores.end(), std::greater<>());
    tau = recent_scores[k - 1];
  }
  std::size_t listed = 0;  // counted first: the list is made in one allocation
  for (const float x : scores) listed += x >= tau;
  // Past a quarter of a long row, ranking the list costs more than the row's own
  // top-k (36005 of 131072 listed: 0.72 ms a call against the top-k's 0.35,
  // docs/dosa.md), which gives the same lanes.
  if (listed > decode_list_limit(scores.size())) return rank_the_row(scores, k, out);
  std::vector<std::pair<float, std::int32_t>> ranked;  // only keys at or above tau
  ranked.reserve(listed);
  for (std::size_t j = 0; j < scores.size(); ++j)
    if (scores[j] >= tau) ranked.emplace_back(scores[j], std::int32_t(j));
  // The best n under the total order as a set (out lists ids ascending), in linear time.
  const std::size_t n = std::min(k, ranked.size());
  if (n > 0 && n < ranked.size())
    std::nth_element(ranked.begin(), ranked.begin() + std::ptrdiff_t(n - 1), ranked.end(), before);
  for (std::size_t i = 0; i < k; ++i) out[i] = i < n ? ranked[i].second : -1;
  std::sort(out.begin(), out.begin() + std::ptrdiff_t(n));
  return Ok{};
}

std::vector<std::int32_t> cold_prior_seeds(std::span<const float> queries,
                                           std::span<const float> weights, std::size_t query_count,
                                           const IndexKeys& keys, std::size_t k,
                                           std::size_t seed_count) {
  const std::size_t heads = query_count ? weights.size() / query_count : 0, dim = keys.dim;
  const std::size_t row_bytes = key_row_bytes(keys.format, dim);
  const std::size_t count = row_bytes ? keys.bytes.size() / row_bytes : 0;
  std::vector<std::uint32_t> hits(count, 0);
  std::vector<float> scores(count);
  std::vector<std::int32_t> lanes(k);
  std::size_t last = query_count;  // representatives, each once
  for (std::size_t i = 0; i < 4 && query_count > 0; ++i) {
    const std::size_t t = (2 * i + 1) * query_count / 8;
    if (t == last) continue;
    last = t;
    (void)index_scores(queries.subspan(t * heads * dim, heads * dim),
                       weights.subspan(t * heads, heads), keys, scores);
    (void)valid_prefix_topk(scores, count, std::vector<std::int32_t>{std::int32_t(count)}, k,
                            lanes);
    for (std::int32_t j : lanes)
      if (j >= 0) ++hits[std::size_t(j)];
  }
  std::vector<std::int32_t> seeds(count);
  std::iota(seeds.begin(), seeds.end(), 0);
  const std::size_t n = std::min(seed_count, count);
  std::stable_sort(seeds.begin(), seeds.end(), [&](std::int32_t a, std::int32_t b) {
    return hits[std::size_t(a)] > hits[std::size_t(b)];
  });
  seeds.resize(n);
  std::sort(seeds.begin(), seeds.end());
  return seeds;
}

std::vector<std::int32_t> plan_sample(std::span<const std::int32_t> seeds) {
  const std::size_t n = std::min<std::size_t>(128, seeds.size());
  std::vector<std::int32_t> sample;
  for (std::size_t i = 0; i < n; ++i) sample.push_back(seeds[i * seeds.size() / n]);
  return sample;
}

DosaPlan plan_heads(std::span<const float> queries, std::span<const float> weights,
                    const IndexKeys& keys, std::size_t budget, std::span<const std::int32_t> sample,
                    std::size_t anchors) {
  const std::size_t heads = weights.size(), dim = keys.dim;
  const auto row = [&](std::size_t h) { return queries.subspan(h * dim, dim); };
  const auto dot = [&](std::span<const float> a, std::span<const float> b) {
    double s = 0;
    for (std::size_t i = 0; i < dim; ++i) s += double(a[i]) * double(b[i]);
    return s;
  };
  std::vector<std::uint32_t> order(heads);
  std::iota(order.begin(), order.end(), 0u);
  const auto rank = [&](std::uint32_t h) {
    return double(weights[h]) * double(weights[h]) * dot(row(h), row(h));
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return rank(a) > rank(b); });
  DosaPlan plan;
  plan.retained.assign(order.begin(), order.begin() + std::ptrdiff_t(std::min(budget, heads)));
  std::sort(plan.retained.begin(), plan.retained.end());
  std::vector<char> kept(heads, 0);
  for (std::uint32_t h : plan.retained) kept[h] = 1;
  const std::size_t row_bytes = key_row_bytes(keys.format, dim);
  std::vector<float> sample_keys;  // a zero E4M3 scale zeroes the row: active nowhere
  for (std::int32_t s : sample) {
    const std::byte* key = keys.bytes.data() + std::size_t(s) * row_bytes;
    for (std::size_t d = 0; d < dim; ++d)
      sample_keys.push_back(row_scale(keys, key) > 0 ? element(keys, key, d) : 0.0f);
  }
  for (std::uint32_t h = 0; h < heads; ++h) {
    if (kept[h]) continue;
    if (weights[h] > 0) {
      // the greatest p²/n, compared as p² n' > p'² n (exact on the integer grid)
      DosaAnchor best{h, kNoAnchor, 0};
      double best_p = 0, best_n = 1;
      for (std::uint32_t j : plan.retained) {
        const double nj = dot(row(j), row(j)), p = std::max(0.0, dot(row(h), row(j)));
        if (nj == 0) continue;
        if (best.anchor == kNoAnchor || p * p * best_n > best_p * best_p * nj)
          best = {h, j, beta_below(p, nj)}, best_p = p, best_n = nj;
      }
      // Further anchors, one at a time (nonnegative matching pursuit): the retained
      // head whose nonnegative multiple removes most of what is left.
      std::vector<double> left(row(h).begin(), row(h).end());
      if (best.anchor != kNoAnchor)
        for (std::size_t i = 0; i < dim; ++i) left[i] -= double(best.beta) * row(best.anchor)[i];
      for (std::size_t more = 1; more < anchors; ++more) {
        DosaTerm pick{0, 0};
        double removed = 0;
        for (std::uint32_t j : plan.retained) {
          const double nj = dot(row(j), row(j));
          double p = 0;
          for (std::size_t i = 0; i < dim; ++i) p += left[i] * double(row(j)[i]);
          if (nj == 0 || p <= 0) continue;
          const float beta = beta_below(p, nj);
          const double gain = double(beta) * (2 * p - double(beta) * nj);
          if (gain > removed) pick = {j, beta}, removed = gain;
        }
        if (removed <= 0) break;
        best.more.push_back(pick);
        for (std::size_t i = 0; i < dim; ++i) left[i] -= double(pick.beta) * row(pick.anchor)[i];
      }
      plan.anchors.push_back(best);
    } else if (weights[h] < 0 && !sample.empty()) {
      std::size_t active = 0;
      for (std::size_t s = 0; s < sample.size(); ++s)
        active += dot(row(h), std::span<const float>(sample_keys).subspan(s * dim, dim)) > 0;
      if (2 * active >= sample.size()) plan.aggregated.push_back(h);
    }
  }
  return plan;
}

}  // namespace aether::cpu
