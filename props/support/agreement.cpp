#include "props/support/agreement.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <span>
#include <sstream>
#include <vector>

#include "model/dosa.hpp"
#include "model/indexer.hpp"
#include "model/witness.hpp"
#include "props/support/compare.hpp"

namespace aether::props {

namespace {
using I = std::int32_t;
using V = std::vector<I>;

WitnessError witness_output_refusal(std::size_t expected, std::size_t actual) {
  return witness_error::OutputSizeMismatch{expected, actual};
}
IndexerError indexer_output_refusal(std::size_t expected, std::size_t actual) {
  return indexer_error::ShapeMismatch{expected, actual};
}
}  // namespace

// L0: a backend equals the model on every call, refusals included.
void check_witness_agreement(const WitnessBackend& backend, const WitnessCall& c) {
  const V poison(c.out_len(c.learned.size()), 0x5a5a5a5a);
  if (backend.apply) {
    Guarded<I> guarded(poison, 0x6b6b6b6b);
    const auto impl = backend.apply(c.learned, c.topk, c.context_lens, c.learned_keep,
                                    c.num_segments, c.max_replacements, guarded.span());
    if (auto d = guarded.overrun(backend.name + " apply"); !d.empty()) RC_FAIL(d);
    const V out = guarded.values();
    const auto want = model_into_buffer(
        model::apply_topology_witnesses(c.learned, c.topk, c.context_lens, c.learned_keep,
                                        c.num_segments, c.max_replacements),
        out.size(), witness_output_refusal);
    if (auto d = differential_report<I>(want, impl, poison, out, backend.name + " apply");
        !d.empty())
      RC_FAIL(d);
  }
  if (backend.scatter) {
    Guarded<I> guarded(c.learned, 0x6b6b6b6b);
    const auto impl = backend.scatter(guarded.span(), c.topk, c.context_lens, c.num_segments);
    if (auto d = guarded.overrun(backend.name + " scatter"); !d.empty()) RC_FAIL(d);
    const V buf = guarded.values();
    V want_buf = c.learned;
    const auto want =
        model::scatter_topology_witnesses(want_buf, c.topk, c.context_lens, c.num_segments);
    if (impl.ok() != want.ok() || (!impl.ok() && !(impl.error() == want.error()))) {
      std::ostringstream os;
      os << backend.name << " scatter: ";
      if (impl.ok())
        os << "accepted, the model refuses with " << want.error();
      else if (want.ok())
        os << "refused with " << impl.error() << ", the model accepts";
      else
        os << "refused with " << impl.error() << ", the model with " << want.error();
      RC_FAIL(os.str());
    }
    if (auto d = diff_report<I>(want_buf, buf, backend.name + " scatter"); !d.empty()) RC_FAIL(d);
  }
  if (backend.indices) {
    const std::size_t width = c.out_len(c.rows() * c.num_segments);
    const V table_poison(width, 0x5a5a5a5a);
    Guarded<I> guarded(table_poison, 0x6b6b6b6b);
    const auto impl =
        backend.indices(c.learned, c.topk, c.context_lens, c.num_segments, guarded.span());
    if (auto d = guarded.overrun(backend.name + " indices"); !d.empty()) RC_FAIL(d);
    const V table = guarded.values();
    const auto want = model_into_buffer(
        model::topology_witness_indices(c.learned, c.topk, c.context_lens, c.num_segments),
        table.size(), witness_output_refusal);
    if (auto d = differential_report<I>(want, impl, table_poison, table, backend.name + " indices");
        !d.empty())
      RC_FAIL(d);
  }
}

void check_topk_agreement(const decltype(IndexerBackend::topk)& topk, const TopkCall& c,
                          const std::string& name, OutputCheck output_check) {
  const V before(c.out_len(), 0x5a5a5a5a);
  Guarded<I> guarded(before, 0x6b6b6b6b);
  const auto got = topk(c.scores, c.width, c.ends, c.k, guarded.span());
  if (auto d = guarded.overrun(name); !d.empty()) RC_FAIL(d);
  const V out = guarded.values();
  auto want = model_into_buffer(model::valid_prefix_topk(c.scores, c.width, c.ends, c.k),
                                out.size(), indexer_output_refusal);
  const bool scores_shape_refused =
      !want.ok() && std::holds_alternative<indexer_error::ShapeMismatch>(want.error());
  if (output_check == OutputCheck::BeforeData && out.size() != c.ends.size() * c.k &&
      !scores_shape_refused)
    want = indexer_output_refusal(c.ends.size() * c.k, out.size());
  if (auto d = differential_report<I>(want, got, before, out, name); !d.empty()) RC_FAIL(d);
}

void check_pruned_topk_agreement(const PrunedTopk& pruned, const DosaCall& c,
                                 const std::string& name) {
  if (!c.grid) RC_FAIL(name + ": check_pruned_topk_agreement takes calls on the integer grid");
  const V before(c.k, 0x5a5a5a5a);
  Guarded<I> guarded(before, 0x6b6b6b6b);
  const auto got = pruned(c.queries, c.weights, c.stored(), c.k, c.seeds, guarded.span());
  if (auto d = guarded.overrun(name); !d.empty()) RC_FAIL(d);
  const V out = guarded.values();
  const auto want = model::dosa_topk(c.queries, c.weights, c.stored(), c.k, c.seeds, c.plan);
  const std::string d = differential_report<I>(want, got, before, out, name);
  if (d.empty()) return;
  std::ostringstream os;
  os << d;
  if (want.ok() && got.ok()) {  // each id on one side only, with its exact score
    const auto scores = model::index_scores(c.queries, c.weights, c.stored()).value();
    std::vector<model::Rational> seed_scores;
    for (I s : c.seeds) seed_scores.push_back(scores[std::size_t(s)]);
    if (c.seeds.size() >= c.k && c.k > 0)
      os << "\n  tau (the K-th best seed score) " << model::seed_threshold(seed_scores, c.k).str();
    const auto only = [&](const V& a, const V& b, const char* side) {
      for (I id : a)
        if (id >= 0 && std::size_t(id) < scores.size() && std::ranges::find(b, id) == b.end())
          os << "\n  id " << id << " only in the " << side << " lanes: score "
             << scores[std::size_t(id)].str()
             << (std::ranges::find(c.seeds, id) != c.seeds.end() ? " (a seed)" : "");
    };
    only(want.value(), out, "expected");
    only(out, want.value(), "actual");
  }
  RC_FAIL(os.str());
}

}  // namespace aether::props
