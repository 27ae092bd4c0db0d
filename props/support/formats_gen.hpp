// Reusable RapidCheck generators for the cache formats' codecs (source 003 A.5):
// rows whose groups hit the encodings' ties exactly (values at midpoints of two
// codes times the group's scale) and one float either side, their largest values,
// subnormals, signed zeros, saturation, amax exactly or one ulp past a power of two
// times the largest element, and magnitudes from 2^-30 to 2^100.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "api/formats.hpp"

namespace aether::props {

struct FormatsCase {
  CacheFormat format = CacheFormat::MainFp8;
  RoundingProfile profile = RoundingProfile::Cuda;
  std::vector<float> row;
};
void showValue(const FormatsCase& c, std::ostream& os);

// MainFp8 (D 32..128), MainFp4 (D 16..64) or IndexFp4 (D 32..128) rows, finite.
rc::Gen<FormatsCase> gen_formats_row();
// The same with, one time in four, a NaN or infinity somewhere, or a length that is
// not whole groups, or the IndexFp8 format.
rc::Gen<FormatsCase> gen_faulty_formats_row();

// The format's name as the API spells it (for reports and traces).
const char* format_name(CacheFormat f);

// A store into a paged cache and reads back: a geometry of 1 to 4 groups a row,
// 1 to 4 rows a block, 1 to 3 blocks; 0 to 6 rows whose groups have the shapes
// above (one row in 8 with a NaN or infinity) with slots in [-2, slots]
// (placeholders, slots outside, slots twice); the cache's bytes before the store
// at random; 4 slots to read in [-1, slots).
struct StoreCase {
  CacheGeometry cache;
  RoundingProfile profile = RoundingProfile::Cuda;
  std::vector<float> rows;
  std::vector<std::int32_t> slots, reads;
  std::vector<std::byte> before;
};
void showValue(const StoreCase& c, std::ostream& os);
rc::Gen<StoreCase> gen_store_case();

// "" when two caches agree (bytes `ignored` marks aside); otherwise the first few
// differing bytes, each with its slot and both values: the comparison of every
// formats check.
std::string cache_report(const CacheGeometry& g, const std::vector<std::byte>& want,
                         const std::vector<std::byte>& got, const std::vector<bool>& ignored = {});
// The bytes a store refused for its data may change (the rows at its slots,
// model::slots_a_refused_store_may_change), marked.
std::vector<bool> bytes_a_refused_store_may_change(const CacheGeometry& g,
                                                   const std::vector<std::int32_t>& slots);

}  // namespace aether::props
