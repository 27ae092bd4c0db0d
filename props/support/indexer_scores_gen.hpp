// Reusable RapidCheck generators for the indexer's scorer (source 003 A.4.1): calls
// on the integer grid, where every partial sum is exact, and on general floats, in
// every key format (fp32, bf16, E4M3 with its scale), with shapes at the scorer's
// tile edges and the serving shape H 64, D 128.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <ostream>
#include <vector>

#include "api/indexer.hpp"

namespace aether::props {

// One scorer call: queries [H, D], weights [H], keys stored in `format`.
struct ScoreCall {
  std::vector<float> queries, weights;
  std::vector<std::byte> key_bytes;
  std::size_t dim = 0;
  KeyFormat format = KeyFormat::F32;
  IndexKeys keys() const { return {format, key_bytes, dim}; }
  std::size_t rows() const {
    const std::size_t row_bytes = key_row_bytes(format, dim);
    return row_bytes ? key_bytes.size() / row_bytes : 0;
  }
};
void showValue(const ScoreCall& call, std::ostream& os);

// L1 grid: integers |q| <= 8, |k| <= 15, |w| <= 4, E4M3 scales 2^-4..2^4, so every
// fp32 partial sum is an integer below 2^24 (times the scale): no rounding at all.
rc::Gen<ScoreCall> gen_grid_score_call();
// L2: general finite inputs, exponents kept within +-20 so nothing overflows.
rc::Gen<ScoreCall> gen_float_score_call();

}  // namespace aether::props
