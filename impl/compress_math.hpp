// The arithmetic of one compressed channel, shared by impl/cpu and impl/cuda so
// both produce the same bits (L3 across backends); compiled for host and device.
// The model bounds it (model::compress_group_fp32): shift by the group's max
// score, e_t = exp(s_t - m) within 4 ulp, fp32 sums and quotient, then bf16.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define AETHER_HD __host__ __device__
#else
#define AETHER_HD
#endif

namespace aether::impl {

// y 2^k for k in [-150, 0] with one rounding, as ldexpf: 2^k is a float down to
// 2^-149 (y 2^k then rounds once); 2^-150 goes in two exact-then-rounding steps.
AETHER_HD inline float scale_by_power_of_two(float y, int k) {
  const auto power = [](int e) {  // 2^e, e in [-149, 0]
    const std::uint32_t bits = e >= -126 ? std::uint32_t(127 + e) << 23 : std::uint32_t(1) << (149 + e);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  return k >= -149 ? y * power(k) : (y * power(-75)) * power(k + 75);
}

// e^x for x <= 0: x = k ln2 + f (Cody-Waite, ln2 split in two), e^f by the cephes
// expf polynomial in fma form, times 2^k. Below -104, e^x < 2^-150 rounds to 0.
// Only fma, +, *, and exact bit steps: the same bits on every IEEE machine.
// tests/compress_test.cpp checks it against the exact model's enclosure.
AETHER_HD inline float exp_nonpositive(float x) {
  if (x < -104.0f) return 0.0f;
  constexpr float kRound = 12582912.0f;  // 1.5 2^23: v + kRound - kRound = rint(v), |v| < 2^22
  // One rounding of x log2 e, written as the fma: CUDA fuses a * b + c by default and
  // g++ only where FMA instructions are enabled, so the plain expression rounded
  // twice in some builds and picked another k there (tests/compress_test.cpp).
  const float k = fmaf(x, 1.44269504088896341f, kRound) - kRound;
  float f = fmaf(k, -0.693359375f, x);
  f = fmaf(k, 2.12194440e-4f, f);
  float p = 1.9875691500e-4f;
  p = fmaf(p, f, 1.3981999507e-3f);
  p = fmaf(p, f, 8.3334519073e-3f);
  p = fmaf(p, f, 4.1665795894e-2f);
  p = fmaf(p, f, 1.6666665459e-1f);
  p = fmaf(p, f, 5.0000001201e-1f);
  const float y = fmaf(p, f * f, f) + 1.0f;
  return scale_by_power_of_two(y, int(k));
}

// z = Σ_t e_t v_t / Σ_t e_t, e_t = exp(s_t - m), m = max_t s_t, t ascending;
// score(t) and value(t) read position t of the group.
template <class Score, class Value>
AETHER_HD inline float gated_mean(Score score, Value value, int ratio) {
  float m = score(0);
  for (int t = 1; t < ratio; ++t) m = fmaxf(m, score(t));
  float num = 0.0f, den = 0.0f;
  for (int t = 0; t < ratio; ++t) {
    const float e = exp_nonpositive(score(t) - m);
    num = fmaf(e, value(t), num);
    den += e;
  }
  return num / den;
}

// gated_mean for r = 2 with one exponential, operation for operation the same: the
// larger score's weight is exp_nonpositive(0) = 1 exactly, and the smaller one's
// argument s_min - m is exactly -|s_0 - s_1| (subtraction rounds symmetrically).
// The CUDA rows kernels run it (their arithmetic, not their loads, bounds them).
AETHER_HD inline float gated_mean_pair(float s0, float s1, float v0, float v1) {
  const float e = exp_nonpositive(-fabsf(s0 - s1));
  const float e0 = s0 < s1 ? e : 1.0f, e1 = s1 < s0 ? e : 1.0f;
  return fmaf(e1, v1, fmaf(e0, v0, 0.0f)) / (e0 + e1);
}

// fp32 -> bf16, round to nearest even (inputs are finite).
AETHER_HD inline std::uint16_t bf16_nearest(float z) {
  std::uint32_t bits;
  std::memcpy(&bits, &z, 4);
  return std::uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace aether::impl
