// The host side every compression backend shares: the refusals decided from the
// batch description and buffer sizes (in the model's order, docs/compress.md), and
// the plan of a valid call: where each request's tokens and output rows start, and
// which old ring entries it reads. The model keeps its own, literal, checks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "api/compress.hpp"

namespace aether::impl {

enum class Step { Prefill, Decode };

struct CompressPlan {
  std::vector<std::size_t> token_offset, row_offset;  // per request
  std::size_t tokens = 0, rows = 0;
  std::int32_t most_tokens = 0;  // the batch's longest step
};

// Rows of a prefill request: max(1, nc); of a decode request: one per position.
inline std::size_t output_rows(const CompressRequest& q, std::int64_t ratio, Step step) {
  if (step == Step::Decode) return std::size_t(q.tokens);
  return std::size_t(
      std::max<std::int64_t>(1, completed_in_chunk(q.start, q.start + q.tokens, ratio)));
}

// Positions [r floor(s / r), s): the old inputs a step reads, when it completes a row.
inline std::pair<std::int64_t, std::int64_t> old_positions_read(const CompressRequest& q,
                                                                std::int64_t ratio) {
  if (completed_in_chunk(q.start, q.start + q.tokens, ratio) == 0) return {q.start, q.start};
  return {q.start / ratio * ratio, q.start};
}

inline std::variant<CompressPlan, CompressError> plan_call(
    std::span<const CompressRequest> requests, const CompressShape& shape, Step step,
    std::size_t projected, std::size_t ring, std::size_t rows, std::size_t row_index,
    std::size_t positions) {
  namespace ce = compress_error;
  if (shape.ratio < 1 || shape.dim == 0 || shape.ring == 0)
    return ce::BadShape{shape.ratio, shape.dim, shape.ring};
  std::vector<unsigned char> used(shape.state_slots,
                                  0);  // bytes: a call's planning is on every call's path
  CompressPlan plan;
  plan.token_offset.resize(requests.size());
  plan.row_offset.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const CompressRequest& q = requests[i];
    if (q.state_slot < 0 || std::size_t(q.state_slot) >= shape.state_slots ||
        used[std::size_t(q.state_slot)] || q.start < 0 || q.tokens < 0 ||
        q.start + q.tokens > INT32_MAX)
      return ce::BadRequest{i};
    used[std::size_t(q.state_slot)] = 1;
    plan.token_offset[i] = plan.tokens;
    plan.row_offset[i] = plan.rows;
    plan.tokens += std::size_t(q.tokens);
    plan.rows += output_rows(q, shape.ratio, step);
    plan.most_tokens = std::max(plan.most_tokens, q.tokens);
  }
  const std::size_t width = 2 * shape.dim;
  if (projected != plan.tokens * width) return ce::ShapeMismatch{plan.tokens * width, projected};
  if (ring != shape.state_slots * shape.ring * width)
    return ce::ShapeMismatch{shape.state_slots * shape.ring * width, ring};
  if (rows != plan.rows * shape.dim) return ce::ShapeMismatch{plan.rows * shape.dim, rows};
  if (row_index != plan.rows) return ce::ShapeMismatch{plan.rows, row_index};
  if (positions != plan.rows) return ce::ShapeMismatch{plan.rows, positions};
  const std::int64_t needed = ring_needed(shape.ratio, plan.most_tokens, step == Step::Decode);
  if (std::int64_t(shape.ring) < needed) return ce::RingTooSmall{shape.ring, needed};
  return plan;
}

}  // namespace aether::impl
