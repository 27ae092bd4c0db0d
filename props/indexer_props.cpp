// Properties of the indexer's selection path (source 003 A.4): the model's
// total-order invariants, and L0 agreement of the CPU backend with the model,
// refusals and untouched buffers included; L3 determinism over thread counts.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

#include "impl/cpu/dispatch.hpp"
#include "impl/cpu/indexer.hpp"
#include "impl/cpu/parallel.hpp"
#include "model/indexer.hpp"
#include "props/support/compare.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/indexer_gen.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

namespace gen = rc::gen;
using I = std::int32_t;
using V = std::vector<I>;

props::IndexerBackend cpu_indexer() { return props::cpu_indexer_backend(); }

template <class T>
std::string status_report(const Result<std::vector<T>, IndexerError>& want,
                          const Status<IndexerError>& got, const std::vector<T>& before,
                          const std::vector<T>& after, const std::string& what) {
  return props::differential_report<T>(want, got, before, after, what);
}

AETHER_PROP(IndexerModel, the_selection_is_the_best_k_in_the_total_order, "model", ()) {
  const props::TopkCall c = *props::gen_well_formed_topk_call();
  const auto out = model::valid_prefix_topk(c.scores, c.width, c.ends, c.k);
  RC_ASSERT(out.ok());
  for (std::size_t r = 0; r < c.ends.size(); ++r) {
    const std::size_t end = std::size_t(c.ends[r]);
    const auto row = std::span<const float>(c.scores).subspan(r * c.width, c.width);
    const auto lanes = std::span<const I>(out.value()).subspan(r * c.k, c.k);
    const std::size_t n = std::min(c.k, end);
    for (std::size_t i = 0; i < c.k; ++i) RC_ASSERT((lanes[i] == -1) == (i >= n));
    RC_ASSERT(std::is_sorted(lanes.begin(), lanes.begin() + std::ptrdiff_t(n)));
    RC_ASSERT(std::adjacent_find(lanes.begin(), lanes.begin() + std::ptrdiff_t(n)) ==
              lanes.begin() + std::ptrdiff_t(n));
    const std::set<I> chosen(lanes.begin(), lanes.begin() + std::ptrdiff_t(n));
    for (I i : chosen) RC_ASSERT(i >= 0 && std::size_t(i) < end);
    // every chosen row ranks before every unchosen one: the worst chosen before the best unchosen
    std::optional<std::size_t> worst_chosen, best_unchosen;
    for (std::size_t j = 0; j < end; ++j) {
      auto& slot = chosen.contains(I(j)) ? worst_chosen : best_unchosen;
      const bool replace = !slot || (chosen.contains(I(j))
                                         ? model::ranks_before(row[*slot], *slot, row[j], j)
                                         : model::ranks_before(row[j], j, row[*slot], *slot));
      if (replace) slot = j;
    }
    if (worst_chosen && best_unchosen)
      RC_ASSERT(model::ranks_before(row[*worst_chosen], *worst_chosen, row[*best_unchosen],
                                    *best_unchosen));
  }
}

AETHER_PROP(IndexerModel, retaining_every_block_is_plain_topk, "model", ()) {
  const std::size_t end = *props::gen_valid_length();
  const auto row = *props::gen_scores(end);
  const std::size_t bs = *gen::element<std::size_t>(1, 2, 8, 16);
  const std::size_t k = *gen::inRange<std::size_t>(0, 40);
  V all((end + bs - 1) / bs);
  std::iota(all.begin(), all.end(), 0);
  std::reverse(all.begin(), all.end());  // the order of retained blocks does not matter
  RC_ASSERT(model::candidate_topk(row, end, all, bs, k).value() ==
            model::valid_prefix_topk(row, end, V{I(end)}, k).value());
}

AETHER_PROP(IndexerCpu, topk_agrees_with_the_model, "L0", ()) {
  const props::TopkCall c = *props::gen_any_topk_call();
  const V before(c.ends.size() * c.k, 0x5a5a5a5a);
  V out = before;
  const auto got = cpu_indexer().topk(c.scores, c.width, c.ends, c.k, out);
  const auto want = model::valid_prefix_topk(c.scores, c.width, c.ends, c.k);
  if (auto d = status_report<I>(want, got, before, out, "cpu topk"); !d.empty()) RC_FAIL(d);
}

#ifdef AETHER_HAVE_CUDA
AETHER_GPU_PROP(IndexerCuda, topk_agrees_with_the_model, "L0", ()) {
  const props::TopkCall c = *props::gen_any_topk_call();
  const V before(c.ends.size() * c.k, 0x5a5a5a5a);
  V out = before;
  const auto got = props::cuda_valid_prefix_topk(c.scores, c.width, c.ends, c.k, out);
  const auto want = model::valid_prefix_topk(c.scores, c.width, c.ends, c.k);
  if (auto d = status_report<I>(want, got, before, out, "cuda topk"); !d.empty()) RC_FAIL(d);
}
#endif

AETHER_PROP(IndexerCpu, the_same_on_every_thread_count_and_run, "L3", ()) {
  props::TopkCall c = *props::gen_well_formed_topk_call();
  const auto run = [&](std::size_t threads) {
    // restored however the call ends (RC_ASSERT throws)
    struct Limits {
      explicit Limits(std::size_t threads) {
        cpu::thread_limit() = threads;
        cpu::parallel_threshold() = 1;  // the threaded path even on small calls
      }
      ~Limits() {
        cpu::thread_limit() = 0;
        cpu::parallel_threshold() = std::size_t(1) << 17;
      }
    } limits(threads);
    V out(c.ends.size() * c.k, -7);
    RC_ASSERT(cpu_indexer().topk(c.scores, c.width, c.ends, c.k, out).ok());
    return out;
  };
  const V one = run(1);
  RC_ASSERT(run(2) == one);
  RC_ASSERT(run(3) == one);
  RC_ASSERT(run(1) == one);
}

AETHER_PROP(IndexerCpu, candidate_blocks_agree_with_the_model, "L0", ()) {
  const props::CandidateCall c = *props::gen_candidate_call();
  const auto backend = cpu_indexer();
  {
    const V before(c.k, 0x5a5a5a5a);
    V out = before;
    const auto got = backend.candidate_topk(c.row, c.end, c.retained_blocks, c.block_size, c.k, out);
    const auto want = model::candidate_topk(c.row, c.end, c.retained_blocks, c.block_size, c.k);
    if (auto d = status_report<I>(want, got, before, out, "cpu candidate_topk"); !d.empty()) RC_FAIL(d);
  }
  {
    const std::size_t blocks = c.block_size ? (c.end + c.block_size - 1) / c.block_size : 0;
    const std::vector<float> before(blocks, -7.0f);
    std::vector<float> out = before;
    const auto got = backend.block_scores(c.row, c.end, c.block_size, out);
    const auto want = model::candidate_block_scores(c.row, c.end, c.block_size);
    if (auto d = status_report<float>(want, got, before, out, "cpu block scores"); !d.empty()) RC_FAIL(d);
  }
  {
    const auto compact = *gen::container<V>(
        *gen::inRange<std::size_t>(0, 20),
        gen::weightedOneOf<I>({{6, gen::inRange<I>(0, I(c.retained_blocks.size() * c.block_size) + 1)},
                               {1, gen::element<I>(-1, -2)}}));
    const V before(compact.size(), 0x5a5a5a5a);
    V out = before;
    const auto got = backend.restore(compact, c.retained_blocks, c.block_size, out);
    const auto want = model::restore_candidate_indices(compact, c.retained_blocks, c.block_size);
    if (auto d = status_report<I>(want, got, before, out, "cpu restore"); !d.empty()) RC_FAIL(d);
  }
}

AETHER_PROP(IndexerCpu, prefill_offsets_and_chunks_agree_with_the_model, "L0", ()) {
  const auto rows = *gen::container<V>(gen::inRange<I>(-1, 1 << 20));
  const I offset = *gen::inRange<I>(0, 1 << 20);
  V out(rows.size(), 3);
  RC_ASSERT(cpu_indexer().offset(rows, offset, out).ok());
  RC_ASSERT(out == model::add_prefill_offset(rows, offset));

  const std::size_t width = *gen::inRange<std::size_t>(0, 300000);
  const std::size_t budget = *gen::inRange<std::size_t>(0, std::size_t(1) << 33);
  const auto want = model::prefill_chunk_rows(width, budget);
  const auto got = cpu::prefill_chunk_rows(width, budget);
  RC_ASSERT(want == got);
  if (want) {  // a multiple of 8, within the cap and the budget, and the largest such
    const std::size_t n = want.value();
    RC_ASSERT(n % 8 == 0 && n <= MAX_PREFILL_CHUNK_ROWS);
    RC_ASSERT(n * width * 4 <= budget || width == 0);
    RC_ASSERT(n == MAX_PREFILL_CHUNK_ROWS || (n + 8) * width * 4 > budget);
  }
}

std::vector<float> cpu_scores(const props::ScoreCall& c) {
  std::vector<float> out(c.rows(), NAN);
  const auto st = cpu::index_scores(c.queries, c.weights, c.keys(), out);
  if (!st) RC_FAIL("cpu refused a well-formed scorer call");
  return out;
}

AETHER_PROP(IndexerCpu, scores_are_exact_on_the_grid, "L1", ()) {
  const props::ScoreCall c = *props::gen_grid_score_call();
  const auto exact = model::index_scores(c.queries, c.weights, c.keys());
  RC_ASSERT(exact.ok());
  const auto got = cpu_scores(c);
  for (std::size_t j = 0; j < got.size(); ++j)
    if (model::exact(got[j]) != exact.value()[j])
      RC_FAIL("key " + std::to_string(j) + ": cpu " + std::to_string(got[j]) + ", exact " +
              exact.value()[j].str());
}

AETHER_PROP(IndexerCpu, scores_lie_within_the_certified_bound, "L2", ()) {
  const props::ScoreCall c = *props::gen_float_score_call();
  const auto exact = model::index_scores(c.queries, c.weights, c.keys());
  const auto bound = model::index_score_error_bounds(c.queries, c.weights, c.keys());
  RC_ASSERT(exact.ok() && bound.ok());
  const auto got = cpu_scores(c);
  for (std::size_t j = 0; j < got.size(); ++j) {
    RC_ASSERT(std::isfinite(got[j]));
    const model::Rational error = abs(model::exact(got[j]) - exact.value()[j]);
    if (error > bound.value()[j])
      RC_FAIL("key " + std::to_string(j) + ": |cpu - exact| = " + error.str() + " > bound " +
              bound.value()[j].str());
  }
}

// A top-k chosen from float scores, certified against the exact ones (SPEC §2 L2):
// for selected i and unselected j, exact(i) >= exact(j) - (err_i + err_j).
AETHER_PROP(IndexerCpu, a_selection_from_float_scores_is_certified, "L2", ()) {
  const props::ScoreCall c = *props::gen_float_score_call();
  const auto exact = model::index_scores(c.queries, c.weights, c.keys()).value();
  const auto bound = model::index_score_error_bounds(c.queries, c.weights, c.keys()).value();
  const auto scores = cpu_scores(c);
  const std::size_t k = *gen::inRange<std::size_t>(0, scores.size() + 2);
  V chosen(k);
  RC_ASSERT(cpu_indexer().topk(scores, scores.size(), V{I(scores.size())}, k, chosen).ok());
  std::set<I> in(chosen.begin(), chosen.end());
  in.erase(-1);
  for (I i : in)
    for (std::size_t j = 0; j < scores.size(); ++j)
      if (!in.contains(I(j)))
        RC_ASSERT(exact[std::size_t(i)] >= exact[j] - (bound[std::size_t(i)] + bound[j]));
}

AETHER_PROP(IndexerCpu, the_portable_path_equals_the_avx2_path, "L3", ()) {
  const props::ScoreCall c = *gen::oneOf(props::gen_grid_score_call(), props::gen_float_score_call());
  const auto simd = cpu_scores(c);
  struct Portable {
    Portable() { cpu::simd_allowed() = false; }
    ~Portable() { cpu::simd_allowed() = true; }
  } portable;
  const auto plain = cpu_scores(c);
  for (std::size_t j = 0; j < simd.size(); ++j)
    RC_ASSERT(std::bit_cast<std::uint32_t>(simd[j]) == std::bit_cast<std::uint32_t>(plain[j]));
}

}  // namespace
}  // namespace aether
