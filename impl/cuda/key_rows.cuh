// Stored index key rows on the device (api/indexer.hpp's layouts): an E4M3
// element's value, a bf16 element's, and a row's fp32 scale, shared by the scorer
// and DoSA's norms and screens.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aether::cuda {

__device__ __forceinline__ double bf16_value(std::uint16_t bits) {
  return double(__uint_as_float(std::uint32_t(bits) << 16));
}

__device__ __forceinline__ float e4m3_value(std::uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float magnitude = e == 0 ? ldexpf(float(m), -9) : ldexpf(float(8 + m), e - 10);
  return b & 0x80 ? -magnitude : magnitude;
}

// The scale stored after an E4M3 row's `dim` elements (little-endian, any alignment).
__device__ __forceinline__ float row_scale(const std::byte* row, std::size_t dim) {
  std::uint32_t bits = 0;
  for (int i = 0; i < 4; ++i) bits |= std::uint32_t(row[dim + i]) << (8 * i);
  return __uint_as_float(bits);
}

}  // namespace aether::cuda
