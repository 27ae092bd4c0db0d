// The decode path of source 001 §1 on the CUDA backend (GPU only; it skips without
// a device): the hand example, the refusals, and more listed keys than the ranking
// block holds. The CPU's: tests/dosa_test.cpp.
#include <gtest/gtest.h>

#include <cmath>

#include "props/support/dosa_backends.hpp"
#include "props/support/property.hpp"

#ifdef AETHER_HAVE_CUDA
#include "impl/cuda/dosa_kernels.hpp"
#endif

namespace aether {
namespace {

using F = std::vector<float>;
namespace de = dosa_error;

// Decode (source §1): tau 6 from the recent keys' scores 9, 6, 2 at K = 2; the keys
// at or above it (9, 6, 6) ranked, the tie at 6 to the lower id. Fewer keys than K
// are ranked whole, -1 after them. Refusals in the model's order, out untouched.
TEST(DosaCuda, decode_ranks_the_keys_at_or_above_the_recent_threshold) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const F scores{9, 6, 2, 5, 6};
  std::vector<std::int32_t> out(2, 77);
  ASSERT_TRUE(props::cuda_decode_topk(scores, std::vector{0, 1, 2}, 2, out).ok());
  EXPECT_EQ(out, (std::vector<std::int32_t>{0, 1}));
  std::vector<std::int32_t> wide(4, 77);
  ASSERT_TRUE(props::cuda_decode_topk(F{2, 7, 7}, std::vector<std::int32_t>{}, 4, wide).ok());
  EXPECT_EQ(wide, (std::vector<std::int32_t>{0, 1, 2, -1}));
  std::vector<std::int32_t> untouched(2, 77);
  const auto refusal = [&](const F& s, const std::vector<std::int32_t>& recent,
                           std::span<std::int32_t> o) {
    return props::cuda_decode_topk(s, recent, 2, o).error();
  };
  EXPECT_EQ(refusal(F{9, 6, 2, NAN, 6}, {0, 9}, untouched), (DosaError{de::NonFiniteInput{3, 3}}));
  EXPECT_EQ(refusal(scores, {0, 1, 0}, untouched), (DosaError{de::BadSeed{2, 0}}));
  EXPECT_EQ(refusal(scores, {0}, untouched), (DosaError{de::TooFewSeeds{1, 2}}));
  EXPECT_EQ(refusal(scores, {0, 1}, std::span(untouched).first(1)),
            (DosaError{de::ShapeMismatch{2, 1}}));
  EXPECT_EQ(untouched, (std::vector<std::int32_t>{77, 77}));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// Decode with more keys at or above tau than the ranking block holds (the kernel's
// own capacity, every key tied with the recent ones): the block writes nothing and
// the top-k over the row ranks them, the same lanes.
TEST(DosaCuda, decode_past_the_ranking_blocks_capacity_ranks_by_the_top_k) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const std::size_t keys = cuda::dosa::kMergeCapacity + 5;
  F scores(keys, 1.0f);
  scores[17] = 2.0f, scores[keys - 1] = 3.0f;
  std::vector<std::int32_t> out(2, 77);
  ASSERT_TRUE(props::cuda_decode_topk(scores, std::vector{0, 1}, 2, out).ok());
  EXPECT_EQ(out, (std::vector<std::int32_t>{17, std::int32_t(keys - 1)}));
  std::vector<std::int32_t> ties(3, 77);  // all tied but the best: the lower ids
  ASSERT_TRUE(props::cuda_decode_topk(scores, std::vector{4, 5, 6}, 3, ties).ok());
  EXPECT_EQ(ties, (std::vector<std::int32_t>{0, 17, std::int32_t(keys - 1)}));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace aether
