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

// y 2^k for k in [-150, 0] and y in [1/2, 2), with one rounding, as ldexpf: y 2^a
// exactly (a = max(k, -100) keeps it normal), then times 2^(k - a), the one
// rounding. Branch-free (the CUDA rows kernels run it per channel), and every
// power a normal float.
AETHER_HD inline float scale_by_power_of_two(float y, int k) {
  const auto power = [](int e) {  // 2^e, e in [-126, 0]
    const std::uint32_t bits = std::uint32_t(127 + e) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  const int a = k > -100 ? k : -100;
  return (y * power(a)) * power(k - a);
}

// e^x for x <= 0: x = k ln2 + f (Cody-Waite, ln2 split in two), e^f by the cephes
// expf polynomial in fma form, times 2^k. From -104 down e^x < 2^-150 rounds to 0:
// the work runs on max(x, -104), whose result is that 0 (no branch).
// Only fma, +, *, and exact bit steps: the same bits on every IEEE machine.
// tests/compress_test.cpp checks it against the exact model's enclosure.
AETHER_HD inline float exp_nonpositive(float x) {
  const float xc = fmaxf(x, -104.0f);    // e^-104 = 0.486 2^-149 rounds to 0
  constexpr float kRound = 12582912.0f;  // 1.5 2^23: v + kRound - kRound = rint(v), |v| < 2^22
  // One rounding of x log2 e, written as the fma: CUDA fuses a * b + c by default and
  // g++ only where FMA instructions are enabled, so the plain expression rounded
  // twice in some builds and picked another k there (tests/compress_test.cpp).
  const float t = fmaf(xc, 1.44269504088896341f, kRound);
  const float k = t - kRound;
  float f = fmaf(k, -0.693359375f, xc);
  f = fmaf(k, 2.12194440e-4f, f);
  float p = 1.9875691500e-4f;
  p = fmaf(p, f, 1.3981999507e-3f);
  p = fmaf(p, f, 8.3334519073e-3f);
  p = fmaf(p, f, 4.1665795894e-2f);
  p = fmaf(p, f, 1.6666665459e-1f);
  p = fmaf(p, f, 5.0000001201e-1f);
  const float y = fmaf(p, f * f, f) + 1.0f;
  std::int32_t t_bits;  // t = 1.5 2^23 + k exactly, in a binade of unit spacing: k from its bits
  std::memcpy(&t_bits, &t, 4);
  return scale_by_power_of_two(y, t_bits - 0x4B400000);
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
