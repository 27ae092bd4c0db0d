// Source 003 A.3 on the model and the CPU alike: a compressed row's position, the
// store into a paged cache and its read side, what a refused store may change, and
// the store's and read side's refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "model/formats.hpp"
#if defined(AETHER_HAVE_FP_CONVERSIONS)
#include "impl/cpu/formats.hpp"
#endif

namespace aether {
namespace {

using F = std::vector<float>;
using R = model::Rational;
namespace fe = formats_error;
constexpr auto kCuda = RoundingProfile::Cuda;

// A.3: compressed row j carries position j r, the start of its group: equal row
// numbers at other ratios are other positions.
TEST(Formats, a_compressed_row_carries_the_start_of_its_group) {
  EXPECT_EQ(model::compressed_row_position(3, 4), 12);
  EXPECT_EQ(model::compressed_row_position(3, 2), 6);
  EXPECT_EQ(model::compressed_row_position(0, 4), 0);
}

// A.3's store: rows at their slots, a placeholder (slot -1) never a cache entry,
// every other byte untouched; the read side gathers and dequantizes; the index
// format's rows land in their block's sections. Model and CPU write the same bytes.
TEST(Formats, store_writes_rows_at_their_slots_and_gather_reads_them) {
  for (const CacheFormat format :
       {CacheFormat::MainFp8, CacheFormat::MainFp4, CacheFormat::IndexFp4}) {
    const CacheGeometry g{format, 64, 4, 2};
    F rows(3 * 64);
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = float(int(i % 13) - 6) / 4;
    rows[64] = std::numeric_limits<float>::quiet_NaN();  // the placeholder's: never read
    const std::vector<std::int32_t> slots{5, -1, 2};
    std::vector<std::byte> cache(g.bytes(), std::byte{0x5a});
    ASSERT_TRUE(model::store_rows(g, rows, slots, cache, kCuda).ok());
    const auto back = model::gather_rows(g, cache, std::vector<std::int32_t>{2, 5, -1}).value();
    const auto q0 = model::quantize_row(format, std::span(rows).first(64), kCuda).value();
    const auto v0 = model::dequantize_row(format, q0);
    EXPECT_TRUE(std::equal(v0.begin(), v0.end(), back.begin() + 64));  // slot 5: row 0
    EXPECT_TRUE(std::all_of(back.begin() + 128, back.end(), [](const R& x) { return x == 0; }));
    // only two rows' bytes changed
    const std::size_t changed = std::size_t(std::count_if(
        cache.begin(), cache.end(), [](std::byte b) { return b != std::byte{0x5a}; }));
    EXPECT_LE(changed, 2 * cache_row_bytes(format, 64));
    EXPECT_GT(changed, 0u);
#if defined(AETHER_HAVE_FP_CONVERSIONS)
    std::vector<std::byte> cpu_cache(g.bytes(), std::byte{0x5a});
    ASSERT_TRUE(cpu::store_rows(g, rows, slots, cpu_cache).ok());
    EXPECT_EQ(cpu_cache, cache);
    const auto cpu_back = cpu::gather_rows(g, cache, std::vector<std::int32_t>{2, 5, -1}).value();
    for (std::size_t i = 0; i < back.size(); ++i) EXPECT_EQ(model::exact(cpu_back[i]), back[i]);
#endif
  }
  // IndexFp4, D 128, blocks of 4 rows (272 bytes): slot 5 is row 1 of block 1, its
  // data at 272 + 64, its scales at 272 + 4 x 64 + 4
  const CacheGeometry g{CacheFormat::IndexFp4, 128, 4, 2};
  std::vector<std::byte> cache(g.bytes(), std::byte{0});
  ASSERT_TRUE(model::store_rows(g, F(128, 1.0f), std::vector<std::int32_t>{5}, cache, kCuda).ok());
  for (std::size_t b = 0; b < cache.size(); ++b) {
    const bool data = b >= 272 + 64 && b < 272 + 128, scale = b >= 272 + 260 && b < 272 + 264;
    EXPECT_EQ(cache[b] != std::byte{0}, data || scale) << "byte " << b;
  }
}

// SPEC section 3 for the store: the rows a refused call may change are those at its
// own slots inside the cache, each once; a slot's bytes are its packed row, or an
// IndexFp4 row's data and scales in its block's sections.
TEST(Formats, a_refused_store_may_change_only_its_own_slots) {
  const CacheGeometry g{CacheFormat::MainFp8, 32, 4, 2};
  EXPECT_EQ(
      model::slots_a_refused_store_may_change(g, std::vector<std::int32_t>{5, -1, 8, 2, 5, -2}),
      (std::vector<std::size_t>{2, 5}));
  const auto main_bytes = model::bytes_of_slot(g, 2);
  ASSERT_EQ(main_bytes.size(), 33u);
  EXPECT_EQ(main_bytes.front(), 66u);
  EXPECT_EQ(main_bytes.back(), 98u);
  // IndexFp4, D 128, blocks of 4 rows (272 bytes): slot 5's data at 272 + 64, its
  // scales at 272 + 4 x 64 + 4
  const auto index_bytes = model::bytes_of_slot(CacheGeometry{CacheFormat::IndexFp4, 128, 4, 2}, 5);
  ASSERT_EQ(index_bytes.size(), 68u);
  EXPECT_EQ(index_bytes[0], 336u);
  EXPECT_EQ(index_bytes[63], 399u);
  EXPECT_EQ(index_bytes[64], 532u);
  EXPECT_EQ(index_bytes[67], 535u);
}

TEST(Formats, store_refusals_leave_the_cache_untouched) {
  const CacheGeometry g{CacheFormat::MainFp8, 32, 4, 2};
  const std::vector<std::byte> fresh(g.bytes(), std::byte{0x5a});
  const auto refused = [&](const F& rows, const std::vector<std::int32_t>& slots) {
    auto cache = fresh;
    const auto st = model::store_rows(g, rows, slots, cache, kCuda);
    EXPECT_EQ(cache, fresh);
#if defined(AETHER_HAVE_FP_CONVERSIONS)
    auto cpu_cache = fresh;
    const auto cpu_st = cpu::store_rows(g, rows, slots, cpu_cache);
    EXPECT_EQ(cpu_cache, fresh);
    EXPECT_EQ(cpu_st.ok(), st.ok());
    if (!st.ok() && !cpu_st.ok()) EXPECT_EQ(cpu_st.error(), st.error());
#endif
    return st.ok() ? FormatsError{} : st.error();
  };
  F two(64, 1.0f);
  EXPECT_EQ(refused(two, {0, 8}), (FormatsError{fe::BadSlot{1, 8}}));
  EXPECT_EQ(refused(two, {3, 3}), (FormatsError{fe::BadSlot{1, 3}}));
  EXPECT_EQ(refused(two, {-2, 3}), (FormatsError{fe::BadSlot{0, -2}}));
  EXPECT_EQ(refused(two, {3}), (FormatsError{fe::ShapeMismatch{2, 1}}));
  two[40] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(refused(two, {0, 1}), (FormatsError{fe::NonFiniteInput{40}}));
  auto cache = fresh;
  EXPECT_EQ(
      model::store_rows(g, two, std::vector<std::int32_t>{0, 1}, std::span(cache).first(8), kCuda)
          .error(),
      (FormatsError{fe::ShapeMismatch{g.bytes(), 8}}));
  EXPECT_EQ(model::gather_rows(g, fresh, std::vector<std::int32_t>{9}).error(),
            (FormatsError{fe::BadSlot{0, 9}}));
  // the geometry checks, in order: the format, whole groups a row, the cache's length
  const CacheGeometry index8{CacheFormat::IndexFp8, 32, 4, 2}, odd{CacheFormat::MainFp8, 40, 4, 2};
  const std::vector<std::int32_t> none;
  EXPECT_EQ(model::gather_rows(index8, fresh, none).error(),
            (FormatsError{fe::UnsupportedFormat{CacheFormat::IndexFp8}}));
  EXPECT_EQ(model::gather_rows(odd, fresh, none).error(),
            (FormatsError{fe::ShapeMismatch{32, 40}}));
  EXPECT_EQ(model::gather_rows(g, std::span(fresh).first(8), none).error(),
            (FormatsError{fe::ShapeMismatch{g.bytes(), 8}}));
#if defined(AETHER_HAVE_FP_CONVERSIONS)
  EXPECT_EQ(
      cpu::store_rows(g, two, std::vector<std::int32_t>{0, 1}, std::span(cache).first(8)).error(),
      (FormatsError{fe::ShapeMismatch{g.bytes(), 8}}));
  EXPECT_EQ(cpu::gather_rows(index8, fresh, none).error(),
            (FormatsError{fe::UnsupportedFormat{CacheFormat::IndexFp8}}));
  EXPECT_EQ(cpu::gather_rows(odd, fresh, none).error(), (FormatsError{fe::ShapeMismatch{32, 40}}));
  EXPECT_EQ(cpu::gather_rows(g, std::span(fresh).first(8), none).error(),
            (FormatsError{fe::ShapeMismatch{g.bytes(), 8}}));
#endif
}

}  // namespace
}  // namespace aether
