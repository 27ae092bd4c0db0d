// Lab 27 of source 003 (A.4), verbatim, on every indexer backend's top-k and
// candidate blocks, plus the refusals and boundary cases the issue names (the
// scorer's: tests/indexer_scores_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "impl/cpu/indexer.hpp"
#include "impl/cuda/indexer_read_once.hpp"
#include "model/indexer.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

using V = std::vector<std::int32_t>;
using F = std::vector<float>;
namespace ie = indexer_error;

// The lab's printed scores of its five keys (tests/indexer_scores_test.cpp scores
// them).
const F kScores{2, 6, 3, 0, 300};

TEST(IndexerModel, lab27_c2_visibility_counts) {
  // Query 0 sees no completed row; queries 1 and 2 see row 0.
  EXPECT_EQ(model::completed_rows(0, 2), 0);
  EXPECT_EQ(model::completed_rows(1, 2), 1);
  EXPECT_EQ(model::completed_rows(2, 2), 1);
  EXPECT_EQ(model::completed_rows(3, 2), 2);
  EXPECT_EQ(model::completed_rows(6, 1), 7);  // C1: every position is a row
  // Speculative decode: ends clamp at zero.
  EXPECT_EQ(model::speculative_row_end(10, 3, 0), 8);
  EXPECT_EQ(model::speculative_row_end(10, 3, 2), 10);
  EXPECT_EQ(model::speculative_row_end(1, 4, 0), 0);
}

TEST(IndexerModel, prefill_chunks_are_multiples_of_eight_capped_at_8192) {
  EXPECT_EQ(model::prefill_chunk_rows(1000, 4000 * 100).value(), 96u);  // 100 -> 96
  EXPECT_EQ(model::prefill_chunk_rows(1, std::size_t(1) << 30).value(), 8192u);
  EXPECT_EQ(model::prefill_chunk_rows(1000, 4000 * 8).value(), 8u);
  EXPECT_EQ(model::prefill_chunk_rows(1000, 4000 * 7).error(),
            (IndexerError{ie::BudgetTooSmall{28000, 4000}}));
}

class Indexer : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    for (auto& b : props::all_indexer_backends())
      if (b.name == GetParam()) backend = b;
  }
  V topk(const F& scores, std::size_t width, const V& ends, std::size_t k) {
    V out(ends.size() * k, 77);
    auto st = backend.topk(scores, width, ends, k, out);
    EXPECT_TRUE(st.ok()) << st.error();
    return out;
  }
  props::IndexerBackend backend;
};

TEST_P(Indexer, lab27_top2_over_the_valid_prefix) {
  // 300 lies past the valid prefix of 4 and is never selected.
  EXPECT_EQ(topk(kScores, 5, {4}, 2), (V{1, 2}));
}

TEST_P(Indexer, lab27_candidate_blocks) {
  F blocks(2);
  ASSERT_TRUE(backend.block_scores(kScores, 4, 2, blocks).ok());
  EXPECT_EQ(blocks, (F{6, 3}));
  V out(2, 77);
  ASSERT_TRUE(backend.candidate_topk(kScores, 4, V{0}, 2, 2, out).ok());
  EXPECT_EQ(out, (V{0, 1}));  // not [1, 2]: candidates restrict the choice
  // The consumer's compact offsets restore to logical rows.
  V restored(3, 77);
  ASSERT_TRUE(backend.restore(V{0, 3, -1}, V{4, 1}, 2, restored).ok());
  EXPECT_EQ(restored, (V{8, 3, -1}));
}

TEST_P(Indexer, lab27_one_valid_row_three_slots) {
  EXPECT_EQ(topk(kScores, 5, {1}, 3), (V{0, -1, -1}));
}

TEST_P(Indexer, lab27_prefill_offset) {
  V out(3, 77);
  ASSERT_TRUE(backend.offset(V{1, 2, -1}, 10, out).ok());
  EXPECT_EQ(out, (V{11, 12, -1}));
}

TEST_P(Indexer, empty_and_undersized_ranges_pad_with_minus_one) {
  EXPECT_EQ(topk(kScores, 5, {0}, 2), (V{-1, -1}));
  EXPECT_EQ(topk({}, 0, {0, 0}, 1), (V{-1, -1}));
  EXPECT_EQ(topk(kScores, 5, {5}, 0), V{});
  EXPECT_EQ(topk(kScores, 5, {5}, 9), (V{0, 1, 2, 3, 4, -1, -1, -1, -1}));
}

TEST_P(Indexer, ties_go_to_the_lower_index_and_signed_zeros_tie) {
  EXPECT_EQ(topk({1, 5, 5, 5, 0}, 5, {5}, 2), (V{1, 2}));
  EXPECT_EQ(topk({0.0f, -0.0f, 0.0f, -1}, 4, {4}, 2), (V{0, 1}));
  EXPECT_EQ(topk({-0.0f, 0.0f, -0.0f, -1}, 4, {4}, 1), (V{0}));
  EXPECT_EQ(topk(F(7, 2.5f), 7, {7}, 3), (V{0, 1, 2}));
}

// Long runs of ties at the cutoff, where a sort that ignores indices (introsort past
// 16 elements is not stable) or ties broken toward the higher index give another
// answer: 100 scores of 1, ten 2s at the multiples of 10, three 3s at the end. K 20
// takes the 3s, the 2s, and the seven 1s of lowest index.
TEST_P(Indexer, a_long_plateau_at_the_cutoff_keeps_its_lowest_indices) {
  F scores(100, 1.0f);
  for (std::size_t i = 0; i < 100; i += 10) scores[i] = 2.0f;
  scores[97] = scores[98] = scores[99] = 3.0f;
  EXPECT_EQ(topk(scores, 100, {100}, 20),
            (V{0, 1, 2, 3, 4, 5, 6, 7, 10, 20, 30, 40, 50, 60, 70, 80, 90, 97, 98, 99}));
  // Every score equal over two rows of 64: the first K of each row.
  const V first16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  V both = first16;
  both.insert(both.end(), first16.begin(), first16.end());
  EXPECT_EQ(topk(F(128, -0.5f), 64, {64, 64}, 16), both);
}

// A partial last block: end 10 with blocks of 4 leaves block 2 = [8, 10). Its score is
// max(7, 8), not the 100s stored past the end, and its candidates are 8 and 9 only.
TEST_P(Indexer, a_partial_last_block_holds_only_the_valid_candidates) {
  const F row{5, 1, 1, 1, 9, 9, 9, 9, 7, 8, 100, 100};
  F blocks(3, -7);
  ASSERT_TRUE(backend.block_scores(row, 10, 4, blocks).ok());
  EXPECT_EQ(blocks, (F{5, 9, 8}));
  V out(3, 77);
  ASSERT_TRUE(backend.candidate_topk(row, 10, V{2, 0}, 4, 3, out).ok());
  EXPECT_EQ(out, (V{0, 8, 9}));
  V more(7, 77);
  ASSERT_TRUE(backend.candidate_topk(row, 10, V{2, 0}, 4, 7, more).ok());
  EXPECT_EQ(more, (V{0, 1, 2, 3, 8, 9, -1}));
}

TEST_P(Indexer, garbage_past_the_end_is_never_read) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(topk({1, 2, nan, inf, 1e30f}, 5, {2}, 2), (V{0, 1}));
  EXPECT_EQ(topk({1, 2, 3, nan, 4, 5, 6, -inf}, 4, {3, 3}, 1), (V{2, 2}));
}

TEST_P(Indexer, malformed_calls_are_refused_and_write_nothing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto refused = [&](const F& scores, std::size_t width, const V& ends, std::size_t k,
                     IndexerError want) {
    V out(ends.size() * k, 77);
    const auto st = backend.topk(scores, width, ends, k, out);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error(), want);
    EXPECT_EQ(out, V(ends.size() * k, 77));
  };
  refused({1, 2, 3}, 2, {2, 2}, 1, ie::ShapeMismatch{4, 3});
  refused({1, 2, 3, 4}, 2, {2, 3}, 1, ie::EndOutOfRange{1, 3, 2});
  refused({1, 2, 3, 4}, 2, {-1, 2}, 1, ie::EndOutOfRange{0, -1, 2});
  refused({1, 2, 3, nan}, 2, {2, 2}, 1, ie::NonFiniteScore{1, 1});
  V out(2, 77);
  EXPECT_EQ(backend.candidate_topk(kScores, 4, V{2}, 2, 2, out).error(),
            (IndexerError{ie::BadCandidateBlock{2, 2}}));
  EXPECT_EQ(backend.candidate_topk(kScores, 4, V{0, 0}, 2, 2, out).error(),
            (IndexerError{ie::BadCandidateBlock{0, 2}}));
  EXPECT_EQ(backend.restore(V{4}, V{0, 1}, 2, std::span(out).first(1)).error(),
            (IndexerError{ie::BadCandidateBlock{2, 2}}));
  EXPECT_EQ(out, V(2, 77));
}

// The CUDA top-k on the lab and its corner cases (GPU only).
TEST(IndexerCuda, lab27_top_k_ties_garbage_and_refusals) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const auto topk = [](const F& scores, std::size_t width, const V& ends, std::size_t k) {
    V out(ends.size() * k, 77);
    const auto st = props::cuda_valid_prefix_topk(scores, width, ends, k, out);
    EXPECT_TRUE(st.ok()) << st.error();
    return out;
  };
  EXPECT_EQ(topk(kScores, 5, {4}, 2), (V{1, 2}));
  EXPECT_EQ(topk(kScores, 5, {1}, 3), (V{0, -1, -1}));
  EXPECT_EQ(topk({1, 5, 5, 5, 0}, 5, {5}, 2), (V{1, 2}));
  EXPECT_EQ(topk({0.0f, -0.0f, 0.0f, -1}, 4, {4}, 2), (V{0, 1}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(topk({1, 2, nan, INFINITY, 1e30f}, 5, {2}, 2), (V{0, 1}));
  V out(2, 77);
  EXPECT_EQ(props::cuda_valid_prefix_topk(F{1, 2, 3, nan}, 2, V{2, 2}, 1, out).error(),
            (IndexerError{ie::NonFiniteScore{1, 1}}));
  EXPECT_EQ(props::cuda_valid_prefix_topk(F{1, 2, 3, 4}, 2, V{2, 3}, 1, out).error(),
            (IndexerError{ie::EndOutOfRange{1, 3, 2}}));
  EXPECT_EQ(out, V(2, 77));
  // A long row with many ties at the cutoff: the CPU's answer, lane for lane.
  F big(262144);
  for (std::size_t j = 0; j < big.size(); ++j) big[j] = float((j * 7919) % 1000) / 4;
  V want(2048);
  ASSERT_TRUE(cpu::valid_prefix_topk(big, big.size(), V{262144}, 2048, want).ok());
  EXPECT_EQ(topk(big, big.size(), {262144}, 2048), want);
  // Past 262144 valid scores the read-once finish orders its choice by a radix
  // sort of the indices instead of a bitmap over the row.
  F wider(300001);
  std::mt19937 wider_rng(5);
  std::normal_distribution<float> wider_normal;
  for (float& x : wider) x = wider_normal(wider_rng);
  for (const std::int32_t end : {300001, 262145}) {
    V wider_want(2048);
    ASSERT_TRUE(cpu::valid_prefix_topk(wider, wider.size(), V{end}, 2048, wider_want).ok());
    EXPECT_EQ(topk(wider, wider.size(), {end}, 2048), wider_want) << "end " << end;
  }
  // Rows of 16384 and more take the read-once path: distinct values, valid ends
  // inside the rows, K above one row's valid count and below twice it, garbage
  // past the ends, an ascending row, a row of one value (a plateau: its ties
  // counted, the first K read again), a row whose top 1600 distinct keys share
  // one digit (the K-th's bucket split by the next bits), a row whose sampled runs
  // alone hold a plateau (for K 2048 too short: that row selected from its
  // scores), a row whose sampled runs hold its lowest scores (its list
  // overflows: selected from its scores for every K); rows 16-byte aligned (width
  // 40000) and not (40001).
  for (const std::size_t width : {40000, 40001}) {
    constexpr std::size_t kRows = 9;
    F wide(kRows * width);
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    for (std::size_t j = 0; j < 4 * width; ++j) wide[j] = normal(rng);
    for (std::size_t j = 0; j < width; ++j) {
      wide[4 * width + j] = float(j), wide[5 * width + j] = 1.0f;
      wide[6 * width + j] = j % 25 == 0 ? 1.0f + float(j) * 1e-6f : float(j % 1000) / 4000;
      const bool sampled = j % cuda::topk::kSampleStride < cuda::topk::kSampledRun;
      wide[7 * width + j] = sampled ? 5.0f : normal(rng);
      wide[8 * width + j] = sampled ? normal(rng) - 10.0f : normal(rng);
    }
    wide[width + 20000] = nan;  // past row 1's end
    const V wide_ends{std::int32_t(width),
                      17000,
                      1500,
                      3000,
                      std::int32_t(width),
                      std::int32_t(width),
                      std::int32_t(width),
                      std::int32_t(width),
                      std::int32_t(width)};
    for (std::size_t k : {1, 700, 2048}) {
      V expected(kRows * k);
      ASSERT_TRUE(cpu::valid_prefix_topk(wide, width, wide_ends, k, expected).ok());
      EXPECT_EQ(topk(wide, width, wide_ends, k), expected) << "width " << width << ", k " << k;
      // queued: the same lanes, and the rows counted by the way they took
      V queued(kRows * k, 77);
      props::TopkPaths paths;
      EXPECT_TRUE(
          props::cuda_queued_valid_prefix_topk(wide, width, wide_ends, k, queued, &paths).ok());
      EXPECT_EQ(queued, expected) << "queued, width " << width << ", k " << k;
      EXPECT_EQ(paths.from_scores, k == 2048 ? 2 : 1) << "width " << width << ", k " << k;
      EXPECT_GE(paths.refined_or_tied, 1) << "width " << width << ", k " << k;
      EXPECT_LE(paths.refined_or_tied, std::int64_t(kRows));
    }
    wide[width + 100] = nan;
    V untouched(kRows * 16, 77);
    EXPECT_EQ(props::cuda_valid_prefix_topk(wide, width, wide_ends, 16, untouched).error(),
              (IndexerError{ie::NonFiniteScore{1, 100}}));
    EXPECT_EQ(props::cuda_queued_valid_prefix_topk(wide, width, wide_ends, 16, untouched).error(),
              (IndexerError{ie::NonFiniteScore{1, 100}}));
    EXPECT_EQ(untouched, V(kRows * 16, 77));
    V bad_ends = wide_ends;
    bad_ends[3] = std::int32_t(width) + 5;  // the end refused, and described, before the NaN
    EXPECT_EQ(props::cuda_queued_valid_prefix_topk(wide, width, bad_ends, 16, untouched).error(),
              (IndexerError{ie::EndOutOfRange{3, std::int64_t(width) + 5, width}}));
    EXPECT_EQ(untouched, V(kRows * 16, 77));
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

INSTANTIATE_TEST_SUITE_P(Backends, Indexer, ::testing::Values("model", "cpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aether
