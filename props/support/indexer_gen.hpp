// Reusable RapidCheck generators for the indexer's selection path and its
// scorer. Adversarial by construction: valid lengths at 0, 1, tile edges
// and up to 131072; all scores equal; many ties at the cutoff; plateaus of exact
// zeros from the ReLU (with fewer positives than K in long rows); half a row on one
// value; scores offset far from zero (+100, -10000: one exponent, shared top bits);
// ascending and descending rows; NaN, inf and 1e30 past the valid end; K larger
// than the valid count.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <vector>

#include "api/indexer.hpp"
#include "props/support/model_adapter.hpp"

namespace aether::props {

// A batched valid-prefix top-k call: scores [rows, width], one end per row.
struct TopkCall {
  std::vector<float> scores;
  std::size_t width = 0;
  std::vector<std::int32_t> ends;
  std::size_t k = 0;
  // How much longer (or shorter) than rows * k the output buffer is: 0 when well formed.
  std::ptrdiff_t out_delta = 0;
  std::size_t out_len() const { return off_by(ends.size() * k, out_delta); }
};
void showValue(const TopkCall& call, std::ostream& os);

// A candidate-block call on one row.
struct CandidateCall {
  std::vector<float> row;
  std::size_t end = 0;
  std::vector<std::int32_t> retained_blocks;
  std::size_t block_size = 1;
  std::size_t k = 0;
  // How much longer (or shorter) than needed each output buffer is: 0 when well formed.
  std::ptrdiff_t out_delta = 0;
  std::size_t out_len(std::size_t needed) const { return off_by(needed, out_delta); }
};
void showValue(const CandidateCall& call, std::ostream& os);

// Valid lengths: mostly small, sometimes 511..1024, 16000 or 131072.
rc::Gen<std::size_t> gen_valid_length();
// n finite scores in one of the adversarial patterns above.
rc::Gen<std::vector<float>> gen_scores(std::size_t n);
// Values for storage past the valid end: NaN, infinities, 1e30, anything.
rc::Gen<float> gen_garbage();

rc::Gen<TopkCall> gen_well_formed_topk_call();
// Well formed more often than not; else one or more of: a bad end, a shape
// mismatch, NaN/inf inside a valid range, an output of the wrong length.
rc::Gen<TopkCall> gen_any_topk_call();
// Calls that take the CUDA read-once path (impl/cuda/indexer_read_once.hpp's
// limits, its chunk and sample strides): 1 or 2 rows of at least kWideMinWidth,
// K up to kWideMaxK, ends at K, 2K and around; the long-row patterns, plus rows
// built around K (a plateau where the K-th falls, the top value K - 1 to K + 1
// times, fewer than K positives over exact zeros, the K best sharing their top
// bits) and rows the sample misjudges (its runs alone hold a plateau, larger or
// smaller scores). One call in eight has a non-finite score in row 0.
rc::Gen<TopkCall> gen_wide_topk_call();
// Refusals included: in one call in four, one or more of a bad block, NaN inside a
// candidate, a row shorter than its end, outputs of the wrong length.
rc::Gen<CandidateCall> gen_candidate_call();

}  // namespace aether::props
