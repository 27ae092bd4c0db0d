// Source 003 A.5 and A.3 through the CUDA store (GPU only; each skips without a
// device), every body run in each launch mode (props/support/cuda_launch.hpp): the
// blocks' bytes, the encodings' boundary values and ties under both profiles as
// written into a cache, and refusals, which change at most the rows at the
// refused call's own slots (docs/formats.md). The model's and the CPU's:
// tests/formats_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "impl/cpu/formats.hpp"
#include "impl/cuda/formats.hpp"
#include "model/formats.hpp"
#include "props/support/device_buffer.hpp"
#include "props/support/formats_backends.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

#ifdef AETHER_HAVE_CUDA
namespace fe = formats_error;
using F = std::vector<float>;
using props::Mode;

class FormatsCuda : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  }
  // A store of `rows` at `slots` into a cache of 0x5a bytes, in this test's mode.
  Status<FormatsError> store(const CacheGeometry& g, const F& rows,
                             const std::vector<std::int32_t>& slots, std::vector<std::byte>& cache,
                             RoundingProfile profile = RoundingProfile::Cuda) {
    cache.assign(g.bytes(), std::byte{0x5a});
    const props::StoreCase c{g, profile, rows, slots, {}, cache};
    return props::cuda_store_rows(c, cache, GetParam());
  }
  std::vector<std::byte> stored(const CacheGeometry& g, const F& rows,
                                const std::vector<std::int32_t>& slots,
                                RoundingProfile profile = RoundingProfile::Cuda) {
    std::vector<std::byte> cache;
    EXPECT_TRUE(store(g, rows, slots, cache, profile).ok());
    return cache;
  }
};

// A.5: 64 rows a 128-position C2 block: 33,792 bytes of FP8 main, 18,432 of FP4
// main, 4,352 of FP4 index; each row's bytes as the model packs them.
TEST_P(FormatsCuda, a_c2_block_holds_the_sources_bytes) {
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
    EXPECT_EQ(props::cache_report(g, want, stored(g, row, {63})), "");
  }
}

// Rows longer than a chunk (kChunk, 512 elements): MainFp8 and IndexFp4 at D 1056,
// MainFp4 at D 1040, each row's chunks where the model places them, and read back.
TEST_P(FormatsCuda, rows_past_a_chunk_are_stored_and_read_whole) {
  for (const auto& [format, dim] :
       {std::pair{CacheFormat::MainFp8, 1056}, std::pair{CacheFormat::MainFp4, 1040},
        std::pair{CacheFormat::IndexFp4, 1056}}) {
    const CacheGeometry g{format, std::size_t(dim), 3, 2};
    F rows(2 * std::size_t(dim));
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = float(int(i % 23) - 11) / 5;
    const std::vector<std::int32_t> slots{4, 1};
    std::vector<std::byte> want(g.bytes(), std::byte{0x5a});
    ASSERT_TRUE(model::store_rows(g, rows, slots, want, RoundingProfile::Cuda).ok());
    const auto cache = stored(g, rows, slots);
    EXPECT_EQ(props::cache_report(g, want, cache), "");
    const props::StoreCase c{g, RoundingProfile::Cuda, rows, slots, {1, -1, 4}, cache};
    const auto back = props::cuda_gather_rows(c, cache, GetParam());
    ASSERT_TRUE(back.ok());
    const auto values = model::gather_rows(g, want, c.reads).value();
    for (std::size_t i = 0; i < values.size(); ++i)
      EXPECT_EQ(model::exact(back.value()[i]), values[i]) << i;
  }
}

// IndexFp4 calls of more rows than the device's warps hold at once in batches of
// 32 (the H200 holds 4224 of the store's warps: 135,168 rows), a warp a batch, so
// that the blocks run in three waves: at D 96 items (512 values) end inside rows, at
// D 128 each holds four. Every byte as the CPU writes it
// (tests/formats_test.cpp ties the CPU to the model), placeholders among the
// slots; then the same rows refused for a slot given twice, one outside the cache
// and a NaN, each late in the call.
TEST_P(FormatsCuda, index_stores_of_many_batches_a_warp_equal_the_cpu) {
  for (const std::size_t dim : {96, 128}) {
    const std::size_t n = 300000;
    const CacheGeometry g{CacheFormat::IndexFp4, dim, 48, 6300};  // 48: not a power of two
    F rows(n * dim);
    for (std::size_t i = 0; i < rows.size(); ++i)
      rows[i] = float(int((i * 2654435761u) % 97) - 48) / float(1 + i % 7);
    std::vector<std::int32_t> slots(n);
    for (std::size_t j = 0; j < n; ++j)
      slots[j] = j % 13 == 5 ? -1 : std::int32_t((j * 40507) % g.slots());  // distinct
    std::vector<std::byte> want(g.bytes(), std::byte{0x5a});
    ASSERT_TRUE(cpu::store_rows(g, rows, slots, want, RoundingProfile::Cuda).ok());
    EXPECT_EQ(props::cache_report(g, want, stored(g, rows, slots)), "") << "D " << dim;
    const auto refused = [&](const F& r, const std::vector<std::int32_t>& s) {
      std::vector<std::byte> cache, cpu_cache(g.bytes(), std::byte{0x5a});
      const auto got = store(g, r, s, cache);
      const auto want = cpu::store_rows(g, r, s, cpu_cache, RoundingProfile::Cuda);
      ASSERT_FALSE(want.ok());
      EXPECT_EQ(got.ok() ? FormatsError{} : got.error(), want.error()) << "D " << dim;
    };
    auto twice = slots;
    twice[n - 3] = twice[n - 900];
    refused(rows, twice);
    auto outside = slots;
    outside[n - 2] = std::int32_t(g.slots());
    refused(rows, outside);
    const std::size_t late = n - 8;  // a stored row: a placeholder's values are never read
    ASSERT_NE(slots[late], -1);
    F nan = rows;
    nan[late * dim + dim - 1] = std::numeric_limits<float>::quiet_NaN();
    refused(nan, slots);
  }
}

// E4M3 and E2M1 boundaries as the store writes them (scale 1: amax the largest value).
TEST_P(FormatsCuda, boundary_values_and_ties_are_stored_as_the_model_encodes_them) {
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
}

// The model's first refusal; the rows outside the call's slots untouched (a slot
// outside the cache is never written), a placeholder's NaN never read; with
// IndexFp4's sections as with MainFp8's rows.
TEST_P(FormatsCuda, refused_stores_change_only_their_own_slots) {
  for (const auto format : {CacheFormat::MainFp8, CacheFormat::IndexFp4}) {
    SCOPED_TRACE(props::format_name(format));
    const CacheGeometry g{format, 32, 4, 2};
    const auto refused = [&](const F& rows, const std::vector<std::int32_t>& slots) {
      std::vector<std::byte> cache;
      const auto st = store(g, rows, slots, cache);
      EXPECT_EQ(props::cache_report(g, std::vector<std::byte>(g.bytes(), std::byte{0x5a}), cache,
                                    props::bytes_a_refused_store_may_change(g, slots)),
                "");
      return st.ok() ? FormatsError{} : st.error();
    };
    F two(64, 1.0f);
    EXPECT_EQ(refused(two, {0, 8}), (FormatsError{fe::BadSlot{1, 8}}));
    EXPECT_EQ(refused(two, {3, 3}), (FormatsError{fe::BadSlot{1, 3}}));
    EXPECT_EQ(refused(two, {-2, 3}), (FormatsError{fe::BadSlot{0, -2}}));
    F three(96, 1.0f);
    EXPECT_EQ(refused(three, {5, 2, 5}), (FormatsError{fe::BadSlot{2, 5}}));
    EXPECT_EQ(refused(three, {2, 9, 2}), (FormatsError{fe::BadSlot{1, 9}}));
    two[40] = std::numeric_limits<float>::infinity();
    EXPECT_EQ(refused(two, {0, 1}), (FormatsError{fe::NonFiniteInput{40}}));
    EXPECT_EQ(refused(two, {-1, 1}), (FormatsError{fe::NonFiniteInput{40}}));
    EXPECT_EQ(refused(two, {1, 1}), (FormatsError{fe::BadSlot{1, 1}}));  // slots first
    two[40] = 1;
    two[5] = std::numeric_limits<float>::quiet_NaN();  // a placeholder's: never read
    std::vector<std::byte> cache;
    EXPECT_TRUE(store(g, two, {-1, 2}, cache).ok());
    // shape refusals: nothing queued, the cache as it was
    EXPECT_EQ(refused(two, {3}), (FormatsError{fe::ShapeMismatch{2, 1}}));
    cache.assign(g.bytes(), std::byte{0x5a});
    const CacheGeometry odd{format, 40, 4, 2};
    const props::StoreCase c{odd, RoundingProfile::Cuda, F(80, 1.0f), {0, 1}, {}, cache};
    EXPECT_EQ(props::cuda_store_rows(c, cache, GetParam()).error(),
              (FormatsError{fe::ShapeMismatch{32, 40}}));
    EXPECT_EQ(props::cache_report(g, c.before, cache), "");  // the cache is g's
  }
}

// A slot given twice, refused at the later row, the lowest such row first, with a
// word a slot for the claims (8 slots: at most twice the open-addressed table's
// entries) and with the open-addressed table (4096 slots), whose probes pass other
// slots' entries (40 rows on 128 entries); a call's bytes as the CPU writes them,
// a refused call's only at its own slots.
TEST_P(FormatsCuda, a_slot_given_twice_is_refused_at_its_later_row_in_either_claims_table) {
  for (const auto format : {CacheFormat::MainFp8, CacheFormat::IndexFp4})
    for (const std::size_t blocks : {2, 1024}) {
      SCOPED_TRACE(std::string(props::format_name(format)) + ", " + std::to_string(blocks) +
                   " blocks");
      const CacheGeometry g{format, 32, 4, blocks};
      const auto refusal = [&](const F& rows, const std::vector<std::int32_t>& slots) {
        std::vector<std::byte> cache, want(g.bytes(), std::byte{0x5a});
        const auto st = store(g, rows, slots, cache);
        const auto cpu = cpu::store_rows(g, rows, slots, want, RoundingProfile::Cuda);
        const FormatsError got = st.ok() ? FormatsError{} : st.error();
        EXPECT_EQ(got, cpu.ok() ? FormatsError{} : cpu.error());
        if (cpu.ok())
          EXPECT_EQ(props::cache_report(g, want, cache), "");
        else  // two rows on one slot: either row's bytes
          EXPECT_EQ(props::cache_report(g, std::vector<std::byte>(g.bytes(), std::byte{0x5a}),
                                        cache, props::bytes_a_refused_store_may_change(g, slots)),
                    "");
        return got;
      };
      const F three(96, 1.5f);
      EXPECT_EQ(refusal(three, {5, 2, 5}), (FormatsError{fe::BadSlot{2, 5}}));
      EXPECT_EQ(refusal(three, {2, 7, 2}), (FormatsError{fe::BadSlot{2, 2}}));
      EXPECT_EQ(refusal(three, {3, 3, 3}), (FormatsError{fe::BadSlot{1, 3}}));
      EXPECT_EQ(refusal(three, {6, 1, 1}), (FormatsError{fe::BadSlot{2, 1}}));
      std::vector<std::int32_t> spread(40);
      for (std::size_t j = 0; j < spread.size(); ++j)
        spread[j] = std::int32_t((j * 97 + 3) % g.slots());
      const F forty(40 * 32, -2.0f);
      if (blocks > 2) {
        EXPECT_EQ(refusal(forty, spread), FormatsError{});
        auto twice = spread;
        twice[31] = twice[17], twice[36] = twice[9];
        EXPECT_EQ(refusal(forty, twice), (FormatsError{fe::BadSlot{31, twice[17]}}));
      }
    }
}

// Rows not on a 16-byte boundary (the store reads 16-byte words): refused before
// anything is queued, the cache as it was; an empty call is not.
TEST_P(FormatsCuda, rows_off_a_16_byte_boundary_are_refused_untouched) {
  for (const auto format : {CacheFormat::MainFp8, CacheFormat::IndexFp4}) {
    SCOPED_TRACE(props::format_name(format));
    const CacheGeometry g{format, 32, 4, 2};
    const std::vector<std::byte> before(g.bytes(), std::byte{0x5a});
    props::DeviceBuffer<float> rows{std::span<const float>(F(33, 1.0f))};
    props::DeviceBuffer<std::int32_t> slots{std::span<const std::int32_t>(std::vector{0})};
    props::DeviceBuffer<std::byte> cache{std::span<const std::byte>(before)};
    props::DeviceBuffer<cuda::DeviceVerdict> verdict{
        std::span<const cuda::DeviceVerdict>(std::vector<cuda::DeviceVerdict>(1))};
    const auto off = rows.span().subspan(1);
    const FormatsError misaligned = fe::DeviceFailure{int(cudaErrorMisalignedAddress)};
    const auto st =
        GetParam() == Mode::Waiting
            ? cuda::store_rows(g, off, slots.span(), cache.span())
            : cuda::enqueue_store_rows(g, off, slots.span(), cache.span(), verdict.span().data());
    EXPECT_EQ(st.ok() ? FormatsError{} : st.error(), misaligned);
    std::vector<std::byte> after(g.bytes());
    cache.download(after);
    EXPECT_EQ(props::cache_report(g, before, after), "");
    // an empty call reads no rows: accepted wherever they lie
    EXPECT_TRUE(
        cuda::store_rows(g, off.subspan(0, 0), slots.span().subspan(0, 0), cache.span()).ok());
  }
}

// The read side's refusals: a slot outside the cache (by row) before a never-stored
// slot's NaN scale (by output value).
TEST_P(FormatsCuda, refused_reads_name_the_models_first_refusal) {
  const CacheGeometry g{CacheFormat::MainFp8, 32, 4, 2};
  std::vector<std::byte> cache = stored(g, F(32, 1.0f), {3});
  cache[5 * 33 + 32] = std::byte{0xff};  // slot 5's scale: NaN
  const auto read = [&](std::vector<std::int32_t> reads) {
    const props::StoreCase c{g, RoundingProfile::Cuda, {}, {}, std::move(reads), cache};
    const auto got = props::cuda_gather_rows(c, cache, GetParam());
    return got.ok() ? FormatsError{} : got.error();
  };
  EXPECT_EQ(read({3, 5}), (FormatsError{fe::NonFiniteInput{32}}));
  EXPECT_EQ(read({5, 8}), (FormatsError{fe::BadSlot{1, 8}}));
  EXPECT_EQ(read({-1, -3}), (FormatsError{fe::BadSlot{1, -3}}));
}

// Queued stores take their claims' tables in stream order: four queued behind a host
// function that holds their stream each return before it lets go (a store that
// waited on the host for an earlier call's table would wait for the held stream),
// and afterwards the cache equals the model's.
TEST(FormatsCudaQueue, stores_return_while_their_stream_is_held) {
  if (!props::gpu_present()) GTEST_SKIP() << "no CUDA device visible";
  constexpr std::size_t kCalls = 4, kRows = 16, kDim = 128;
  const CacheGeometry g{CacheFormat::IndexFp4, kDim, 64, 1};
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  F rows(kCalls * kRows * kDim);
  for (float& x : rows) x = normal(rng);
  std::vector<std::int32_t> slots(kCalls * kRows);
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = std::int32_t(slots.size() - 1 - i);
  std::vector<std::byte> want(g.bytes(), std::byte{0x5a});
  ASSERT_TRUE(model::store_rows(g, rows, slots, want, RoundingProfile::Cuda).ok());

  props::DeviceBuffer<float> d_rows{std::span<const float>(rows)};
  props::DeviceBuffer<std::int32_t> d_slots{std::span<const std::int32_t>(slots)};
  props::DeviceBuffer<std::byte> cache{
      std::span<const std::byte>(std::vector<std::byte>(g.bytes(), std::byte{0x5a}))};
  props::DeviceBuffer<cuda::DeviceVerdict> verdicts{
      std::span<const cuda::DeviceVerdict>(std::vector<cuda::DeviceVerdict>(kCalls))};
  const props::Held held = props::queue_while_held([&](cudaStream_t stream) {
    for (std::size_t c = 0; c < kCalls; ++c)
      if (!cuda::enqueue_store_rows(g, d_rows.span().subspan(c * kRows * kDim, kRows * kDim),
                                    d_slots.span().subspan(c * kRows, kRows), cache.span(),
                                    verdicts.span().data() + c, RoundingProfile::Cuda, stream)
               .ok())
        return false;
    return true;
  });
  ASSERT_TRUE(held.ok) << "a store, or the stream's work, failed";
  EXPECT_TRUE(held.returned) << "a queued store waited for its held stream";
  std::vector<cuda::DeviceVerdict> got(kCalls);
  verdicts.download(got);
  for (const auto& v : got) EXPECT_TRUE(cuda::formats_verdict(v).ok());
  std::vector<std::byte> after(g.bytes());
  cache.download(after);
  EXPECT_EQ(props::cache_report(g, want, after), "");
}

INSTANTIATE_TEST_SUITE_P(EveryLaunch, FormatsCuda,
                         ::testing::Values(Mode::Waiting, Mode::Queued, Mode::Captured),
                         [](const auto& info) { return props::mode_name(info.param); });
#else
TEST(FormatsCuda, skipped) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace aether
