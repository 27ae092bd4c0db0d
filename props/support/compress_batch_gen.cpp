#include "props/support/compress_batch_gen.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>

namespace aether::props {

namespace gen = rc::gen;

void showValue(const BatchCall& c, std::ostream& os) {
  os << (c.decode ? "decode" : "prefill") << " r=" << c.shape.ratio << " D=" << c.shape.dim
     << " S=" << c.shape.ring << " slots=" << c.shape.state_slots << " rows=" << c.rows;
  if (c.index_rows != c.rows) os << " row_index=" << c.index_rows;
  if (c.position_rows != c.rows) os << " positions=" << c.position_rows;
  os << " requests:";
  for (const auto& q : c.requests)
    os << " {slot " << q.state_slot << ", start " << q.start << ", tokens " << q.tokens << "}";
  os << "\nprojected:";
  for (float x : c.projected) os << ' ' << x;
  os << "\nring:";
  for (float x : c.ring) os << ' ' << x;
  os << '\n';
}

rc::Gen<BatchCall> gen_batch_call(bool grid) {
  return gen::exec([grid] {
    BatchCall c;
    c.decode = *gen::arbitrary<bool>();
    c.shape.ratio = grid ? *gen::element<std::int64_t>(1, 2, 4) : *gen::inRange<std::int64_t>(1, 4);
    // small dimensions for the model's sake; multiples of 4 for the CUDA 16-byte path
    // (132: a lane's second group of channels)
    c.shape.dim = *gen::weightedElement<std::size_t>(
        {{4, 1}, {4, 2}, {2, 3}, {3, 4}, {2, 8}, {1, 12}, {1, 132}});
    c.shape.state_slots = *gen::inRange<std::size_t>(1, 4);
    const std::int64_t qmax = *gen::inRange<std::int64_t>(1, 7);
    const std::int64_t needed = ring_needed(c.shape.ratio, qmax, c.decode);
    c.shape.ring = std::size_t(std::max<std::int64_t>(
        1, needed + *gen::weightedElement<std::int64_t>({{1, -1}, {8, 0}, {4, 1}, {2, 3}})));
    std::vector<std::int32_t> slots(c.shape.state_slots);
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = std::int32_t(i);
    std::mt19937 shuffle_rng(*gen::arbitrary<std::uint32_t>());
    std::shuffle(slots.begin(), slots.end(), shuffle_rng);
    // Mostly every slot busy and steps of 1..qmax tokens: most calls complete rows.
    const std::size_t n = *gen::weightedOneOf<std::size_t>(
        {{1, gen::just<std::size_t>(0)},
         {9, gen::inRange<std::size_t>(1, c.shape.state_slots + 1)}});
    // A third of the calls carry faults drawn independently, so that several meet in
    // one call: malformed requests, non-finite inputs, non-finite old ring entries,
    // and outputs (rows, row indices, positions) of the wrong length. The rest have
    // each fault now and then, alone.
    const int faults = *gen::inRange(0, 3) == 0 ? *gen::inRange(1, 128) : 0;
    const std::size_t bad_request =
        faults & 1 ? *gen::inRange<std::size_t>(0, std::max<std::size_t>(n, 1)) : n;
    std::size_t tokens = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto count = *gen::weightedOneOf<std::int64_t>(
          {{1, gen::just<std::int64_t>(0)}, {9, gen::inRange<std::int64_t>(1, qmax + 1)}});
      CompressRequest q{slots[i], *gen::inRange<std::int64_t>(0, 14), std::int32_t(count)};
      const bool malformed = i == bad_request || (faults & 1 && *gen::inRange(0, 4) == 0);
      switch (malformed ? *gen::inRange(0, 5) : *gen::inRange(0, 40)) {
        case 0:
          q.state_slot = std::int32_t(c.shape.state_slots);
          break;
        case 1:
          q.state_slot = slots[0];
          break;
        case 2:
          q.start = -1;
          break;
        case 3:
          q.tokens = -1;
          break;
        case 4:  // positions past INT32_MAX
          q.start = INT32_MAX;
          q.tokens = std::max(q.tokens, 1);
          break;
        default:
          break;
      }
      c.requests.push_back(q);
      tokens += std::size_t(std::max(q.tokens, 0));
    }
    // One sequence for the new positions and the ring, so the grid's scores agree.
    const std::size_t entries = c.shape.state_slots * c.shape.ring;
    const Sequence all = *(grid ? gen_grid_sequence(tokens + entries, c.shape.dim, c.shape.ratio)
                                : gen_float_sequence(tokens + entries, c.shape.dim));
    const auto split = all.projected.begin() + std::ptrdiff_t(tokens * 2 * c.shape.dim);
    c.projected.assign(all.projected.begin(), split);
    c.ring.assign(split, all.projected.end());
    const int bad_inputs = faults & 2 ? *gen::inRange(1, 4) : *gen::inRange(0, 30) == 0;
    for (int i = 0; i < bad_inputs && !c.projected.empty(); ++i)
      c.projected[*gen::inRange<std::size_t>(0, c.projected.size())] =
          *gen::element(NAN, INFINITY, -INFINITY);
    // Old entries a step reads (positions r floor(s/r) .. s-1 of a request that
    // completes a row) are few among the ring's: a random entry seldom hits one.
    std::vector<std::size_t> read_entries;
    const std::int64_t r = c.shape.ratio, S = std::int64_t(c.shape.ring);
    for (const auto& q : c.requests)
      if (q.state_slot >= 0 && std::size_t(q.state_slot) < c.shape.state_slots && q.start >= 0 &&
          q.tokens > 0 && (q.start + q.tokens) / r > q.start / r)
        for (std::int64_t p = q.start / r * r; p < q.start; ++p)
          read_entries.push_back(ring_entry_offset(q.state_slot, p, std::size_t(S), 1));
    const int bad_entries = faults & 4 ? *gen::inRange(1, 4) : *gen::inRange(0, 10) == 0;
    for (int i = 0; i < bad_entries; ++i) {
      const std::size_t width = 2 * c.shape.dim;
      const std::size_t at =
          read_entries.empty() || *gen::arbitrary<bool>()
              ? *gen::inRange<std::size_t>(0, c.ring.size())
              : *gen::elementOf(read_entries) * width + *gen::inRange<std::size_t>(0, width);
      c.ring[at] = *gen::element(NAN, INFINITY);
    }
    for (const auto& q : c.requests)
      if (q.start >= 0 && q.tokens >= 0)
        c.rows += c.decode
                      ? std::size_t(q.tokens)
                      : std::size_t(std::max<std::int64_t>(
                            1, (q.start + q.tokens) / c.shape.ratio - q.start / c.shape.ratio));
    if (faults & 8 || *gen::inRange(0, 30) == 0) c.rows += *gen::element<std::size_t>(1, 2);
    if (faults & 64) {  // a bad shape, or a ring buffer of the wrong length
      switch (*gen::inRange(0, 4)) {
        case 0:
          c.shape.ratio = 0;
          break;
        case 1:
          c.shape.dim = 0;
          break;
        case 2:
          c.shape.ring = 0;
          break;
        default:
          if (!c.ring.empty()) c.ring.pop_back();
          break;
      }
    }
    c.index_rows = c.rows + (faults & 16 ? 1 : 0);
    c.position_rows = c.rows + (faults & 32 ? 2 : 0);
    return c;
  });
}

}  // namespace aether::props
