#include "props/support/indexer_scores_gen.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <tuple>

#include "impl/compress_math.hpp"
#include "props/support/compare.hpp"

namespace aether::props {

namespace gen = rc::gen;

void showValue(const ScoreCall& c, std::ostream& os) {
  static const char* names[] = {"F32", "BF16", "E4M3"};
  os << "ScoreCall{format=" << names[int(c.format)] << ", H=" << c.weights.size() << ", D=" << c.dim
     << ", L=" << c.rows() << ", weights=" << show_span(std::span<const float>(c.weights))
     << ", queries=" << show_span(std::span<const float>(c.queries), 64)
     << ", key bytes=" << c.key_bytes.size() << "}";
}

namespace {
struct Shape {
  std::size_t heads, dim, rows;
};

rc::Gen<Shape> gen_score_shape() {
  return gen::weightedOneOf<Shape>({
      {20, gen::apply(
               [](std::size_t h, std::size_t d, std::size_t l) {
                 return Shape{h, d, l};
               },
               gen::inRange<std::size_t>(0, 6), gen::inRange<std::size_t>(0, 10),
               gen::inRange<std::size_t>(0, 24))},
      {4, gen::apply(
              [](std::size_t h, std::size_t d, std::size_t l) {
                return Shape{h, d, l};
              },
              gen::element<std::size_t>(4, 8, 9), gen::element<std::size_t>(15, 16, 17, 31, 32, 33),
              gen::inRange<std::size_t>(0, 40))},
      {1, gen::apply(
              [](std::size_t l) {
                return Shape{64, 128, l};
              },
              gen::inRange<std::size_t>(0, 3))},
  });
}

void append(std::vector<std::byte>& bytes, const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  bytes.insert(bytes.end(), b, b + n);
}

// Stores key values (already representable in `format`) and, for E4M3, the scale.
void store_row(ScoreCall& c, const std::vector<float>& values, std::uint8_t* e4m3, float scale) {
  for (std::size_t d = 0; d < values.size(); ++d) {
    if (c.format == KeyFormat::F32) append(c.key_bytes, &values[d], 4);
    if (c.format == KeyFormat::BF16) {
      const auto half = std::uint16_t(std::bit_cast<std::uint32_t>(values[d]) >> 16);
      append(c.key_bytes, &half, 2);
    }
    if (c.format == KeyFormat::E4M3) append(c.key_bytes, &e4m3[d], 1);
  }
  if (c.format == KeyFormat::E4M3) append(c.key_bytes, &scale, 4);
}

// E4M3 byte of a small integer |v| <= 15 (exact there).
std::uint8_t e4m3_of_int(int v) {
  const int a = std::abs(v);
  std::uint8_t byte = 0;
  if (a != 0) {
    int e = 0;
    while ((2 << e) <= a) ++e;                    // 2^e <= a < 2^(e+1)
    const int m = (a - (1 << e)) * 8 / (1 << e);  // exact for a <= 15
    byte = std::uint8_t(((e + 7) << 3) | m);
  }
  return v < 0 ? std::uint8_t(byte | 0x80) : byte;
}
}  // namespace

rc::Gen<ScoreCall> gen_grid_score_call() {
  return gen::exec([] {
    ScoreCall c;
    const Shape s = *gen_score_shape();
    c.dim = s.dim;
    c.format = *gen::element(KeyFormat::F32, KeyFormat::BF16, KeyFormat::E4M3);
    const auto small = [](int lo, int hi) {
      return gen::map(gen::inRange(lo, hi + 1), [](int x) { return float(x); });
    };
    c.queries = *gen::container<std::vector<float>>(s.heads * s.dim, small(-8, 8));
    c.weights = *gen::container<std::vector<float>>(s.heads, small(-4, 4));
    for (std::size_t j = 0; j < s.rows; ++j) {
      const auto ints = *gen::container<std::vector<int>>(s.dim, gen::inRange(-15, 16));
      std::vector<float> values(ints.begin(), ints.end());
      std::vector<std::uint8_t> bytes;
      for (int v : ints) bytes.push_back(e4m3_of_int(v));
      store_row(c, values, bytes.data(), std::ldexp(1.0f, *gen::inRange(-4, 5)));
    }
    return c;
  });
}

rc::Gen<ScoreCall> gen_float_score_call() {
  return gen::exec([] {
    ScoreCall c;
    const Shape s = *gen_score_shape();
    c.dim = s.dim;
    c.format = *gen::element(KeyFormat::F32, KeyFormat::BF16, KeyFormat::E4M3);
    const auto real = gen::map(gen::tuple(gen::inRange(-20, 21), gen::arbitrary<std::uint32_t>()),
                               [](std::tuple<int, std::uint32_t> t) {
                                 const auto [e, bits] = t;
                                 const float mantissa =
                                     std::bit_cast<float>((bits & 0x807fffffu) | 0x3f800000u);
                                 return std::ldexp(mantissa, e);  // ±[1, 2) 2^e
                               });
    c.queries = *gen::container<std::vector<float>>(s.heads * s.dim, real);
    c.weights = *gen::container<std::vector<float>>(s.heads, real);
    for (std::size_t j = 0; j < s.rows; ++j) {
      auto values = *gen::container<std::vector<float>>(s.dim, real);
      if (c.format == KeyFormat::BF16)  // keep what bf16 stores
        for (float& v : values)
          v = std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0xffff0000u);
      auto bytes = *gen::container<std::vector<std::uint8_t>>(
          s.dim, gen::suchThat(gen::arbitrary<std::uint8_t>(),
                               [](std::uint8_t b) { return (b & 0x7f) != 0x7f; }));
      store_row(c, values, bytes.data(),
                std::ldexp(1.0f + float(*gen::inRange(0, 8)) / 8, *gen::inRange(-10, 11)));
    }
    return c;
  });
}

std::vector<float> DeviceScoreCall::query(std::size_t t) const {
  const std::size_t n = query_values.size() / count;
  return {query_values.begin() + t * n, query_values.begin() + (t + 1) * n};
}
std::vector<float> DeviceScoreCall::weight(std::size_t t) const {
  const std::size_t n = weights.size() / count;
  return {weights.begin() + t * n, weights.begin() + (t + 1) * n};
}

DeviceScoreCall device_call(const ScoreCall& c, std::size_t count) {
  DeviceScoreCall d{count, {}, {}, {}, c};
  const std::size_t heads = c.weights.size(), dim = c.dim;
  for (std::size_t t = 0; t < count; ++t)
    for (std::size_t h = 0; h < heads; ++h) {
      const std::size_t from = (h + t) % heads;
      d.weights.push_back(c.weights[from]);
      for (std::size_t k = 0; k < dim; ++k) {
        const std::uint16_t b =
            impl::bf16_nearest((t % 2 ? -1.0f : 1.0f) * c.queries[from * dim + k]);
        d.queries.push_back(b);
        d.query_values.push_back(std::bit_cast<float>(std::uint32_t(b) << 16));
      }
    }
  return d;
}

ScoreCall with_device_keys(ScoreCall c) {
  if (c.format != KeyFormat::F32) return c;
  std::vector<std::byte> halves;
  for (std::size_t i = 0; i + 4 <= c.key_bytes.size(); i += 4)
    halves.insert(halves.end(), c.key_bytes.begin() + std::ptrdiff_t(i) + 2,
                  c.key_bytes.begin() + std::ptrdiff_t(i) + 4);
  c.format = KeyFormat::BF16;
  c.key_bytes = halves;
  return c;
}

rc::Gen<DeviceScoreCall> gen_device_score_call(rc::Gen<ScoreCall> calls) {
  return gen::apply(
      [](const ScoreCall& c, std::size_t count) { return device_call(with_device_keys(c), count); },
      std::move(calls), gen::inRange<std::size_t>(1, 4));
}

}  // namespace aether::props
