#include "props/support/agreement.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <iomanip>
#include <span>
#include <sstream>
#include <vector>

#include "model/dosa.hpp"
#include "model/formats.hpp"
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

// "0x0b (-3/2)": a code and its value
std::string code_text(Element element, std::uint8_t code) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(2) << std::setfill('0') << int(code) << std::dec << " ("
     << model::element_value(element, code).str() << ")";
  return os.str();
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

std::vector<RoundingProfile> profiles_followed(CacheFormat format, std::span<const float> row,
                                               const QuantizedRow& got) {
  std::vector<RoundingProfile> followed;
  for (RoundingProfile p : {RoundingProfile::Cuda, RoundingProfile::TiesTowardZero})
    if (const auto want = model::quantize_row(format, row, p); want.ok() && want.value() == got)
      followed.push_back(p);
  return followed;
}

void check_quantizer_agreement(const Quantizer& quantize, const FormatsCase& c,
                               RoundingProfile profile, const std::string& name) {
  const auto want = model::quantize_row(c.format, c.row, profile);
  const auto got = quantize(c.format, c.row);
  std::ostringstream os;
  os << std::setprecision(9) << name << ", profile " << profile << ": ";
  if (!want.ok() || !got.ok()) {
    if (want.ok())
      os << "refused with " << got.error() << ", the model accepts";
    else if (got.ok())
      os << "accepted, the model refuses with " << want.error();
    else if (!(got.error() == want.error()))
      os << "refused with " << got.error() << ", the model with " << want.error();
    else
      return;
    RC_FAIL(os.str());
  }
  const QuantizedRow &w = want.value(), &g = got.value();
  if (g == w) return;
  if (g.codes.size() != w.codes.size() || g.scales.size() != w.scales.size()) {
    os << g.codes.size() << " codes and " << g.scales.size() << " scales, the model's "
       << w.codes.size() << " and " << w.scales.size();
    RC_FAIL(os.str());
  }
  const GroupFormat f = group_format(c.format);
  std::vector<std::size_t> codes, scales;  // the differing places
  for (std::size_t i = 0; i < w.codes.size(); ++i)
    if (g.codes[i] != w.codes[i]) codes.push_back(i);
  for (std::size_t s = 0; s < w.scales.size(); ++s)
    if (g.scales[s] != w.scales[s]) scales.push_back(s);
  os << codes.size() << " of " << w.codes.size() << " codes and " << scales.size() << " of "
     << w.scales.size() << " scales differ; the row follows ";
  const auto followed = profiles_followed(c.format, c.row, g);
  if (followed.empty()) os << "no named profile";
  for (std::size_t i = 0; i < followed.size(); ++i) os << (i ? " and " : "") << followed[i];
  for (std::size_t n = 0; n < std::min<std::size_t>(scales.size(), 4); ++n) {
    const std::size_t s = scales[n];
    os << "\n  scale [" << s << "] of elements [" << s * f.group << ", " << (s + 1) * f.group
       << "): expected byte " << int(w.scales[s]) << " ("
       << model::scale_value(f.scale, w.scales[s]).str() << "), actual " << int(g.scales[s]) << " ("
       << model::scale_value(f.scale, g.scales[s]).str() << ")";
  }
  for (std::size_t n = 0; n < std::min<std::size_t>(codes.size(), 8); ++n) {
    const std::size_t i = codes[n], group = i / f.group;
    const model::Rational scale = model::scale_value(f.scale, w.scales[group]);
    const model::Rational q = model::exact(c.row[i]) / scale;
    os << "\n  code [" << i << "] (group " << group << "): x = " << c.row[i] << ", scale "
       << scale.str() << ", x / scale = " << q.str() << ": expected "
       << code_text(f.element, w.codes[i]) << ", actual " << code_text(f.element, g.codes[i]);
    const model::Rational e = model::element_value(f.element, w.codes[i]),
                          a = model::element_value(f.element, g.codes[i]);
    if (g.scales[group] == w.scales[group] && e != a && abs(q - e) == abs(q - a))
      os << " (a tie: x / scale is halfway between them)";
  }
  RC_FAIL(os.str());
}

}  // namespace aether::props
