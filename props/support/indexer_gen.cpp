#include "props/support/indexer_gen.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "impl/cuda/indexer_read_once.hpp"
#include "props/support/compare.hpp"

namespace aether::props {

namespace gen = rc::gen;
using I = std::int32_t;

void showValue(const TopkCall& c, std::ostream& os) {
  os << "TopkCall{width=" << c.width << ", k=" << c.k
     << ", ends=" << show_span(std::span<const I>(c.ends));
  if (c.out_delta != 0) os << ", out_delta=" << c.out_delta;
  os << ", scores=" << show_span(std::span<const float>(c.scores), 96) << "}";
}

void showValue(const CandidateCall& c, std::ostream& os) {
  os << "CandidateCall{end=" << c.end << ", block_size=" << c.block_size << ", k=" << c.k
     << (c.out_delta ? ", out_delta=" + std::to_string(c.out_delta) : std::string())
     << ", retained=" << show_span(std::span<const I>(c.retained_blocks))
     << ", row=" << show_span(std::span<const float>(c.row), 96) << "}";
}

rc::Gen<std::size_t> gen_valid_length() {
  return gen::weightedOneOf<std::size_t>({
      {60, gen::inRange<std::size_t>(0, 40)},
      {20, gen::inRange<std::size_t>(40, 600)},
      {10, gen::element<std::size_t>(0, 1, 2, 7, 8, 9, 31, 32, 33, 511, 512, 513, 1023, 1024)},
      {1, gen::element<std::size_t>(16000, 131072)},
  });
}

namespace {
// Long rows are filled from a seeded stream: per-element generators (and their
// shrink trees) would cost more than the check. Same patterns as short rows.
std::vector<float> seeded_scores(std::size_t n, int pattern, std::uint32_t seed) {
  std::mt19937 rng{seed};
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (pattern) {
      case 0:
        v[i] = float(int(rng() % 7) - 3);
        break;  // ties
      case 1:
        v[i] = 1.5f;
        break;  // all equal
      case 2:
        v[i] = rng() % 8 ? (rng() % 5 ? 0.0f : -0.0f) : float(rng() % 100) / 8;
        break;
      case 3:
        v[i] = float(i);
        break;  // ascending
      case 4:
        v[i] = float(n - i);
        break;  // descending
      case 5:   // offset far from zero: every score shares its exponent and top bits
        v[i] = 100.0f + float(int(rng() % 2001) - 1000) / 4096;
        break;
      case 6:  // around a large negative offset
        v[i] = -10000.0f + float(int(rng() % 2001) - 1000) / 64;
        break;
      case 7:  // a ReLU plateau of exact zeros with few positives (fewer than K of 2048)
        v[i] = rng() % 512 ? 0.0f : float(1 + rng() % 1000) / 8;
        break;
      case 8:  // half the row one value, where a K-th largest tends to fall
        v[i] = rng() % 2 ? 0.75f : float(int(rng() % 4096)) / 2048 - 0.5f;
        break;
      default: {
        const float f = std::bit_cast<float>(std::uint32_t(rng()));
        v[i] = std::isfinite(f) ? f : 1.0f;
      }
    }
  }
  return v;
}
}  // namespace

rc::Gen<std::vector<float>> gen_scores(std::size_t n) {
  if (n > 600)
    return gen::apply(
        [n](int pattern, std::uint32_t seed) { return seeded_scores(n, pattern, seed); },
        gen::inRange(0, 10), gen::arbitrary<std::uint32_t>());
  const auto vec = [n](rc::Gen<float> g) { return gen::container<std::vector<float>>(n, g); };
  const auto small_int = gen::map(gen::inRange(-3, 4), [](int x) { return float(x); });
  return gen::weightedOneOf<std::vector<float>>({
      // few distinct values: many ties at the cutoff
      {4, vec(small_int)},
      // all equal
      {1, gen::map(small_int, [n](float v) { return std::vector<float>(n, v); })},
      // a plateau of exact zeros (ReLU) with a few positive and signed-zero entries
      {2, vec(gen::weightedOneOf<float>(
              {{6, gen::just(0.0f)},
               {1, gen::just(-0.0f)},
               {2, gen::map(gen::inRange(1, 100), [](int x) { return float(x) / 8; })}}))},
      // offset far from zero, and around a large negative offset
      {1, vec(gen::map(gen::inRange(-1000, 1001), [](int x) { return 100.0f + float(x) / 4096; }))},
      {1, vec(gen::map(gen::inRange(-1000, 1001), [](int x) { return -1e4f + float(x) / 64; }))},
      // ascending and descending
      {1, gen::just([n] {
         std::vector<float> v(n);
         std::iota(v.begin(), v.end(), 0.0f);
         return v;
       }())},
      {1, gen::just([n] {
         std::vector<float> v(n);
         for (std::size_t i = 0; i < n; ++i) v[i] = float(n - i);
         return v;
       }())},
      // general finite floats: negatives, subnormals, huge
      {3, vec(gen::weightedOneOf<float>(
              {{6, gen::map(gen::arbitrary<std::int32_t>(),
                            [](std::int32_t b) {
                              const float f = std::bit_cast<float>(b);
                              return std::isfinite(f) ? f : 1.0f;
                            })},
               {1, gen::element(1e30f, -1e30f, std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::denorm_min())}}))},
  });
}

rc::Gen<float> gen_garbage() {
  return gen::element(std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), 1e30f, 3e38f, -0.0f, 42.0f);
}

rc::Gen<TopkCall> gen_well_formed_topk_call() {
  return gen::exec([] {
    TopkCall c;
    const auto rows = *gen::weightedOneOf<std::size_t>(
        {{8, gen::inRange<std::size_t>(1, 4)}, {1, gen::just<std::size_t>(0)}});
    std::vector<std::size_t> lens;
    for (std::size_t r = 0; r < rows; ++r) lens.push_back(*gen_valid_length());
    const std::size_t longest = lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
    c.width = longest + *gen::weightedOneOf<std::size_t>(
                            {{3, gen::just<std::size_t>(0)}, {2, gen::inRange<std::size_t>(1, 9)}});
    for (std::size_t r = 0; r < rows; ++r) {
      auto valid = *gen_scores(lens[r]);
      valid.resize(c.width, 0.0f);
      for (std::size_t j = lens[r]; j < c.width; ++j) valid[j] = *gen_garbage();
      c.scores.insert(c.scores.end(), valid.begin(), valid.end());
      c.ends.push_back(I(lens[r]));
    }
    c.k = *gen::weightedOneOf<std::size_t>({
        {6, gen::inRange<std::size_t>(0, longest + 6)},
        {1, gen::element<std::size_t>(0, 1, 2048)},
    });
    return c;
  });
}

rc::Gen<TopkCall> gen_any_topk_call() {
  // Faults drawn independently, several at once as often as one: non-finite scores
  // in up to three valid places (the model names the first in row-major order), bad
  // ends in up to two rows, a score array of the wrong length, an output buffer of
  // the wrong length.
  const auto faulty = gen::exec([] {
    auto c = *gen_well_formed_topk_call();
    const int faults = *gen::inRange(1, 16);
    if (faults & 1) {
      const int places = *gen::inRange(1, 4);
      for (int i = 0; i < places && !c.ends.empty(); ++i) {
        const auto r = *gen::inRange<std::size_t>(0, c.ends.size());
        if (c.ends[r] <= 0) continue;
        c.scores[r * c.width + *gen::inRange<std::size_t>(0, std::size_t(c.ends[r]))] =
            *gen::element(std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity());
      }
    }
    if (faults & 2) {
      const int rows = *gen::inRange(1, 3);
      for (int i = 0; i < rows && !c.ends.empty(); ++i)
        c.ends[*gen::inRange<std::size_t>(0, c.ends.size())] =
            *gen::element<I>(-1, I(c.width + 1), std::numeric_limits<I>::min());
    }
    if (faults & 4) {
      if (!c.scores.empty() && *gen::arbitrary<bool>())
        c.scores.pop_back();
      else
        c.scores.push_back(1.0f);
    }
    if (faults & 8) c.out_delta = *gen::element<std::ptrdiff_t>(-2, -1, 1, 3);
    return c;
  });
  return gen::weightedOneOf<TopkCall>({{3, gen_well_formed_topk_call()}, {2, faulty}});
}

namespace {
namespace ro = cuda::topk;

// Whether score j of a row falls in a run the read-once sample reads.
bool sampled(std::size_t j) { return j % ro::kSampleStride < ro::kSampledRun; }

// n scores of a wide row: the long-row patterns, and rows built around K and
// against the read-once sample (each reaching one way of its finish).
std::vector<float> wide_scores(std::size_t n, std::size_t k, int pattern, std::uint32_t seed) {
  if (pattern < 10) return seeded_scores(n, pattern, seed);
  std::mt19937 rng{seed};
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  if (n == 0 || k == 0) return v;
  const std::size_t kth = std::min(k, n) - 1;
  switch (pattern) {
    case 10:  // continuous: the sample's list, ranked by levels
      break;
    case 11: {  // half of what lies below the K-th raised to it: a plateau where it falls
      std::vector<float> sorted = v;
      std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(kth), sorted.end(),
                       std::greater<float>());
      for (float& x : v)
        if (x < sorted[kth] && rng() % 2) x = sorted[kth];
      break;
    }
    case 12: {  // the top value K - 1, K or K + 1 times, then distinct lower ones
      for (float& x : v) x = std::min(x, 8.0f);
      const std::size_t copies = std::min(n, k + rng() % 3 - 1);
      for (std::size_t i = 0; i < copies; ++i) v[rng() % n] = 9.0f;
      break;
    }
    case 13: {  // a ReLU: exact zeros (either sign) and K - 1 or K / 2 positives at most
      const std::size_t positives = rng() % 2 ? k - 1 : k / 2;
      for (float& x : v) x = rng() % 4 ? 0.0f : -0.0f;
      for (std::size_t i = 0; i < positives; ++i) v[rng() % n] = 1.0f + float(rng() % 4096) / 64;
      break;
    }
    case 14: {  // K best keys sharing their top 13 bits: the K-th's bucket refined
      for (float& x : v) x = x / 8;
      for (std::size_t i = 0; i < 2 * k; ++i) v[rng() % n] = 1.0f + float(rng() % 65536) * 0x1p-20f;
      break;
    }
    default: {  // the sample misled: its runs hold a plateau, larger or smaller scores
      const int kind = int(rng() % 3);
      for (std::size_t j = 0; j < n; ++j)
        if (sampled(j)) v[j] = kind == 0 ? 5.0f : kind == 1 ? 10.0f + v[j] : v[j] - 10.0f;
    }
  }
  return v;
}
}  // namespace

rc::Gen<TopkCall> gen_wide_topk_call() {
  return gen::exec([] {
    TopkCall c;
    const auto rows = *gen::inRange<std::size_t>(1, 3);
    c.k =
        *gen::weightedOneOf<std::size_t>({{3, gen::just(ro::kWideMaxK)},
                                          {2, gen::inRange<std::size_t>(1, ro::kWideMaxK + 1)},
                                          {1, gen::element<std::size_t>(1, 2, ro::kWideMaxK - 1)}});
    c.width = ro::kWideMinWidth +
              *gen::weightedOneOf<std::size_t>({{3, gen::just<std::size_t>(0)},
                                                {2, gen::inRange<std::size_t>(1, ro::kWideChunk)},
                                                {1, gen::just<std::size_t>(ro::kWideChunk + 1)}});
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t end = *gen::weightedOneOf<std::size_t>(
          {{6, gen::just(c.width)},
           {2, gen::inRange<std::size_t>(0, c.width + 1)},
           {1, gen::element<std::size_t>(0, c.k, c.k + 1, 2 * c.k, 2 * c.k + 1)}});
      auto row = wide_scores(end, c.k, *gen::inRange(0, 16), *gen::arbitrary<std::uint32_t>());
      row.resize(c.width, 0.0f);
      for (std::size_t j = end; j < c.width; ++j) row[j] = *gen_garbage();
      c.scores.insert(c.scores.end(), row.begin(), row.end());
      c.ends.push_back(I(end));
    }
    // now and then a non-finite score inside a valid range: the path's refusal
    if (*gen::inRange(0, 8) == 0 && c.ends[0] > 0)
      c.scores[*gen::inRange<std::size_t>(0, std::size_t(c.ends[0]))] = *gen::element(
          std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity());
    return c;
  });
}

rc::Gen<CandidateCall> gen_candidate_call() {
  return gen::exec([] {
    CandidateCall c;
    c.block_size = *gen::weightedOneOf<std::size_t>(
        {{4, gen::element<std::size_t>(1, 2, 8, 16)}, {1, gen::inRange<std::size_t>(0, 20)}});
    c.end = *gen::weightedOneOf<std::size_t>(
        {{6, gen::inRange<std::size_t>(0, 200)}, {1, gen::element<std::size_t>(511, 1024, 4099)}});
    c.row = *gen_scores(c.end);
    const std::size_t extra = *gen::inRange<std::size_t>(0, 5);
    for (std::size_t j = 0; j < extra; ++j) c.row.push_back(*gen_garbage());
    const std::size_t blocks = c.block_size ? (c.end + c.block_size - 1) / c.block_size : 0;
    std::vector<I> all(blocks);
    std::iota(all.begin(), all.end(), 0);
    std::mt19937 rng{std::uint32_t(*gen::inRange<int>(0, 1 << 30))};
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(std::uniform_int_distribution<std::size_t>(0, all.size())(rng));
    c.retained_blocks = all;
    c.k = *gen::inRange<std::size_t>(0, 40);
    const int faults = *gen::inRange(0, 4) == 0 ? *gen::inRange(1, 16) : 0;
    if (faults & 1)  // a bad block: past the row, negative or repeated
      c.retained_blocks.push_back(
          *gen::element<I>(I(blocks), -1, c.retained_blocks.empty() ? 0 : c.retained_blocks[0]));
    if (faults & 2 && c.end > 0)  // NaN inside a candidate
      c.row[*gen::inRange<std::size_t>(0, c.end)] = std::numeric_limits<float>::quiet_NaN();
    if (faults & 4 && c.end > 0) c.row.resize(c.end - 1);  // the end past the row
    if (faults & 8) c.out_delta = *gen::element<std::ptrdiff_t>(-1, 1, 2);
    return c;
  });
}

}  // namespace aether::props
