// Vocabulary shared by the witness model and every witness backend: the segment
// bound and the refusals of 000 ("Refusals"), plus the two an impl adds because it
// writes into caller buffers or a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <variant>

#include "api/result.hpp"

namespace aether {

// The fused kernel carries occupancy as a 64-bit mask; every path enforces it.
inline constexpr std::size_t MAX_TOPOLOGY_SEGMENTS = 64;

namespace witness_error {
// The context lengths do not cover every learned row (learned_len != topk * rows).
struct RowsMismatch {
  std::size_t learned_len, topk, rows;
  friend bool operator==(const RowsMismatch&, const RowsMismatch&) = default;
};
// Zero segments, or more than MAX_TOPOLOGY_SEGMENTS, at the merge.
struct SegmentsOutOfRange {
  std::size_t num_segments;
  friend bool operator==(const SegmentsOutOfRange&, const SegmentsOutOfRange&) = default;
};
// The retained prefix is wider than the row.
struct LearnedKeepOutOfRange {
  std::size_t learned_keep, topk;
  friend bool operator==(const LearnedKeepOutOfRange&, const LearnedKeepOutOfRange&) = default;
};
// Impl only: the caller's output buffer does not have the learned row's length.
struct OutputSizeMismatch {
  std::size_t expected, actual;
  friend bool operator==(const OutputSizeMismatch&, const OutputSizeMismatch&) = default;
};
// CUDA only: the runtime reported an error (cudaError_t value).
struct DeviceFailure {
  int code;
  friend bool operator==(const DeviceFailure&, const DeviceFailure&) = default;
};
}  // namespace witness_error

using WitnessError = std::variant<witness_error::RowsMismatch, witness_error::SegmentsOutOfRange,
                                  witness_error::LearnedKeepOutOfRange,
                                  witness_error::OutputSizeMismatch, witness_error::DeviceFailure>;

// In witness_error so argument-dependent lookup finds it for the variant.
namespace witness_error {
inline std::ostream& operator<<(std::ostream& os, const WitnessError& e) {
  namespace we = witness_error;
  if (auto* p = std::get_if<we::RowsMismatch>(&e))
    return os << "RowsMismatch{learned_len=" << p->learned_len << ", topk=" << p->topk
              << ", rows=" << p->rows << "}";
  if (auto* p = std::get_if<we::SegmentsOutOfRange>(&e))
    return os << "SegmentsOutOfRange{num_segments=" << p->num_segments << "}";
  if (auto* p = std::get_if<we::LearnedKeepOutOfRange>(&e))
    return os << "LearnedKeepOutOfRange{learned_keep=" << p->learned_keep << ", topk=" << p->topk
              << "}";
  if (auto* p = std::get_if<we::OutputSizeMismatch>(&e))
    return os << "OutputSizeMismatch{expected=" << p->expected << ", actual=" << p->actual << "}";
  return os << "DeviceFailure{code=" << std::get<we::DeviceFailure>(e).code << "}";
}
}  // namespace witness_error

}  // namespace aether
