// Hand examples of the causal selectors the witness nulls reuse (source 000, "Null models").
#include <gtest/gtest.h>

#include <cmath>

#include "model/attention.hpp"

namespace aether::model {
namespace {

using V = std::vector<std::int32_t>;

TEST(Attention, dense_selects_the_whole_causal_prefix) {
  EXPECT_EQ(select_row(Dense{}, 0).value(), (V{0}));
  EXPECT_EQ(select_row(Dense{}, 3).value(), (V{0, 1, 2, 3}));
}

TEST(Attention, local_selects_the_most_recent_window) {
  EXPECT_EQ(select_row(Local{3}, 9).value(), (V{7, 8, 9}));
  EXPECT_EQ(select_row(Local{30}, 2).value(), (V{0, 1, 2}));
  EXPECT_EQ(select_row(Local{0}, 5).value(), V{});
}

TEST(Attention, random_is_seeded_distinct_causal_and_exactly_its_budget) {
  const V a = select_row(Random{5, 11}, 99).value();
  EXPECT_EQ(a, select_row(Random{5, 11}, 99).value());
  EXPECT_EQ(a.size(), 5u);
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::adjacent_find(a.begin(), a.end()), a.end());
  EXPECT_LE(a.back(), 99);
  EXPECT_NE(a, select_row(Random{5, 12}, 99).value());
  EXPECT_EQ(select_row(Random{50, 1}, 3).value(), (V{0, 1, 2, 3}));
}

TEST(Attention, learned_top_k_breaks_ties_toward_the_lower_key) {
  // 3x3 causal scores; row 2 has a tie between keys 0 and 2.
  const std::vector<double> scores{1, 0, 0,  //
                                   5, 7, 0,  //
                                   4, 1, 4};
  EXPECT_EQ(select_row(LearnedTopK{1, 3, scores}, 2).value(), (V{0}));
  EXPECT_EQ(select_row(LearnedTopK{2, 3, scores}, 2).value(), (V{0, 2}));
  EXPECT_EQ(select_row(LearnedTopK{1, 3, scores}, 1).value(), (V{1}));
  EXPECT_EQ(select_row(LearnedTopK{9, 3, scores}, 0).value(), (V{0}));
}

TEST(Attention, learned_top_k_refuses_bad_input) {
  namespace ae = attention_error;
  std::vector<double> scores(9, 1.0);
  EXPECT_EQ((select_row(LearnedTopK{1, 4, scores}, 0).error()),
            (AttentionError{ae::ScoresShapeMismatch{16, 9}}));
  EXPECT_EQ((select_row(LearnedTopK{1, 3, scores}, 3).error()),
            (AttentionError{ae::RowOutOfRange{3, 3}}));
  scores[2 * 3 + 1] = std::nan("");
  EXPECT_EQ((select_row(LearnedTopK{1, 3, scores}, 2).error()),
            (AttentionError{ae::NonFiniteScore{2, 1}}));
  // a non-finite score past the causal prefix is never read
  scores[0 * 3 + 2] = INFINITY;
  EXPECT_TRUE(select_row(LearnedTopK{1, 3, scores}, 0).ok());
}

}  // namespace
}  // namespace aether::model
