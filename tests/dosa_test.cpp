// The worked examples of source 001, verbatim, on the model: the score's signs,
// the threshold, the positive-head bound through an anchor, the aggregated
// negative deduction, the teaching count; and the refusals. The CPU on the same
// examples (the CUDA backend's: tests/dosa_cuda_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "impl/cpu/dosa.hpp"
#include "impl/cpu/indexer.hpp"
#include "model/dosa.hpp"
#include "model/indexer.hpp"
#include "props/support/dosa_workload.hpp"

namespace aether {
namespace {

using R = model::Rational;
using F = std::vector<float>;
namespace de = dosa_error;

std::vector<R> exact_row(const F& v) {
  std::vector<R> out;
  for (float x : v) out.push_back(model::exact(x));
  return out;
}
R score(const F& queries, const F& weights, const F& key) {
  return model::index_scores(queries, weights, key, key.size()).value()[0];
}
// U's value when ||k|| is rational (every example's is)
R value(const model::DosaBound& u) {
  return u.rational_part + u.residual * model::upper_sqrt(u.key_norm_sq);
}

// §3: activations 4 and 3 with weights 2 and -1 score 2*4 - 1*3 = 5; a negative
// dot product goes through the ReLU to 0 and deducts nothing, whatever its weight.
TEST(DosaModel, weights_add_and_deduct_after_the_relu) {
  EXPECT_EQ(score({4, 0, 0, 3}, {2, -1}, {1, 1}), R(5));
  EXPECT_EQ(score({4, 0, 0, -3}, {2, -1}, {1, 1}), R(8));
}

// §2: K = 2, seed scores 9, 6, 2: tau = 6; a key bounded by 5 is excluded, one
// bounded by exactly 6 is kept.
TEST(DosaModel, the_threshold_is_the_kth_seed_and_equality_is_kept) {
  const std::vector<R> seeds{9, 6, 2};
  const R tau = model::seed_threshold(seeds, 2);
  EXPECT_EQ(tau, R(6));
  EXPECT_TRUE(model::excluded({R(5), R(0), R(0)}, tau));
  EXPECT_FALSE(model::excluded({R(6), R(0), R(0)}, tau));
  // the same through a residual term: 4 + 1 * ||(1, 0)|| = 5 and 5 + 1 = 6
  EXPECT_TRUE(model::excluded({R(4), R(1), R(1)}, tau));
  EXPECT_FALSE(model::excluded({R(5), R(1), R(1)}, tau));
}

// §3.1: anchor q_j = (1, 0), omitted q_h = (2, 1), beta 2, d_h = (0, 1); for
// k = (3, 4) the activation bound is 2*3 + 1*5 = 11 against a true 10; with
// weight 2, 22 against 20.
TEST(DosaModel, an_anchor_bounds_an_omitted_positive_head) {
  const F queries{1, 0, 2, 1}, key{3, 4};
  for (const float w : {1.0f, 2.0f}) {
    const F weights{0, w};  // the anchor's own term is 0: the bound is the omitted head's
    const DosaPlan plan{{0}, {{1, 0, 2.0f}}, {}};
    ASSERT_TRUE(model::check_plan(weights, plan).ok());
    const R c = model::residual_coefficient(queries, weights, 2, plan);
    EXPECT_EQ(c, R(w));  // w ||d_h|| = w
    const auto u = model::upper_bound(queries, weights, exact_row(key), plan, c);
    EXPECT_EQ(value(u), R(11) * R(w));
    EXPECT_EQ(score(queries, weights, key), R(10) * R(w));
  }
}

// The joint bound the source points to: q_2 = 2 q_0 + 3 q_1 exactly (d = 0), so
// with anchor q_0 (beta 2) and a further anchor q_1 (beta 3) the bound of
// w [q_2 . k]_+ is w (2 [q_0 . k]_+ + 3 [q_1 . k]_+), exact for k = (0, 4): 12 w.
const F kJointQueries{1, 0, 0, 1, 2, 3};
const DosaPlan kJointPlan{{0, 1}, {{2, 0, 2.0f, {{1, 3.0f}}}}, {}};
TEST(DosaModel, further_anchors_bound_an_omitted_head_jointly) {
  for (const float w : {1.0f, 2.0f}) {
    const F weights{0, 0, w};
    ASSERT_TRUE(model::check_plan(weights, kJointPlan).ok());
    const R c = model::residual_coefficient(kJointQueries, weights, 2, kJointPlan);
    EXPECT_EQ(c, R(0));
    const auto u = model::upper_bound(kJointQueries, weights, exact_row({0, 4}), kJointPlan, c);
    EXPECT_EQ(value(u), R(12) * R(w));
    EXPECT_EQ(score(kJointQueries, weights, {0, 4}), R(12) * R(w));
  }
}

// §3.2: omitted heads (1, 0) and (0, 1) with weights -1 aggregate to a_A = (1, 1).
// For k = (3, 4) it deducts 7, exactly the true 3 + 4, and a bound of 12 falls to
// 5: excluded at tau 6. For k = (3, -2) it deducts [3 - 2]_+ = 1 against a true 3.
TEST(DosaModel, aggregated_negative_heads_deduct_a_lower_bound) {
  const F queries{4, 0, 1, 0, 0, 1}, weights{1, -1, -1};
  const DosaPlan plan{{0}, {}, {1, 2}};
  ASSERT_TRUE(model::check_plan(weights, plan).ok());
  const R c = model::residual_coefficient(queries, weights, 2, plan);
  EXPECT_EQ(c, R(0));
  const auto u = model::upper_bound(queries, weights, exact_row({3, 4}), plan, c);
  EXPECT_EQ(value(u), R(5));  // 12 - 7
  EXPECT_EQ(score(queries, weights, {3, 4}), R(5));
  EXPECT_TRUE(model::excluded(u, R(6)));
  const DosaPlan without{{0}, {}, {}};
  EXPECT_EQ(value(model::upper_bound(queries, weights, exact_row({3, 4}), without, c)), R(12));
  const auto loose = model::upper_bound(queries, weights, exact_row({3, -2}), plan, c);
  EXPECT_EQ(value(loose), R(12 - 1));  // deducts 1
  EXPECT_EQ(score(queries, weights, {3, -2}), R(12 - 3));
}

// §5: 100 keys screened with 16 dot products each and 5 survivors scored on 32
// heads: 100 x 16 + 5 x 32 = 1760 dot products against 3200.
TEST(DosaModel, the_teaching_count) {
  DosaPlan plan;
  for (std::uint32_t h = 0; h < 16; ++h) plan.retained.push_back(h);
  EXPECT_EQ(model::pruned_dot_products(100, plan, 5, 32), 1760u);
  EXPECT_EQ(model::pruned_dot_products(100, DosaPlan{}, 100, 32), 3200u);
}

TEST(DosaModel, upper_sqrt_is_exact_on_squares_and_above_elsewhere) {
  EXPECT_EQ(model::upper_sqrt(R(25)), R(5));
  EXPECT_EQ(model::upper_sqrt(R(9, 4)), R(3, 2));
  EXPECT_EQ(model::upper_sqrt(R(0)), R(0));
  const R two = model::upper_sqrt(R(2));
  EXPECT_GT(two * two, R(2));
  EXPECT_LT(two * two, R(2) + R(1, model::Integer(1) << 60));
}

TEST(DosaModel, refusals) {
  const F queries{1, 0, 0, 1}, weights{1, -1};
  const std::vector<R> keys = exact_row({1, 2, 3, 4, 5, 6});  // 3 keys of dim 2
  const DosaPlan all{{0, 1}, {}, {}};
  const std::vector<std::int32_t> seeds{0, 1};
  EXPECT_EQ(
      model::dosa_topk(queries, weights, keys, 2, 2, std::vector<std::int32_t>{0, 0}, all).error(),
      (DosaError{de::BadSeed{1, 0}}));
  EXPECT_EQ(
      model::dosa_topk(queries, weights, keys, 2, 2, std::vector<std::int32_t>{3}, all).error(),
      (DosaError{de::BadSeed{0, 3}}));
  EXPECT_EQ(
      model::dosa_topk(queries, weights, keys, 2, 2, std::vector<std::int32_t>{1}, all).error(),
      (DosaError{de::TooFewSeeds{1, 2}}));
  const F nan_weights{1, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_EQ(model::dosa_topk(queries, nan_weights, keys, 2, 2, seeds, all).error(),
            (DosaError{de::NonFiniteInput{1, 1}}));
  // a positive head omitted without an anchor; a negative head anchored; an
  // aggregated positive head; a head placed twice
  EXPECT_EQ(model::check_plan(weights, DosaPlan{{1}, {}, {}}).error(), (DosaError{de::BadPlan{0}}));
  EXPECT_EQ(model::check_plan(weights, DosaPlan{{0}, {{1, 0, 1.0f}}, {}}).error(),
            (DosaError{de::BadPlan{1}}));
  EXPECT_EQ(model::check_plan(weights, DosaPlan{{1}, {}, {0}}).error(),
            (DosaError{de::BadPlan{0}}));
  EXPECT_EQ(model::check_plan(weights, DosaPlan{{0, 0}, {}, {}}).error(),
            (DosaError{de::BadPlan{0}}));
  EXPECT_EQ(model::check_plan(weights, DosaPlan{{1}, {{0, 1, -1.0f}}, {}}).error(),
            (DosaError{de::BadPlan{0}}));
  // K >= L: the plain top-K, no seeds needed
  EXPECT_EQ(model::dosa_topk(queries, weights, keys, 2, 3, {}, all).value(),
            (std::vector<std::int32_t>{0, 1, 2}));
}

IndexKeys f32_keys(const F& keys, std::size_t dim) {
  return {KeyFormat::F32, std::as_bytes(std::span<const float>(keys)), dim};
}
// The CPU's float bound of one key: the exact bound raised by the rounding margin.
double cpu_bound(const F& queries, const F& weights, const F& key, const DosaPlan& plan) {
  std::vector<double> u(1);
  cpu::dosa_bounds(queries, weights, f32_keys(key, key.size()), plan, u);
  return u[0];
}

// §3 on the CPU's scorer: 2*4 - 1*3 = 5, and a negative dot product deducts nothing.
TEST(DosaCpu, weights_add_and_deduct_after_the_relu) {
  const F key{1, 1};
  std::vector<float> s(1);
  ASSERT_TRUE(cpu::index_scores(F{4, 0, 0, 3}, F{2, -1}, f32_keys(key, 2), s).ok());
  EXPECT_EQ(s[0], 5.0f);
  ASSERT_TRUE(cpu::index_scores(F{4, 0, 0, -3}, F{2, -1}, f32_keys(key, 2), s).ok());
  EXPECT_EQ(s[0], 8.0f);
}

// §2 end to end: K = 2, seeds scoring 9, 6, 2 give tau 6; a key bounded by 5 (every
// head retained: its bound is its score plus the margin) is excluded, one scoring
// exactly 6 survives and, tied with the seed at 6, loses to its lower index.
TEST(DosaCpu, the_threshold_excludes_below_tau_and_keeps_equality) {
  const F queries{1}, weights{1}, keys{9, 6, 2, 5, 6};
  const std::vector<std::int32_t> seeds{0, 1, 2};
  const std::vector<DosaPlan> plans{DosaPlan{{0}, {}, {}}};
  std::vector<std::int32_t> out(2);
  cpu::DosaStats stats;
  ASSERT_TRUE(cpu::dosa_topk(queries, weights, 1, f32_keys(keys, 1), 2, seeds, plans, out,
                             cpu::DosaOptions{false}, &stats)
                  .ok());
  EXPECT_EQ(out, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(stats.screened, 2u);
  EXPECT_EQ(stats.survivors, 1u);  // the key scoring 6
}

// K = 0 selects nothing, screened or not, on the model and the CPU.
TEST(DosaCpu, k_zero_selects_nothing) {
  const F queries{1}, weights{1}, keys{9, 6, 2};
  EXPECT_TRUE(model::dosa_topk(queries, weights, exact_row(keys), 1, 0, {}, DosaPlan{{0}, {}, {}})
                  .value()
                  .empty());
  const std::vector<DosaPlan> plans{DosaPlan{{0}, {}, {}}};
  std::vector<std::int32_t> out;
  for (const bool fall_back : {false, true})
    EXPECT_TRUE(cpu::dosa_topk(queries, weights, 1, f32_keys(keys, 1), 0, {}, plans, out,
                               cpu::DosaOptions{fall_back})
                    .ok());
}

// §3.1 on the CPU: the anchored bound 11 (22 with weight 2) against a true 10 (20),
// raised only by the rounding margin.
TEST(DosaCpu, an_anchor_bounds_an_omitted_positive_head) {
  for (const float w : {1.0f, 2.0f}) {
    const double u = cpu_bound({1, 0, 2, 1}, {0, w}, {3, 4}, DosaPlan{{0}, {{1, 0, 2.0f}}, {}});
    EXPECT_GE(u, 11.0 * w);
    EXPECT_LT(u, 11.0 * w * (1 + 1e-5));
  }
}

// The joint bound on the CPU: 12 w, raised only by the rounding margin.
TEST(DosaCpu, further_anchors_bound_an_omitted_head_jointly) {
  for (const float w : {1.0f, 2.0f}) {
    const double u = cpu_bound(kJointQueries, {0, 0, w}, {0, 4}, kJointPlan);
    EXPECT_GE(u, 12.0 * w);
    EXPECT_LT(u, 12.0 * w * (1 + 1e-5));
  }
}

// §3.2 on the CPU: a_A = (1, 1) deducts 7 from 12 for k = (3, 4) (bound 5: excluded
// at tau 6) and 1 for k = (3, -2) (bound 11).
TEST(DosaCpu, aggregated_negative_heads_deduct_a_lower_bound) {
  const F queries{4, 0, 1, 0, 0, 1}, weights{1, -1, -1};
  const DosaPlan plan{{0}, {}, {1, 2}};
  const double tight = cpu_bound(queries, weights, {3, 4}, plan);
  EXPECT_GE(tight, 5.0);
  EXPECT_LT(tight, 6.0);
  EXPECT_LT(tight, 5.0 * (1 + 1e-5));
  const double loose = cpu_bound(queries, weights, {3, -2}, plan);
  EXPECT_GE(loose, 11.0);
  EXPECT_LT(loose, 11.0 * (1 + 1e-5));
}

}  // namespace

// Decode (source §1): tau 6 from the recent keys' scores 9, 6, 2 at K = 2; the keys
// at or above it (9, 6, 6) ranked, the tie at 6 to the lower id; fewer keys than K
// ranked whole, -1 after them; refusals in the model's order (tests/dosa_decode_cuda_test.cpp
// holds the CUDA path to the same values).
TEST(DosaCpu, decode_ranks_the_keys_at_or_above_the_recent_threshold) {
  const F scores{9, 6, 2, 5, 6};
  using V = std::vector<std::int32_t>;
  EXPECT_EQ(model::decode_topk(scores, V{0, 1, 2}, 2).value(), (V{0, 1}));
  EXPECT_EQ(model::decode_topk(F{2, 7, 7}, V{}, 4).value(), (V{0, 1, 2, -1}));
  V out(2, 77), wide(4, 77), untouched(2, 77);
  ASSERT_TRUE(cpu::decode_topk(scores, V{0, 1, 2}, 2, out).ok());
  EXPECT_EQ(out, (V{0, 1}));
  ASSERT_TRUE(cpu::decode_topk(F{2, 7, 7}, V{}, 4, wide).ok());
  EXPECT_EQ(wide, (V{0, 1, 2, -1}));
  EXPECT_EQ(cpu::decode_topk(F{9, 6, 2, NAN, 6}, V{0, 9}, 2, untouched).error(),
            (DosaError{de::NonFiniteInput{3, 3}}));
  EXPECT_EQ(cpu::decode_topk(scores, V{0, 1, 0}, 2, untouched).error(),
            (DosaError{de::BadSeed{2, 0}}));
  EXPECT_EQ(cpu::decode_topk(scores, V{0}, 2, untouched).error(),
            (DosaError{de::TooFewSeeds{1, 2}}));
  EXPECT_EQ(cpu::decode_topk(scores, V{0, 1}, 2, std::span(untouched).first(1)).error(),
            (DosaError{de::ShapeMismatch{2, 1}}));
  EXPECT_EQ(untouched, (V{77, 77}));
}

// Forced pruning where nearly every key survives: the survivors (more than one of
// the CPU's rescoring chunks of 8192) are rescored a chunk at a time, and the lanes
// are full scoring's.
TEST(DosaCpu, survivors_past_one_rescoring_chunk_give_full_scorings_lanes) {
  props::DosaWorkloadParams p;
  p.keys = 20000, p.queries = 2, p.heads = 8;
  const props::DosaWorkload w = props::make_dosa_workload(p);
  const IndexKeys keys{KeyFormat::F32, std::as_bytes(std::span(w.keys)), p.dim};
  constexpr std::size_t k = 64;
  // seeds from the end of the context (a warm prior), so that the top-K lies among
  // the survivors, in every chunk
  std::vector<std::int32_t> seeds(2 * k);
  std::iota(seeds.begin(), seeds.end(), std::int32_t(p.keys - 2 * k));
  std::vector<DosaPlan> plans;
  for (std::size_t t = 0; t < p.queries; ++t)
    plans.push_back(cpu::plan_heads(
        std::span(w.queries).subspan(t * p.heads * p.dim, p.heads * p.dim),
        std::span(w.weights).subspan(t * p.heads, p.heads), keys, 2, cpu::plan_sample(seeds)));
  std::vector<std::int32_t> pruned(p.queries * k), full(p.queries * k);
  cpu::DosaStats stats;
  ASSERT_TRUE(cpu::dosa_topk(w.queries, w.weights, p.queries, keys, k, seeds, plans, pruned,
                             DosaOptions{false}, &stats)
                  .ok());
  EXPECT_GT(stats.survivors, 2 * 8192u);  // so one query's at least past its first chunk
  std::vector<float> scores(p.keys);
  for (std::size_t t = 0; t < p.queries; ++t) {
    ASSERT_TRUE(
        cpu::index_scores(std::span(w.queries).subspan(t * p.heads * p.dim, p.heads * p.dim),
                          std::span(w.weights).subspan(t * p.heads, p.heads), keys, scores)
            .ok());
    ASSERT_TRUE(cpu::valid_prefix_topk(scores, p.keys,
                                       std::vector<std::int32_t>{std::int32_t(p.keys)}, k,
                                       std::span(full).subspan(t * k, k))
                    .ok());
  }
  EXPECT_EQ(pruned, full);
}

}  // namespace aether
