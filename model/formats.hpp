// Exact model of the cache formats' codecs (source 003 A.5): element values and
// encodings, group scales, quantized rows and their byte layouts, in rationals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "api/formats.hpp"
#include "model/rational.hpp"

namespace aether::model {

// E4M3: (-1)^s 2^(e-7) (1 + m/8), e = 0: (-1)^s 2^-6 m/8 (0x7f, 0xff: NaN).
// E2M1: (-1)^s 2^(e-1) (1 + m/2), e = 0: (-1)^s m/2.
Rational element_value(Element element, std::uint8_t code);
bool is_nan_code(Element element, std::uint8_t code);
Rational element_max(Element element);  // 448, 6

// The code nearest x among the finite codes of x's sign (so |x| past the largest
// finite value saturates to it); a tie between two codes goes to the even code
// (Cuda) or the smaller magnitude (TiesTowardZero). x = 0 is +0, or -0 when
// `negative` (a float -0).
std::uint8_t encode_element(Element element, const Rational& x, RoundingProfile profile,
                            bool negative = false);
// What a profile makes of NaN: E4M3 0x7f and E2M1 +6 (Cuda), +0 (TiesTowardZero).
std::uint8_t encode_nan(Element element, RoundingProfile profile);

// UE8M0 byte b: 2^(b - 127); E4M3: element_value.
Rational scale_value(ScaleKind kind, std::uint8_t byte);

// The amax floors: a group's scale is computed from max(amax, floor).
// UE8M0: 10^-4 (as engines clamp amax); E4M3: 6 2^-9 (the scale stays at least the
// smallest E4M3 value, 2^-9).
Rational amax_floor(ScaleKind kind);

// A group's scale byte. UE8M0: the smallest power of two at least
// max(amax, floor) / element_max (decided on rationals: no log2 rounding). E4M3:
// encode_element(E4M3, max(amax, floor) / element_max, profile).
std::uint8_t group_scale(GroupFormat format, const Rational& amax, RoundingProfile profile);

// A row quantized group by group: codes[i] = encode_element(x_i / scale of its
// group), scales[g] = group_scale(max |x| of group g). Refuses IndexFp8, a row
// that is not whole groups, and NaN/inf (the first, by index).
Result<QuantizedRow, FormatsError> quantize_row(CacheFormat format, std::span<const float> row,
                                                RoundingProfile profile);
// code value x scale value, element by element.
std::vector<Rational> dequantize_row(CacheFormat format, const QuantizedRow& q);

// A row's bytes (cache_row_bytes): MainFp8 and MainFp4 interleave each group's
// data and its scale ([32 E4M3][UE8M0] x D/32; [8 bytes of E2M1 pairs, the even
// element in the low nibble][E4M3] x D/16). IndexFp4 rows are not contiguous:
// index_block_offsets places them.
std::vector<std::byte> pack_row(CacheFormat format, const QuantizedRow& q);
QuantizedRow unpack_row(CacheFormat format, std::span<const std::byte> bytes);

// An IndexFp4 block of `rows` rows of D: a data section (rows x D/2 bytes, row i
// at i D/2) then a scale section (rows x D/32 bytes, row i at rows D/2 + i D/32).
SectionOffsets index_block_offsets(std::size_t rows, std::size_t dim, std::size_t row);

// |x - dequantized x| at most: within the finite range, half the gap between the
// two codes around x / s, times s; past it, |x| - max s.
Rational round_trip_bound(Element element, const Rational& x, const Rational& scale);

// A.3: compressed row j covers positions [j r, (j + 1) r) and carries position j r,
// the start of its group (a query keeps its own token position).
std::int64_t compressed_row_position(std::int64_t row, std::int64_t ratio);

// A.3's store: rows [n, D] into the cache at slots [n], each quantized in the
// cache's format and written where the geometry places its slot; a placeholder
// row (slot -1) is not written and its values not read. Refusals, before anything
// is written: IndexFp8; a dimension that is not whole groups, the cache's length,
// rows not whole rows, slots not one a row (ShapeMismatch, in that order); the
// first bad slot (outside the cache, or given twice: BadSlot at the second); the
// first NaN/inf of a stored row.
Status<FormatsError> store_rows(const CacheGeometry& cache, std::span<const float> rows,
                                std::span<const std::int32_t> slots,
                                std::span<std::byte> cache_bytes, RoundingProfile profile);

// Every byte offset of the row at `slot`: the packed row (main formats), or its
// data then its scales (IndexFp4).
std::vector<std::size_t> bytes_of_slot(const CacheGeometry& cache, std::size_t slot);

// SPEC section 3 for the store: a call refused for its data (a bad slot, NaN/inf)
// may change the rows at its own slots inside the cache, and only those. The slot
// mapping gives each of them to the position this call stores, so a later read of
// one is a read of that position, which exists only once a store of it is
// accepted, and that store rewrites every byte of the row. Sorted, distinct.
std::vector<std::size_t> slots_a_refused_store_may_change(const CacheGeometry& cache,
                                                          std::span<const std::int32_t> slots);

// The read side: the rows at slots [m], dequantized ([m, D]; a -1 slot reads as
// zeros). Refuses as store_rows does for the format, dimension and cache's length,
// then a slot outside the cache, then a NaN element or scale byte (a slot never
// stored): NonFiniteInput at the first such value of the output.
Result<std::vector<Rational>, FormatsError> gather_rows(const CacheGeometry& cache,
                                                        std::span<const std::byte> cache_bytes,
                                                        std::span<const std::int32_t> slots);

}  // namespace aether::model
