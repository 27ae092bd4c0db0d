// Properties of segment witnesses (source 000): the invariants of the model, and
// L0 agreement of every backend with the model, refusals included.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "impl/cpu/dispatch.hpp"
#include "model/witness.hpp"
#include "props/support/agreement.hpp"
#include "props/support/compare.hpp"
#include "props/support/property.hpp"
#include "props/support/witness_backends.hpp"
#include "props/support/witness_gen.hpp"

namespace aether {
namespace {

namespace gen = rc::gen;
using I = std::int32_t;
using V = std::vector<I>;

struct Row {
  I len;
  std::size_t num_segments;
  V tokens;
};

void showValue(const Row& r, std::ostream& os) {
  os << "Row{L=" << r.len << ", S=" << r.num_segments
     << ", tokens=" << props::show_span(std::span<const I>(r.tokens)) << "}";
}

// A row with L >= 1; in_range_only keeps every entry in [0, L) or padding.
rc::Gen<Row> gen_row(bool in_range_only = false) {
  return gen::exec([=] {
    const I len = *gen::suchThat(props::gen_context_len(), [](I l) { return l > 0; });
    const std::size_t s = *props::gen_valid_segments();
    const std::size_t topk = *gen::inRange<std::size_t>(0, 80);
    V tokens = *props::gen_learned_row(len, s, topk);
    if (in_range_only)
      for (I& x : tokens)
        if (x < -1 || x >= len) x = -1;
    return Row{len, s, tokens};
  });
}

V witnesses_of(const Row& r) {
  V w;
  for (I x : model::row_witnesses(r.tokens, r.len, r.num_segments))
    if (x != -1) w.push_back(x);
  return w;
}

AETHER_PROP(WitnessModel, every_edge_lands_in_its_own_segment, "model", ()) {
  const I len = *gen::suchThat(props::gen_context_len(), [](I l) { return l > 0; });
  const std::size_t s = *props::gen_valid_segments();
  const auto L = std::size_t(len);
  for (std::size_t seg = 0; seg < model::effective_segments(L, s); ++seg) {
    const std::size_t e = model::segment_edge(seg, L, s);
    RC_ASSERT(e < L);
    RC_ASSERT(model::segment_of(e, L, s) == seg);
    if (seg > 0) RC_ASSERT(model::segment_of(e - 1, L, s) == seg - 1);  // e_s is the left edge
  }
}

AETHER_PROP(WitnessModel, witnesses_are_causal_disjoint_distinct_and_complete, "model", ()) {
  const Row r = *gen_row();
  const V w = witnesses_of(r);
  for (I x : w) RC_ASSERT(x >= 0 && x < r.len);
  RC_ASSERT(std::set<I>(w.begin(), w.end()).size() == w.size());
  for (I x : w) RC_ASSERT(std::count(r.tokens.begin(), r.tokens.end(), x) == 0);
  V both = r.tokens;
  both.insert(both.end(), w.begin(), w.end());
  // O(K ∪ W(K)) ⊇ {0, ..., S_eff - 1}, occupancy read as the model marks it
  const auto occupied = model::occupied_segments(both, r.len, r.num_segments);
  for (std::size_t s = 0; s < model::effective_segments(std::size_t(r.len), r.num_segments); ++s)
    RC_ASSERT(occupied[s]);
}

// Holds for rows of in-range tokens: an out-of-range entry marks segment S - 1
// without putting a token in it (a pinned caveat, see docs/witness.md).
AETHER_PROP(WitnessModel, the_uncovered_run_is_at_most_two_segments, "model", ()) {
  const Row r = *gen::suchThat(gen_row(true), [](const Row& r) { return r.len <= 100000; });
  V both = r.tokens;
  const V w = witnesses_of(r);
  both.insert(both.end(), w.begin(), w.end());
  const std::set<I> chosen(both.begin(), both.end());
  const std::int64_t s_eff =
      std::int64_t(model::effective_segments(std::size_t(r.len), r.num_segments));
  const std::int64_t bound = 2 * ((r.len + s_eff - 1) / s_eff) - 2;
  std::int64_t run = 0, longest = 0;
  for (I x = 0; x < r.len; ++x) {
    run = chosen.contains(x) ? 0 : run + 1;
    longest = std::max(longest, run);
  }
  RC_ASSERT(longest <= bound);
}

AETHER_PROP(WitnessModel, the_merge_keeps_the_prefix_and_writes_one_ascending_run, "model", ()) {
  const props::WitnessCall c = *props::gen_well_formed_call();
  const auto merged = model::apply_topology_witnesses(
      c.learned, c.topk, c.context_lens, c.learned_keep, c.num_segments, c.max_replacements);
  RC_ASSERT(merged.ok());
  const std::size_t budget = std::min(c.max_replacements, c.topk - c.learned_keep);
  for (std::size_t r = 0; r < c.rows(); ++r) {
    const auto in = std::span<const I>(c.learned).subspan(r * c.topk, c.topk);
    const auto out = std::span<const I>(merged.value()).subspan(r * c.topk, c.topk);
    V w = witnesses_of(Row{c.context_lens[r], c.num_segments, V(in.begin(), in.end())});
    const std::size_t n = std::min(budget, w.size());
    for (std::size_t i = 0; i < c.topk; ++i) {
      if (i >= c.learned_keep && i < c.learned_keep + n)
        RC_ASSERT(out[i] == w[i - c.learned_keep]);  // one ascending run at keep
      else
        RC_ASSERT(out[i] == in[i]);  // prefix and rest bit-identical
    }
    RC_ASSERT(std::is_sorted(w.begin(), w.end()));
    RC_ASSERT(n <= budget);
  }
}

AETHER_PROP(WitnessModel, the_serving_entry_is_the_merge_with_keep_topk_minus_s, "model", ()) {
  props::WitnessCall c = *props::gen_well_formed_call();
  V buf = c.learned;
  RC_ASSERT(model::scatter_topology_witnesses(buf, c.topk, c.context_lens, c.num_segments).ok());
  const std::size_t keep = c.topk - std::min(c.topk, c.num_segments);
  RC_ASSERT(buf == model::apply_topology_witnesses(c.learned, c.topk, c.context_lens, keep,
                                                   c.num_segments, c.num_segments)
                       .value());
  V off = c.learned;
  RC_ASSERT(model::scatter_topology_witnesses(off, c.topk, c.context_lens, 0).ok());
  RC_ASSERT(off == c.learned);
}

AETHER_PROP(WitnessModel, every_segment_is_covered_when_the_reserved_tail_is_padding, "model", ()) {
  const I len = *gen::suchThat(props::gen_context_len(), [](I l) { return l > 0; });
  const std::size_t s = *props::gen_valid_segments();
  const std::size_t topk = s + *gen::inRange<std::size_t>(0, 40);
  V row = *props::gen_row_with_padded_tail(len, s, topk, s);
  for (I& x : row)         // in-range tokens, as the source's _random_case draws them; an
    if (x >= len) x = -1;  // out-of-range entry can occupy a segment it does not cover
  RC_ASSERT(model::scatter_topology_witnesses(row, topk, V{len}, s).ok());
  RC_ASSERT(model::segment_coverage_exact(row, std::size_t(len), s) == 1);
}

AETHER_PROP(WitnessModel, the_witness_set_is_invariant_under_permutations, "model", ()) {
  const Row r = *gen_row();
  V shuffled = *gen::apply(
      [&](int seed) {
        V v = r.tokens;
        std::mt19937 rng{std::uint32_t(seed)};
        std::shuffle(v.begin(), v.end(), rng);
        return v;
      },
      gen::arbitrary<int>());
  RC_ASSERT(model::row_witnesses(shuffled, r.len, r.num_segments) ==
            model::row_witnesses(r.tokens, r.len, r.num_segments));
}

AETHER_PROP(WitnessCpu, agrees_with_the_model_on_every_call, "L0", (const props::WitnessCall& c)) {
  props::check_witness_agreement(props::cpu_witness_backend(), c);
}

AETHER_PROP(WitnessCpu, merging_in_place_equals_merging_out_of_place, "L3", ()) {
  const props::WitnessCall c = *props::gen_well_formed_call();
  props::Guarded<I> out(V(c.learned.size(), -7), 0x6b6b6b6b), in_place(c.learned, 0x6b6b6b6b);
  const auto backend = props::cpu_witness_backend();
  RC_ASSERT(backend
                .apply(c.learned, c.topk, c.context_lens, c.learned_keep, c.num_segments,
                       c.max_replacements, out.span())
                .ok());
  RC_ASSERT(backend
                .apply(in_place.span(), c.topk, c.context_lens, c.learned_keep, c.num_segments,
                       c.max_replacements, in_place.span())
                .ok());
  for (const auto& d : {out.overrun("cpu apply"), in_place.overrun("cpu apply in place")})
    if (!d.empty()) RC_FAIL(d);
  RC_ASSERT(out.values() == in_place.values());
}

AETHER_PROP(WitnessCpu, the_portable_path_equals_the_avx2_path, "L3", ()) {
  const props::WitnessCall c = *props::gen_well_formed_call();
  const auto run = [&] {
    props::Guarded<I> out(V(c.learned.size(), -7), 0x6b6b6b6b);
    RC_ASSERT(props::cpu_witness_backend()
                  .apply(c.learned, c.topk, c.context_lens, c.learned_keep, c.num_segments,
                         c.max_replacements, out.span())
                  .ok());
    if (auto d = out.overrun("cpu apply"); !d.empty()) RC_FAIL(d);
    return out.values();
  };
  const V simd = run();
  struct Portable {
    Portable() { cpu::simd_allowed() = false; }
    ~Portable() { cpu::simd_allowed() = true; }
  } portable;
  RC_ASSERT(run() == simd);
}

#ifdef AETHER_HAVE_CUDA
AETHER_GPU_PROP(WitnessCuda, agrees_with_the_model_on_every_call, "L0",
                (const props::WitnessCall& c)) {
  props::check_witness_agreement(props::cuda_witness_backend(), c);
}
#endif

}  // namespace
}  // namespace aether
