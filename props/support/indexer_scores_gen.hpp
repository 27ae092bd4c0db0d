// Reusable RapidCheck generators for the indexer's scorer (source 003 A.4.1): calls
// on the integer grid, where every partial sum is exact, and on general floats, in
// every key format (fp32, bf16, E4M3 with its scale), with shapes at the scorer's
// tile edges and the serving shape H 64, D 128.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
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

// The device takes bf16 queries and bf16/E4M3 keys: a call's queries rounded to
// bf16, to nearest even (the model then scores the rounded values), and its fp32
// keys stored as their bf16 high halves. Queries t > 0 are query 0's heads rotated
// by t (negated for odd t), so every query of a batch scores differently.
struct DeviceScoreCall {
  std::size_t count = 0;
  std::vector<std::uint16_t> queries;  // [T, H, D] bf16 bits
  std::vector<float> query_values, weights;
  ScoreCall keys;
  std::vector<float> query(std::size_t t) const;
  std::vector<float> weight(std::size_t t) const;
};
// A batch of `count` queries from one call (its keys already in a device format).
DeviceScoreCall device_call(const ScoreCall& c, std::size_t count);
// fp32 keys stored as their bf16 high halves; other formats unchanged.
ScoreCall with_device_keys(ScoreCall c);
// Batches of 1 to 3 queries from generated calls, keys in a device format.
rc::Gen<DeviceScoreCall> gen_device_score_call(rc::Gen<ScoreCall> calls);

}  // namespace aether::props
