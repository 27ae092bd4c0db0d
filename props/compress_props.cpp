// Properties of the compression backends (source 003 A.1-A.2) against the model: L0
// on rows' indices, positions, the ring and refusals, L2 on the bf16 rows, L1 on the
// grid, C1 the identity; chunk partition and rollback invariance, thread counts and
// builds, CUDA against the CPU (L3). The model's own: compress_model_props.cpp; the
// state contract: compress_refusal_props.cpp.
#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>

#include "impl/cpu/compress.hpp"
#include "impl/cpu/dispatch.hpp"
#include "model/compress.hpp"
#include "props/support/compare.hpp"
#include "props/support/compress_gen.hpp"
#include "props/support/cpu_threads.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

namespace gen = rc::gen;
using model::Gate;
using model::Interval;
using model::Position;
using model::Rational;

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
  const props::VerifySchedule schedule = *props::gen_verify_schedule(n, qmax);
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
  const props::ForcedThreads forced(threads);
  cpu::simd_allowed() = simd;
  std::vector<float> ring = c.ring;
  std::vector<std::uint16_t> rows(c.rows * c.shape.dim);
  std::vector<std::int32_t> index(c.index_rows), positions(c.position_rows);
  const auto backend = props::cpu_compress_backend();
  const auto st = (c.decode ? backend.decode : backend.prefill)(c.requests, c.projected, ring,
                                                                c.shape, rows, index, positions);
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
