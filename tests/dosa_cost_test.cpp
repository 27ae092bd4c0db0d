// DoSA's cost rules, host logic run without a device: CUDA's (impl/cuda/dosa_host.hpp:
// pruning_pays), the lengths and the survivor rate at which docs/dosa.md says it
// stops scoring in full, at the benchmark's T 64, H 64; and the CPU decode path's
// list limit, past which the row's top-k ranks the keys at or above tau.
#include <gtest/gtest.h>

#include <vector>

#include "impl/cpu/dosa.hpp"
#include "impl/cpu/indexer.hpp"

#ifdef AETHER_HAVE_CUDA
#include "impl/cuda/dosa_host.hpp"
#endif

namespace aether {
namespace {

#ifdef AETHER_HAVE_CUDA
bool pays(std::size_t keys, std::size_t seeds, std::size_t width, double rho = 0) {
  return cuda::dosa::pruning_pays(
      {.queries = 64, .keys = keys, .seeds = seeds, .heads = 64, .width = width}, rho);
}
#endif

TEST(DosaCost, screens_in_full_below_the_documented_lengths) {
#ifdef AETHER_HAVE_CUDA
  // one-tile screens and 4096 seeds from about L 116000, 12288 seeds from 155000,
  // two-tile screens from 222000
  EXPECT_FALSE(pays(116000, 4096, 16));
  EXPECT_TRUE(pays(116500, 4096, 16));
  EXPECT_FALSE(pays(155000, 12288, 16));
  EXPECT_TRUE(pays(155500, 12288, 16));
  EXPECT_FALSE(pays(221800, 4096, 32));
  EXPECT_TRUE(pays(222000, 4096, 32));
  // so at the benchmark's L 131072 only one-tile screens with 4096 seeds are probed
  EXPECT_FALSE(pays(131072, 12288, 16));
  EXPECT_FALSE(pays(131072, 4096, 32));
  EXPECT_FALSE(pays(32768, 4096, 16));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(DosaCost, the_probe_sends_more_than_about_fifteen_permille_survivors_to_full_scoring) {
#ifdef AETHER_HAVE_CUDA
  EXPECT_TRUE(pays(131072, 4096, 16, 0.0153));
  EXPECT_FALSE(pays(131072, 4096, 16, 0.0154));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(DosaCost, the_cpu_decode_path_lists_up_to_a_quarter_of_a_long_row) {
  EXPECT_EQ(cpu::decode_list_limit(100), 4096u);
  EXPECT_EQ(cpu::decode_list_limit(16384), 4096u);
  EXPECT_EQ(cpu::decode_list_limit(131072), 32768u);
}

// A long row whose recent keys set tau low: more than a quarter of it at or above
// tau, so that the row's top-k ranks it, with the best key last and ties at the
// K-th score (998, 32 keys); the lanes are the top-k's, as the list's would be.
TEST(DosaCost, a_long_list_is_ranked_by_the_rows_top_k) {
  constexpr std::size_t kRow = 32768, kK = 64;
  std::vector<float> scores(kRow);
  for (std::size_t j = 0; j < kRow; ++j) scores[j] = float(j % 1000);
  scores[kRow - 1] = 5000;  // the best key, last
  std::vector<std::int32_t> recent;
  for (std::int32_t j = 0; j < std::int32_t(kK); ++j) recent.push_back(j * 500 + 300);
  // scores 300 and 800, tau 300: keys scoring 300..999, 70% of the row
  std::vector<std::int32_t> got(kK, 77), want(kK);
  ASSERT_TRUE(cpu::decode_topk(scores, recent, kK, got).ok());
  const std::int32_t end[] = {std::int32_t(kRow)};
  ASSERT_TRUE(cpu::valid_prefix_topk(scores, kRow, end, kK, want).ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.back(), std::int32_t(kRow - 1));
}

}  // namespace
}  // namespace aether
