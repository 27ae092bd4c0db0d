// Element and scale codes through CUDA's own conversions (cuda_fp8.h, cuda_fp4.h),
// shared by the CPU backend (impl/cpu/formats.cpp, on the host) and the CUDA one
// (impl/cuda/formats.cu, on the device): one definition of each rule; and the
// geometry checks both backends make first.
#pragma once

#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "api/formats.hpp"

#ifdef __CUDACC__
#define AETHER_CODES_HD __host__ __device__
#else
#define AETHER_CODES_HD
#endif

namespace aether::formats_codes {

AETHER_CODES_HD inline std::uint8_t sign_of(Element e) { return e == Element::E4M3 ? 0x80 : 0x8; }

// An element code's value (E4M3 0x7f, 0xff: NaN).
AETHER_CODES_HD inline double value_of(Element e, std::uint8_t code) {
  if (e == Element::E4M3)
    return double(__half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3))));
  return double(__half2float(__half(__nv_cvt_fp4_to_halfraw(code, __NV_E2M1))));
}

// CUDA's nearest-even saturating conversion; TiesTowardZero steps back toward zero
// where that conversion rounded an exact tie away from it.
AETHER_CODES_HD inline std::uint8_t encode(Element e, double q, RoundingProfile profile) {
  const std::uint8_t code = e == Element::E4M3
                                ? __nv_cvt_double_to_fp8(q, __NV_SATFINITE, __NV_E4M3)
                                : __nv_cvt_double_to_fp4(q, __NV_E2M1, cudaRoundNearest);
  const std::uint8_t magnitude = code & std::uint8_t(~sign_of(e));
  if (profile == RoundingProfile::Cuda || magnitude == 0) return code;
  const std::uint8_t lower = std::uint8_t((magnitude - 1) | (code & sign_of(e)));
  const double a = q < 0 ? -q : q, hi = value_of(e, code), lo = value_of(e, lower);
  const double hi_a = hi < 0 ? -hi : hi, lo_a = lo < 0 ? -lo : lo;
  return hi_a > a && a - lo_a == hi_a - a ? lower : code;
}

// A scale byte's value (UE8M0 0xff and E4M3 0x7f, 0xff: NaN).
AETHER_CODES_HD inline double scale_of(ScaleKind kind, std::uint8_t byte) {
  if (kind == ScaleKind::E4M3) return value_of(Element::E4M3, byte);
  const unsigned bits = unsigned(__nv_cvt_e8m0_to_bf16raw(byte).x) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return double(f);
}

// scale_of's UE8M0 values built from their bits, for the CUDA read side: 2^(b - 127)
// is the double whose biased exponent is b + 896 (normal for every byte); 0xff is NaN.
AETHER_CODES_HD inline double ue8m0_value(std::uint8_t byte) {
  const std::uint64_t bits =
      byte == 0xff ? 0x7ff8000000000000ull : std::uint64_t(byte + 896u) << 52;
  double d;
  memcpy(&d, &bits, 8);
  return d;
}

// A group's scale byte from its amax: UE8M0 rounded up to a power of two,
// E4M3 by the profile's element rule (docs/formats.md).
AETHER_CODES_HD inline std::uint8_t scale_byte(GroupFormat f, double amax,
                                               RoundingProfile profile) {
  const double max_element = f.element == Element::E4M3 ? 448.0 : 6.0;
  if (f.scale == ScaleKind::UE8M0)
    return __nv_cvt_double_to_e8m0((amax > 1e-4 ? amax : 1e-4) / max_element, __NV_SATFINITE,
                                   cudaRoundPosInf);
  const double floor = 6 * 0x1p-9;
  return encode(Element::E4M3, (amax > floor ? amax : floor) / max_element, profile);
}

// scale_byte's UE8M0 rule from the bits of a finite amax, in integers. With
// amax = m 2^E (1 <= m < 2): amax / 448 = (m / 7) 2^(E-6), m / 7 in [1/7, 2/7), whose
// least power of two at or above is 2^(E-8), or 2^(E-7) when m > 7/4 (at m = 7/4 the
// quotient is 2^(E-8) itself); amax / 6 = (m / 3) 2^(E-1): 2^(E-2), or 2^(E-1) when
// m > 3/2. The rule is monotone in amax, so the floor max(amax, 10^-4) is the larger
// of the two bytes, and 10^-4 gives the byte 1e-4f does (no power of two lies
// between 10^-4 / max and 1e-4f / max). Zero and subnormal amax fall below the floor.
AETHER_CODES_HD constexpr int ue8m0_rule(std::uint32_t bits, Element e) {
  const bool e4m3 = e == Element::E4M3;
  const bool above = (bits & 0x7fffffu) > (e4m3 ? 0x600000u : 0x400000u);
  return int(bits >> 23) - (e4m3 ? 8 : 2) + int(above);
}
inline constexpr std::uint32_t kUe8m0FloorBits = std::bit_cast<std::uint32_t>(1e-4f);
AETHER_CODES_HD constexpr std::uint8_t ue8m0_scale_of_bits(std::uint32_t amax_bits, Element e) {
  const int byte = ue8m0_rule(amax_bits, e), floor = ue8m0_rule(kUe8m0FloorBits, e);
  return std::uint8_t(byte > floor ? byte : floor);
}

// E2M1 by classes of floats (the CUDA store's table, impl/cuda/formats_rows.cuh): a
// float's class is its sign, its exponent, its first two fraction bits, and whether
// any bit below them is set. In the binade [2^E, 2^(E+1)), E >= -2, every E2M1 value
// and every midpoint of two is a multiple of 2^(E-2); below 2^-2 every value rounds to
// +-0 and from 8 up every one saturates to +-6. So a class is one such multiple or lies
// strictly between two neighbouring ones, and each of its members converts as the one
// e2m1_class_member gives (Formats.e2m1_classes_convert_alike).
inline constexpr unsigned kE2m1Classes = 4096;
// (bits >> 20) keeps bit 20 as its lowest; the bits under it join it, so the lowest
// bit is any of bits 0 to 20, the rest the class's sign, exponent and two fraction
// bits: four integer instructions.
AETHER_CODES_HD constexpr unsigned e2m1_class(std::uint32_t bits) {
  const std::uint32_t low = bits & 0xfffffu;
  return bits >> 20 | (low < 1u ? low : 1u);
}
AETHER_CODES_HD constexpr std::uint32_t e2m1_class_member(unsigned c) {
  return std::uint32_t(c >> 1) << 21 | std::uint32_t(c & 1) << 20;
}

// The refusals every call on a paged cache makes first, in the model's order: the
// format, whole groups a row, the cache's length (host code, both backends).
inline Status<FormatsError> check_geometry(const CacheGeometry& g, std::size_t bytes) {
  namespace fe = formats_error;
  if (g.format == CacheFormat::IndexFp8) return fe::UnsupportedFormat{g.format};
  const std::size_t group = group_format(g.format).group;
  if (g.dim == 0 || g.dim % group != 0) return fe::ShapeMismatch{g.dim / group * group, g.dim};
  if (bytes != g.bytes()) return fe::ShapeMismatch{g.bytes(), bytes};
  return Ok{};
}

}  // namespace aether::formats_codes
