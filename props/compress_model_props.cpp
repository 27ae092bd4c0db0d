// Properties of the compression model (source 003 A.1-A.2), exact: every chunk
// partition and every verify schedule give the whole sequence's rows, the ring
// hazard S >= r + qmax - 1 is tight (and every backend refuses one entry less), and
// the score gate's exact path holds the weighted mean for groups whose scores differ.
#include <algorithm>

#include "model/compress.hpp"
#include "props/support/compress_gen.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

namespace gen = rc::gen;
using model::Gate;
using model::Interval;
using model::Position;
using model::Rational;

// Exact positions for the model: positive integer weights, small integer values.
std::vector<Position> weighted_positions(std::size_t n, std::size_t dim) {
  std::vector<Position> out;
  for (std::size_t p = 0; p < n; ++p) {
    Position pos;
    for (std::size_t d = 0; d < dim; ++d) {
      pos.gate.push_back(*gen::inRange(1, 5));
      pos.value.push_back(*gen::inRange(-20, 21));
    }
    out.push_back(pos);
  }
  return out;
}

std::vector<std::vector<Interval>> valid(const std::vector<model::Row>& rows) {
  std::vector<std::vector<Interval>> out;
  for (const auto& r : rows)
    if (r.row >= 0) out.push_back(r.z);
  return out;
}

std::vector<std::vector<std::size_t>> every_partition(std::size_t n) {
  std::vector<std::vector<std::size_t>> all;
  for (std::size_t cuts = 0; cuts < (std::size_t(1) << (n ? n - 1 : 0)); ++cuts) {
    std::vector<std::size_t> chunks;
    std::size_t first = 0;
    for (std::size_t p = 0; p < n; ++p)
      if (p + 1 == n || cuts >> p & 1) {
        chunks.push_back(p + 1 - first);
        first = p + 1;
      }
    all.push_back(chunks);
  }
  return all;
}

AETHER_PROP(CompressModel, every_chunk_partition_gives_the_same_rows_and_pending_suffix, "model",
            ()) {
  const std::int64_t r = *gen::inRange<std::int64_t>(1, 5);
  const std::size_t S = std::size_t(r + *gen::inRange<std::int64_t>(0, 4));
  const std::size_t n = *gen::inRange<std::size_t>(0, 12), dim = *gen::inRange<std::size_t>(1, 3);
  const auto in = weighted_positions(n, dim);
  const auto whole = model::whole_sequence_rows(in, r, Gate::Weight);
  const auto partitions =
      n <= 7 ? every_partition(n) : std::vector<std::vector<std::size_t>>{*props::gen_partition(n)};
  for (const auto& chunks : partitions) {
    model::Ring ring(S);
    std::vector<std::vector<Interval>> rows;
    std::size_t first = 0;
    for (std::size_t len : chunks) {
      for (auto& row :
           valid(model::prefill(ring, r, std::span(in).subspan(first, len), Gate::Weight)))
        rows.push_back(row);
      first += len;
    }
    RC_ASSERT(rows == whole);
    const std::size_t pending_from = n / std::size_t(r) * std::size_t(r);
    RC_ASSERT(model::pending(ring, r) ==
              std::vector<Position>(in.begin() + std::ptrdiff_t(pending_from), in.end()));
  }
}

// The score gate's exact path for a group whose scores differ: compress_group(Score)
// holds the weighted mean at every weight inside exp's enclosures (its range over
// that box is attained at the box's vertices, and the enclosures' lower ends are a
// point of the box), it is tight (narrower than 2^-60 of the largest value), and it
// lies inside the fp32 enclosure, which holds the exact row as well.
AETHER_PROP(CompressModel, the_score_gate_holds_the_weighted_mean_at_exps_enclosures, "model", ()) {
  const int r = *gen::inRange(2, 5);
  std::vector<Position> group;
  for (int t = 0; t < r; ++t)
    group.push_back(
        Position{{Rational(*gen::inRange(-128, 129), 16)}, {Rational(*gen::inRange(-20, 21))}, {}});
  const auto differ = [&](auto field) {
    return std::any_of(group.begin(), group.end(),
                       [&](const Position& p) { return field(p) != field(group[0]); });
  };
  RC_PRE(differ([](const Position& p) { return p.gate[0]; }) &&
         differ([](const Position& p) { return p.value[0]; }));
  Rational m = group[0].gate[0];
  for (const Position& p : group) m = std::max(m, p.gate[0]);
  std::vector<Position> weighted = group;
  for (Position& p : weighted) p.gate[0] = model::exp_enclosure(p.gate[0] - m).lo;
  const Interval z = model::compress_group(group, Gate::Score)[0];
  const Rational at = model::compress_group(weighted, Gate::Weight)[0].lo;
  RC_ASSERT(z.contains(at));
  RC_ASSERT(z.hi - z.lo <= Rational(20, model::Integer(1) << 60));
  const Interval fp32 = model::compress_group_fp32(group)[0];
  RC_ASSERT(fp32.lo <= z.lo && z.hi <= fp32.hi);
}

AETHER_PROP(CompressModel, any_verify_schedule_gives_the_accepted_sequences_rows, "model", ()) {
  const std::int64_t r = *gen::inRange<std::int64_t>(1, 5),
                     qmax = *gen::inRange<std::int64_t>(1, 7);
  const std::size_t S = std::size_t(ring_needed(r, qmax, true) + *gen::inRange<std::int64_t>(0, 3));
  const std::size_t n = *gen::inRange<std::size_t>(0, 16), dim = 1;
  const auto in = weighted_positions(n, dim);
  const props::VerifySchedule schedule = *props::gen_verify_schedule(n, qmax);
  model::Ring ring(S);
  auto rows = valid(model::prefill(ring, r, std::span(in).first(schedule.prefix), Gate::Weight));
  for (auto [q, accepted] : schedule.steps) {
    std::vector<Position> draft(in.begin() + ring.length,
                                in.begin() + ring.length + std::ptrdiff_t(accepted));
    for (auto& garbage : weighted_positions(q - accepted, dim)) draft.push_back(garbage);
    for (auto& row : valid(model::verify(ring, r, draft, accepted, Gate::Weight)))
      rows.push_back(row);
  }
  const auto whole =
      model::whole_sequence_rows(std::span(in).first(std::size_t(ring.length)), r, Gate::Weight);
  RC_ASSERT(rows == whole);
}

// S = r + qmax - 2: some schedule corrupts a completed row (found by search), and
// every backend refuses that ring for a step of qmax positions.
AETHER_PROP(CompressModel, one_entry_less_than_r_plus_qmax_minus_1_corrupts_a_row, "model", ()) {
  const std::int64_t r = *gen::inRange<std::int64_t>(1, 6),
                     qmax = *gen::inRange<std::int64_t>(1, 7);
  RC_PRE(r + qmax - 2 >= 1);
  const std::size_t S = std::size_t(r + qmax - 2);
  const std::size_t n = std::size_t(3 * r + qmax);
  std::vector<Position> in;  // distinct values, equal weights: any substitution shows
  for (std::size_t p = 0; p < n; ++p)
    in.push_back(Position{{1}, {Rational(model::Integer(p + 1))}, {}});
  const auto whole = model::whole_sequence_rows(in, r, Gate::Weight);
  bool corrupted = false;
  for (std::size_t prefix = 0; prefix < std::size_t(2 * r) && !corrupted; ++prefix) {
    model::Ring ring(S);
    auto rows = model::prefill(ring, r, std::span(in).first(prefix), Gate::Weight);
    for (const auto& row :
         model::decode(ring, r, std::span(in).subspan(prefix, std::size_t(qmax)), Gate::Weight))
      if (row.row >= 0 && row.z != whole[std::size_t(row.row)]) corrupted = true;
  }
  RC_ASSERT(corrupted);

  const CompressShape shape{r, 1, S, 1};
  const CompressRequest q{0, 0, std::int32_t(qmax)};
  const std::size_t qn = std::size_t(qmax);
  std::vector<float> projected(qn * 2, 1.0f), ring(S * 2, 0.0f);
  std::vector<std::uint16_t> rows(qn);
  std::vector<std::int32_t> index(qn), positions(qn);
  for (const auto& backend : props::impl_compress_backends()) {
    const auto st =
        backend.decode(std::span(&q, 1), projected, ring, shape, rows, index, positions);
    RC_ASSERT(!st.ok());
    const CompressError too_small = compress_error::RingTooSmall{S, r + qmax - 1};
    RC_ASSERT(st.error() == too_small);
  }
}

}  // namespace
}  // namespace aether
