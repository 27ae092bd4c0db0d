// The arithmetic every compression backend shares (impl/compress_math.hpp): the
// model's exp enclosure, the shared exp against it, the CPU's eight-lane exp and the
// pair form against the scalar gated mean, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "impl/compress_math.hpp"
#include "impl/cpu/compress.hpp"
#include "impl/cpu/dispatch.hpp"
#include "model/compress.hpp"

namespace aether {
namespace {

using model::Interval;
using model::Rational;

TEST(CompressModel, exp_enclosures_are_tight_and_correct) {
  // e to 50 digits; the enclosure's width is far below 10^-27.
  const Rational e(
      "271828182845904523536028747135266249775724709369995/"
      "100000000000000000000000000000000000000000000000000");
  const Rational tiny(1, model::Integer("1000000000000000000000000000"));
  const Interval one = model::exp_enclosure(1);
  EXPECT_LT(one.lo, one.hi);
  EXPECT_LT(abs(one.lo - e), tiny);
  EXPECT_LT(abs(one.hi - e), tiny);
  EXPECT_EQ(model::exp_enclosure(0), (Interval{1, 1}));
  const Interval a = model::exp_enclosure(Rational(-87, 2)),
                 b = model::exp_enclosure(Rational(87, 2));
  EXPECT_TRUE(a.lo * b.lo <= 1 && 1 <= a.hi * b.hi);  // e^-x e^x = 1
  EXPECT_LT(a.hi - a.lo, a.lo * tiny);
}

// The backends' exp: within 4 ulp (2^-21 relative) of e^x, or 2^-147 absolute in
// the subnormal range: the bound model::compress_group_fp32 assumes.
TEST(CompressImpl, shared_exp_is_within_the_assumed_bound) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> x_of(-110.0f, 0.0f);
  std::vector<float> xs{0.0f, -0.0f, -1e-30f, -1.0f, -87.0f, -103.9f, -104.0f, -104.1f};
  for (int i = 0; i < 3000; ++i) xs.push_back(x_of(rng));
  for (float x : xs) {
    const Interval e = model::exp_enclosure(model::exact(x));
    const Rational got = model::exact(impl::exp_nonpositive(x));
    const Rational slack = e.hi / Rational(1 << 21) + Rational(1, model::Integer(1) << 147);
    EXPECT_TRUE(e.lo - slack <= got && got <= e.hi + slack) << "x = " << x;
  }
}

// The CPU's AVX2 build runs the exp eight lanes at a time: the same bits as the
// scalar exp (which the portable build and CUDA run) on every float in [-105, -80]
// (the subnormal results, k = -150, the cut at -104) and on 2^22 more over [-2^9, 0].
TEST(CompressImpl, the_eight_lane_exp_gives_the_scalar_bits) {
  std::vector<float> xs;
  for (float x = -105.0f; x <= -80.0f; x = std::nextafter(x, 0.0f)) xs.push_back(x);
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> bits(0x80000000u, 0xC4000000u);  // -0 down to -512
  for (int i = 0; i < (1 << 22); ++i) xs.push_back(std::bit_cast<float>(bits(rng)));
  for (float x : {0.0f, -0.0f, -1e-45f, -104.0f, -0x1.92068p+5f}) xs.push_back(x);
  while (xs.size() % 8) xs.push_back(-1.0f);
  std::vector<float> lanes(xs.size());
  if (!cpu::exp_nonpositive_avx2(xs.data(), lanes.data(), xs.size()))
    GTEST_SKIP() << "no AVX2 + FMA here";
  std::size_t differ = 0;
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (std::bit_cast<std::uint32_t>(lanes[i]) !=
            std::bit_cast<std::uint32_t>(impl::exp_nonpositive(xs[i])) &&
        ++differ <= 5)
      ADD_FAILURE() << "x = " << std::hexfloat << xs[i] << ": " << lanes[i] << " vs "
                    << impl::exp_nonpositive(xs[i]);
  EXPECT_EQ(differ, 0u) << "of " << xs.size();
}

// The CUDA kernels' pair form: gated_mean's bits for r = 2 on random pairs (scores
// close and far apart, equal, signed zeros, weights that underflow).
TEST(CompressImpl, the_pair_form_gives_the_gated_mean_bits) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> near(-2.0f, 2.0f), far(-150.0f, 150.0f);
  std::vector<float> scores{0.0f, -0.0f, 1.0f, -1.0f, 104.0f, -104.0f, 0x1p-140f, 3e38f, -3e38f};
  std::vector<float> values{0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f, 3e38f, -3e38f};
  for (int i = 0; i < 60; ++i)
    scores.push_back(i % 2 ? near(rng) : far(rng)), values.push_back(far(rng));
  std::size_t differ = 0;
  for (float s0 : scores)
    for (float s1 : scores)
      for (std::size_t a = 0; a < values.size(); ++a)
        for (std::size_t b = a % 7; b < values.size(); b += 7) {
          const float sc[2] = {s0, s1}, v[2] = {values[a], values[b]};
          const float want =
              impl::gated_mean([&](int t) { return sc[t]; }, [&](int t) { return v[t]; }, 2);
          const float got = impl::gated_mean_pair(s0, s1, v[0], v[1]);
          if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want) &&
              ++differ <= 5)
            ADD_FAILURE() << std::hexfloat << "s " << s0 << ", " << s1 << " v " << v[0] << ", "
                          << v[1] << ": " << got << " vs " << want;
        }
  EXPECT_EQ(differ, 0u);
}

}  // namespace
}  // namespace aether
