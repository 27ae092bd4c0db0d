#include "impl/cpu/formats.hpp"

#include "impl/formats_codes.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace aether::cpu {

namespace {
namespace fe = formats_error;

using formats_codes::encode;
using formats_codes::scale_byte;
using formats_codes::scale_of;
using formats_codes::value_of;
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

namespace {
// Byte offsets of slot s's data and scales (equal for main formats: one packed row).
std::pair<std::size_t, std::size_t> slot_bytes(const CacheGeometry& g, std::size_t s) {
  const std::size_t row_bytes = cache_row_bytes(g.format, g.dim);
  if (g.format != CacheFormat::IndexFp4) return {s * row_bytes, s * row_bytes};
  const std::size_t base = s / g.rows_per_block * g.rows_per_block * row_bytes;
  const SectionOffsets o = index_block_offsets(g.rows_per_block, g.dim, s % g.rows_per_block);
  return {base + o.data, base + o.scales};
}
}  // namespace

Status<FormatsError> store_rows(const CacheGeometry& g, std::span<const float> rows,
                                std::span<const std::int32_t> slots,
                                std::span<std::byte> cache_bytes, RoundingProfile profile) {
  if (auto st = formats_codes::check_geometry(g, cache_bytes.size()); !st.ok()) return st;
  if (rows.size() % g.dim != 0) return fe::ShapeMismatch{rows.size() / g.dim * g.dim, rows.size()};
  const std::size_t n = rows.size() / g.dim;
  if (slots.size() != n) return fe::ShapeMismatch{n, slots.size()};
  std::vector<char> taken(g.slots(), 0);
  for (std::size_t j = 0; j < n; ++j) {
    const std::int32_t s = slots[j];
    if (s == -1) continue;
    if (s < -1 || std::size_t(s) >= g.slots() || taken[std::size_t(s)]) return fe::BadSlot{j, s};
    taken[std::size_t(s)] = 1;
  }
  for (std::size_t j = 0; j < n; ++j)  // every stored row finite before the first write
    if (slots[j] != -1)
      for (std::size_t i = 0; i < g.dim; ++i)
        if (!std::isfinite(rows[j * g.dim + i])) return fe::NonFiniteInput{j * g.dim + i};
  for (std::size_t j = 0; j < n; ++j) {
    if (slots[j] == -1) continue;
    const QuantizedRow q = quantize_row(g.format, rows.subspan(j * g.dim, g.dim), profile).value();
    const auto [data, scales] = slot_bytes(g, std::size_t(slots[j]));
    if (g.format != CacheFormat::IndexFp4) {
      const auto bytes = pack_row(g.format, q);
      std::copy(bytes.begin(), bytes.end(), cache_bytes.begin() + std::ptrdiff_t(data));
      continue;
    }
    for (std::size_t i = 0; i < g.dim / 2; ++i)
      cache_bytes[data + i] = std::byte(q.codes[2 * i] | q.codes[2 * i + 1] << 4);
    for (std::size_t k = 0; k < q.scales.size(); ++k)
      cache_bytes[scales + k] = std::byte(q.scales[k]);
  }
  return Ok{};
}

Result<std::vector<double>, FormatsError> gather_rows(const CacheGeometry& g,
                                                      std::span<const std::byte> cache_bytes,
                                                      std::span<const std::int32_t> slots) {
  if (auto st = formats_codes::check_geometry(g, cache_bytes.size()); !st.ok()) return st.error();
  for (std::size_t j = 0; j < slots.size(); ++j)
    if (slots[j] < -1 || slots[j] >= std::int64_t(g.slots())) return fe::BadSlot{j, slots[j]};
  std::vector<double> out(slots.size() * g.dim, 0.0);
  const GroupFormat f = group_format(g.format);
  for (std::size_t j = 0; j < slots.size(); ++j) {
    if (slots[j] == -1) continue;
    const auto [data, scales] = slot_bytes(g, std::size_t(slots[j]));
    QuantizedRow q;
    if (g.format != CacheFormat::IndexFp4) {
      q = unpack_row(g.format, cache_bytes.subspan(data, cache_row_bytes(g.format, g.dim)));
    } else {
      q.codes.resize(g.dim);
      for (std::size_t i = 0; i < g.dim / 2; ++i) {
        const auto b = std::uint8_t(cache_bytes[data + i]);
        q.codes[2 * i] = b & 0xf;
        q.codes[2 * i + 1] = b >> 4;
      }
      for (std::size_t k = 0; k < g.dim / f.group; ++k)
        q.scales.push_back(std::uint8_t(cache_bytes[scales + k]));
    }
    const auto values = dequantize_row(g.format, q);
    for (std::size_t i = 0; i < g.dim; ++i)  // NaN codes decode to NaN
      if (std::isnan(values[i])) return fe::NonFiniteInput{j * g.dim + i};
    std::copy(values.begin(), values.end(), out.begin() + std::ptrdiff_t(j * g.dim));
  }
  return out;
}

}  // namespace aether::cpu
