// The 15 named tests of source 000 ("Test evidence"), verbatim, each run on
// every backend: the model adapter, the CPU and CUDA (skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "model/attention.hpp"
#include "model/witness.hpp"
#include "tests/witness_test.hpp"

namespace aether {
namespace {

using I = std::int32_t;
using V = std::vector<I>;
namespace we = witness_error;

// Distinct learned rows over [0, L) with padding, as the source's _random_case draws them.
V random_row(std::mt19937& rng, I len, std::size_t topk, std::size_t padded_tail = 0) {
  V pool(static_cast<std::size_t>(len));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  V row(topk, -1);
  const std::size_t filled = std::uniform_int_distribution<std::size_t>(
      0, std::min<std::size_t>(topk - std::min(padded_tail, topk), pool.size()))(rng);
  std::copy_n(pool.begin(), filled, row.begin());
  std::shuffle(row.begin(), row.end() - std::ptrdiff_t(std::min(padded_tail, topk)), rng);
  return row;
}

std::set<std::size_t> segments_of(const V& tokens, I len, std::size_t s) {
  std::set<std::size_t> segs;
  for (I x : tokens)
    if (x >= 0 && x < len) segs.insert(model::segment_of(std::size_t(x), std::size_t(len), s));
  return segs;
}

TEST_P(Witness, a_witness_fills_only_the_segment_the_learned_row_misses) {
  EXPECT_EQ(indices({0, 5, 9, -1}, 4, {16}, 4), (V{-1, -1, -1, 12}));
}

TEST_P(Witness, the_merge_keeps_the_prefix_and_writes_witnesses_into_the_tail) {
  EXPECT_EQ(apply({0, 5, 9, -1}, 4, {16}, 2, 4, 2), (V{0, 5, 12, -1}));
}

TEST_P(Witness, a_disabled_policy_is_the_identity) {
  const V learned{0, 5, 9, -1, 3, -1, -1, -1};
  // S = 0 at the serving entry: the off switch, whatever the row.
  EXPECT_EQ(scatter(learned, 4, {16, 8}, 0), learned);
  // B = 0: no replacements allowed, or no room after keep; topk = 0 at the serving entry.
  EXPECT_EQ(apply(learned, 4, {16, 8}, 0, 4, 0), learned);
  EXPECT_EQ(apply(learned, 4, {16, 8}, 4, 4, 3), learned);
  EXPECT_EQ(scatter({}, 0, {16, 8}, 4), V{});
  // zero rows
  EXPECT_EQ(apply({}, 4, {}, 0, 4, 4), V{});
  EXPECT_EQ(scatter({}, 4, {}, 4), V{});
}

TEST_P(Witness, short_and_empty_rows_follow_the_source_fallback) {
  // L <= 0: no witnesses, the row stays all padding.
  EXPECT_EQ(scatter({-1, -1, -1, -1, -1, -1, -1, -1}, 4, {0, -3}, 4), V(8, -1));
  EXPECT_EQ(indices({-1, -1, -1, -1}, 4, {0}, 4), V(4, -1));
  // L < S: S_eff = L, every token the row does not hold becomes a witness.
  EXPECT_EQ(indices({1, -1, -1, -1}, 4, {3}, 8), (V{0, -1, 2, -1, -1, -1, -1, -1}));
  EXPECT_EQ(scatter({1, -1, -1, -1, -1, -1, -1, -1, -1, -1}, 10, {3}, 8),
            (V{1, -1, 0, 2, -1, -1, -1, -1, -1, -1}));
}

TEST_P(Witness, an_out_of_range_learned_index_is_clamped_rather_than_refused) {
  // L = 4, S = 8: 20 marks segment min(floor(20 * 4 / 4), 7) = 7, outside S_eff = 4.
  EXPECT_EQ(model::occupied_segments(V{20}, 4, 8),
            (std::vector<bool>{false, false, false, false, false, false, false, true}));
  EXPECT_EQ(indices({20, -1, -1, -1, -1, -1}, 6, {4}, 8), (V{0, 1, 2, 3, -1, -1, -1, -1}));
  // ... and it passes through the merge.
  EXPECT_EQ(apply({20, -1, -1, -1, -1, -1}, 6, {4}, 1, 8, 8), (V{20, 0, 1, 2, 3, -1}));
  // With S_eff = S the clamp lands inside the partition: 99 >= 16 marks segment 3,
  // so segment 3 gets no witness and stays uncovered after the merge.
  EXPECT_EQ(indices({99, -1}, 2, {16}, 4), (V{0, 4, 8, -1}));
  const V merged = scatter({99, -1, -1, -1, -1}, 5, {16}, 4);
  EXPECT_EQ(merged, (V{99, 0, 4, 8, -1}));
  EXPECT_EQ(model::segment_coverage_exact(merged, 16, 4), model::Rational(3, 4));
}

TEST_P(Witness, malformed_calls_are_refused) {
  const V learned{0, 5, 9, -1, 3};
  const V poison(5, 77);
  auto expect_refused = [&](auto status, WitnessError want, const V& out) {
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.error(), want);
    EXPECT_EQ(out, poison) << "a refused call wrote into its buffer";
  };
  V out = poison;
  expect_refused(backend.apply(learned, 4, V{16}, 0, 4, 4, out), we::RowsMismatch{5, 4, 1}, out);
  out = poison;
  expect_refused(backend.indices(learned, 4, V{16}, 4, std::span(out).first(4)),
                 we::RowsMismatch{5, 4, 1}, out);
  const V row{0, 5, 9, -1};
  out = poison;
  expect_refused(backend.apply(row, 4, V{16}, 0, 0, 4, std::span(out).first(4)),
                 we::SegmentsOutOfRange{0}, out);
  out = poison;
  expect_refused(backend.apply(row, 4, V{16}, 0, 65, 4, std::span(out).first(4)),
                 we::SegmentsOutOfRange{65}, out);
  out = poison;
  expect_refused(backend.apply(row, 4, V{16}, 5, 4, 4, std::span(out).first(4)),
                 we::LearnedKeepOutOfRange{5, 4}, out);
  // the serving entry refuses in place and leaves the row untouched
  V buf = row;
  auto st = backend.scatter(buf, 4, V{16}, 65);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error(), (WitnessError{we::SegmentsOutOfRange{65}}));
  EXPECT_EQ(buf, row);
  buf = row;
  st = backend.scatter(buf, 4, V{16, 16}, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error(), (WitnessError{we::RowsMismatch{4, 4, 2}}));
  EXPECT_EQ(buf, row);
}

TEST_P(Witness, every_witness_lands_in_its_own_segment) {
  // Rounding the edge down does not round-trip: floor(1 * 10 / 4) = 2, σ(2) = 0.
  EXPECT_EQ(model::segment_of(2, 10, 4), 0u);
  EXPECT_EQ(model::segment_edge(1, 10, 4), 3u);
  const V lens{1, 2, 3, 10, 63, 64, 65, 100, 127, 509, 1000, 4097, 131071, 2147483647};
  for (std::size_t s = 1; s <= MAX_TOPOLOGY_SEGMENTS; ++s) {
    const V empty(lens.size(), -1);  // topk 1, all padding: every segment needs a witness
    const V table = indices(empty, 1, lens, s);
    for (std::size_t r = 0; r < lens.size(); ++r) {
      const auto L = std::size_t(lens[r]);
      for (std::size_t seg = 0; seg < s; ++seg) {
        const I w = table[r * s + seg];
        if (seg >= std::min(s, L)) {
          EXPECT_EQ(w, -1);
          continue;
        }
        ASSERT_EQ(std::size_t(w), model::segment_edge(seg, L, s)) << "L=" << L << " S=" << s;
        EXPECT_EQ(model::segment_of(std::size_t(w), L, s), seg) << "L=" << L << " S=" << s;
      }
    }
  }
}

TEST_P(Witness, witnesses_are_causal_distinct_disjoint_and_complete) {
  std::mt19937 rng(20261130);
  for (int it = 0; it < 200; ++it) {
    const I len = std::uniform_int_distribution<I>(1, 300)(rng);
    const std::size_t s = std::uniform_int_distribution<std::size_t>(1, 64)(rng);
    const std::size_t topk = std::uniform_int_distribution<std::size_t>(1, 48)(rng);
    const V row = random_row(rng, len, topk);
    const V table = indices(row, topk, {len}, s);
    V w;
    for (I x : table)
      if (x != -1) w.push_back(x);
    for (I x : w) EXPECT_TRUE(x >= 0 && x < len) << "causal";
    EXPECT_EQ(std::set<I>(w.begin(), w.end()).size(), w.size()) << "distinct";
    for (I x : w) EXPECT_EQ(std::count(row.begin(), row.end(), x), 0) << "disjoint";
    V both = row;
    both.insert(both.end(), w.begin(), w.end());
    EXPECT_EQ(segments_of(both, len, s).size(), std::min<std::size_t>(s, std::size_t(len)))
        << "complete";
  }
}

TEST_P(Witness, the_serving_row_is_causal_distinct_ordered_and_within_budget) {
  std::mt19937 rng(47942);
  for (int it = 0; it < 200; ++it) {
    const I len = std::uniform_int_distribution<I>(1, 400)(rng);
    const std::size_t s = std::uniform_int_distribution<std::size_t>(1, 64)(rng);
    const std::size_t topk = std::uniform_int_distribution<std::size_t>(1, 96)(rng);
    const V row = random_row(rng, len, topk);
    const V out = scatter(row, topk, {len}, s);
    const std::size_t keep = topk - std::min(s, topk);
    EXPECT_TRUE(std::equal(row.begin(), row.begin() + std::ptrdiff_t(keep), out.begin()))
        << "prefix bit-identical";
    std::size_t changed = 0;
    for (std::size_t i = keep; i < topk; ++i) changed += out[i] != row[i];
    EXPECT_LE(changed, std::min(s, topk)) << "budget";
    // one ascending run of witnesses starting at keep, then the untouched rest
    const V table = indices(row, topk, {len}, s);
    V w;
    for (I x : table)
      if (x != -1) w.push_back(x);
    const std::size_t n = std::min(w.size(), topk - keep);
    for (std::size_t j = 0; j < n; ++j) EXPECT_EQ(out[keep + j], w[j]);
    EXPECT_TRUE(
        std::is_sorted(out.begin() + std::ptrdiff_t(keep), out.begin() + std::ptrdiff_t(keep + n)));
    EXPECT_TRUE(std::equal(row.begin() + std::ptrdiff_t(keep + n), row.end(),
                           out.begin() + std::ptrdiff_t(keep + n)));
    V valid;
    for (I x : out) {
      EXPECT_TRUE(x == -1 || (x >= 0 && x < len)) << "causal";
      if (x != -1) valid.push_back(x);
    }
    EXPECT_EQ(std::set<I>(valid.begin(), valid.end()).size(), valid.size()) << "distinct";
  }
}

TEST_P(Witness, every_segment_is_covered_when_the_reserved_tail_is_padding) {
  std::mt19937 rng(64);
  for (int it = 0; it < 200; ++it) {
    const I len = std::uniform_int_distribution<I>(1, 500)(rng);
    const std::size_t s = std::uniform_int_distribution<std::size_t>(1, 64)(rng);
    const std::size_t topk = s + std::uniform_int_distribution<std::size_t>(0, 40)(rng);
    const V out = scatter(random_row(rng, len, topk, s), topk, {len}, s);
    EXPECT_EQ(model::segment_coverage_exact(out, std::size_t(len), s), 1);
  }
}

TEST_P(Witness, overwriting_a_sole_tail_occupant_uncovers_its_segment) {
  // 12 is segment 3's only learned token; it sits in the tail the witnesses overwrite.
  const V out = scatter({0, 1, 2, 3, 12, -1, -1, -1}, 8, {16}, 4);
  EXPECT_EQ(out, (V{0, 1, 2, 3, 4, 8, -1, -1}));
  EXPECT_EQ(model::segment_coverage_exact(out, 16, 4), model::Rational(3, 4));
  EXPECT_EQ(model::segment_coverage(out, 16, 4), 0.75);
}

TEST_P(Witness, permuting_the_learned_row_leaves_the_witness_set_unchanged) {
  V row{0, 5, 9, -1};
  const V table = indices(row, 4, {16}, 4);
  std::sort(row.begin(), row.end());
  do EXPECT_EQ(indices(row, 4, {16}, 4), table);
  while (std::next_permutation(row.begin(), row.end()));
  // The merge is positional: moving 9 across keep = 2 changes the retained set.
  const auto retained = [](const V& v) {
    std::set<I> s(v.begin(), v.end());
    s.erase(-1);
    return s;
  };
  EXPECT_EQ(retained(apply({0, 5, 9, -1}, 4, {16}, 2, 4, 2)), (std::set<I>{0, 5, 12}));
  EXPECT_EQ(retained(apply({5, 9, 0, -1}, 4, {16}, 2, 4, 2)), (std::set<I>{5, 9, 12}));
}

TEST_P(Witness, the_nulls_spend_exactly_the_policy_budget) {
  std::mt19937 rng(7);
  for (int it = 0; it < 50; ++it) {
    const I len = std::uniform_int_distribution<I>(1, 300)(rng);
    const std::size_t s = std::uniform_int_distribution<std::size_t>(1, 64)(rng);
    const std::size_t topk = std::uniform_int_distribution<std::size_t>(1, 96)(rng);
    const V out = scatter(random_row(rng, len, topk), topk, {len}, s);
    const std::size_t k = model::valid_slot_count(out, len);
    const V rnd = model::random_null(std::size_t(len), k, std::uint64_t(it));
    EXPECT_EQ(rnd.size(), k);
    EXPECT_EQ(std::set<I>(rnd.begin(), rnd.end()).size(), k);
    for (I x : rnd) EXPECT_TRUE(x >= 0 && x < len);
    V recent(k);
    std::iota(recent.begin(), recent.end(), len - I(k));
    EXPECT_EQ(model::locality_null(std::size_t(len), k), recent);
  }
}

TEST_P(Witness, the_nulls_are_the_last_row_of_the_attention_selectors) {
  const V out = scatter({0, 1, 2, 3, 12, -1, -1, -1}, 8, {16}, 4);
  const std::size_t k = model::valid_slot_count(out, 16);
  ASSERT_EQ(k, 6u);
  for (std::uint64_t seed : {0ull, 1ull, 42ull, ~0ull})
    EXPECT_EQ(model::random_null(16, k, seed),
              model::select_row(model::Random{k, seed}, 15).value());
  EXPECT_EQ(model::locality_null(16, k), model::select_row(model::Local{k}, 15).value());
}

TEST_P(Witness, coverage_and_recall_match_a_hand_computed_example) {
  // L = 8, S = 4; the learned row misses segment 3, whose witness e_3 = 6 fills slot 3.
  const V policy = apply({0, 3, 5, -1}, 4, {8}, 3, 4, 1);
  ASSERT_EQ(policy, (V{0, 3, 5, 6}));
  // Dyadic weights in 64ths: 32, 1, 1, 14, 1, 8, 6, 1 (sum 64).
  const std::vector<double> a{0.5,      1.0 / 64, 1.0 / 64, 14.0 / 64,
                              1.0 / 64, 0.125,    6.0 / 64, 1.0 / 64};
  EXPECT_EQ(model::segment_coverage(policy, 8, 4), 1.0);
  EXPECT_EQ(model::attention_mass_recall(policy, a), 0.9375);
  const V local = model::locality_null(8, model::valid_slot_count(policy, 8));
  ASSERT_EQ(local, (V{4, 5, 6, 7}));
  EXPECT_EQ(model::segment_coverage(local, 8, 4), 0.5);
  EXPECT_EQ(model::attention_mass_recall(local, a), 0.25);
  // Padding, duplicates and out-of-range entries count for nothing.
  const V noisy{0, 3, -1, 5, 6, 6, 8, 1000};
  EXPECT_EQ(model::segment_coverage(noisy, 8, 4), 1.0);
  EXPECT_EQ(model::attention_mass_recall(noisy, a), 0.9375);
  // No segments: coverage 1; no mass: recall NaN.
  EXPECT_EQ(model::segment_coverage(noisy, 0, 4), 1.0);
  EXPECT_TRUE(std::isnan(model::attention_mass_recall(noisy, std::vector<double>(8, 0.0))));
  // A weight that is not finite: NaN, and no value in the exact form.
  std::vector<double> bad = a;
  bad[3] = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(model::attention_mass_recall(noisy, bad)));
  EXPECT_FALSE(model::attention_mass_recall_exact(noisy, bad).has_value());
  // An empty context has no last row: both nulls select nothing.
  EXPECT_TRUE(model::random_null(0, 4, 7).empty());
  EXPECT_TRUE(model::locality_null(0, 4).empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, Witness, ::testing::Values("model", "cpu", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aether
