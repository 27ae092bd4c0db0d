#include "impl/cpu/formats.hpp"

#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>

namespace aether::cpu {

namespace {
namespace fe = formats_error;

std::uint8_t sign_of(Element e) { return e == Element::E4M3 ? 0x80 : 0x8; }

double value_of(Element e, std::uint8_t code) {
  if (e == Element::E4M3)
    return double(__half2float(__half(__nv_cvt_fp8_to_halfraw(code, __NV_E4M3))));
  return double(__half2float(__half(__nv_cvt_fp4_to_halfraw(code, __NV_E2M1))));
}

// CUDA's nearest-even saturating conversion; TiesTowardZero steps back toward zero
// where that conversion rounded an exact tie away from it.
std::uint8_t encode(Element e, double q, RoundingProfile profile) {
  const std::uint8_t code = e == Element::E4M3
                                ? __nv_cvt_double_to_fp8(q, __NV_SATFINITE, __NV_E4M3)
                                : __nv_cvt_double_to_fp4(q, __NV_E2M1, cudaRoundNearest);
  const std::uint8_t magnitude = code & std::uint8_t(~sign_of(e));
  if (profile == RoundingProfile::Cuda || magnitude == 0) return code;
  const std::uint8_t lower = std::uint8_t((magnitude - 1) | (code & sign_of(e)));
  const double a = std::abs(q), hi = std::abs(value_of(e, code)), lo = std::abs(value_of(e, lower));
  return hi > a && a - lo == hi - a ? lower : code;
}

double scale_of(ScaleKind kind, std::uint8_t byte) {
  return kind == ScaleKind::UE8M0 ? std::ldexp(1.0, int(byte) - 127)
                                  : value_of(Element::E4M3, byte);
}

std::uint8_t scale_byte(GroupFormat f, double amax, RoundingProfile profile) {
  const double max_element = f.element == Element::E4M3 ? 448.0 : 6.0;
  if (f.scale == ScaleKind::UE8M0)
    return __nv_cvt_double_to_e8m0(std::max(amax, 1e-4) / max_element, __NV_SATFINITE,
                                   cudaRoundPosInf);
  return encode(Element::E4M3, std::max(amax, 6 * 0x1p-9) / max_element, profile);
}
}  // namespace

Result<QuantizedRow, FormatsError> quantize_row(CacheFormat format, std::span<const float> row,
                                                RoundingProfile profile) {
  if (format == CacheFormat::IndexFp8) return fe::UnsupportedFormat{format};
  const GroupFormat f = group_format(format);
  if (row.size() % f.group != 0)
    return fe::ShapeMismatch{row.size() / f.group * f.group, row.size()};
  for (std::size_t i = 0; i < row.size(); ++i)
    if (!std::isfinite(row[i])) return fe::NonFiniteInput{i};
  QuantizedRow q;
  q.codes.resize(row.size());
  for (std::size_t first = 0; first < row.size(); first += f.group) {
    const auto group = row.subspan(first, f.group);
    double amax = 0;
    for (float x : group) amax = std::max(amax, double(std::abs(x)));
    q.scales.push_back(scale_byte(f, amax, profile));
    const double s = scale_of(f.scale, q.scales.back());
    for (std::size_t i = 0; i < f.group; ++i)
      q.codes[first + i] = encode(f.element, double(group[i]) / s, profile);
  }
  return q;
}

std::vector<double> dequantize_row(CacheFormat format, const QuantizedRow& q) {
  const GroupFormat f = group_format(format);
  std::vector<double> out(q.codes.size());
  for (std::size_t i = 0; i < q.codes.size(); ++i)
    out[i] = value_of(f.element, q.codes[i]) * scale_of(f.scale, q.scales[i / f.group]);
  return out;
}

std::vector<std::byte> pack_row(CacheFormat format, const QuantizedRow& q) {
  const GroupFormat f = group_format(format);
  const std::size_t data = f.element == Element::E4M3 ? f.group : f.group / 2;
  std::vector<std::byte> out(q.scales.size() * (data + 1));
  for (std::size_t g = 0; g < q.scales.size(); ++g) {
    std::byte* at = out.data() + g * (data + 1);
    for (std::size_t b = 0; b < data; ++b)
      at[b] = f.element == Element::E4M3
                  ? std::byte(q.codes[g * f.group + b])
                  : std::byte(q.codes[g * f.group + 2 * b] | q.codes[g * f.group + 2 * b + 1] << 4);
    at[data] = std::byte(q.scales[g]);
  }
  return out;
}

QuantizedRow unpack_row(CacheFormat format, std::span<const std::byte> bytes) {
  const GroupFormat f = group_format(format);
  const std::size_t data = f.element == Element::E4M3 ? f.group : f.group / 2;
  const std::size_t groups = bytes.size() / (data + 1);
  QuantizedRow q;
  q.codes.resize(groups * f.group);
  for (std::size_t g = 0; g < groups; ++g) {
    const std::byte* at = bytes.data() + g * (data + 1);
    for (std::size_t b = 0; b < data; ++b) {
      const auto v = std::uint8_t(at[b]);
      if (f.element == Element::E4M3) {
        q.codes[g * f.group + b] = v;
      } else {
        q.codes[g * f.group + 2 * b] = v & 0xf;
        q.codes[g * f.group + 2 * b + 1] = v >> 4;
      }
    }
    q.scales.push_back(std::uint8_t(at[data]));
  }
  return q;
}

SectionOffsets index_block_offsets(std::size_t rows, std::size_t dim, std::size_t row) {
  const std::size_t data_bytes = dim / 2, scale_bytes = dim / 32;
  return {row * data_bytes, rows * data_bytes + row * scale_bytes};
}

}  // namespace aether::cpu
