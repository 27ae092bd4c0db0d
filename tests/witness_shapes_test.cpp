// Boundary shapes of the witness backends' fast paths, against the model (not a
// source example; source 000's named tests are tests/witness_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "model/witness.hpp"
#include "props/support/compare.hpp"
#include "tests/witness_test.hpp"

namespace aether {
namespace {

using I = std::int32_t;
using V = std::vector<I>;

// Row widths at and past each register tile (4 * 256 * {1, 2, 4, 8} slots), widths that are not
// a multiple of 4, and the serving shape topk 2048, S 64.
TEST_P(Witness, wide_rows_match_the_model) {
  std::mt19937 rng(2048);
  for (std::size_t topk : {1020u, 1024u, 1028u, 2047u, 2048u, 2052u, 4096u, 8192u, 8196u, 12288u}) {
    const V lens{131072, 4096, 100, 0, 2147483647, 63};
    V learned;
    for (I len : lens) {
      std::uniform_int_distribution<I> token(-1, I(std::int64_t(std::max(len, 1)) * 3 / 4));
      for (std::size_t i = 0; i < topk; ++i) learned.push_back(token(rng));
    }
    const std::size_t keep = topk - 64;
    const auto want = model::apply_topology_witnesses(learned, topk, lens, keep, 64, 64);
    ASSERT_TRUE(want.ok());
    V out(learned.size(), 0x5a5a5a5a);
    ASSERT_TRUE(backend.apply(learned, topk, lens, keep, 64, 64, out).ok());
    EXPECT_EQ(props::diff_report<I>(want.value(), out, "apply topk=" + std::to_string(topk)), "");
    EXPECT_EQ(props::diff_report<I>(want.value(), scatter(learned, topk, lens, 64),
                                    "scatter topk=" + std::to_string(topk)),
              "");
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Witness, ::testing::Values("model", "cpu", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aether
