#include "model/formats.hpp"

#include <cmath>
#include <cstring>
#include <set>

namespace aether::model {

Rational value_from_bits(Element element, std::uint8_t code);

namespace {
namespace fe = formats_error;

// 2^e exactly
Rational power_of_two(int e) {
  Rational r = 1;
  for (int i = 0; i < (e < 0 ? -e : e); ++i) r *= 2;
  return e < 0 ? Rational(1) / r : r;
}

// Every code's value, computed once (value_from_bits below is the formula).
const std::vector<Rational>& value_table(Element element) {
  static const auto table = [](Element e) {
    std::vector<Rational> t;
    for (int c = 0; c < (e == Element::E4M3 ? 256 : 16); ++c)
      t.push_back(value_from_bits(e, std::uint8_t(c)));
    return t;
  };
  static const std::vector<Rational> e4m3 = table(Element::E4M3), e2m1 = table(Element::E2M1);
  return element == Element::E4M3 ? e4m3 : e2m1;
}

std::uint8_t sign_bit(Element element) { return element == Element::E4M3 ? 0x80 : 0x8; }
std::uint8_t codes_of(Element element) { return element == Element::E4M3 ? 0x80 : 0x8; }
Rational magnitude(const Rational& x) { return x < 0 ? Rational(-x) : x; }
}  // namespace

// (-1)^s 2^(e - bias) (1 + m / 2^mbits), or (-1)^s 2^(1 - bias) m / 2^mbits when e = 0
Rational value_from_bits(Element element, std::uint8_t code) {
  const bool e4m3 = element == Element::E4M3;
  const int mbits = e4m3 ? 3 : 1, bias = e4m3 ? 7 : 1, ebits = e4m3 ? 4 : 2;
  const int m = code & ((1 << mbits) - 1), e = (code >> mbits) & ((1 << ebits) - 1);
  const Rational v = e == 0 ? power_of_two(1 - bias) * Rational(m, 1 << mbits)
                            : power_of_two(e - bias) * (1 + Rational(m, 1 << mbits));
  return code & sign_bit(element) ? Rational(-v) : v;
}

Rational element_value(Element element, std::uint8_t code) {
  return value_table(element)[code & (element == Element::E4M3 ? 0xff : 0xf)];
}

bool is_nan_code(Element element, std::uint8_t code) {
  return element == Element::E4M3 && (code & 0x7f) == 0x7f;
}

Rational element_max(Element element) { return element == Element::E4M3 ? 448 : 6; }

std::uint8_t encode_element(Element element, const Rational& x, RoundingProfile profile,
                            bool negative) {
  const bool minus = x < 0 || (x == 0 && negative);
  const std::uint8_t sign = minus ? sign_bit(element) : 0;
  std::uint8_t best = sign;  // +-0
  Rational d_best = magnitude(x);
  for (std::uint8_t c = 1; c < codes_of(element); ++c) {
    const std::uint8_t code = std::uint8_t(sign | c);
    if (is_nan_code(element, code)) continue;
    const Rational d = magnitude(element_value(element, code) - x);
    // magnitudes grow with the code: on a tie, `best` (found first) is the smaller
    const bool tie_to_this = profile == RoundingProfile::Cuda && (code & 1) == 0;
    if (d < d_best || (d == d_best && tie_to_this)) best = code, d_best = d;
    if (d > d_best) break;  // past x: every later code is farther
  }
  return best;
}

std::uint8_t encode_nan(Element element, RoundingProfile profile) {
  if (profile == RoundingProfile::TiesTowardZero) return 0;
  return element == Element::E4M3 ? 0x7f : 0x7;
}

Rational scale_value(ScaleKind kind, std::uint8_t byte) {
  static const auto powers = [] {
    std::vector<Rational> t;
    for (int b = 0; b < 256; ++b) t.push_back(power_of_two(b - 127));
    return t;
  }();
  return kind == ScaleKind::UE8M0 ? powers[byte] : element_value(Element::E4M3, byte);
}

Rational amax_floor(ScaleKind kind) {
  return kind == ScaleKind::UE8M0 ? Rational(1, 10000) : Rational(6) * power_of_two(-9);
}

std::uint8_t group_scale(GroupFormat format, const Rational& amax, RoundingProfile profile) {
  const Rational floor = amax_floor(format.scale);
  const Rational t = (amax > floor ? amax : floor) / element_max(format.element);
  if (format.scale == ScaleKind::E4M3) return encode_element(Element::E4M3, t, profile);
  int b = 0;  // the smallest byte with 2^(b - 127) >= t
  while (scale_value(ScaleKind::UE8M0, std::uint8_t(b)) < t) ++b;
  return std::uint8_t(b);
}

Result<QuantizedRow, FormatsError> quantize_row(CacheFormat format, std::span<const float> row,
                                                RoundingProfile profile) {
  if (format == CacheFormat::IndexFp8) return fe::UnsupportedFormat{format};
  const GroupFormat f = group_format(format);
  if (row.size() % f.group != 0)
    return fe::ShapeMismatch{row.size() / f.group * f.group, row.size()};
  for (std::size_t i = 0; i < row.size(); ++i)
    if (!std::isfinite(row[i])) return fe::NonFiniteInput{i};
  QuantizedRow q;
  for (std::size_t g = 0; g < row.size() / f.group; ++g) {
    Rational amax = 0;
    for (std::size_t i = 0; i < f.group; ++i)
      amax = std::max(amax, magnitude(exact(row[g * f.group + i])));
    q.scales.push_back(group_scale(f, amax, profile));
    const Rational s = scale_value(f.scale, q.scales.back());
    for (std::size_t i = 0; i < f.group; ++i) {
      const float x = row[g * f.group + i];
      q.codes.push_back(encode_element(f.element, exact(x) / s, profile, std::signbit(x)));
    }
  }
  return q;
}

std::vector<Rational> dequantize_row(CacheFormat format, const QuantizedRow& q) {
  const GroupFormat f = group_format(format);
  std::vector<Rational> out;
  for (std::size_t i = 0; i < q.codes.size(); ++i)
    out.push_back(element_value(f.element, q.codes[i]) *
                  scale_value(f.scale, q.scales[i / f.group]));
  return out;
}

std::vector<std::byte> pack_row(CacheFormat format, const QuantizedRow& q) {
  const GroupFormat f = group_format(format);
  std::vector<std::byte> out;
  for (std::size_t g = 0; g < q.scales.size(); ++g) {
    const auto codes = std::span(q.codes).subspan(g * f.group, f.group);
    if (f.element == Element::E4M3)
      for (std::uint8_t c : codes) out.push_back(std::byte(c));
    else
      for (std::size_t i = 0; i < f.group; i += 2)
        out.push_back(std::byte(codes[i] | (codes[i + 1] << 4)));
    out.push_back(std::byte(q.scales[g]));
  }
  return out;
}

QuantizedRow unpack_row(CacheFormat format, std::span<const std::byte> bytes) {
  const GroupFormat f = group_format(format);
  const std::size_t group_bytes = (f.element == Element::E4M3 ? f.group : f.group / 2) + 1;
  QuantizedRow q;
  for (std::size_t at = 0; at + group_bytes <= bytes.size(); at += group_bytes) {
    for (std::size_t i = 0; i + 1 < group_bytes; ++i) {
      const auto b = std::uint8_t(bytes[at + i]);
      if (f.element == Element::E4M3) {
        q.codes.push_back(b);
      } else {
        q.codes.push_back(b & 0xf);
        q.codes.push_back(b >> 4);
      }
    }
    q.scales.push_back(std::uint8_t(bytes[at + group_bytes - 1]));
  }
  return q;
}

// row i's data at i D/2; its scales after every row's data, at rows D/2 + i D/32
SectionOffsets index_block_offsets(std::size_t rows, std::size_t dim, std::size_t row) {
  return {row * (dim / 2), rows * (dim / 2) + row * (dim / 32)};
}

Rational round_trip_bound(Element element, const Rational& x, const Rational& scale) {
  const Rational m = magnitude(x) / scale, top = element_max(element);
  if (m >= top) return (m - top) * scale;
  Rational below = 0, above = top;  // the codes around m
  for (std::uint8_t c = 0; c < codes_of(element); ++c) {
    if (is_nan_code(element, c)) continue;
    const Rational v = element_value(element, c);
    if (v <= m && v > below) below = v;
    if (v >= m && v < above) above = v;
  }
  return (above - below) / 2 * scale;
}

// j r
std::int64_t compressed_row_position(std::int64_t row, std::int64_t ratio) { return row * ratio; }

namespace {
// Where slot s's codes and scales live: main formats, the packed row at s row_bytes;
// IndexFp4, its block's sections.
struct Place {
  std::size_t data, scales;
};
Place place_of(const CacheGeometry& g, std::size_t slot) {
  if (g.format != CacheFormat::IndexFp4) {
    const std::size_t at = slot * cache_row_bytes(g.format, g.dim);
    return {at, at};
  }
  const std::size_t block = slot / g.rows_per_block;
  const std::size_t base = block * g.rows_per_block * cache_row_bytes(g.format, g.dim);
  const SectionOffsets o = index_block_offsets(g.rows_per_block, g.dim, slot % g.rows_per_block);
  return {base + o.data, base + o.scales};
}

// The format and whole groups a row (ShapeMismatch{whole groups' dim, dim}), then
// the cache's length.
Status<FormatsError> check_cache(const CacheGeometry& g, std::size_t bytes) {
  if (g.format == CacheFormat::IndexFp8) return fe::UnsupportedFormat{g.format};
  const std::size_t group = group_format(g.format).group;
  if (g.dim == 0 || g.dim % group != 0) return fe::ShapeMismatch{g.dim / group * group, g.dim};
  if (bytes != g.bytes()) return fe::ShapeMismatch{g.bytes(), bytes};
  return Ok{};
}
}  // namespace

Status<FormatsError> store_rows(const CacheGeometry& g, std::span<const float> rows,
                                std::span<const std::int32_t> slots,
                                std::span<std::byte> cache_bytes, RoundingProfile profile) {
  if (auto st = check_cache(g, cache_bytes.size()); !st.ok()) return st;
  if (rows.size() % g.dim != 0) return fe::ShapeMismatch{rows.size() / g.dim * g.dim, rows.size()};
  const std::size_t n = rows.size() / g.dim;
  if (slots.size() != n) return fe::ShapeMismatch{n, slots.size()};
  std::vector<bool> taken(g.slots(), false);
  for (std::size_t j = 0; j < n; ++j) {
    const std::int64_t s = slots[j];
    if (s == -1) continue;
    if (s < -1 || s >= std::int64_t(g.slots()) || taken[std::size_t(s)]) return fe::BadSlot{j, s};
    taken[std::size_t(s)] = true;
  }
  std::vector<QuantizedRow> quantized(n);
  for (std::size_t j = 0; j < n; ++j) {
    if (slots[j] == -1) continue;
    auto q = quantize_row(g.format, rows.subspan(j * g.dim, g.dim), profile);
    if (!q.ok()) {
      const auto bad = std::get<fe::NonFiniteInput>(q.error());
      return fe::NonFiniteInput{j * g.dim + bad.index};
    }
    quantized[j] = q.value();
  }
  for (std::size_t j = 0; j < n; ++j) {
    if (slots[j] == -1) continue;
    const Place at = place_of(g, std::size_t(slots[j]));
    if (g.format != CacheFormat::IndexFp4) {
      const auto bytes = pack_row(g.format, quantized[j]);
      std::copy(bytes.begin(), bytes.end(), cache_bytes.begin() + std::ptrdiff_t(at.data));
      continue;
    }
    const auto& q = quantized[j];
    for (std::size_t i = 0; i < g.dim; i += 2)
      cache_bytes[at.data + i / 2] = std::byte(q.codes[i] | (q.codes[i + 1] << 4));
    for (std::size_t k = 0; k < q.scales.size(); ++k)
      cache_bytes[at.scales + k] = std::byte(q.scales[k]);
  }
  return Ok{};
}

std::vector<std::size_t> bytes_of_slot(const CacheGeometry& g, std::size_t slot) {
  const Place at = place_of(g, slot);
  const std::size_t row_bytes = cache_row_bytes(g.format, g.dim);
  std::vector<std::size_t> bytes;
  if (g.format != CacheFormat::IndexFp4) {
    for (std::size_t b = 0; b < row_bytes; ++b) bytes.push_back(at.data + b);
    return bytes;
  }
  for (std::size_t b = 0; b < g.dim / 2; ++b) bytes.push_back(at.data + b);
  for (std::size_t b = 0; b < g.dim / 32; ++b) bytes.push_back(at.scales + b);
  return bytes;
}

std::vector<std::size_t> slots_a_refused_store_may_change(const CacheGeometry& g,
                                                          std::span<const std::int32_t> slots) {
  std::set<std::size_t> inside;
  for (const std::int32_t s : slots)
    if (s >= 0 && std::size_t(s) < g.slots()) inside.insert(std::size_t(s));
  return {inside.begin(), inside.end()};
}

Result<std::vector<Rational>, FormatsError> gather_rows(const CacheGeometry& g,
                                                        std::span<const std::byte> cache_bytes,
                                                        std::span<const std::int32_t> slots) {
  if (auto st = check_cache(g, cache_bytes.size()); !st.ok()) return st.error();
  for (std::size_t j = 0; j < slots.size(); ++j)
    if (slots[j] < -1 || slots[j] >= std::int64_t(g.slots())) return fe::BadSlot{j, slots[j]};
  std::vector<Rational> out;
  for (std::int32_t s : slots) {
    if (s == -1) {
      out.resize(out.size() + g.dim, Rational(0));
      continue;
    }
    const Place at = place_of(g, std::size_t(s));
    QuantizedRow q;
    if (g.format != CacheFormat::IndexFp4) {
      q = unpack_row(g.format, cache_bytes.subspan(at.data, cache_row_bytes(g.format, g.dim)));
    } else {
      for (std::size_t i = 0; i < g.dim / 2; ++i) {
        const auto b = std::uint8_t(cache_bytes[at.data + i]);
        q.codes.push_back(b & 0xf);
        q.codes.push_back(b >> 4);
      }
      for (std::size_t k = 0; k < g.dim / 32; ++k)
        q.scales.push_back(std::uint8_t(cache_bytes[at.scales + k]));
    }
    const GroupFormat f = group_format(g.format);
    for (std::size_t i = 0; i < g.dim; ++i) {  // a NaN element or scale byte reads as no value
      const std::uint8_t scale = q.scales[i / f.group];
      if (is_nan_code(f.element, q.codes[i]) ||
          (f.scale == ScaleKind::UE8M0 ? scale == 0xff : is_nan_code(Element::E4M3, scale)))
        return fe::NonFiniteInput{out.size() + i};
    }
    const auto values = dequantize_row(g.format, q);
    out.insert(out.end(), values.begin(), values.end());
  }
  return out;
}

}  // namespace aether::model
