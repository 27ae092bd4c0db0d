// Stored index keys read on the CPU (api/indexer.hpp's layouts): one element
// decoded, a row's E4M3 scale, and the scorer's input checks in the model's
// refusal order. Shared by the scorer and DoSA's bound pass.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <span>

#include "api/indexer.hpp"

namespace aether::cpu {

// E4M3 byte -> float: (-1)^s 2^(e-7) (1 + m/8), subnormal 2^-6 m/8, NaN for e = 15, m = 7.
inline const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) {
      const int e = (b >> 3) & 15, m = b & 7;
      const float magnitude =
          e == 0 ? std::ldexp(float(m) / 8, -6) : std::ldexp(1 + float(m) / 8, e - 7);
      t[std::size_t(b)] = (e == 15 && m == 7) ? NAN : (b & 0x80 ? -magnitude : magnitude);
    }
    return t;
  }();
  return table;
}

template <KeyFormat kFormat>
inline float element(const std::byte* row, std::size_t d) {
  if constexpr (kFormat == KeyFormat::F32) {
    float f;
    std::memcpy(&f, row + 4 * d, 4);
    return f;
  } else if constexpr (kFormat == KeyFormat::BF16) {
    std::uint16_t half;
    std::memcpy(&half, row + 2 * d, 2);
    return std::bit_cast<float>(std::uint32_t(half) << 16);
  } else {
    return e4m3_table()[std::size_t(row[d])];
  }
}

inline float element(const IndexKeys& keys, const std::byte* row, std::size_t d) {
  switch (keys.format) {
    case KeyFormat::F32:
      return element<KeyFormat::F32>(row, d);
    case KeyFormat::BF16:
      return element<KeyFormat::BF16>(row, d);
    default:
      return element<KeyFormat::E4M3>(row, d);
  }
}

inline float row_scale(const IndexKeys& keys, const std::byte* row) {
  float scale = 1.0f;
  if (keys.format == KeyFormat::E4M3) std::memcpy(&scale, row + keys.dim, 4);
  return scale;
}

// Whether any key is NaN/inf (or an E4M3 scale NaN/inf/negative), as one branch-free
// pass the compiler vectorises: the element-by-element scan that names the first
// one runs only then (on every call it costs as much time as the scoring itself).
inline bool any_non_finite_bits(const IndexKeys& keys) {
  std::uint32_t bad = 0;
  if (keys.format == KeyFormat::F32) {
    const std::size_t n = keys.bytes.size() / 4;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t w;
      std::memcpy(&w, keys.bytes.data() + 4 * i, 4);
      bad |= std::uint32_t((w & 0x7f800000u) == 0x7f800000u);
    }
  } else if (keys.format == KeyFormat::BF16) {
    const std::size_t n = keys.bytes.size() / 2;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, keys.bytes.data() + 2 * i, 2);
      bad |= std::uint32_t((h & 0x7f80u) == 0x7f80u);
    }
  } else {  // E4M3: a NaN code (low 7 bits set), or a scale that is NaN/inf or below zero
    const std::size_t row_bytes = keys.dim + 4, rows = keys.bytes.size() / row_bytes;
    for (std::size_t j = 0; j < rows; ++j) {
      const std::byte* row = keys.bytes.data() + j * row_bytes;
      for (std::size_t d = 0; d < keys.dim; ++d)
        bad |= std::uint32_t((std::uint8_t(row[d]) & 0x7f) == 0x7f);
      std::uint32_t w;
      std::memcpy(&w, row + keys.dim, 4);
      bad |= std::uint32_t((w & 0x7f800000u) == 0x7f800000u) | std::uint32_t(w > 0x80000000u);
    }
  }
  return bad != 0;
}

// The model's refusal order: queries, weights, then keys row by row.
inline std::optional<IndexerError> check_score_inputs(std::span<const float> queries,
                                                      std::span<const float> weights,
                                                      const IndexKeys& keys) {
  if (queries.size() != weights.size() * keys.dim)
    return indexer_error::ShapeMismatch{weights.size() * keys.dim, queries.size()};
  for (std::size_t i = 0; i < queries.size(); ++i)
    if (!std::isfinite(queries[i])) return indexer_error::NonFiniteInput{0, i};
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (!std::isfinite(weights[i])) return indexer_error::NonFiniteInput{1, i};
  const std::size_t row_bytes = key_row_bytes(keys.format, keys.dim);
  if (row_bytes == 0 ? !keys.bytes.empty() : keys.bytes.size() % row_bytes != 0)
    return indexer_error::ShapeMismatch{row_bytes ? keys.bytes.size() / row_bytes * row_bytes : 0,
                                        keys.bytes.size()};
  const std::size_t rows = row_bytes ? keys.bytes.size() / row_bytes : 0;
  if (!any_non_finite_bits(keys)) return std::nullopt;
  for (std::size_t j = 0; j < rows; ++j) {
    const std::byte* row = keys.bytes.data() + j * row_bytes;
    const float scale = row_scale(keys, row);
    if (!std::isfinite(scale) || scale < 0)
      return indexer_error::NonFiniteInput{2, j * row_bytes + keys.dim};
    for (std::size_t d = 0; d < keys.dim; ++d)
      if (!std::isfinite(element(keys, row, d)))
        return indexer_error::NonFiniteInput{2, j * keys.dim + d};
  }
  return std::nullopt;
}

}  // namespace aether::cpu
