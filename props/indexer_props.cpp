// Properties of the indexer's selection path (source 003 A.4): the model's
// total-order invariants, and L0 agreement of the CPU backend with the model,
// refusals and untouched buffers included; L3 determinism over thread counts.
#include <algorithm>
#include <numeric>
#include <optional>
#include <set>

#include "impl/cpu/indexer.hpp"
#include "model/indexer.hpp"
#include "props/support/agreement.hpp"
#include "props/support/compare.hpp"
#include "props/support/cpu_threads.hpp"
#include "props/support/indexer_backends.hpp"
#include "props/support/indexer_gen.hpp"
#include "props/support/property.hpp"

namespace aether {
namespace {

namespace gen = rc::gen;
using I = std::int32_t;
using V = std::vector<I>;

props::IndexerBackend cpu_indexer() { return props::cpu_indexer_backend(); }

IndexerError output_refusal(std::size_t expected, std::size_t actual) {
  return indexer_error::ShapeMismatch{expected, actual};
}

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
      const bool replace =
          !slot || (chosen.contains(I(j)) ? model::ranks_before(row[*slot], *slot, row[j], j)
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
  props::check_topk_agreement(cpu_indexer().topk, *props::gen_any_topk_call(), "cpu topk");
}

#ifdef AETHER_HAVE_CUDA
AETHER_GPU_PROP(IndexerCuda, topk_agrees_with_the_model, "L0", ()) {
  props::check_topk_agreement(props::cuda_valid_prefix_topk, *props::gen_any_topk_call(),
                              "cuda topk");
}

// The queued call, plain and captured in a CUDA graph and replayed: its refusals
// come back through the device verdict, described the model's way; out's length,
// the one shape the queued form refuses before queuing anything, is refused before
// the data's refusals.
AETHER_GPU_PROP(IndexerCuda, queued_topk_agrees_with_the_model, "L0", ()) {
  const props::TopkCall c = *props::gen_any_topk_call();
  for (const props::Mode mode : {props::Mode::Queued, props::Mode::Captured})
    props::check_topk_agreement(
        [mode](auto&&... args) {
          return props::cuda_queued_valid_prefix_topk(args..., nullptr, mode);
        },
        c, "cuda " + props::mode_name(mode) + " topk", props::OutputCheck::BeforeData);
}

// Rows the read-once path takes, in every distribution that sends its finish a
// different way (tagged by the ways the verdict counts), queued and captured.
AETHER_GPU_PROP(IndexerCuda, wide_topk_agrees_with_the_model, "L0", ()) {
  const props::TopkCall c = *props::gen_wide_topk_call();
  props::check_topk_agreement(props::cuda_valid_prefix_topk, c, "cuda topk");
  props::check_topk_agreement(
      [](auto&&... args) {
        props::TopkPaths paths;
        const auto status = props::cuda_queued_valid_prefix_topk(args..., &paths);
        if (status.ok()) {
          RC_TAG(paths.from_scores > 0 ? "some row from its scores" : "no row from its scores");
          RC_TAG(paths.refined_or_tied > 0 ? "some row refined or tied" : "no row refined or tied");
        }
        return status;
      },
      c, "cuda queued topk", props::OutputCheck::BeforeData);
  // captured: its scratch (the rows' records and lists) allocated in the graph
  props::check_topk_agreement(
      [](auto&&... args) {
        return props::cuda_queued_valid_prefix_topk(args..., nullptr, props::Mode::Captured);
      },
      c, "cuda captured topk", props::OutputCheck::BeforeData);
}
#endif

AETHER_PROP(IndexerCpu, wide_topk_agrees_with_the_model, "L0", ()) {
  props::check_topk_agreement(cpu_indexer().topk, *props::gen_wide_topk_call(), "cpu topk");
}

AETHER_PROP(IndexerCpu, the_same_on_every_thread_count_and_run, "L3", ()) {
  props::TopkCall c = *props::gen_well_formed_topk_call();
  const auto run = [&](std::size_t threads) {
    const props::ForcedThreads forced(threads);
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
    const V before(c.out_len(c.k), 0x5a5a5a5a);
    V out = before;
    const auto got =
        backend.candidate_topk(c.row, c.end, c.retained_blocks, c.block_size, c.k, out);
    const auto want = props::model_into_buffer(
        model::candidate_topk(c.row, c.end, c.retained_blocks, c.block_size, c.k), out.size(),
        output_refusal);
    if (auto d = status_report<I>(want, got, before, out, "cpu candidate_topk"); !d.empty())
      RC_FAIL(d);
  }
  {
    const std::size_t blocks = c.block_size ? (c.end + c.block_size - 1) / c.block_size : 0;
    const std::vector<float> before(c.out_len(blocks), -7.0f);
    std::vector<float> out = before;
    const auto got = backend.block_scores(c.row, c.end, c.block_size, out);
    const auto want = props::model_into_buffer(
        model::candidate_block_scores(c.row, c.end, c.block_size), out.size(), output_refusal);
    if (auto d = status_report<float>(want, got, before, out, "cpu block scores"); !d.empty())
      RC_FAIL(d);
  }
  {
    const auto compact = *gen::container<V>(
        *gen::inRange<std::size_t>(0, 20),
        gen::weightedOneOf<I>(
            {{6, gen::inRange<I>(0, I(c.retained_blocks.size() * c.block_size) + 1)},
             {1, gen::element<I>(-1, -2)}}));
    const V before(c.out_len(compact.size()), 0x5a5a5a5a);
    V out = before;
    const auto got = backend.restore(compact, c.retained_blocks, c.block_size, out);
    const auto want = props::model_into_buffer(
        model::restore_candidate_indices(compact, c.retained_blocks, c.block_size), out.size(),
        output_refusal);
    if (auto d = status_report<I>(want, got, before, out, "cpu restore"); !d.empty()) RC_FAIL(d);
  }
}

AETHER_PROP(IndexerCpu, prefill_offsets_and_chunks_agree_with_the_model, "L0", ()) {
  const auto rows = *gen::container<V>(gen::inRange<I>(-1, 1 << 20));
  const I offset = *gen::inRange<I>(0, 1 << 20);
  const std::size_t out_len = props::off_by(rows.size(), *gen::element<std::ptrdiff_t>(0, 0, 0, 1));
  const V before(out_len, 3);
  V out = before;
  const auto offset_want = props::model_into_buffer(
      Result<V, IndexerError>(model::add_prefill_offset(rows, offset)), out.size(), output_refusal);
  if (auto d = status_report<I>(offset_want, cpu_indexer().offset(rows, offset, out), before, out,
                                "cpu offset");
      !d.empty())
    RC_FAIL(d);

  // Logits of 4 (fp32), 2 (bf16) or 1 byte (fp8).
  const std::size_t width = *gen::inRange<std::size_t>(0, 300000);
  const std::size_t budget = *gen::inRange<std::size_t>(0, std::size_t(1) << 33);
  const std::size_t logit = *gen::element<std::size_t>(1, 2, 4);
  const auto want = model::prefill_chunk_rows(width, budget, logit);
  const auto got = cpu::prefill_chunk_rows(width, budget, logit);
  RC_ASSERT(want == got);
  if (want) {  // a multiple of 8, within the cap and the budget, and the largest such
    const std::size_t n = want.value();
    RC_ASSERT(n % 8 == 0 && n <= MAX_PREFILL_CHUNK_ROWS);
    RC_ASSERT(n * width * logit <= budget || width == 0);
    RC_ASSERT(n == MAX_PREFILL_CHUNK_ROWS || (n + 8) * width * logit > budget);
  }
}

}  // namespace
}  // namespace aether
