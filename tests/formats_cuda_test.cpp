// Source 003 A.5 and A.3 through the CUDA store (GPU only; each skips without a
// device): the blocks' bytes, the encodings' boundary values and ties under both
// profiles as written into a cache, and refusals that leave the cache untouched.
// The model's and the CPU's: tests/formats_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "model/formats.hpp"
#include "props/support/formats_backends.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

namespace fe = formats_error;
using F = std::vector<float>;

#ifdef AETHER_HAVE_CUDA
// The cache after a CUDA store of `rows` at `slots` into a cache of 0x5a bytes.
std::vector<std::byte> stored(const CacheGeometry& g, const F& rows,
                              const std::vector<std::int32_t>& slots,
                              RoundingProfile profile = RoundingProfile::Cuda) {
  props::StoreCase c{g,     profile, rows,
                     slots, {},      std::vector<std::byte>(g.bytes(), std::byte{0x5a})};
  std::vector<std::byte> cache = c.before;
  EXPECT_TRUE(props::cuda_store_rows(c, cache).ok());
  return cache;
}
#endif

// A.5: 64 rows a 128-position C2 block: 33,792 bytes of FP8 main, 18,432 of FP4
// main, 4,352 of FP4 index; each row's bytes as the model packs them.
TEST(FormatsCuda, a_c2_block_holds_the_sources_bytes) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  for (const auto& [format, dim, bytes] :
       {std::tuple{CacheFormat::MainFp8, 512, 33792}, std::tuple{CacheFormat::MainFp4, 512, 18432},
        std::tuple{CacheFormat::IndexFp4, 128, 4352}}) {
    const CacheGeometry g{format, std::size_t(dim), 64, 1};
    EXPECT_EQ(g.bytes(), std::size_t(bytes));
    F row(static_cast<std::size_t>(dim));
    for (std::size_t i = 0; i < row.size(); ++i) row[i] = float(int(i % 11) - 5) / 3;
    std::vector<std::byte> want(g.bytes(), std::byte{0x5a});
    ASSERT_TRUE(
        model::store_rows(g, row, std::vector<std::int32_t>{63}, want, RoundingProfile::Cuda).ok());
    EXPECT_EQ(stored(g, row, {63}), want);
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

// E4M3 and E2M1 boundaries as the store writes them (scale 1: amax the largest value).
TEST(FormatsCuda, boundary_values_and_ties_are_stored_as_the_model_encodes_them) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const CacheGeometry fp8{CacheFormat::MainFp8, 32, 1, 1};
  F row(32, 0.0f);
  const F values{448,
                 432,
                 416,
                 std::ldexp(1.0f, -9),
                 std::ldexp(1.0f, -10),
                 3 * std::ldexp(1.0f, -10),
                 -0.0f,
                 -std::ldexp(1.0f, -12),
                 -448};
  std::copy(values.begin(), values.end(), row.begin());
  const auto cache = stored(fp8, row, {0});
  const std::uint8_t codes[] = {0x7e, 0x7e, 0x7d, 0x01, 0x00, 0x02, 0x80, 0x80, 0xfe};
  for (std::size_t i = 0; i < std::size(codes); ++i)
    EXPECT_EQ(std::uint8_t(cache[i]), codes[i]) << i;
  EXPECT_EQ(std::uint8_t(cache[32]), 127);  // the scale: 1
  // E2M1 ties: the even code (Cuda), the smaller magnitude (TiesTowardZero)
  const CacheGeometry fp4{CacheFormat::IndexFp4, 32, 1, 1};
  F ties(32, 0.0f);
  ties[0] = 6, ties[1] = 0.75f, ties[2] = 3.5f, ties[3] = 0.25f;
  for (const auto profile : {RoundingProfile::Cuda, RoundingProfile::TiesTowardZero}) {
    const auto c = stored(fp4, ties, {0}, profile);
    const bool even = profile == RoundingProfile::Cuda;
    EXPECT_EQ(std::uint8_t(c[0]), 7 | (even ? 2 : 1) << 4);  // 6, then 1.0 or 0.5
    EXPECT_EQ(std::uint8_t(c[1]), even ? 6 : 5);             // 4 or 3, then 0
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(FormatsCuda, refused_stores_leave_the_cache_untouched) {
#ifdef AETHER_HAVE_CUDA
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  const CacheGeometry g{CacheFormat::MainFp8, 32, 4, 2};
  const auto refused = [&](F rows, std::vector<std::int32_t> slots) {
    props::StoreCase c{g,    RoundingProfile::Cuda,
                       rows, slots,
                       {},   std::vector<std::byte>(g.bytes(), std::byte{0x5a})};
    auto cache = c.before;
    const auto st = props::cuda_store_rows(c, cache);
    EXPECT_EQ(cache, c.before);
    return st.ok() ? FormatsError{} : st.error();
  };
  F two(64, 1.0f);
  EXPECT_EQ(refused(two, {0, 8}), (FormatsError{fe::BadSlot{1, 8}}));
  EXPECT_EQ(refused(two, {3, 3}), (FormatsError{fe::BadSlot{1, 3}}));
  two[40] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(refused(two, {0, 1}), (FormatsError{fe::NonFiniteInput{40}}));
  EXPECT_EQ(refused(two, {-1, 1}), (FormatsError{fe::NonFiniteInput{40}}));
  two[40] = 1;
  two[5] = std::numeric_limits<float>::quiet_NaN();  // a placeholder's: never read
  props::StoreCase c{g,   RoundingProfile::Cuda,
                     two, {-1, 2},
                     {},  std::vector<std::byte>(g.bytes(), std::byte{0x5a})};
  auto cache = c.before;
  EXPECT_TRUE(props::cuda_store_rows(c, cache).ok());
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

}  // namespace
}  // namespace aether
