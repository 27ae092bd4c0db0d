// Properties of compression's state contract (SPEC section 3, docs/compress.md): a
// call refused for its data changes no ring entry outside the set
// model::entries_a_refusal_may_change names, and no continuation (prefill chunks,
// decode and verify steps, any accepted prefix) reads an entry of that set; and two
// identities serving engines have broken: a verify step's batch leaves the state its
// accepted positions leave one at a time, and rollback then replay equals never
// rolling back. L0 on refusals, ring bytes and indices; rows compared as bits.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "model/compress.hpp"
#include "props/support/compare.hpp"
#include "props/support/compress_gen.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

namespace gen = rc::gen;

// D small for the model's sake, multiples of 4 for the CUDA 16-byte paths, 132 for a
// lane's second group of channels.
std::size_t gen_dim() {
  return *gen::weightedElement<std::size_t>(
      {{3, 1}, {2, 2}, {2, 3}, {3, 4}, {2, 8}, {1, 12}, {1, 132}});
}

std::vector<float> gen_positions(std::size_t n, std::size_t dim) {
  return (*props::gen_float_sequence(n, dim)).projected;
}

// One call on a single request: its status, and its rows by compressed row index
// (decode: only the first `accepted` positions' rows, the verify step's accepted
// prefix).
struct Call {
  bool decode = false;
  std::vector<float> positions;  // [tokens, 2, D]
  std::size_t accepted = 0;      // decode: positions kept; prefill: all
};
struct Continued {
  std::vector<std::string> statuses;
  std::map<std::int32_t, std::vector<std::uint16_t>> rows;
  std::int64_t length = 0;
};

Continued run_calls(const props::CompressBackend& backend, const CompressShape& shape,
                    std::int32_t slot, std::int64_t start, std::vector<float>& ring,
                    std::span<const Call> calls) {
  Continued out;
  out.length = start;
  const std::size_t D = shape.dim;
  for (const Call& c : calls) {
    const CompressRequest q{slot, out.length, std::int32_t(c.positions.size() / (2 * D))};
    const std::size_t n =
        c.decode ? std::size_t(q.tokens)
                 : std::size_t(std::max<std::int64_t>(
                       1, completed_in_chunk(q.start, q.start + q.tokens, shape.ratio)));
    std::vector<std::uint16_t> rows(n * D);
    std::vector<std::int32_t> index(n), positions(n);
    const auto st = (c.decode ? backend.decode : backend.prefill)(
        std::span(&q, 1), c.positions, ring, shape, rows, index, positions);
    out.statuses.push_back(st ? std::string("ok") : (std::ostringstream() << st.error()).str());
    if (!st) continue;
    const std::size_t kept = c.decode ? c.accepted : n;
    for (std::size_t i = 0; i < kept; ++i)
      if (index[i] >= 0)
        out.rows[index[i]] = std::vector<std::uint16_t>(rows.begin() + std::ptrdiff_t(i * D),
                                                        rows.begin() + std::ptrdiff_t((i + 1) * D));
    out.length += c.decode ? std::int64_t(c.accepted) : q.tokens;
  }
  return out;
}

// Prefill chunks (up to twice the ring and more, so that a chunk's writes wrap onto
// its pending inputs) and verify steps of up to qmax drafted positions.
std::vector<Call> gen_continuation(const CompressShape& shape, std::int64_t qmax) {
  std::vector<Call> calls(*gen::inRange<std::size_t>(1, 5));
  for (Call& c : calls) {
    c.decode = *gen::arbitrary<bool>();
    const std::size_t n = c.decode ? *gen::inRange<std::size_t>(1, std::size_t(qmax) + 1)
                                   : *gen::inRange<std::size_t>(0, 2 * shape.ring + 3);
    c.positions = gen_positions(n, shape.dim);
    c.accepted = c.decode ? *gen::inRange<std::size_t>(0, n + 1) : n;
  }
  return calls;
}

// Empty when two rings hold the same bits in the pending entries [r floor(L/r), L)
// of `slot`, what a continuation from L reads; else ring_report's account of them.
// The other entries may differ (a refused call's dead entries, not overwritten since).
std::string pending_report(const std::vector<float>& a, const std::vector<float>& b,
                           const CompressShape& shape, std::int32_t slot, std::int64_t length) {
  std::set<std::size_t> others;
  for (std::size_t e = 0; e < shape.state_slots * shape.ring; ++e) others.insert(e);
  for (std::int64_t p = length / shape.ratio * shape.ratio; p < length; ++p)
    others.erase(ring_entry_offset(slot, p, shape.ring, 2 * shape.dim) / (2 * shape.dim));
  return props::ring_report(a, b, shape, others);
}

std::string same_continuation(const Continued& a, const Continued& b,
                              const std::vector<float>& ring_a, const std::vector<float>& ring_b,
                              const CompressShape& shape, std::int32_t slot) {
  std::ostringstream os;
  if (a.statuses != b.statuses || a.length != b.length) {
    os << "continuation statuses differ:";
    for (std::size_t i = 0; i < a.statuses.size(); ++i)
      os << "\n  call " << i << ": " << a.statuses[i] << " / " << b.statuses[i];
    return os.str();
  }
  if (a.rows != b.rows) return "continuation rows differ";
  if (const auto d = pending_report(ring_a, ring_b, shape, slot, a.length); !d.empty())
    return "pending entries at " + std::to_string(a.length) + " differ:\n" + d;
  return {};
}

// A call refused for NaN/inf in what it reads (projected always, now and then an old
// ring entry it reads too), then a continuation of its first request from the same
// start, once on the ring as it was and once on the ring the refused call left
// (`scribble`: with NaN written over every entry the model lets it change, the worst
// a one-pass backend may leave). Both continuations must give the same.
void a_data_refusal_leaves_every_continuation_unchanged(const props::CompressBackend& backend,
                                                        bool scribble) {
  const std::int64_t r = *gen::inRange<std::int64_t>(1, 5),
                     qmax = *gen::inRange<std::int64_t>(1, 7);
  const bool decode = *gen::arbitrary<bool>();
  CompressShape shape{r, gen_dim(), 0, *gen::inRange<std::size_t>(1, 4)};
  shape.ring = std::size_t(ring_needed(r, qmax, true) + *gen::inRange<std::int64_t>(0, 3));
  std::vector<std::int32_t> slots(shape.state_slots);
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = std::int32_t(i);
  std::mt19937 rng(*gen::arbitrary<std::uint32_t>());
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<CompressRequest> requests(*gen::inRange<std::size_t>(1, shape.state_slots + 1));
  std::size_t tokens = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::int64_t most = decode ? qmax : std::int64_t(3 * shape.ring + 2);
    requests[i] = {slots[i], *gen::inRange<std::int64_t>(0, 14),
                   std::int32_t(*gen::inRange<std::int64_t>(i == 0 ? 1 : 0, most + 1))};
    tokens += std::size_t(requests[i].tokens);
  }
  const std::vector<float> before = gen_positions(shape.state_slots * shape.ring, shape.dim);
  std::vector<float> projected = gen_positions(tokens, shape.dim);
  projected[*gen::inRange<std::size_t>(0, projected.size())] =
      *gen::element(NAN, INFINITY, -INFINITY);
  std::vector<float> ring = before;
  if (*gen::inRange(0, 4) == 0) {  // an old entry of the first request's group, if it reads one
    const CompressRequest& q = requests[0];
    if (completed_in_chunk(q.start, q.start + q.tokens, r) > 0 && q.start % r != 0) {
      const std::int64_t p = *gen::inRange(q.start / r * r, q.start);
      ring[ring_entry_offset(q.state_slot, p, shape.ring, 2 * shape.dim) +
           *gen::inRange<std::size_t>(0, 2 * shape.dim)] = NAN;
    }
  }
  const std::vector<float> poisoned = ring;
  std::size_t rows = 0;
  for (const auto& q : requests)
    rows += decode ? std::size_t(q.tokens)
                   : std::size_t(std::max<std::int64_t>(
                         1, completed_in_chunk(q.start, q.start + q.tokens, r)));
  const auto want = model::compress_batch(requests, projected, poisoned, shape, decode,
                                          rows * shape.dim, rows, rows);
  RC_ASSERT(!want.ok());
  std::vector<std::uint16_t> out(rows * shape.dim);
  std::vector<std::int32_t> index(rows), positions(rows);
  const auto got = (decode ? backend.decode : backend.prefill)(requests, projected, ring, shape,
                                                               out, index, positions);
  RC_ASSERT(!got.ok());
  if (!(got.error() == want.error()))
    RC_FAIL((std::ostringstream() << backend.name << " refused with " << got.error()
                                  << ", the model with " << want.error())
                .str());
  const auto may_change = model::entries_a_refusal_may_change(requests, shape, decode);
  RC_TAG(may_change.empty() ? "nothing may change" : "entries may change");
  if (const auto d = props::ring_report(poisoned, ring, shape, may_change); !d.empty())
    RC_FAIL(backend.name + " changed an entry outside the model's set:\n" + d);
  if (scribble)
    for (std::size_t entry : may_change)
      std::fill_n(ring.begin() + std::ptrdiff_t(entry * 2 * shape.dim), 2 * shape.dim, NAN);
  const std::vector<Call> calls = gen_continuation(shape, qmax);
  std::vector<float> ring_a = poisoned, ring_b = ring;
  const auto a =
      run_calls(backend, shape, requests[0].state_slot, requests[0].start, ring_a, calls);
  const auto b =
      run_calls(backend, shape, requests[0].state_slot, requests[0].start, ring_b, calls);
  if (const auto d = same_continuation(a, b, ring_a, ring_b, shape, requests[0].state_slot);
      !d.empty())
    RC_FAIL(backend.name + ": " + d);
}

AETHER_PROP(CompressCpu, no_continuation_reads_an_entry_a_data_refusal_may_change, "L0", ()) {
  a_data_refusal_leaves_every_continuation_unchanged(props::cpu_compress_backend(), true);
}

// One request's verify step on a one-slot ring: q of up to qmax drafted positions
// from `start`, a prefix of `accepted` of them kept, the ring's entries random.
struct VerifyCase {
  CompressShape shape;
  std::int64_t qmax;
  std::int64_t start;
  std::size_t q, accepted;
  std::vector<float> draft, ring;
};
VerifyCase gen_verify_case() {
  const std::int64_t r = *gen::inRange<std::int64_t>(1, 5),
                     qmax = *gen::inRange<std::int64_t>(1, 7);
  const CompressShape shape{
      r, gen_dim(), std::size_t(ring_needed(r, qmax, true) + *gen::inRange<std::int64_t>(0, 3)), 1};
  const std::size_t q = *gen::inRange<std::size_t>(1, std::size_t(qmax) + 1);
  return {shape,
          qmax,
          *gen::inRange<std::int64_t>(0, 14),
          q,
          *gen::inRange<std::size_t>(0, q + 1),
          gen_positions(q, shape.dim),
          gen_positions(shape.ring, shape.dim)};
}

// A verify step of q drafted positions accepting a prefix of a, against the a
// positions decoded one at a time: the same rows, the same pending entries, and the
// same answer to the step after.
void a_verify_batch_equals_its_accepted_positions_one_at_a_time(
    const props::CompressBackend& backend) {
  const VerifyCase v = gen_verify_case();
  const auto& [shape, qmax, start, q, accepted, draft, ring] = v;
  const std::vector<float> next =
      gen_positions(*gen::inRange<std::size_t>(1, std::size_t(qmax) + 1), shape.dim);
  const std::size_t width = 2 * shape.dim;
  std::vector<Call> batch{{true, draft, accepted}}, single;
  for (std::size_t i = 0; i < accepted; ++i)
    single.push_back({true,
                      std::vector<float>(draft.begin() + std::ptrdiff_t(i * width),
                                         draft.begin() + std::ptrdiff_t((i + 1) * width)),
                      1});
  batch.push_back({true, next, next.size() / width});
  single.push_back(batch.back());
  std::vector<float> ring_a = ring, ring_b = ring;
  const auto a = run_calls(backend, shape, 0, start, ring_a, batch);
  const auto b = run_calls(backend, shape, 0, start, ring_b, single);
  RC_ASSERT(a.statuses.front() == "ok");
  RC_ASSERT(a.statuses.back() == b.statuses.back());
  RC_ASSERT(a.length == b.length);
  RC_ASSERT(a.rows == b.rows);
  if (const auto d = pending_report(ring_a, ring_b, shape, 0, a.length); !d.empty()) RC_FAIL(d);
}

AETHER_PROP(CompressCpu, a_verify_batch_equals_its_accepted_positions_one_at_a_time, "L3", ()) {
  a_verify_batch_equals_its_accepted_positions_one_at_a_time(props::cpu_compress_backend());
}

// q positions decoded with only a prefix accepted (rollback), the rest decoded again
// (replay), against the q positions decoded at once: the same rows and the same ring,
// byte for byte.
void rollback_then_replay_equals_never_rolling_back(const props::CompressBackend& backend) {
  const VerifyCase v = gen_verify_case();
  const auto& [shape, qmax, start, q, accepted, draft, ring] = v;
  const std::size_t width = 2 * shape.dim;
  const std::vector<Call> once{{true, draft, q}},
      twice{
          {true, draft, accepted},
          {true, std::vector<float>(draft.begin() + std::ptrdiff_t(accepted * width), draft.end()),
           q - accepted}};
  std::vector<float> ring_a = ring, ring_b = ring;
  const auto a = run_calls(backend, shape, 0, start, ring_a, once);
  const auto b = run_calls(backend, shape, 0, start, ring_b, twice);
  RC_ASSERT(a.statuses.front() == "ok");
  RC_ASSERT(b.statuses == std::vector<std::string>(2, "ok"));
  RC_ASSERT(a.rows == b.rows);
  if (const auto d = props::ring_report(ring_a, ring_b, shape); !d.empty()) RC_FAIL(d);
}

AETHER_PROP(CompressCpu, rollback_then_replay_equals_never_rolling_back, "L3", ()) {
  rollback_then_replay_equals_never_rolling_back(props::cpu_compress_backend());
}

#ifdef AETHER_HAVE_CUDA
AETHER_GPU_PROP(CompressCuda, a_data_refusal_changes_only_entries_no_continuation_reads, "L0", ()) {
  a_data_refusal_leaves_every_continuation_unchanged(props::cuda_compress_backend(), false);
}
AETHER_GPU_PROP(CompressCuda, a_queued_data_refusal_changes_only_entries_no_continuation_reads,
                "L0", ()) {
  a_data_refusal_leaves_every_continuation_unchanged(props::cuda_queued_compress_backend(), false);
}
AETHER_GPU_PROP(CompressCuda, a_verify_batch_equals_its_accepted_positions_one_at_a_time, "L3",
                ()) {
  a_verify_batch_equals_its_accepted_positions_one_at_a_time(props::cuda_compress_backend());
}
AETHER_GPU_PROP(CompressCuda, rollback_then_replay_equals_never_rolling_back, "L3", ()) {
  rollback_then_replay_equals_never_rolling_back(props::cuda_compress_backend());
}
#endif

}  // namespace
}  // namespace aether
