// Reusable RapidCheck generators for the cache formats' codecs (source 003 A.5):
// rows whose groups hit the encodings' ties exactly (values at midpoints of two
// codes times the group's scale), their largest values, subnormals, signed zeros,
// saturation, amax exactly or one ulp past a power of two times the largest
// element, and magnitudes from 2^-30 to 2^100.
#pragma once

#include <rapidcheck.h>

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

}  // namespace aether::props
