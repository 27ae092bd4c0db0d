// CUDA DoSA's cost rule (impl/cuda/dosa_host.hpp: pruning_pays), host logic run
// without a device: the lengths and the survivor rate at which docs/dosa.md says it
// stops scoring in full, at the benchmark's T 64, H 64.
#include <gtest/gtest.h>

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

TEST(DosaCost, the_probe_sends_more_than_about_six_permille_survivors_to_full_scoring) {
#ifdef AETHER_HAVE_CUDA
  EXPECT_TRUE(pays(131072, 4096, 16, 0.0060));
  EXPECT_FALSE(pays(131072, 4096, 16, 0.0062));
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace aether
