// Properties of C1/C2 compression and its state ring (source 003 A.1-A.2): chunk
// partition and rollback invariance in the model (exact) and in the backends (bit
// for bit), the tightness of the ring hazard S >= r + qmax - 1, and the backends
// against the model: L0 on rows' indices, positions, the ring and refusals, L2 on
// the bf16 rows, L1 on the grid, C1 the identity.
#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>

#include "impl/cpu/compress.hpp"
#include "impl/cpu/dispatch.hpp"
#include "impl/cpu/parallel.hpp"
#include "model/compress.hpp"
#include "props/support/compare.hpp"
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

// A schedule of verify steps over the true sequence `in`: each drafts up to qmax
// positions (the accepted prefix true, the rest garbage) and accepts a prefix.
struct Schedule {
  std::size_t prefix = 0;
  std::vector<std::pair<std::size_t, std::size_t>> steps;  // (drafted, accepted)
};
Schedule gen_schedule(std::size_t n, std::int64_t qmax) {
  Schedule s{*gen::inRange<std::size_t>(0, n + 1), {}};
  std::size_t at = s.prefix;
  while (at < n && s.steps.size() < 12) {
    const std::size_t q = *gen::inRange<std::size_t>(1, std::size_t(qmax) + 1);
    const std::size_t accepted = std::min(n - at, *gen::inRange<std::size_t>(0, q + 1));
    s.steps.push_back({q, accepted});
    at += accepted;
  }
  return s;
}

AETHER_PROP(CompressModel, any_verify_schedule_gives_the_accepted_sequences_rows, "model", ()) {
  const std::int64_t r = *gen::inRange<std::int64_t>(1, 5),
                     qmax = *gen::inRange<std::int64_t>(1, 7);
  const std::size_t S = std::size_t(ring_needed(r, qmax, true) + *gen::inRange<std::int64_t>(0, 3));
  const std::size_t n = *gen::inRange<std::size_t>(0, 16), dim = 1;
  const auto in = weighted_positions(n, dim);
  const Schedule schedule = gen_schedule(n, qmax);
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

void agrees_with_the_model(const props::CompressBackend& backend, bool grid) {
  const props::BatchCall c = *props::gen_batch_call(grid);
  const std::size_t D = c.shape.dim;
  props::Guarded<float> g_ring(c.ring, 1234.5f);
  props::Guarded<std::uint16_t> g_rows(std::vector<std::uint16_t>(c.rows * D, 0x5a5a), 0x6b6b);
  props::Guarded<std::int32_t> g_index(std::vector<std::int32_t>(c.index_rows, 0x5a5a5a5a),
                                       0x6b6b6b6b),
      g_positions(std::vector<std::int32_t>(c.position_rows, 0x5a5a5a5a), 0x6b6b6b6b);
  const auto got = (c.decode ? backend.decode : backend.prefill)(
      c.requests, c.projected, g_ring.span(), c.shape, g_rows.span(), g_index.span(),
      g_positions.span());
  for (const auto& d :
       {g_ring.overrun(backend.name + " ring"), g_rows.overrun(backend.name + " rows"),
        g_index.overrun(backend.name + " row_index"),
        g_positions.overrun(backend.name + " positions")})
    if (!d.empty()) RC_FAIL(d);
  const std::vector<float> ring = g_ring.values();
  const std::vector<std::uint16_t> rows = g_rows.values();
  const std::vector<std::int32_t> index = g_index.values(), positions = g_positions.values();
  const auto want =
      model::compress_batch(c.requests, c.projected, c.ring, c.shape, c.decode, rows.size(),
                            index.size(), positions.size(), grid ? Gate::Score : Gate::ScoreFp32);
  if (!want) {
    RC_TAG("refused");
    RC_ASSERT(!got.ok());
    if (!(got.error() == want.error()))
      RC_FAIL((std::ostringstream() << backend.name << " refused with " << got.error()
                                    << ", model with " << want.error())
                  .str());
    if (const auto d = props::ring_report(c.ring, ring, c.shape); !d.empty())
      RC_FAIL(backend.name + " changed the ring of a refused call:\n" + d);
    RC_ASSERT(rows == std::vector<std::uint16_t>(c.rows * D, 0x5a5a));
    RC_ASSERT(index == std::vector<std::int32_t>(c.index_rows, 0x5a5a5a5a));
    RC_ASSERT(positions == std::vector<std::int32_t>(c.position_rows, 0x5a5a5a5a));
    return;
  }
  if (!got)
    RC_FAIL((std::ostringstream() << backend.name
                                  << " refused a call the model accepts: " << got.error())
                .str());
  RC_TAG(std::count_if(index.begin(), index.end(), [](std::int32_t j) { return j >= 0; }) > 0
             ? "rows completed"
             : "no row completed");
  if (const auto d = props::ring_report(want.value().ring, ring, c.shape); !d.empty())
    RC_FAIL(backend.name + ":\n" + d);
  for (std::size_t i = 0; i < c.rows; ++i) {
    const model::Row& row = want.value().rows[i];
    RC_ASSERT(index[i] == row.row);
    RC_ASSERT(positions[i] == row.position);
    for (std::size_t d = 0; d < D; ++d) {
      // the grid's rows are exact (lo == hi): the bits are determined there
      const std::uint16_t y = rows[i * D + d];
      if (!props::bf16_between(y, row.z[d]))
        RC_FAIL("row " + std::to_string(i) + " channel " + std::to_string(d) + ": bf16 " +
                std::to_string(y) + " is not the rounding of a value in [" + row.z[d].lo.str() +
                ", " + row.z[d].hi.str() + "]: " + std::to_string(props::bf16_round(row.z[d].lo)) +
                " to " + std::to_string(props::bf16_round(row.z[d].hi)));
    }
  }
}

AETHER_PROP(CompressCpu, agrees_with_the_model_rows_inside_the_fp32_enclosure, "L0+L2", ()) {
  agrees_with_the_model(props::cpu_compress_backend(), false);
}

AETHER_PROP(CompressCpu, rows_are_exact_on_the_grid, "L0+L1", ()) {
  agrees_with_the_model(props::cpu_compress_backend(), true);
}

// C1: a group of one position; its softmax is 1 and the row is the latent rounded to
// the nearest bf16, ties to even (props::bf16_round, exact). D reaches the CPU's
// eight-lane path and its tail; the latents include exact ties, their fp32
// neighbours and the largest finite bf16 with the values either side of its rounding
// boundary.
AETHER_PROP(CompressCpu, c1_rows_are_the_latents_rounded_to_bf16, "L1", ()) {
  const std::size_t n = *gen::inRange<std::size_t>(0, 20),
                    dim = *gen::element<std::size_t>(1, 2, 3, 4, 8, 9, 12, 16);
  const props::Sequence seq =
      *gen::oneOf(props::gen_float_sequence(n, dim), props::gen_grid_sequence(n, dim, 1));
  const std::vector<std::size_t> whole{n};
  const auto run = props::run_chunks(props::cpu_compress_backend(), {1, dim, 1, 1}, seq, whole);
  RC_ASSERT(run.ok());
  RC_ASSERT(run.value().rows.size() == n);
  for (const auto& [j, row] : run.value().rows) {
    RC_ASSERT(j >= 0 && std::size_t(j) < n);  // the index the backend wrote, before it is used
    RC_ASSERT(row.size() == dim);
    for (std::size_t d = 0; d < dim; ++d) {
      const float v = seq.projected[std::size_t(j) * 2 * dim + dim + d];
      RC_ASSERT(row[d] == props::bf16_round(model::exact(v)));
    }
  }
}

void partitions_agree(const props::CompressBackend& backend) {
  const std::int64_t r = *gen::inRange<std::int64_t>(1, 5);
  const std::size_t dim = *gen::inRange<std::size_t>(1, 5), n = *gen::inRange<std::size_t>(0, 40);
  const CompressShape shape{r, dim, std::size_t(r + *gen::inRange<std::int64_t>(0, 4)), 1};
  const props::Sequence seq = *props::gen_float_sequence(n, dim);
  const std::vector<std::size_t> whole{n};
  const auto chunks = *props::gen_partition(n);
  const auto a = props::run_chunks(backend, shape, seq, whole),
             b = props::run_chunks(backend, shape, seq, chunks);
  RC_ASSERT(a.ok() && b.ok());
  RC_ASSERT(a.value().rows == b.value().rows);
  const std::int64_t pending_from = std::int64_t(n) / r * r;
  RC_ASSERT(props::ring_positions(a.value(), shape, pending_from, std::int64_t(n)) ==
            props::ring_positions(b.value(), shape, pending_from, std::int64_t(n)));
}

void rollbacks_agree(const props::CompressBackend& backend) {
  const std::int64_t r = *gen::inRange<std::int64_t>(1, 5),
                     qmax = *gen::inRange<std::int64_t>(1, 7);
  const std::size_t dim = *gen::element<std::size_t>(1, 2, 3, 4, 8),
                    n = *gen::inRange<std::size_t>(0, 24);
  const CompressShape shape{
      r, dim, std::size_t(ring_needed(r, qmax, true) + *gen::inRange<std::int64_t>(0, 3)), 1};
  const props::Sequence seq = *props::gen_float_sequence(n, dim);
  const Schedule schedule = gen_schedule(n, qmax);
  std::vector<props::VerifyStep> steps;
  std::size_t at = schedule.prefix;
  for (auto [q, accepted] : schedule.steps) {
    const auto truth = seq.positions(at, accepted);
    props::VerifyStep v{std::vector<float>(truth.begin(), truth.end()), accepted};
    const auto garbage = *props::gen_float_sequence(q - accepted, dim);
    v.draft.insert(v.draft.end(), garbage.projected.begin(), garbage.projected.end());
    steps.push_back(v);
    at += accepted;
  }
  const std::vector<std::size_t> whole{at};
  const auto a = props::run_chunks(backend, shape, seq, whole);
  const auto b = props::run_verify(backend, shape, seq, schedule.prefix, steps);
  RC_ASSERT(a.ok() && b.ok());
  RC_ASSERT(a.value().rows == b.value().rows);
}

AETHER_PROP(CompressCpu, every_chunk_partition_gives_the_same_bits, "L3", ()) {
  partitions_agree(props::cpu_compress_backend());
}

AETHER_PROP(CompressCpu, any_verify_schedule_gives_the_same_bits_as_the_accepted_sequence, "L3",
            ()) {
  rollbacks_agree(props::cpu_compress_backend());
}

// One CPU call on a copy of the batch's ring, with `threads` threads and the AVX2 +
// FMA build allowed or not: (accepted, ring, rows, indices, positions).
auto cpu_run(const props::BatchCall& c, std::size_t threads, bool simd) {
  cpu::thread_limit() = threads;
  cpu::parallel_threshold() = 1;
  cpu::simd_allowed() = simd;
  std::vector<float> ring = c.ring;
  std::vector<std::uint16_t> rows(c.rows * c.shape.dim);
  std::vector<std::int32_t> index(c.index_rows), positions(c.position_rows);
  const auto backend = props::cpu_compress_backend();
  const auto st = (c.decode ? backend.decode : backend.prefill)(c.requests, c.projected, ring,
                                                                c.shape, rows, index, positions);
  cpu::thread_limit() = 0;
  cpu::parallel_threshold() = std::size_t(1) << 17;
  cpu::simd_allowed() = true;
  return std::tuple(st.ok(), ring, rows, index, positions);
}

void same_results(const CompressShape& shape, const auto& a, const auto& b) {
  RC_ASSERT(std::get<0>(a) == std::get<0>(b));
  if (const auto d = props::ring_report(std::get<1>(a), std::get<1>(b), shape); !d.empty())
    RC_FAIL(d);
  RC_ASSERT(std::get<2>(a) == std::get<2>(b));
  RC_ASSERT(std::get<3>(a) == std::get<3>(b));
  RC_ASSERT(std::get<4>(a) == std::get<4>(b));
}

AETHER_PROP(CompressCpu, the_same_on_every_thread_count, "L3", ()) {
  const props::BatchCall c = *props::gen_batch_call(false);
  same_results(c.shape, cpu_run(c, 1, true), cpu_run(c, 3, true));
}

AETHER_PROP(CompressCpu, the_portable_path_equals_the_avx2_path, "L3", ()) {
  const props::BatchCall c = *props::gen_batch_call(false);
  same_results(c.shape, cpu_run(c, 1, true), cpu_run(c, 1, false));
}

#ifdef AETHER_HAVE_CUDA
// CUDA shares the CPU's arithmetic (impl/compress_math.hpp): the same bits, the same
// refusals, the same ring; partitions and schedules as on the CPU.
void equals_the_cpu_bit_for_bit(const props::CompressBackend& gpu) {
  const props::BatchCall c = *props::gen_batch_call(*gen::arbitrary<bool>());
  const auto run = [&](const props::CompressBackend& backend) {
    std::vector<float> ring = c.ring;
    std::vector<std::uint16_t> rows(c.rows * c.shape.dim, 0x5a5a);
    std::vector<std::int32_t> index(c.index_rows, 7), positions(c.position_rows, 7);
    const auto st = (c.decode ? backend.decode : backend.prefill)(c.requests, c.projected, ring,
                                                                  c.shape, rows, index, positions);
    return std::tuple(st, ring, rows, index, positions);
  };
  const auto cpu = run(props::cpu_compress_backend()), cuda = run(gpu);
  RC_ASSERT(std::get<0>(cpu) == std::get<0>(cuda));
  const auto& status = std::get<0>(cpu);
  if (!status && std::holds_alternative<compress_error::NonFiniteInput>(status.error())) {
    // a data refusal: outputs unspecified, the ring kept outside the model's set
    // (the CPU is transactional: its ring is the one the call was given)
    RC_TAG("data refusal");
    const auto may_change = model::entries_a_refusal_may_change(c.requests, c.shape, c.decode);
    if (const auto d = props::ring_report(std::get<1>(cpu), std::get<1>(cuda), c.shape, may_change);
        !d.empty())
      RC_FAIL(gpu.name + " changed a ring entry outside the model's set:\n" + d);
    return;
  }
  if (const auto d = props::ring_report(std::get<1>(cpu), std::get<1>(cuda), c.shape); !d.empty())
    RC_FAIL(gpu.name + ":\n" + d);
  RC_ASSERT(std::get<2>(cpu) == std::get<2>(cuda));
  RC_ASSERT(std::get<3>(cpu) == std::get<3>(cuda));
  RC_ASSERT(std::get<4>(cpu) == std::get<4>(cuda));
}

AETHER_GPU_PROP(CompressCuda, equals_the_cpu_bit_for_bit, "L3", ()) {
  equals_the_cpu_bit_for_bit(props::cuda_compress_backend());
}

AETHER_GPU_PROP(CompressCuda, the_queued_call_equals_the_cpu_bit_for_bit, "L3", ()) {
  equals_the_cpu_bit_for_bit(props::cuda_queued_compress_backend());
}

AETHER_GPU_PROP(CompressCuda, every_chunk_partition_gives_the_same_bits, "L3", ()) {
  partitions_agree(props::cuda_compress_backend());
}

AETHER_GPU_PROP(CompressCuda, any_verify_schedule_gives_the_same_bits_as_the_accepted_sequence,
                "L3", ()) {
  rollbacks_agree(props::cuda_compress_backend());
}
#endif

}  // namespace
}  // namespace aether
