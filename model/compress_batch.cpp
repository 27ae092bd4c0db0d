// The model's batch over flat buffers (model/compress.hpp): the api's refusals in
// its order (shapes, the ring's capacity, NaN/inf in the inputs, then in the old
// ring entries a step reads), then each request's prefill or decode on the ring as
// the step can see it, and the set of entries a refused call may change.
#include "model/compress.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace aether::model {
namespace {
// A ring entry or a projected position; nothing for an entry holding NaN/inf (the
// checks guarantee a step never reads one).
std::optional<Position> position_from(const float* row, std::size_t dim) {
  Position p;
  for (std::size_t c = 0; c < 2 * dim; ++c)
    if (!std::isfinite(row[c])) return std::nullopt;
  p.gate.reserve(dim);
  p.value.reserve(dim);
  for (std::size_t d = 0; d < dim; ++d) {
    p.gate.push_back(exact(row[d]));
    p.value.push_back(exact(row[dim + d]));
  }
  p.stored.assign(row, row + 2 * dim);
  return p;
}
}  // namespace

Result<BatchResult, CompressError> compress_batch(std::span<const CompressRequest> requests,
                                                  std::span<const float> projected,
                                                  std::span<const float> ring,
                                                  const CompressShape& shape, bool decode,
                                                  std::size_t rows_len, std::size_t row_index_len,
                                                  std::size_t positions_len, Gate gate) {
  namespace ce = compress_error;
  const std::int64_t r = shape.ratio;
  const std::size_t D = shape.dim, S = shape.ring, width = 2 * D;
  if (r < 1 || D == 0 || S == 0) return ce::BadShape{r, D, S};
  std::set<std::int32_t> slots;
  std::size_t tokens = 0, rows = 0;
  std::int64_t qmax = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const CompressRequest& q = requests[i];
    if (q.state_slot < 0 || std::size_t(q.state_slot) >= shape.state_slots ||
        slots.contains(q.state_slot) || q.start < 0 || q.tokens < 0 ||
        q.start + q.tokens > INT32_MAX)
      return ce::BadRequest{i};
    slots.insert(q.state_slot);
    tokens += std::size_t(q.tokens);
    rows += decode ? std::size_t(q.tokens)
                   : std::size_t(std::max<std::int64_t>(1, (q.start + q.tokens) / r - q.start / r));
    qmax = std::max<std::int64_t>(qmax, q.tokens);
  }
  for (auto [expected, actual] :
       {std::pair{tokens * width, projected.size()},
        std::pair{shape.state_slots * S * width, ring.size()}, std::pair{rows * D, rows_len},
        std::pair{rows, row_index_len}, std::pair{rows, positions_len}})
    if (expected != actual) return ce::ShapeMismatch{expected, actual};
  if (const std::int64_t needed = ring_needed(r, qmax, decode); std::int64_t(S) < needed)
    return ce::RingTooSmall{S, needed};
  for (std::size_t i = 0; i < projected.size(); ++i)
    if (!std::isfinite(projected[i])) return ce::NonFiniteInput{ce::Input::Projected, i};
  std::optional<std::size_t> first_bad;
  for (const CompressRequest& q : requests) {
    if ((q.start + q.tokens) / r == q.start / r) continue;  // completes nothing: reads nothing old
    for (std::int64_t p = q.start / r * r; p < q.start; ++p)
      for (std::size_t c = 0; c < width; ++c) {
        const std::size_t at = (std::size_t(q.state_slot) * S + std::size_t(p) % S) * width + c;
        if (!std::isfinite(ring[at]) && (!first_bad || at < *first_bad)) first_bad = at;
      }
  }
  if (first_bad) return ce::NonFiniteInput{ce::Input::Ring, *first_bad};

  BatchResult out{{}, std::vector<float>(ring.begin(), ring.end())};
  out.rows.reserve(rows);
  std::size_t offset = 0;
  for (const CompressRequest& q : requests) {
    // The ring as the step can see it: the old inputs of its first group (the only
    // entries it reads that it does not write first).
    Ring state(S);
    float* slot = out.ring.data() + std::size_t(q.state_slot) * S * width;
    if ((q.start + q.tokens) / r != q.start / r)
      for (std::int64_t p = q.start / r * r; p < q.start; ++p)
        state.entries[std::size_t(p) % S] = position_from(slot + std::size_t(p) % S * width, D);
    state.length = q.start;
    std::vector<Position> step;
    step.reserve(std::size_t(q.tokens));
    for (std::int32_t t = 0; t < q.tokens; ++t)
      step.push_back(*position_from(projected.data() + (offset + std::size_t(t)) * width, D));
    offset += std::size_t(q.tokens);
    for (Row& row : decode ? model::decode(state, r, step, gate) : prefill(state, r, step, gate)) {
      if (row.z.empty()) row.z.assign(D, Interval{0, 0});  // an empty chunk's placeholder
      out.rows.push_back(std::move(row));
    }
    for (std::size_t e = 0; e < S; ++e)  // the bytes each entry now holds
      if (state.entries[e])
        std::copy(state.entries[e]->stored.begin(), state.entries[e]->stored.end(),
                  slot + e * width);
  }
  return out;
}

std::set<std::size_t> entries_a_refusal_may_change(std::span<const CompressRequest> requests,
                                                   const CompressShape& shape, bool decode) {
  const std::int64_t r = shape.ratio, S = std::int64_t(shape.ring);
  std::set<std::size_t> may_change;
  for (const CompressRequest& q : requests) {
    const std::int64_t s = q.start, e = q.start + q.tokens;
    const auto entry_of = [&](std::int64_t p) {
      return std::size_t(q.state_slot) * std::size_t(S) + std::size_t(p % S);
    };
    std::set<std::size_t> pending;
    for (std::int64_t p = s / r * r; p < s; ++p) pending.insert(entry_of(p));
    for (std::int64_t p = decode ? s : std::max(s, e - S); p < e; ++p)
      if (!pending.contains(entry_of(p))) may_change.insert(entry_of(p));
  }
  return may_change;
}

}  // namespace aether::model
