// "Their" kernels, written outside aether, checked by aether's properties: a
// witness merge and a valid-prefix top-k, each in a right and a deliberately
// wrong variant. run.sh expects the right ones to pass and the wrong ones to be
// caught with a counterexample and a replay line (docs/using-aether.md).
#include <aether/props.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

namespace {

using aether::Status, aether::WitnessError, aether::IndexerError;
namespace we = aether::witness_error;
namespace ie = aether::indexer_error;

// A merge written from docs/witness.md. The segment's left edge is ceil(s L / S_eff);
// the wrong variant rounds it down, the mistake source 000 warns of.
template <bool FloorEdges>
Status<WitnessError> their_merge(std::span<const std::int32_t> learned, std::size_t topk,
                                 std::span<const std::int32_t> lens, std::size_t keep,
                                 std::size_t segments, std::size_t replacements,
                                 std::span<std::int32_t> out) {
  const std::size_t rows = lens.size();
  if (learned.size() != topk * rows) return we::RowsMismatch{learned.size(), topk, rows};
  if (segments == 0 || segments > aether::MAX_TOPOLOGY_SEGMENTS)
    return we::SegmentsOutOfRange{segments};
  if (keep > topk) return we::LearnedKeepOutOfRange{keep, topk};
  if (out.size() != learned.size()) return we::OutputSizeMismatch{learned.size(), out.size()};
  const std::size_t budget = std::min(replacements, topk - keep);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::vector<std::int32_t> row(learned.begin() + r * topk,
                                        learned.begin() + (r + 1) * topk);
    std::copy(row.begin(), row.end(), out.begin() + r * topk);
    const std::int64_t len = lens[r];
    if (len <= 0) continue;
    const std::int64_t s_eff = std::min<std::int64_t>(std::int64_t(segments), len);
    std::vector<bool> occupied(segments, false);
    for (std::int32_t x : row)
      if (x >= 0) occupied[std::min<std::int64_t>(x * s_eff / len, segments - 1)] = true;
    std::size_t j = 0;
    for (std::int64_t s = 0; s < s_eff && j < budget; ++s)
      if (!occupied[s])
        out[r * topk + keep + j++] =
            std::int32_t(FloorEdges ? s * len / s_eff : (s * len + s_eff - 1) / s_eff);
  }
  return aether::Ok{};
}

// A top-k written from docs/indexer.md: the K best of each valid prefix in the
// total order, in index order, -1 padded. The wrong variant breaks ties toward the
// higher index.
template <bool HigherIndexFirst>
Status<IndexerError> their_topk(std::span<const float> scores, std::size_t width,
                                std::span<const std::int32_t> ends, std::size_t k,
                                std::span<std::int32_t> out) {
  const std::size_t rows = ends.size();
  if (scores.size() != rows * width) return ie::ShapeMismatch{rows * width, scores.size()};
  for (std::size_t r = 0; r < rows; ++r)
    if (ends[r] < 0 || std::size_t(ends[r]) > width) return ie::EndOutOfRange{r, ends[r], width};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < std::size_t(ends[r]); ++j)
      if (!std::isfinite(scores[r * width + j])) return ie::NonFiniteScore{r, j};
  if (out.size() != rows * k) return ie::ShapeMismatch{rows * k, out.size()};
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = scores.data() + r * width;
    std::vector<std::int32_t> order(std::size_t(ends[r]));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      if (row[a] != row[b]) return row[a] > row[b];
      return HigherIndexFirst ? a > b : a < b;
    });
    order.resize(std::min(k, order.size()));
    std::sort(order.begin(), order.end());
    std::fill_n(out.begin() + r * k, k, -1);
    std::copy(order.begin(), order.end(), out.begin() + r * k);
  }
  return aether::Ok{};
}

template <bool Wrong>
aether::props::WitnessBackend their_witness_backend() {
  aether::props::WitnessBackend b;
  b.name = Wrong ? "their floor-edge merge" : "their merge";
  b.apply = their_merge<Wrong>;  // indices and scatter left empty: not checked
  return b;
}

}  // namespace

AETHER_PROP(TheirMerge, agrees_with_the_model, "L0", (const aether::props::WitnessCall& c)) {
  aether::props::check_witness_agreement(their_witness_backend<false>(), c);
}

AETHER_PROP(TheirFloorEdgeMerge, agrees_with_the_model, "L0",
            (const aether::props::WitnessCall& c)) {
  aether::props::check_witness_agreement(their_witness_backend<true>(), c);
}

AETHER_PROP(TheirTopk, agrees_with_the_model, "L0", ()) {
  aether::props::check_topk_agreement(their_topk<false>, *aether::props::gen_any_topk_call(),
                                      "their topk");
}

AETHER_PROP(TheirHigherIndexTieTopk, agrees_with_the_model, "L0", ()) {
  aether::props::check_topk_agreement(their_topk<true>, *aether::props::gen_any_topk_call(),
                                      "their higher-index-tie topk");
}
