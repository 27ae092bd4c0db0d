// Vocabulary of the cache formats' codecs (source 003 A.5): element encodings,
// group scales, rounding profiles, and the refusals of a quantizer. Row byte
// counts: api/sharing.hpp (cache_row_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <variant>
#include <vector>

#include "api/result.hpp"
#include "api/sharing.hpp"

namespace aether {

// E4M3 (OCP "fn": max 448, no infinity, NaN 0x7f/0xff) and E2M1 (+-{0, 0.5, 1, 1.5,
// 2, 3, 4, 6}, sign in bit 3) elements.
enum class Element : std::uint8_t { E4M3, E2M1 };
// UE8M0: the byte b is 2^(b - 127) (255 NaN); E4M3: an E4M3 byte.
enum class ScaleKind : std::uint8_t { UE8M0, E4M3 };

// How a value becomes an element code. Cuda (the default): nearest, ties to the
// even code, saturating to the largest finite value, NaN to +max (cuda_fp8.h,
// cuda_fp4.h with __NV_SATFINITE / cudaRoundNearest). TiesTowardZero: nearest,
// ties to the smaller magnitude, saturating, NaN to +0 (a public reference FP4
// quantizer's rule), so that a user can name the rule their quantizer follows.
enum class RoundingProfile : std::uint8_t { Cuda, TiesTowardZero };
inline std::ostream& operator<<(std::ostream& os, RoundingProfile p) {
  return os << (p == RoundingProfile::Cuda ? "Cuda" : "TiesTowardZero");
}

// A cache format's groups: `group` elements share one scale.
struct GroupFormat {
  Element element;
  ScaleKind scale;
  std::size_t group;
};
// MainFp8: E4M3 with a UE8M0 scale per 32; MainFp4: E2M1 with an E4M3 scale per
// 16; IndexFp4: E2M1 with a UE8M0 scale per 32. (IndexFp8 is the indexer's key:
// api/indexer.hpp's KeyFormat::E4M3.)
constexpr GroupFormat group_format(CacheFormat format) {
  switch (format) {
    case CacheFormat::MainFp8:
      return {Element::E4M3, ScaleKind::UE8M0, 32};
    case CacheFormat::MainFp4:
      return {Element::E2M1, ScaleKind::E4M3, 16};
    default:
      return {Element::E2M1, ScaleKind::UE8M0, 32};
  }
}

// A row quantized group by group: one element code a value (E2M1 codes in the low
// nibble), one scale byte a group.
struct QuantizedRow {
  std::vector<std::uint8_t> codes, scales;
  friend bool operator==(const QuantizedRow&, const QuantizedRow&) = default;
};

// Where row i of an IndexFp4 block lives: its data and its scales (byte offsets).
struct SectionOffsets {
  std::size_t data, scales;
  friend bool operator==(const SectionOffsets&, const SectionOffsets&) = default;
};

// A paged cache of one format: `blocks` blocks of `rows_per_block` row slots of `dim`
// elements; slot s is row s mod rows_per_block of block s / rows_per_block. Main
// formats keep a block's rows one after another (cache_row_bytes each); IndexFp4
// keeps a block's data section, then its scale section.
struct CacheGeometry {
  CacheFormat format = CacheFormat::MainFp8;
  std::size_t dim = 0, rows_per_block = 0, blocks = 0;
  std::size_t slots() const { return rows_per_block * blocks; }
  std::size_t bytes() const { return slots() * cache_row_bytes(format, dim); }
};

namespace formats_error {
// A NaN or infinity at this position of the input.
struct NonFiniteInput {
  std::size_t index;
  friend bool operator==(const NonFiniteInput&, const NonFiniteInput&) = default;
};
// A length that is not what the format needs (a row of whole groups, the bytes of
// a row).
struct ShapeMismatch {
  std::size_t expected, actual;
  friend bool operator==(const ShapeMismatch&, const ShapeMismatch&) = default;
};
// A format the call does not take (IndexFp8 rows are the indexer's).
struct UnsupportedFormat {
  CacheFormat format;
  friend bool operator==(const UnsupportedFormat&, const UnsupportedFormat&) = default;
};
// A row's slot that is neither -1 (a placeholder) nor a slot of the cache, or a
// slot given twice in one store.
struct BadSlot {
  std::size_t row;
  std::int64_t slot;
  friend bool operator==(const BadSlot&, const BadSlot&) = default;
};
// CUDA only: the runtime reported an error (cudaError_t value).
struct DeviceFailure {
  int code;
  friend bool operator==(const DeviceFailure&, const DeviceFailure&) = default;
};
using FormatsError =
    std::variant<NonFiniteInput, ShapeMismatch, UnsupportedFormat, BadSlot, DeviceFailure>;

inline std::ostream& operator<<(std::ostream& os, const FormatsError& e) {
  if (auto* p = std::get_if<NonFiniteInput>(&e))
    return os << "NonFiniteInput{index=" << p->index << "}";
  if (auto* p = std::get_if<ShapeMismatch>(&e))
    return os << "ShapeMismatch{expected=" << p->expected << ", actual=" << p->actual << "}";
  if (auto* p = std::get_if<UnsupportedFormat>(&e))
    return os << "UnsupportedFormat{format=" << int(p->format) << "}";
  if (auto* p = std::get_if<BadSlot>(&e))
    return os << "BadSlot{row=" << p->row << ", slot=" << p->slot << "}";
  return os << "DeviceFailure{code=" << std::get<DeviceFailure>(e).code << "}";
}
}  // namespace formats_error

using formats_error::FormatsError;

}  // namespace aether
