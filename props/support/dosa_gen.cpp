#include "props/support/dosa_gen.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "impl/cpu/indexer.hpp"
#include "model/dosa.hpp"
#include "props/support/compare.hpp"

namespace aether::props {

namespace gen = rc::gen;

void showValue(const DosaCall& c, std::ostream& os) {
  os << "DosaCall{H=" << c.heads() << ", D=" << c.dim << ", L=" << c.key_count() << ", K=" << c.k
     << ", weights=" << show_span(std::span<const float>(c.weights))
     << ", queries=" << show_span(std::span<const float>(c.queries), 64)
     << ", keys=" << show_span(std::span<const float>(c.keys), 96)
     << ", seeds=" << show_span(std::span<const std::int32_t>(c.seeds))
     << ", retained=" << show_span(std::span<const std::uint32_t>(c.plan.retained))
     << ", anchors={";
  for (const DosaAnchor& a : c.plan.anchors) {
    os << "(" << a.head << "<-" << std::int64_t(a.anchor == kNoAnchor ? -1 : a.anchor) << ", "
       << a.beta;
    for (const DosaTerm& m : a.more) os << " + " << m.beta << " q" << m.anchor;
    os << ")";
  }
  os << "}, aggregated=" << show_span(std::span<const std::uint32_t>(c.plan.aggregated)) << "}";
}

rc::Gen<DosaPlan> gen_valid_plan(const std::vector<float>& weights) {
  return gen::exec([weights] {
    DosaPlan plan;
    for (std::uint32_t h = 0; h < weights.size(); ++h)
      if (*gen::inRange(0, 3) == 0) plan.retained.push_back(h);
    for (std::uint32_t h = 0; h < weights.size(); ++h) {
      if (std::find(plan.retained.begin(), plan.retained.end(), h) != plan.retained.end()) continue;
      if (weights[h] > 0) {
        DosaAnchor a{h, kNoAnchor, 0};
        if (!plan.retained.empty() && *gen::inRange(0, 4) != 0) {
          const auto beta = [] {
            return *gen::weightedOneOf<float>(
                {{3, gen::element(0.0f, 0.5f, 1.0f, 2.0f)},
                 {1, gen::map(gen::inRange(0, 1 << 20), [](int x) { return float(x) / 4096; })}});
          };
          a.anchor = *gen::elementOf(plan.retained);
          a.beta = beta();
          for (int more = *gen::inRange(0, 4) - 1; more > 0; --more)  // the joint bound
            a.more.push_back({*gen::elementOf(plan.retained), beta()});
        }
        plan.anchors.push_back(a);
      } else if (weights[h] < 0 && *gen::inRange(0, 2) == 0) {
        plan.aggregated.push_back(h);
      }
    }
    return plan;
  });
}

namespace {
// The E4M3 value of byte b: (-1)^s 2^(e-7) (1 + m/8), subnormal 2^-6 m/8; NaN codes 0x7f, 0xff.
float e4m3_value(int b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float magnitude =
      e == 0 ? std::ldexp(float(m) / 8, -6) : std::ldexp(1 + float(m) / 8, e - 7);
  return b & 0x80 ? -magnitude : magnitude;
}

// Stores c.keys in c.format, first making them representable: BF16 keeps each
// float's high half; E4M3 takes the nearest code and a power-of-two row scale.
void store_keys(DosaCall& c, std::mt19937& rng) {
  const auto append = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    c.key_bytes.insert(c.key_bytes.end(), b, b + n);
  };
  for (std::size_t j = 0; j < c.key_count(); ++j) {
    float* row = c.keys.data() + j * c.dim;
    const float scale = std::ldexp(1.0f, int(rng() % 9) - 4);
    for (std::size_t d = 0; d < c.dim; ++d) {
      if (c.format == KeyFormat::F32) {
        append(&row[d], 4);
      } else if (c.format == KeyFormat::BF16) {
        const std::uint16_t half = std::uint16_t(std::bit_cast<std::uint32_t>(row[d]) >> 16);
        row[d] = std::bit_cast<float>(std::uint32_t(half) << 16);
        append(&half, 2);
      } else {
        int best = 0;
        for (int b = 0; b < 256; ++b)
          if ((b & 0x7f) != 0x7f && std::abs(e4m3_value(b) * scale - row[d]) <
                                        std::abs(e4m3_value(best) * scale - row[d]))
            best = b;
        row[d] = e4m3_value(best) * scale;
        const auto byte = std::uint8_t(best);
        append(&byte, 1);
      }
    }
    if (c.format == KeyFormat::E4M3) append(&scale, 4);
  }
}

// n values of one of the shapes the header names, from a seeded stream
std::vector<float> values(std::size_t n, int shape, std::mt19937& rng) {
  std::vector<float> v(n);
  std::uniform_int_distribution<int> small(-4, 4);
  std::normal_distribution<float> normal;
  for (float& x : v) {
    switch (shape) {
      case 0:  // the integer grid: every product and sum exact
        x = float(small(rng));
        break;
      case 1:  // general floats
        x = normal(rng);
        break;
      default:  // a few distinct values: ties everywhere
        x = float(small(rng) % 2);
    }
  }
  return v;
}
}  // namespace

rc::Gen<DosaCall> gen_dosa_call() {
  return gen::exec([] {
    DosaCall c;
    const std::size_t heads = *gen::inRange<std::size_t>(1, 7);
    c.dim = *gen::inRange<std::size_t>(1, 6);
    const std::size_t keys = *gen::weightedOneOf<std::size_t>(
        {{6, gen::inRange<std::size_t>(0, 40)}, {1, gen::inRange<std::size_t>(40, 200)}});
    std::mt19937 rng{*gen::arbitrary<std::uint32_t>()};
    const int shape = *gen::inRange(0, 3);
    c.grid = shape != 1;
    c.queries = values(heads * c.dim, shape, rng);
    c.keys = values(keys * c.dim, shape, rng);
    c.weights = values(heads, shape == 1 ? 1 : 0, rng);
    const int twist = *gen::inRange(0, 8);
    if (twist == 1)  // every weight negative
      for (float& w : c.weights) w = -std::abs(w) - 1;
    if (twist == 2)  // every weight positive
      for (float& w : c.weights) w = std::abs(w) + 1;
    if (twist == 3)  // zero-norm keys and heads
      for (std::size_t j = 0; j < keys; j += 3)
        std::fill_n(c.keys.begin() + std::ptrdiff_t(j * c.dim), c.dim, 0.0f);
    if (twist == 4 && heads > 1) std::fill_n(c.queries.begin(), c.dim, 0.0f);
    if (twist == 5)  // a ReLU plateau: most keys opposite every head
      for (std::size_t i = 0; i < c.keys.size(); ++i)
        if (i % 5) c.keys[i] = -std::abs(c.keys[i]) * (c.queries[i % c.dim] >= 0 ? 1 : -1);
    if (twist == 6)  // keys far outside the sample's scale, whole rows: a row scaled in part
                     // mixes 2^20 with units in one dot product, past float's 24 bits
      for (std::size_t i = keys / 2 * c.dim; i < c.keys.size(); ++i) c.keys[i] *= 0x1p20f;
    if (twist == 7)  // a tiny score range
      for (float& x : c.keys) x *= 0x1p-30f;
    c.format = *gen::element(KeyFormat::F32, KeyFormat::F32, KeyFormat::BF16, KeyFormat::E4M3);
    store_keys(c, rng);
    c.k = *gen::weightedOneOf<std::size_t>(
        {{6, gen::inRange<std::size_t>(1, std::max<std::size_t>(2, keys / 2 + 1))},
         {1, gen::inRange<std::size_t>(1, keys + 3)}});
    if (keys > c.k) {
      std::vector<std::int32_t> all(keys);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(*gen::inRange<std::size_t>(c.k, keys + 1));
      c.seeds = all;
    }
    if (*gen::inRange(0, 2) == 0) {
      c.plan = *gen_valid_plan(c.weights);
    } else {
      std::vector<model::Rational> sample;
      for (std::int32_t s : model::plan_sample(c.seeds))
        for (std::size_t d = 0; d < c.dim; ++d)
          sample.push_back(model::exact(c.keys[std::size_t(s) * c.dim + d]));
      c.plan = model::plan_heads(c.queries, c.weights, c.dim,
                                 *gen::inRange<std::size_t>(0, heads + 1), sample);
    }
    return c;
  });
}

rc::Gen<DosaCall> gen_faulty_dosa_call() {
  return gen::exec([] {
    DosaCall c = *gen_dosa_call();
    const int faults = *gen::inRange(1, 32);
    const float nan = std::numeric_limits<float>::quiet_NaN(),
                inf = std::numeric_limits<float>::infinity();
    if (faults & 1 && !c.queries.empty())
      c.queries[*gen::inRange<std::size_t>(0, c.queries.size())] = *gen::element(nan, -inf);
    if (faults & 2)
      c.weights[*gen::inRange<std::size_t>(0, c.weights.size())] = *gen::element(nan, inf);
    if (faults & 4 && !c.key_bytes.empty()) {
      const std::size_t row_bytes = key_row_bytes(c.format, c.dim);
      const std::size_t j = *gen::inRange<std::size_t>(0, c.key_count());
      std::byte* row = c.key_bytes.data() + j * row_bytes;
      if (c.format == KeyFormat::F32) {
        std::memcpy(row + 4 * *gen::inRange<std::size_t>(0, c.dim), &nan, 4);
      } else if (c.format == KeyFormat::BF16) {
        const std::uint16_t half = 0x7fc0;
        std::memcpy(row + 2 * *gen::inRange<std::size_t>(0, c.dim), &half, 2);
      } else if (*gen::arbitrary<bool>()) {
        row[*gen::inRange<std::size_t>(0, c.dim)] = std::byte{0x7f};
      } else {
        const float bad = *gen::element(nan, -1.0f);
        std::memcpy(row + c.dim, &bad, 4);
      }
    }
    if (faults & 8 && !c.seeds.empty())
      c.seeds[*gen::inRange<std::size_t>(0, c.seeds.size())] =
          *gen::element<std::int32_t>(-1, std::int32_t(c.key_count()), c.seeds[0]);
    if (faults & 16) {
      if (!c.plan.anchors.empty() && *gen::arbitrary<bool>())
        c.plan.anchors.erase(c.plan.anchors.begin());
      else if (!c.plan.anchors.empty())
        c.plan.anchors[0].beta = -1.0f;
      else if (!c.seeds.empty())
        c.seeds.resize(c.k - 1 < c.seeds.size() ? c.k - 1 : c.seeds.size());
    }
    return c;
  });
}

void showValue(const DecodeCase& c, std::ostream& os) {
  os << "decode K " << c.k << ", scores";
  for (float x : c.scores) os << ' ' << x;
  os << "; recent";
  for (std::int32_t j : c.recent) os << ' ' << j;
}

rc::Gen<DecodeCase> gen_decode_case() {
  return gen::exec([] {
    const DosaCall call = *gen_dosa_call();
    DecodeCase c{std::vector<float>(call.key_count()), call.seeds, call.k};
    RC_ASSERT(cpu::index_scores(call.queries, call.weights, call.stored(), c.scores).ok());
    if (*gen::inRange(0, 8) == 0) std::fill(c.scores.begin(), c.scores.end(), 0.0f);
    if (*gen::inRange(0, 4) == 0 && !c.scores.empty()) switch (*gen::inRange(0, 3)) {
        case 0:
          c.scores[*gen::inRange<std::size_t>(0, c.scores.size())] = std::nanf("");
          break;
        case 1:
          c.recent.push_back(c.recent.empty() ? std::int32_t(c.scores.size()) : c.recent[0]);
          break;
        default:
          c.recent.resize(c.recent.size() / 2);
      }
    return c;
  });
}

void assert_decode_agrees(const DecodeCase& c, const DecodeFn& decode) {
  const auto want = model::decode_topk(c.scores, c.recent, c.k);
  std::vector<std::int32_t> out(c.k, 77);
  const auto got = decode(c.scores, c.recent, c.k, out);
  RC_ASSERT(got.ok() == want.ok());
  if (!want.ok()) {
    RC_ASSERT(got.error() == want.error());
    RC_ASSERT(out == std::vector<std::int32_t>(c.k, 77));
  } else {
    RC_ASSERT(out == want.value());
  }
}

}  // namespace aether::props
