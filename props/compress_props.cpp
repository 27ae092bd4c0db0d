// Properties of the compression backends (source 003 A.1-A.2) against the model: L0
// on rows' indices, positions, the ring and refusals, L2 on the bf16 rows, L1 on the
// grid, C1 the identity; chunk partition and rollback invariance, thread counts and
// builds, CUDA against the CPU (L3). The model's own: compress_model_props.cpp; the
// state contract: compress_refusal_props.cpp.
#include <cmath>

#include "impl/cpu/compress.hpp"
#include "impl/cpu/dispatch.hpp"
#include "model/compress.hpp"
#include "props/support/agreement.hpp"
#include "props/support/compare.hpp"
#include "props/support/compress_batch_gen.hpp"
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

AETHER_PROP(CompressCpu, agrees_with_the_model_rows_inside_the_fp32_enclosure, "L0+L2", ()) {
  props::check_compress_agreement(props::cpu_compress_backend(), *props::gen_batch_call(false),
                                  false);
}

AETHER_PROP(CompressCpu, rows_are_exact_on_the_grid, "L0+L1", ()) {
  props::check_compress_agreement(props::cpu_compress_backend(), *props::gen_batch_call(true),
                                  true);
}

// A one-pass backend as SPEC section 3 allows it: the CPU, but on a refusal of the
// data NaN over every ring entry the model lets the call change and 0x5a over its
// outputs. The check with `transactional` off passes it (and fails it where it
// writes one entry more).
AETHER_PROP(CompressCpu, a_one_pass_refusal_may_change_only_the_models_entries, "L0", ()) {
  const auto scribbling = [](bool decode, props::CompressStep step) -> props::CompressStep {
    return [=](auto requests, auto projected, auto ring, const CompressShape& shape, auto rows,
               auto index, auto positions) {
      const auto st = step(requests, projected, ring, shape, rows, index, positions);
      if (!st.ok() && std::holds_alternative<compress_error::NonFiniteInput>(st.error())) {
        for (std::size_t e : model::entries_a_refusal_may_change(requests, shape, decode))
          std::fill_n(ring.begin() + std::ptrdiff_t(e * 2 * shape.dim), 2 * shape.dim, NAN);
        std::ranges::fill(rows, 0x5a), std::ranges::fill(index, 0x5a);
        std::ranges::fill(positions, 0x5a);
      }
      return st;
    };
  };
  const auto cpu = props::cpu_compress_backend();
  const props::CompressBackend one_pass{"one-pass cpu", scribbling(false, cpu.prefill),
                                        scribbling(true, cpu.decode), false};
  props::check_compress_agreement(one_pass, *props::gen_batch_call(false), false);
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
