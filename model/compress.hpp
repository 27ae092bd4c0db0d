// Exact reference model of C1/C2 compression and its state ring (source 003
// A.1-A.3): the gated mean of a group of r positions, prefill chunks with their
// reserved and placeholder rows, decode that writes every new position before it
// reads, speculative verification with an accepted prefix. Literal and
// sequential: the ring is a vector of positions, a step is a loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "api/compress.hpp"
#include "model/rational.hpp"

namespace aether::model {

struct Interval {
  Rational lo, hi;
  bool contains(const Rational& x) const { return lo <= x && x <= hi; }
  friend bool operator==(const Interval&, const Interval&) = default;
};

// What a position's gate row holds, and what a row is: the positive weights exp(s)
// themselves (the lab's mode: exact rational results); the scores s (the exact
// real row, enclosed); or the scores s with the row widened to every value an fp32
// evaluation can give (compress_group_fp32: what a backend's row must lie in).
enum class Gate { Weight, Score, ScoreFp32 };

// One position's projection: D gate values and D latent values, exact. `stored`:
// the 2 D floats a ring entry holds for it, when it came from a float buffer (the
// bytes a ring copy must reproduce, -0 included).
// Small vectors: the properties and fuzz targets step thousands of positions of
// D = 1 to 4 through the model, and a heap block per field dominated their time.
template <class T>
using Channels = boost::container::small_vector<T, 4>;
struct Position {
  Channels<Rational> gate, value;
  Channels<float> stored;
  friend bool operator==(const Position&, const Position&) = default;
};

// e^x, enclosed: lo <= e^x <= hi, both dyadic, relative width below 2^-80.
Interval exp_enclosure(const Rational& x);

// z_d = Σ_t g_t,d v_t,d / Σ_t g_t,d over the group's positions t, with g = the
// weight (Gate::Weight, exact) or g = exp(s) (Gate::Score: exact when the group's
// scores are equal, else the tightest interval over the enclosures of exp).
std::vector<Interval> compress_group(std::span<const Position> group, Gate gate);

// Every value an fp32 evaluation of a score group can take before its bf16
// rounding, for an implementation that shifts by the group's max score
// (m = max_t s_t, x_t = fl(s_t - m)), takes e_t = exp(x_t) within 4 ulp, and forms
// Σ e_t v_t, Σ e_t and their quotient in fp32 (any order):
//   e_t in exp(s_t - m) [(1 - 2^-21)(1 - 2u|s_t - m|), (1 + 2^-21)(1 + 2u|s_t - m|)] ± 2^-147
//   (the shift's rounding, exp's error, underflow), the weighted mean's range over
//   those boxes, widened by γ_{4r+4} max_t |v_t| for the sums and the division.
std::vector<Interval> compress_group_fp32(std::span<const Position> group);

// One output row: row -1 for a placeholder (prefill, nc = 0) or a decode position
// that completes no group; its z is zero and its position 0. Compressed row j
// carries position j r.
struct Row {
  std::vector<Interval> z;
  std::int32_t row = -1;
  std::int32_t position = 0;
  friend bool operator==(const Row&, const Row&) = default;
};

// One request's live state: ring entry p mod S holds position p's inputs (or
// nothing, never written), and `length` positions have been processed.
struct Ring {
  std::vector<std::optional<Position>> entries;
  std::int64_t length = 0;
  explicit Ring(std::size_t size) : entries(size) {}
};

// Prefill chunk [s, e), s = ring.length: rows j in [floor(s/r), floor(e/r)), inputs
// before s read from the ring, the rest from the chunk; max(1, nc) rows (one
// placeholder when nc = 0); then the ring keeps the chunk's last S positions.
std::vector<Row> prefill(Ring& ring, std::int64_t ratio, std::span<const Position> chunk,
                         Gate gate);

// Decode step: every new position p is written to entry p mod S first, then each
// new position gets a row, completed when p mod r = r - 1 (its group read back from
// the ring). Any S: an undersized ring gives the corrupted rows it would give.
std::vector<Row> decode(Ring& ring, std::int64_t ratio, std::span<const Position> step, Gate gate);

// Speculative verification: decode the drafted positions, accept the first
// `accepted`; the rows of accepted positions are returned, the rejected positions'
// bytes stay in the ring (only the length says they are invalid).
std::vector<Row> verify(Ring& ring, std::int64_t ratio, std::span<const Position> draft,
                        std::size_t accepted, Gate gate);

// The pending suffix: positions [r floor(length / r), length) as the ring holds them.
std::vector<Position> pending(const Ring& ring, std::int64_t ratio);

// The reference: every complete group of `inputs` compressed, in order.
std::vector<std::vector<Interval>> whole_sequence_rows(std::span<const Position> inputs,
                                                       std::int64_t ratio, Gate gate);

// The backends' batch contract (impl/cpu/compress.hpp), literally: the refusals in
// order (shape, each request, buffer lengths, ring capacity, then the first
// non-finite projected value, else the lowest non-finite old ring entry a request
// reads), then each request's ring rebuilt from the buffer (every entry, length =
// start) and stepped by prefill or decode. Returns the rows and the ring after.
// The ring entries, as slot * S + entry, a call refused for its data (NaN/inf
// found while it reads) may leave changed (SPEC section 3): for each request the
// entries p mod S of the positions the step writes (decode: [s, s + q); prefill:
// [max(s, e - S), e)), less the entries of its pending inputs [r floor(s/r), s),
// which every continuation from s reads. Every other entry of the slot holds a
// position below r floor(s/r), which no continuation reads again, or one at or past
// s, which a continuation writes before it reads; but the set is kept to what the
// step writes, so that a backend changing anything else is caught. Decode's pending
// entries never meet its writes (S >= r + qmax - 1); a prefill chunk of more than
// S - (s mod r) positions lands on them.
std::set<std::size_t> entries_a_refusal_may_change(std::span<const CompressRequest> requests,
                                                   const CompressShape& shape, bool decode);

struct BatchResult {
  std::vector<Row> rows;
  std::vector<float> ring;
};
Result<BatchResult, CompressError> compress_batch(
    std::span<const CompressRequest> requests, std::span<const float> projected,
    std::span<const float> ring, const CompressShape& shape, bool decode, std::size_t rows_len,
    std::size_t row_index_len, std::size_t positions_len, Gate gate = Gate::ScoreFp32);

}  // namespace aether::model
