#include "props/support/dosa_backends.hpp"

#include <bit>
#include <cstring>

namespace aether::props {

namespace {
std::uint16_t high_half(float x) { return std::uint16_t(std::bit_cast<std::uint32_t>(x) >> 16); }
}  // namespace

CudaDosaCall cuda_form(const DosaCall& call) {
  CudaDosaCall c;
  c.dim = call.dim;
  for (float x : call.queries) c.queries.push_back(high_half(x));
  if (call.format != KeyFormat::F32) {
    c.format = call.format;
    c.key_bytes = call.key_bytes;
    return c;
  }
  c.format = KeyFormat::BF16;
  c.key_bytes.resize(call.keys.size() * 2);
  for (std::size_t i = 0; i < call.keys.size(); ++i) {
    const std::uint16_t half = high_half(call.keys[i]);
    std::memcpy(c.key_bytes.data() + 2 * i, &half, 2);
  }
  return c;
}

std::vector<std::uint16_t> bf16_bits(std::span<const float> values) {
  std::vector<std::uint16_t> bits;
  for (float x : values) bits.push_back(high_half(x));
  return bits;
}

std::vector<float> bf16_values(std::span<const std::uint16_t> bits) {
  std::vector<float> v;
  for (std::uint16_t b : bits) v.push_back(std::bit_cast<float>(std::uint32_t(b) << 16));
  return v;
}

}  // namespace aether::props
