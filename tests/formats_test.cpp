// Source 003 A.5 on the codecs, model and CPU alike: the rows' and blocks' bytes,
// the encodings' boundary values (448, 464, 480, subnormals, ties, -0), scale
// boundaries where amax / max is a power of two or one ulp above one, the
// rounding profiles, and the refusals (the store: tests/formats_store_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "model/formats.hpp"
#include "props/support/agreement.hpp"
#if defined(AETHER_HAVE_FP_CONVERSIONS)
#include "impl/cpu/formats.hpp"
#include "impl/formats_codes.hpp"
#endif

namespace aether {
namespace {

using F = std::vector<float>;
using R = model::Rational;
namespace fe = formats_error;
constexpr auto kCuda = RoundingProfile::Cuda, kTowardZero = RoundingProfile::TiesTowardZero;

// The code of x alone in a group whose scale is 1 (UE8M0 byte 127: amax = max),
// by the model and by the CPU (which must agree).
std::uint8_t code_of(CacheFormat format, float x, RoundingProfile profile = kCuda) {
  const GroupFormat f = group_format(format);
  F row(f.group, 0.0f);
  row[0] = x;
  row[1] = float(model::element_max(f.element).convert_to<double>());  // the scale: 1
  const auto q = model::quantize_row(format, row, profile).value();
  EXPECT_EQ(q.scales[0], 127);
#if defined(AETHER_HAVE_FP_CONVERSIONS)
  EXPECT_EQ(cpu::quantize_row(format, row, profile).value(), q) << "x = " << x;
#endif
  return q.codes[0];
}

TEST(Formats, rows_and_blocks_have_the_sources_bytes) {
  const F row512(512, 1.0f), row128(128, 1.0f);
  EXPECT_EQ(model::pack_row(CacheFormat::MainFp8,
                            model::quantize_row(CacheFormat::MainFp8, row512, kCuda).value())
                .size(),
            528u);
  EXPECT_EQ(model::pack_row(CacheFormat::MainFp4,
                            model::quantize_row(CacheFormat::MainFp4, row512, kCuda).value())
                .size(),
            288u);
  // an index block of 64 rows: data 64 x 64 bytes, then scales 64 x 4: 4,352 in all
  EXPECT_EQ(model::index_block_offsets(64, 128, 0), (SectionOffsets{0, 4096}));
  EXPECT_EQ(model::index_block_offsets(64, 128, 63), (SectionOffsets{63 * 64, 4096 + 63 * 4}));
  EXPECT_EQ(model::index_block_offsets(64, 128, 63).scales + 4, 4352u);
#if defined(AETHER_HAVE_FP_CONVERSIONS)
  for (std::size_t r : {0u, 1u, 63u})
    EXPECT_EQ(cpu::index_block_offsets(64, 128, r), model::index_block_offsets(64, 128, r));
#endif
}

TEST(Formats, e4m3_boundaries) {
  const auto m = CacheFormat::MainFp8;
  EXPECT_EQ(code_of(m, 448), 0x7e);
  EXPECT_EQ(code_of(m, 416), 0x7d);
  EXPECT_EQ(code_of(m, 432), 0x7e);  // between 416 (odd 0x7d) and 448 (even 0x7e)
  EXPECT_EQ(code_of(m, -448), 0xfe);
  EXPECT_EQ(code_of(m, std::ldexp(1.0f, -9)), 0x01);       // the smallest subnormal
  EXPECT_EQ(code_of(m, std::ldexp(1.0f, -10)), 0x00);      // a tie with 0: even
  EXPECT_EQ(code_of(m, 3 * std::ldexp(1.0f, -10)), 0x02);  // a tie between 0x01 and 0x02
  EXPECT_EQ(code_of(m, -0.0f), 0x80);
  EXPECT_EQ(code_of(m, -std::ldexp(1.0f, -12)), 0x80);  // rounds to -0
  // 464 is halfway to 480, which is the NaN pattern's place: saturating, 448
  F row(32, 0.0f);
  row[0] = 464;
  row[1] = 448;  // keeps the scale at 1 (amax 464 would make it 2)
  EXPECT_EQ(model::quantize_row(m, row, kCuda).value().scales[0], 128);  // amax 464 > 448: 2
}

TEST(Formats, e4m3_saturates_past_448) {
  // elements past 448 at scale 1 exist only with a scale forced by another group: the
  // element encoding alone
  for (const double x : {448.0, 464.0, 480.0, 1e6})
    EXPECT_EQ(model::encode_element(Element::E4M3, R(x), kCuda), 0x7e) << x;
  EXPECT_EQ(model::encode_element(Element::E4M3, R(-1e6), kCuda), 0xfe);
}

TEST(Formats, e2m1_values_ties_and_profiles) {
  const auto m = CacheFormat::IndexFp4;
  const float values[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 8; ++c) EXPECT_EQ(code_of(m, values[c]), c);
  for (int c = 1; c < 8; ++c) EXPECT_EQ(code_of(m, -values[c]), c | 8);
  // ties: the even code (Cuda), the smaller magnitude (TiesTowardZero)
  EXPECT_EQ(code_of(m, 0.25f), 0);
  EXPECT_EQ(code_of(m, 0.75f), 2);
  EXPECT_EQ(code_of(m, 0.75f, kTowardZero), 1);
  EXPECT_EQ(code_of(m, 3.5f), 6);
  EXPECT_EQ(code_of(m, 3.5f, kTowardZero), 5);
  EXPECT_EQ(code_of(m, 5.0f), 6);
  EXPECT_EQ(code_of(m, 5.0f, kTowardZero), 6);
  EXPECT_EQ(code_of(m, -2.5f), 12);
  EXPECT_EQ(code_of(m, -2.5f, kTowardZero), 12);
  EXPECT_EQ(code_of(m, 3.25f), 5);                                  // not a tie
  EXPECT_EQ(model::encode_element(Element::E2M1, R(7), kCuda), 7);  // saturates to 6
  EXPECT_EQ(model::encode_nan(Element::E2M1, kCuda), 7);            // CUDA: +max
  EXPECT_EQ(model::encode_nan(Element::E2M1, kTowardZero), 0);      // the reference: +0
  EXPECT_EQ(model::encode_nan(Element::E4M3, kCuda), 0x7f);
}

// Which rule a quantizer followed, from its output on one row: a group with amax 6
// (scale 1) holding the ties 3.5 and 0.75, where the profiles part; a row without a
// tie follows both; a code matching neither, none.
TEST(Formats, profiles_followed_names_the_rule_a_row_was_quantized_by) {
  const auto m = CacheFormat::IndexFp4;
  F row(32, 0.0f);
  row[0] = 6, row[1] = 3.5f, row[2] = 0.75f;
  const auto even = model::quantize_row(m, row, kCuda).value();
  const auto toward_zero = model::quantize_row(m, row, kTowardZero).value();
  EXPECT_EQ(even.codes[1], 6);
  EXPECT_EQ(toward_zero.codes[1], 5);
  using P = std::vector<RoundingProfile>;
  EXPECT_EQ(props::profiles_followed(m, row, even), P{kCuda});
  EXPECT_EQ(props::profiles_followed(m, row, toward_zero), P{kTowardZero});
  auto neither = even;
  neither.codes[2] = 3;  // 1.5 for 0.75
  EXPECT_EQ(props::profiles_followed(m, row, neither), P{});
  row[1] = row[2] = 1;
  EXPECT_EQ(props::profiles_followed(m, row, model::quantize_row(m, row, kCuda).value()),
            (P{kCuda, kTowardZero}));
}

// UE8M0: the smallest power of two at least amax / max. At amax / 448 = 2^-3 exactly
// the scale is 2^-3; one float ulp above, 2^-2 (a log2 rounded down would say 2^-3).
TEST(Formats, ue8m0_scale_boundaries) {
  const auto scale = [](float amax) {
    F row(32, 0.0f);
    row[0] = amax;
    const auto q = model::quantize_row(CacheFormat::MainFp8, row, kCuda).value();
#if defined(AETHER_HAVE_FP_CONVERSIONS)
    EXPECT_EQ(cpu::quantize_row(CacheFormat::MainFp8, row).value(), q);
#endif
    return int(q.scales[0]) - 127;
  };
  EXPECT_EQ(scale(56), -3);
  EXPECT_EQ(scale(std::nextafter(56.0f, 100.0f)), -2);
  EXPECT_EQ(scale(std::nextafter(56.0f, 0.0f)), -3);
  EXPECT_EQ(scale(0), -22);  // the floor 10^-4: 10^-4 / 448 is in (2^-23, 2^-22]
  EXPECT_EQ(scale(std::numeric_limits<float>::max()), 120);
}

#if defined(AETHER_HAVE_FP_CONVERSIONS)
// The integer UE8M0 rule the CUDA store uses (formats_codes::ue8m0_scale_of_bits)
// against the model's, at every binade: mantissas at and around the thresholds 7/4
// (amax / 448) and 3/2 (amax / 6), the binade's ends, zero and the subnormals.
TEST(Formats, ue8m0_scale_from_bits_is_the_models) {
  for (const CacheFormat format : {CacheFormat::MainFp8, CacheFormat::IndexFp4}) {
    const GroupFormat f = group_format(format);
    const std::uint32_t threshold = f.element == Element::E4M3 ? 0x600000 : 0x400000;
    for (std::uint32_t biased = 0; biased < 255; ++biased)
      for (const std::uint32_t mantissa :
           {0u, 1u, threshold - 1, threshold, threshold + 1, 0x7fffffu}) {
        const std::uint32_t bits = biased << 23 | mantissa;
        const float amax = std::bit_cast<float>(bits);
        EXPECT_EQ(formats_codes::ue8m0_scale_of_bits(bits, f.element),
                  model::group_scale(f, model::exact(amax), kCuda))
            << "amax " << amax << " (bits 0x" << std::hex << bits << ")";
      }
  }
}

// The CUDA read side's UE8M0 decode (formats_codes::ue8m0_value) against scale_of,
// every byte, NaN included.
TEST(Formats, ue8m0_value_from_bits_is_scale_of) {
  for (int b = 0; b < 256; ++b) {
    const double want = formats_codes::scale_of(ScaleKind::UE8M0, std::uint8_t(b));
    const double got = formats_codes::ue8m0_value(std::uint8_t(b));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << "byte " << b;
    else
      EXPECT_EQ(got, want) << "byte " << b;
  }
}

// The CUDA store's E2M1 classes (formats_codes::e2m1_class): every finite member of a
// class converts as its given member does (each class's least and greatest member, the
// 21 with one bit under its fraction bits, and 64 others at random; docs/formats.md
// gives the argument for all), and the table's fill shortcut holds: each class below
// 2^-3 converts as the first class of [2^-3, 1/4) in its sign, and each finite one from
// 16 up as the first of [8, 16).
TEST(Formats, e2m1_classes_convert_alike) {
  using formats_codes::e2m1_class, formats_codes::e2m1_class_member;
  const auto code = [](std::uint32_t bits) {
    return formats_codes::encode(Element::E2M1, double(std::bit_cast<float>(bits)), kCuda);
  };
  std::mt19937 rng(5);
  for (unsigned c = 0; c < formats_codes::kE2m1Classes; ++c) {
    const std::uint32_t member = e2m1_class_member(c), base = member & ~0x1fffffu;
    if (!std::isfinite(std::bit_cast<float>(member))) continue;
    ASSERT_EQ(e2m1_class(member), c);
    std::vector<std::uint32_t> others = {base | (c & 1), base | (c & 1 ? 0x1fffff : 0)};
    for (int k = 0; k < 64 && c & 1; ++k) others.push_back(base | (rng() % 0x1fffff + 1));
    for (int j = 0; j < 21 && c & 1; ++j) others.push_back(base | 1u << j);
    for (const std::uint32_t bits : others) {
      ASSERT_EQ(e2m1_class(bits), c) << std::hex << bits;
      ASSERT_EQ(code(bits), code(member)) << "class " << c << ", bits 0x" << std::hex << bits;
    }
    const unsigned exponent = member >> 23 & 0xff, sign = c / 2048 * 2048;
    if (exponent < 124 || exponent > 130)
      EXPECT_EQ(code(member), code(e2m1_class_member(sign + (exponent < 124 ? 992 : 1040))))
          << "class " << c;
  }
}

// The same on every float the store can convert (|q| <= 6), against the direct
// conversion (about 10 s).
TEST(Formats, e2m1_classes_convert_alike_for_every_float) {
  std::uint8_t table[formats_codes::kE2m1Classes];
  for (unsigned c = 0; c < formats_codes::kE2m1Classes; ++c)
    table[c] =
        __nv_cvt_double_to_fp4(double(std::bit_cast<float>(formats_codes::e2m1_class_member(c))),
                               __NV_E2M1, cudaRoundNearest);
  std::uint32_t bits = 0;
  do {
    const float q = std::bit_cast<float>(bits);
    if (std::fabs(q) <= 6)
      ASSERT_EQ(table[formats_codes::e2m1_class(bits)],
                __nv_cvt_double_to_fp4(double(q), __NV_E2M1, cudaRoundNearest))
          << "q " << q << " (bits 0x" << std::hex << bits << ")";
  } while (++bits != 0);
}
#endif

// E4M3 scales (main FP4): amax / 6 to the nearest E4M3; at least 2^-9.
TEST(Formats, e4m3_scale) {
  const auto scale = [](float amax) {
    F row(16, 0.0f);
    row[0] = amax;
    const auto q = model::quantize_row(CacheFormat::MainFp4, row, kCuda).value();
#if defined(AETHER_HAVE_FP_CONVERSIONS)
    EXPECT_EQ(cpu::quantize_row(CacheFormat::MainFp4, row).value(), q);
#endif
    return model::scale_value(ScaleKind::E4M3, q.scales[0]);
  };
  EXPECT_EQ(scale(9), R(3, 2));
  EXPECT_EQ(scale(0), R(1, 512));
  EXPECT_EQ(scale(6 * 448), R(448));
}

TEST(Formats, refusals) {
  F row(32, 1.0f);
  row[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(model::quantize_row(CacheFormat::MainFp8, row, kCuda).error(),
            (FormatsError{fe::NonFiniteInput{5}}));
  row[5] = 1;
  row[7] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(model::quantize_row(CacheFormat::IndexFp4, row, kCuda).error(),
            (FormatsError{fe::NonFiniteInput{7}}));
  EXPECT_EQ(model::quantize_row(CacheFormat::MainFp8, F(31, 1.0f), kCuda).error(),
            (FormatsError{fe::ShapeMismatch{0, 31}}));
  EXPECT_EQ(model::quantize_row(CacheFormat::IndexFp8, F(128, 1.0f), kCuda).error(),
            (FormatsError{fe::UnsupportedFormat{CacheFormat::IndexFp8}}));
#if defined(AETHER_HAVE_FP_CONVERSIONS)
  EXPECT_EQ(cpu::quantize_row(CacheFormat::IndexFp4, row).error(),
            (FormatsError{fe::NonFiniteInput{7}}));
  EXPECT_EQ(cpu::quantize_row(CacheFormat::MainFp8, F(31, 1.0f)).error(),
            (FormatsError{fe::ShapeMismatch{0, 31}}));
#endif
}

}  // namespace
}  // namespace aether
