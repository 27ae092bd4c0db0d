// Reusable RapidCheck generators for witness calls. They aim at the corners of
// source 000: lengths from negative to 2^31 - 1, padding, duplicates, entries
// on and next to the segment edges e_s, out-of-range entries, S from 0 to past
// 64, keep and budgets at and past the row width.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

#include "props/support/model_adapter.hpp"

namespace aether::props {

// One call of the witness API. well_formed() calls pass every refusal check.
struct WitnessCall {
  std::vector<std::int32_t> learned;  // row-major [rows, topk]
  std::size_t topk = 0;
  std::vector<std::int32_t> context_lens;  // one per row
  std::size_t learned_keep = 0;
  std::size_t num_segments = 0;
  std::size_t max_replacements = 0;
  // How much longer (or shorter) than the call needs an impl's output buffer is:
  // 0 in a well-formed call.
  std::ptrdiff_t out_delta = 0;

  std::size_t rows() const { return context_lens.size(); }
  // The output buffer's length for a call whose output needs `needed` elements.
  std::size_t out_len(std::size_t needed) const { return off_by(needed, out_delta); }
};

std::ostream& operator<<(std::ostream& os, const WitnessCall& call);
void showValue(const WitnessCall& call, std::ostream& os);

// L: mostly small; also 0, negatives, tile and prime sizes, and up to INT32_MAX.
rc::Gen<std::int32_t> gen_context_len();
// S: 1..64 for merges the model accepts.
rc::Gen<std::size_t> gen_valid_segments();
// S: anywhere in 0..70 (0 is the off switch, > 64 is refused at the merge).
rc::Gen<std::size_t> gen_any_segments();
// A learned row of width topk over [0, L): padding, duplicates, edges, out-of-range.
rc::Gen<std::vector<std::int32_t>> gen_learned_row(std::int32_t context_len,
                                                   std::size_t num_segments, std::size_t topk);
// A row whose last `tail` slots are padding (the reserved tail of the serving entry).
rc::Gen<std::vector<std::int32_t>> gen_row_with_padded_tail(std::int32_t context_len,
                                                            std::size_t num_segments,
                                                            std::size_t topk, std::size_t tail);

// Calls every refusal check accepts.
rc::Gen<WitnessCall> gen_well_formed_call();
// Any call: well formed more often than not, otherwise with one or more of the
// refusals' conditions at once (rows mismatch, S out of range, keep past topk, an
// output buffer of the wrong length).
rc::Gen<WitnessCall> gen_any_call();

}  // namespace aether::props

namespace rc {
template <>
struct Arbitrary<aether::props::WitnessCall> {
  static Gen<aether::props::WitnessCall> arbitrary() { return aether::props::gen_any_call(); }
};
}  // namespace rc
