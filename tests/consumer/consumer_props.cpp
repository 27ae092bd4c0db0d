// "Their" kernels, written outside aether, checked by aether's properties: a
// witness merge, a valid-prefix top-k, an IndexFp4 quantizer and a pruned top-k
// (seeds, a threshold, survivors), each in a right
// and a deliberately wrong variant. run.sh expects the right ones to pass and the
// wrong ones to be caught with a counterexample and a replay line, and the wrong
// quantizer to pass under the profile it does follow (docs/using-aether.md).
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

// An IndexFp4 quantizer written from docs/formats.md: per group of 32 the scale
// 2^e, e the least with 6 2^e >= max(amax, 1e-4) (compared exactly: 6 2^e is a
// float), UE8M0 byte e + 127; each x / 2^e (exact) to the nearest E2M1 value of
// its sign, ties to the even code. The wrong variant breaks ties toward zero, the
// rule of a public reference quantizer.
template <bool TiesTowardZero>
aether::Result<aether::QuantizedRow, aether::FormatsError> their_fp4_quantizer(
    aether::CacheFormat format, std::span<const float> row) {
  namespace fe = aether::formats_error;
  if (format != aether::CacheFormat::IndexFp4) return fe::UnsupportedFormat{format};
  if (row.size() % 32 != 0) return fe::ShapeMismatch{row.size() / 32 * 32, row.size()};
  for (std::size_t i = 0; i < row.size(); ++i)
    if (!std::isfinite(row[i])) return fe::NonFiniteInput{i};
  static constexpr float kValues[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  aether::QuantizedRow q;
  for (std::size_t g = 0; g < row.size() / 32; ++g) {
    float amax = 1e-4f;
    for (std::size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(row[g * 32 + i]));
    int e = std::ilogb(amax / 6) - 1;
    while (std::ldexp(6.0f, e) < amax) ++e;
    q.scales.push_back(std::uint8_t(e + 127));
    for (std::size_t i = 0; i < 32; ++i) {
      const float x = row[g * 32 + i], v = std::fabs(std::ldexp(x, -e));
      std::uint8_t code = 7;
      for (std::uint8_t c = 0; c < 7; ++c) {
        const float mid = (kValues[c] + kValues[c + 1]) / 2;
        if (v < mid || (v == mid && (TiesTowardZero || c % 2 == 0))) {
          code = c;
          break;
        }
      }
      q.codes.push_back(std::uint8_t(code | (std::signbit(x) ? 8 : 0)));
    }
  }
  return q;
}

// A pruned top-k written from docs/dosa.md, with the plainest sound bound (each
// key's own score, fp32 keys only): tau is the K-th best seed score; the seeds' top
// K and the other keys scoring at least tau are merged in the total order. The
// wrong variant keeps only the keys scoring above tau, the off-by-one the source
// warns of (a key tied with tau at a lower id than a seed's is lost).
template <bool DropsTiesAtTau>
Status<aether::DosaError> their_pruned_topk(std::span<const float> query,
                                            std::span<const float> weights,
                                            const aether::IndexKeys& keys, std::size_t k,
                                            std::span<const std::int32_t> seeds,
                                            std::span<std::int32_t> out) {
  if (k == 0) return aether::Ok{};  // no lane, and no K-th seed for tau
  const std::size_t dim = keys.dim, heads = weights.size();
  const std::size_t count = dim ? keys.bytes.size() / (4 * dim) : 0;
  const auto* values = reinterpret_cast<const float*>(keys.bytes.data());
  std::vector<float> score(count, 0.0f);
  for (std::size_t j = 0; j < count; ++j)
    for (std::size_t h = 0; h < heads; ++h) {
      float dot = 0;
      for (std::size_t d = 0; d < dim; ++d) dot += query[h * dim + d] * values[j * dim + d];
      score[j] += weights[h] * std::max(dot, 0.0f);
    }
  const auto before = [&](std::int32_t a, std::int32_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  };
  std::vector<std::int32_t> chosen(seeds.begin(), seeds.end());
  if (count > k) {
    std::sort(chosen.begin(), chosen.end(), before);
    chosen.resize(k);
    const float tau = score[chosen.back()];
    for (std::size_t j = 0; j < count; ++j)
      if (std::find(seeds.begin(), seeds.end(), std::int32_t(j)) == seeds.end() &&
          (DropsTiesAtTau ? score[j] > tau : score[j] >= tau))
        chosen.push_back(std::int32_t(j));
  } else {
    chosen.resize(count);
    std::iota(chosen.begin(), chosen.end(), 0);
  }
  std::sort(chosen.begin(), chosen.end(), before);
  chosen.resize(std::min(k, chosen.size()));
  std::sort(chosen.begin(), chosen.end());
  std::fill(out.begin(), out.end(), -1);
  std::copy(chosen.begin(), chosen.end(), out.begin());
  return aether::Ok{};
}

// Well-formed calls on the integer grid with fp32 keys, the ones the kernel takes.
aether::props::DosaCall grid_dosa_call() {
  return *rc::gen::suchThat(aether::props::gen_dosa_call(), [](const auto& c) {
    return c.grid && c.format == aether::KeyFormat::F32;
  });
}

// The formats generator's rows (ties, saturation, scale boundaries, faults) in the
// one format the quantizer takes.
aether::props::FormatsCase index_fp4_row() {
  return *rc::gen::suchThat(aether::props::gen_faulty_formats_row(), [](const auto& c) {
    return c.format == aether::CacheFormat::IndexFp4;
  });
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

AETHER_PROP(TheirFp4Quantizer, agrees_with_the_model, "L0", ()) {
  aether::props::check_quantizer_agreement(their_fp4_quantizer<false>, index_fp4_row(),
                                           aether::RoundingProfile::Cuda, "their fp4 quantizer");
}

AETHER_PROP(TheirTowardZeroFp4Quantizer, agrees_with_the_model, "L0", ()) {
  aether::props::check_quantizer_agreement(their_fp4_quantizer<true>, index_fp4_row(),
                                           aether::RoundingProfile::Cuda,
                                           "their toward-zero fp4 quantizer");
}

AETHER_PROP(TheirTowardZeroFp4Quantizer, follows_ties_toward_zero, "L0", ()) {
  aether::props::check_quantizer_agreement(their_fp4_quantizer<true>, index_fp4_row(),
                                           aether::RoundingProfile::TiesTowardZero,
                                           "their toward-zero fp4 quantizer");
}

AETHER_PROP(TheirPrunedTopk, agrees_with_the_model, "L0", ()) {
  aether::props::check_pruned_topk_agreement(their_pruned_topk<false>, grid_dosa_call(),
                                             "their pruned topk");
}

AETHER_PROP(TheirTauDroppingPrunedTopk, agrees_with_the_model, "L0", ()) {
  aether::props::check_pruned_topk_agreement(their_pruned_topk<true>, grid_dosa_call(),
                                             "their tau-dropping pruned topk");
}
