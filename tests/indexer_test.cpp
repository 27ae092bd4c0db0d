// Lab 27 of source 003 (A.4), verbatim, on every indexer backend, plus the
// refusals and boundary cases the issue names.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
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

// The lab's five keys: the text gives (0, 3) -> 6 and (1, 1) -> 3 and prints the
// scores [2, 6, 3, 0, 300]; the other three keys are ours, consistent with them.
const F kQueries{1, 0, 0, 1};  // heads (1, 0) and (0, 1)
const F kWeights{1, 2};
const F kKeys{2, 0, 0, 3, 1, 1, -1, -1, 100, 100};
const F kScores{2, 6, 3, 0, 300};

TEST(IndexerModel, lab27_scores_are_the_weighted_relu_sum) {
  const auto scores = model::index_scores(kQueries, kWeights, kKeys, 2);
  ASSERT_TRUE(scores.ok());
  std::vector<model::Rational> want;
  for (float s : kScores) want.emplace_back(s);
  EXPECT_EQ(scores.value(), want);
  // A negative weight subtracts; a negative dot product is clipped first (001 §3).
  const auto mixed = model::index_scores(F{1, 0, 0, 1}, F{2, -1}, F{4, 3, -4, 3}, 2);
  EXPECT_EQ(mixed.value(), (std::vector<model::Rational>{5, -3}));
  EXPECT_EQ(model::index_scores(F{1, NAN}, F{1}, F{1, 1}, 2).error(),
            (IndexerError{ie::NonFiniteInput{0, 1}}));
}

// The lab's keys stored as F32, BF16 and E4M3 (doubled values with scale 1/2; the
// last key as (8, 8) with scale 12.5, since 100 has no E4M3 code): the CPU scorer
// gives the printed scores exactly.
struct LabKeys {
  std::vector<std::byte> f32, bf16, e4m3;
};
LabKeys lab_keys() {
  LabKeys k;
  k.f32.assign(std::as_bytes(std::span(kKeys)).begin(), std::as_bytes(std::span(kKeys)).end());
  auto& bf16 = k.bf16;
  auto& e4m3 = k.e4m3;
  const std::uint8_t e4m3_codes[5][2] = {
      {0x48, 0x00}, {0x00, 0x4c}, {0x40, 0x40}, {0xc0, 0xc0}, {0x50, 0x50}};
  const float scales[5] = {0.5f, 0.5f, 0.5f, 0.5f, 12.5f};
  for (std::size_t j = 0; j < 5; ++j) {
    for (std::size_t d = 0; d < 2; ++d) {
      const auto h = std::uint16_t(std::bit_cast<std::uint32_t>(kKeys[2 * j + d]) >> 16);
      const auto* p = reinterpret_cast<const std::byte*>(&h);
      bf16.insert(bf16.end(), p, p + 2);
      e4m3.push_back(std::byte(e4m3_codes[j][d]));
    }
    const auto* p = reinterpret_cast<const std::byte*>(&scales[j]);
    e4m3.insert(e4m3.end(), p, p + 4);
  }
  return k;
}

TEST(IndexerCpu, lab27_scores_in_every_key_format) {
  const LabKeys lab = lab_keys();
  for (const IndexKeys& keys :
       {IndexKeys{KeyFormat::F32, lab.f32, 2}, IndexKeys{KeyFormat::BF16, lab.bf16, 2},
        IndexKeys{KeyFormat::E4M3, lab.e4m3, 2}}) {
    F out(5, -7);
    ASSERT_TRUE(cpu::index_scores(kQueries, kWeights, keys, out).ok());
    EXPECT_EQ(out, kScores) << "format " << int(keys.format);
    std::vector<model::Rational> want(kScores.begin(), kScores.end());
    EXPECT_EQ(model::index_scores(kQueries, kWeights, keys).value(), want);
  }
}

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

// The CUDA scorer: the lab's printed scores from bf16 and E4M3 keys; a grid batch
// spanning several key tiles and query groups equal to the model bit for bit;
// what the device refuses.
TEST(IndexerCuda, lab27_scores_tiles_query_groups_and_refusals) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const std::vector<std::uint16_t> lab_queries{0x3f80, 0, 0, 0x3f80};  // bf16 1, 0, 0, 1
  const LabKeys lab = lab_keys();
  for (const IndexKeys& keys :
       {IndexKeys{KeyFormat::BF16, lab.bf16, 2}, IndexKeys{KeyFormat::E4M3, lab.e4m3, 2}}) {
    F out(5, -7);
    const auto st = props::cuda_index_scores(lab_queries, kWeights, 1, keys, out);
    ASSERT_TRUE(st.ok()) << st.error();
    EXPECT_EQ(out, kScores) << "format " << int(keys.format);
  }

  // 2 key tiles and 2 query groups; then D > 128 (the 16-slice kernel), an odd D
  // (element-wise loads) and H not a multiple of 16; then the widest D with 64 heads.
  struct Case {
    std::size_t T, H, D, L;
  };
  for (const Case& c : {Case{40, 5, 24, 300}, Case{3, 17, 201, 130}, Case{2, 64, 256, 40}}) {
    std::vector<std::uint16_t> queries(c.T * c.H * c.D);
    F query_values(queries.size()), weights(c.T * c.H);
    for (std::size_t i = 0; i < queries.size(); ++i) {
      query_values[i] = float(int(i * 37 % 17) - 8);
      queries[i] = std::uint16_t(std::bit_cast<std::uint32_t>(query_values[i]) >> 16);
    }
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = float(int(i * 11 % 9) - 4);
    std::vector<std::byte> keys(c.L * c.D * 2);
    for (std::size_t i = 0; i < c.L * c.D; ++i) {
      const auto h =
          std::uint16_t(std::bit_cast<std::uint32_t>(float(int(i * 13 % 31) - 15)) >> 16);
      std::memcpy(keys.data() + 2 * i, &h, 2);
    }
    const IndexKeys batch_keys{KeyFormat::BF16, keys, c.D};
    F out(c.T * c.L, NAN);
    ASSERT_TRUE(props::cuda_index_scores(queries, weights, c.T, batch_keys, out).ok());
    const auto want = model::index_scores_batch(query_values, weights, c.T, batch_keys).value();
    for (std::size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(model::exact(out[i]), want[i]) << "D " << c.D << " score " << i;
  }

  F untouched(5, -7);
  EXPECT_EQ(props::cuda_index_scores(lab_queries, kWeights, 1,
                                     IndexKeys{KeyFormat::F32, lab.f32, 2}, untouched)
                .error(),
            (IndexerError{ie::UnsupportedOnDevice{KeyFormat::F32, 2, 2}}));
  const std::vector<std::uint16_t> wide(257);
  EXPECT_EQ(props::cuda_index_scores(wide, F{1}, 1, IndexKeys{KeyFormat::BF16, {}, 257}, untouched)
                .error(),
            (IndexerError{ie::UnsupportedOnDevice{KeyFormat::BF16, 1, 257}}));
  const std::vector<std::uint16_t> many_heads(128 *
                                              256);  // 270 KB of tiles: more than a block holds
  EXPECT_EQ(props::cuda_index_scores(many_heads, F(128, 1.0f), 1,
                                     IndexKeys{KeyFormat::BF16, {}, 256}, untouched)
                .error(),
            (IndexerError{ie::UnsupportedOnDevice{KeyFormat::BF16, 128, 256}}));
  EXPECT_EQ(props::cuda_index_scores(lab_queries, F{1, NAN}, 1,
                                     IndexKeys{KeyFormat::BF16, lab.bf16, 2}, untouched)
                .error(),
            (IndexerError{ie::NonFiniteInput{1, 1}}));
  EXPECT_EQ(untouched, F(5, -7));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

INSTANTIATE_TEST_SUITE_P(Backends, Indexer, ::testing::Values("model", "cpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aether
