// The worked examples of source 001 on the CUDA backend (GPU only; they skip
// without a device): bf16 queries, BF16 keys (every value here is a bf16). Its
// margin carries the tensor cores' error bound and, for a_A, the bf16 row's actual
// rounding (none here). The model's and the CPU's: tests/dosa_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "props/support/dosa_backends.hpp"
#include "props/support/dosa_bf16_case.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/property.hpp"

#ifdef AETHER_HAVE_CUDA
#include "impl/cuda/dosa_host.hpp"
#include "impl/cuda/dosa_kernels.hpp"
#endif

namespace aether {
namespace {

using F = std::vector<float>;
namespace de = dosa_error;

#ifdef AETHER_HAVE_CUDA
// The joint bound (tests/dosa_test.cpp): q_2 = 2 q_0 + 3 q_1, bound 12 w at k = (0, 4).
const F kJointQueries{1, 0, 0, 1, 2, 3};
const DosaPlan kJointPlan{{0, 1}, {{2, 0, 2.0f, {{1, 3.0f}}}}, {}};

std::vector<std::uint16_t> bf16(const F& v) { return props::bf16_bits(v); }
struct Bf16Keys {
  std::vector<std::uint16_t> bits;
  std::size_t dim;
  IndexKeys view() const { return {KeyFormat::BF16, std::as_bytes(std::span(bits)), dim}; }
};
double cuda_bound(const F& queries, const F& weights, const F& key, const DosaPlan& plan) {
  std::vector<double> u(1);
  const Bf16Keys keys{bf16(key), key.size()};
  EXPECT_TRUE(props::cuda_dosa_bounds(bf16(queries), weights, keys.view(), plan, u).ok());
  return u[0];
}
#endif

TEST(DosaCuda, weights_add_and_deduct_after_the_relu) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const Bf16Keys key{bf16({1, 1}), 2};
  std::vector<float> s(1);
  ASSERT_TRUE(props::cuda_index_scores(bf16({4, 0, 0, 3}), F{2, -1}, 1, key.view(), s).ok());
  EXPECT_EQ(s[0], 5.0f);
  ASSERT_TRUE(props::cuda_index_scores(bf16({4, 0, 0, -3}), F{2, -1}, 1, key.view(), s).ok());
  EXPECT_EQ(s[0], 8.0f);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(DosaCuda, the_threshold_excludes_below_tau_and_keeps_equality) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const Bf16Keys keys{bf16({9, 6, 2, 5, 6}), 1};
  const std::vector<std::int32_t> seeds{0, 1, 2};
  const std::vector<DosaPlan> plans{DosaPlan{{0}, {}, {}}};
  std::vector<std::int32_t> out(2, 77);
  DosaStats stats;
  ASSERT_TRUE(props::cuda_dosa_topk(bf16({1}), F{1}, 1, keys.view(), 2, seeds, plans, out,
                                    DosaOptions{false}, &stats)
                  .ok());
  EXPECT_EQ(out, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(stats.screened, 2u);
  EXPECT_EQ(stats.survivors, 1u);  // the key scoring 6
  // a seed given twice, and a wrong out length: refused, out untouched
  std::vector<std::int32_t> untouched(2, 77);
  EXPECT_EQ(props::cuda_dosa_topk(bf16({1}), F{1}, 1, keys.view(), 2, std::vector{0, 1, 1}, plans,
                                  untouched)
                .error(),
            (DosaError{de::BadSeed{2, 1}}));
  EXPECT_EQ(props::cuda_dosa_topk(bf16({1}), F{1}, 1, keys.view(), 2, seeds, plans,
                                  std::span(untouched).first(1))
                .error(),
            (DosaError{de::ShapeMismatch{2, 1}}));
  EXPECT_EQ(untouched, (std::vector<std::int32_t>{77, 77}));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(DosaCuda, an_anchor_bounds_an_omitted_positive_head) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  for (const float w : {1.0f, 2.0f}) {
    const double u = cuda_bound({1, 0, 2, 1}, {0, w}, {3, 4}, DosaPlan{{0}, {{1, 0, 2.0f}}, {}});
    EXPECT_GE(u, 11.0 * w);
    EXPECT_LT(u, 11.0 * w * (1 + 1e-4));
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(DosaCuda, further_anchors_bound_an_omitted_head_jointly) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  for (const float w : {1.0f, 2.0f}) {
    const double u = cuda_bound(kJointQueries, {0, 0, w}, {0, 4}, kJointPlan);
    EXPECT_GE(u, 12.0 * w);
    EXPECT_LT(u, 12.0 * w * (1 + 1e-4));
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(DosaCuda, aggregated_negative_heads_deduct_a_lower_bound) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const F queries{4, 0, 1, 0, 0, 1}, weights{1, -1, -1};
  const DosaPlan plan{{0}, {}, {1, 2}};
  const double tight = cuda_bound(queries, weights, {3, 4}, plan);
  EXPECT_GE(tight, 5.0);
  EXPECT_LT(tight, 5.0 * (1 + 1e-4));
  const double loose = cuda_bound(queries, weights, {3, -2}, plan);
  EXPECT_GE(loose, 11.0);
  EXPECT_LT(loose, 11.0 * (1 + 1e-4));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// More keys than one thread each in the most blocks the bound test launches (65535
// of 256 threads): the last key, past them, still survives and wins (scores 5 and 6
// for the seeds, 9 for the last key, 1 for every other).
TEST(DosaCuda, keys_past_the_bound_tests_grid_are_screened) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const std::size_t count = 65535 * 256 + 300, k = 2;
  F values(count, 1.0f);
  values[0] = 5;
  values[1] = 6;
  values[count - 1] = 9;
  const Bf16Keys keys{bf16(values), 1};
  const std::vector<std::int32_t> seeds{0, 1};
  const std::vector<DosaPlan> plans{DosaPlan{{0}, {}, {}}};
  std::vector<std::int32_t> got(k, 77), want(k, 77);
  DosaStats stats;
  ASSERT_TRUE(props::cuda_dosa_topk(bf16({1}), F{1}, 1, keys.view(), k, seeds, plans, got,
                                    DosaOptions{false}, &stats)
                  .ok());
  F scores(count);
  ASSERT_TRUE(props::cuda_index_scores(bf16({1}), F{1}, 1, keys.view(), scores).ok());
  ASSERT_TRUE(props::cuda_valid_prefix_topk(scores, count,
                                            std::vector<std::int32_t>{std::int32_t(count)}, k, want)
                  .ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, (std::vector<std::int32_t>{1, std::int32_t(count - 1)}));
  EXPECT_EQ(stats.survivors, 1u);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// Pruning forced where nearly every key survives, with seeds from the context's end
// (a warm prior), so that the top-K lies among the survivors of every block of the
// bound test: the lists the blocks fill together give full scoring's lanes. Two
// queries on 20000 keys take its grid of a key a thread, 64 on 100000 its grid of
// four (impl/cuda/dosa_kernels.cu: screen_keys).
TEST(DosaCuda, survivors_of_every_bound_test_block_give_full_scorings_lanes) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  for (const auto& [keys_count, queries] : {std::pair<std::size_t, std::size_t>{20000, 2},
                                            std::pair<std::size_t, std::size_t>{100000, 64}}) {
    props::DosaWorkloadParams p;
    p.keys = keys_count, p.queries = queries, p.heads = 8;
    const std::size_t n = p.queries, k = 64;
    props::Bf16DosaCase c = props::bf16_dosa_case(p, k, 2 * k, 2);
    std::iota(c.seeds.begin(), c.seeds.end(), std::int32_t(p.keys - 2 * k));
    const Bf16Keys keys{c.key_bits, p.dim};
    std::vector<std::int32_t> got(n * k, 77), want(n * k, 77);
    DosaStats stats;
    ASSERT_TRUE(props::cuda_dosa_topk(c.query_bits, c.weights, n, keys.view(), k, c.seeds, c.plans,
                                      got, DosaOptions{false}, &stats)
                    .ok());
    EXPECT_GT(stats.survivors, n * p.keys / 2);
    F scores(n * p.keys);
    ASSERT_TRUE(props::cuda_index_scores(c.query_bits, c.weights, n, keys.view(), scores).ok());
    ASSERT_TRUE(props::cuda_valid_prefix_topk(
                    scores, p.keys, std::vector<std::int32_t>(n, std::int32_t(p.keys)), k, want)
                    .ok());
    EXPECT_EQ(got, want) << p.keys << " keys, " << n << " queries";
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// The probe (the first query on the first keys: docs/dosa.md) runs only on a batch
// large enough for pruning to pay: 64 queries on 131072 keys (bench/dosa_bench_cuda's
// shape). It sends the default workload (every key survives) to full scoring and
// parallel heads (one exact anchor) to pruning; the lanes are full scoring's
// either way. (At 65536 keys the probe keeps 13659 of these heads' 13818 screened
// keys and falls back: one query decides for the batch.)
TEST(DosaCuda, the_probe_decides_and_the_lanes_stay_full_scorings) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  props::DosaWorkloadParams base;
  base.keys = 131072;
  for (const auto& [p, pruned] :
       {std::pair{base, false}, std::pair{props::parallel_heads(base), true}}) {
    const std::size_t n = p.queries, k = 2048;
    const props::Bf16DosaCase c = props::bf16_dosa_case(p, k, 4096, 15);
    const Bf16Keys keys{c.key_bits, p.dim};
    std::vector<std::int32_t> got(n * k, 77), want(n * k, 77);
    DosaStats stats;
    ASSERT_TRUE(props::cuda_dosa_topk(c.query_bits, c.weights, n, keys.view(), k, c.seeds, c.plans,
                                      got, {}, &stats)
                    .ok());
    EXPECT_EQ(stats.full_queries, pruned ? 0 : n)
        << "survivors " << stats.survivors << " of " << stats.screened << " screened";
    F scores(n * p.keys);
    ASSERT_TRUE(props::cuda_index_scores(c.query_bits, c.weights, n, keys.view(), scores).ok());
    ASSERT_TRUE(props::cuda_valid_prefix_topk(
                    scores, p.keys, std::vector<std::int32_t>(n, std::int32_t(p.keys)), k, want)
                    .ok());
    EXPECT_EQ(got, want);
    // A later plan is checked while the probe runs: its refusal is still the first in
    // the model's order (before too few seeds), and `out` keeps its bytes. Its last
    // retained head repeats its first, so its screen stays one tile wide and the batch
    // is still probed (a wider screen is scored in full at this length, every plan
    // checked first).
    std::vector<DosaPlan> bad = c.plans;
    bad[5].retained.back() = bad[5].retained.front();
    const std::span<const std::int32_t> all_seeds(c.seeds);
    for (const std::size_t seeds : {all_seeds.size(), k - 1})
      ASSERT_TRUE(cuda::dosa::pruning_pays({.queries = n,
                                            .keys = p.keys,
                                            .seeds = seeds,
                                            .heads = p.heads,
                                            .width = cuda::dosa::widest_screen(bad)},
                                           0));
    for (const auto s : {all_seeds, all_seeds.first(k - 1)}) {
      std::vector<std::int32_t> untouched(n * k, 77);
      const auto st =
          props::cuda_dosa_topk(c.query_bits, c.weights, n, keys.view(), k, s, bad, untouched);
      EXPECT_EQ(st.error(), (DosaError{de::BadPlan{bad[5].retained.front()}}));
      EXPECT_EQ(untouched, std::vector<std::int32_t>(n * k, 77));
    }
    EXPECT_EQ(props::cuda_dosa_topk(c.query_bits, c.weights, n, keys.view(), k,
                                    all_seeds.first(k - 1), c.plans, got)
                  .error(),
              (DosaError{de::TooFewSeeds{k - 1, k}}));
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// AETHER_DOSA_TRY as an if's statement before an else (dosa_decode.cu's tau: the
// seeds' select, else a fill): the else is the caller's, taken only when the
// condition fails, never after a call that succeeded. Host code: no device needed.
TEST(DosaCuda, the_try_macro_leaves_an_else_to_its_caller) {
#ifdef AETHER_HAVE_CUDA
  const auto branch = [](bool first, cudaError_t e, int& taken) -> Status<DosaError> {
    if (first)
      AETHER_DOSA_TRY((taken = 1, e));
    else
      AETHER_DOSA_TRY((taken = 2, e));
    return Ok{};
  };
  int taken = 0;
  EXPECT_TRUE(branch(true, cudaSuccess, taken).ok());
  EXPECT_EQ(taken, 1);
  EXPECT_TRUE(branch(false, cudaSuccess, taken).ok());
  EXPECT_EQ(taken, 2);
  EXPECT_EQ(branch(true, cudaErrorInvalidValue, taken).error(),
            (DosaError{de::DeviceFailure{int(cudaErrorInvalidValue)}}));
  EXPECT_EQ(taken, 1);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace aether
