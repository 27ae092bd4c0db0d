// The refusals every witness backend decides from sizes alone, in the order the
// model checks them (docs/witness.md). Shared by impl/cpu and impl/cuda so both
// accept exactly the same calls; the model keeps its own, literal, checks.
#pragma once

#include <cstddef>
#include <optional>

#include "api/witness.hpp"

namespace aether::impl {

// The witness table: out is [rows, S].
inline std::optional<WitnessError> table_refusal(std::size_t learned_len, std::size_t topk,
                                                 std::size_t rows, std::size_t num_segments,
                                                 std::size_t out_len) {
  namespace we = witness_error;
  if (static_cast<unsigned __int128>(topk) * rows != learned_len)
    return we::RowsMismatch{learned_len, topk, rows};
  if (num_segments == 0 || num_segments > MAX_TOPOLOGY_SEGMENTS)
    return we::SegmentsOutOfRange{num_segments};
  if (out_len != rows * num_segments) return we::OutputSizeMismatch{rows * num_segments, out_len};
  return std::nullopt;
}

// The merge: out has learned's length.
inline std::optional<WitnessError> merge_refusal(std::size_t learned_len, std::size_t topk,
                                                 std::size_t rows, std::size_t learned_keep,
                                                 std::size_t num_segments, std::size_t out_len) {
  namespace we = witness_error;
  if (static_cast<unsigned __int128>(topk) * rows != learned_len)
    return we::RowsMismatch{learned_len, topk, rows};
  if (num_segments == 0 || num_segments > MAX_TOPOLOGY_SEGMENTS)
    return we::SegmentsOutOfRange{num_segments};
  if (learned_keep > topk) return we::LearnedKeepOutOfRange{learned_keep, topk};
  if (out_len != learned_len) return we::OutputSizeMismatch{learned_len, out_len};
  return std::nullopt;
}

}  // namespace aether::impl
