#include "model/attention.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace aether::model {

namespace {
namespace ae = attention_error;

// splitmix64 (Steele, Lea, Flood 2014): a fixed, portable stream.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // uniform on [0, n), n >= 1, by rejection of the biased low range
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t threshold = (0 - n) % n;
    for (;;)
      if (std::uint64_t r = next(); r >= threshold) return r % n;
  }
};

std::vector<std::int32_t> iota_range(std::size_t lo, std::size_t hi) {
  std::vector<std::int32_t> v(hi - lo);
  std::iota(v.begin(), v.end(), std::int32_t(lo));
  return v;
}
}  // namespace

// Floyd: for j = n-m .. n-1, draw t ∈ [0, j]; take t unless taken, else j.
std::vector<std::int32_t> seeded_sample(std::size_t n, std::size_t budget, std::uint64_t seed) {
  const std::size_t m = std::min(budget, n);
  SplitMix64 rng{seed ^ (0x5851f42d4c957f2dull * (n + 1))};
  std::set<std::int32_t> taken;
  for (std::size_t j = n - m; j < n; ++j) {
    const auto t = std::int32_t(rng.below(j + 1));
    taken.insert(taken.contains(t) ? std::int32_t(j) : t);
  }
  return {taken.begin(), taken.end()};
}

Result<std::vector<std::int32_t>, AttentionError> select_row(const Selector& selector,
                                                             std::size_t row) {
  const std::size_t n = row + 1;  // causal: keys [0, row]
  if (std::holds_alternative<Dense>(selector)) return iota_range(0, n);
  if (auto* local = std::get_if<Local>(&selector))
    return iota_range(n - std::min(local->window, n), n);
  if (auto* random = std::get_if<Random>(&selector))
    return seeded_sample(n, random->budget, random->seed);

  // Learned top-k: higher score first, then lower key index.
  const auto& learned = std::get<LearnedTopK>(selector);
  const std::size_t L = learned.context_len;
  if (learned.scores.size() != L * L) return ae::ScoresShapeMismatch{L * L, learned.scores.size()};
  if (row >= L) return ae::RowOutOfRange{row, L};
  const auto scores = learned.scores.subspan(row * L, n);
  for (std::size_t j = 0; j < n; ++j)
    if (!std::isfinite(scores[j])) return ae::NonFiniteScore{row, j};
  std::vector<std::int32_t> keys = iota_range(0, n);
  std::stable_sort(keys.begin(), keys.end(),
                   [&](std::int32_t a, std::int32_t b) { return scores[a] > scores[b]; });
  keys.resize(std::min(learned.k, n));
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace aether::model
