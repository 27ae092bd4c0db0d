#include "props/support/agreement.hpp"

#include <rapidcheck.h>

#include <span>
#include <vector>

#include "model/indexer.hpp"
#include "model/witness.hpp"
#include "props/support/compare.hpp"

namespace aether::props {

namespace {
using I = std::int32_t;
using V = std::vector<I>;
}  // namespace

// L0: a backend equals the model on every call, refusals included.
void check_witness_agreement(const WitnessBackend& backend, const WitnessCall& c) {
  const V poison(c.learned.size(), 0x5a5a5a5a);
  if (backend.apply) {
    V out = poison;
    const auto impl = backend.apply(c.learned, c.topk, c.context_lens, c.learned_keep,
                                    c.num_segments, c.max_replacements, out);
    const auto want = model::apply_topology_witnesses(
        c.learned, c.topk, c.context_lens, c.learned_keep, c.num_segments, c.max_replacements);
    if (auto d = differential_report<I>(want, impl, poison, out, backend.name + " apply");
        !d.empty())
      RC_FAIL(d);
  }
  if (backend.scatter) {
    V buf = c.learned;
    const auto impl = backend.scatter(buf, c.topk, c.context_lens, c.num_segments);
    V want_buf = c.learned;
    const auto want =
        model::scatter_topology_witnesses(want_buf, c.topk, c.context_lens, c.num_segments);
    if (impl.ok() != want.ok() || (!impl.ok() && !(impl.error() == want.error())))
      RC_FAIL(backend.name + " scatter: status differs from the model's");
    if (auto d = diff_report<I>(want_buf, buf, backend.name + " scatter"); !d.empty()) RC_FAIL(d);
  }
  if (backend.indices) {
    const std::size_t width = c.rows() * c.num_segments;
    const V table_poison(width, 0x5a5a5a5a);
    V table = table_poison;
    const auto impl = backend.indices(c.learned, c.topk, c.context_lens, c.num_segments, table);
    const auto want =
        model::topology_witness_indices(c.learned, c.topk, c.context_lens, c.num_segments);
    if (auto d = differential_report<I>(want, impl, table_poison, table, backend.name + " indices");
        !d.empty())
      RC_FAIL(d);
  }
}

void check_topk_agreement(const decltype(IndexerBackend::topk)& topk, const TopkCall& c,
                          const std::string& name) {
  const V before(c.ends.size() * c.k, 0x5a5a5a5a);
  V out = before;
  const auto got = topk(c.scores, c.width, c.ends, c.k, std::span<I>(out));
  const auto want = model::valid_prefix_topk(c.scores, c.width, c.ends, c.k);
  if (auto d = differential_report<I>(want, got, before, out, name); !d.empty()) RC_FAIL(d);
}

}  // namespace aether::props
