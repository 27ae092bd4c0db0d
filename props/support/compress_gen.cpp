#include "props/support/compress_gen.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <ostream>
#include <sstream>

namespace aether::props {

namespace gen = rc::gen;

namespace {
float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

// A latent whose bf16 rounding is a hard case: a tie (2m + 1) 2^(e - 8) between the
// bf16 numbers 2m 2^(e-8) and (2m + 2) 2^(e-8), or an fp32 step either side of one;
// with `huge`, also the largest finite bf16 (0x7f7f) and the fp32 values around its
// rounding boundary 0x7f7f8000 (a tie: it rounds to infinity, the even neighbour).
rc::Gen<float> gen_rounding_case(bool huge) {
  return gen::exec([huge] {
    const bool negative = *gen::arbitrary<bool>();
    std::uint32_t bits;
    if (huge && *gen::inRange(0, 4) == 0) {
      bits = *gen::element<std::uint32_t>(0x7f7f0000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7f0001u);
    } else {
      const int e = *gen::inRange(-30, 60);  // scale; sums of four stay far from overflow
      const std::uint32_t m = std::uint32_t(*gen::inRange(0, 128));  // bf16 mantissa bits
      const std::uint32_t tie = std::uint32_t(127 + e) << 23 | m << 16 | 0x8000u;
      bits = tie + std::uint32_t(*gen::element<int>(0, 0, 0, -1, 1));
    }
    return from_bits(bits | (negative ? 0x80000000u : 0u));
  });
}
}  // namespace

rc::Gen<Sequence> gen_grid_sequence(std::size_t n, std::size_t dim, std::int64_t ratio) {
  return gen::exec([n, dim, ratio] {
    Sequence s{dim, {}};
    const auto scores = *gen::container<std::vector<float>>(
        dim, gen::map(gen::inRange(-40, 41), [](int x) { return float(x) / 4; }));
    const bool hard = *gen::inRange(0, 3) == 0;
    const auto shared = *gen::container<std::vector<float>>(dim, gen_rounding_case(ratio == 1));
    for (std::size_t p = 0; p < n; ++p) {
      s.projected.insert(s.projected.end(), scores.begin(), scores.end());
      for (std::size_t d = 0; d < dim; ++d)
        s.projected.push_back(hard ? shared[d] : float(*gen::inRange(-15, 16)));
    }
    return s;
  });
}

std::uint16_t bf16_round(const model::Rational& x) {
  const auto value = [](std::uint32_t b) { return model::exact(from_bits(b << 16)); };
  const model::Rational a = abs(x);
  std::uint32_t lo = 0, hi = 0x7f7f;  // the largest b with value(b) <= a, in [lo, hi]
  if (a >= value(hi)) {
    lo = hi;
  } else {
    while (hi - lo > 1) {
      const std::uint32_t mid = (lo + hi) / 2;
      (value(mid) <= a ? lo : hi) = mid;
    }
  }
  const model::Rational below = value(lo), above = lo == 0x7f7f
                                                       ? model::Rational(model::Integer(1) << 128)
                                                       : value(lo + 1);
  const model::Rational midpoint = (below + above) / 2;
  const std::uint32_t up = lo + 1;  // 0x7f80: infinity
  const std::uint32_t b = a < midpoint ? lo : a > midpoint ? up : (lo & 1 ? up : lo);
  return std::uint16_t(b | (x < 0 ? 0x8000u : 0u));
}

bool bf16_between(std::uint16_t y, const model::Interval& z) {
  const auto as_float = [](std::uint16_t b) { return from_bits(std::uint32_t(b) << 16); };
  const float got = as_float(y), least = as_float(bf16_round(z.lo)),
              most = as_float(bf16_round(z.hi));
  return least <= got && got <= most;  // false for NaN
}

rc::Gen<Sequence> gen_float_sequence(std::size_t n, std::size_t dim) {
  return gen::exec([n, dim] {
    Sequence s{dim, {}};
    const auto score = gen::map(gen::inRange(-30000, 30001), [](int x) { return float(x) / 1000; });
    const auto latent =
        gen::map(gen::tuple(gen::inRange(-20, 21), gen::arbitrary<std::uint32_t>()),
                 [](std::tuple<int, std::uint32_t> t) {
                   const auto [e, bits] = t;
                   return std::ldexp(std::bit_cast<float>((bits & 0x807fffffu) | 0x3f800000u), e);
                 });
    const bool tied = *gen::inRange(0, 8) == 0;  // now and then a group with equal scores
    for (std::size_t p = 0; p < n; ++p) {
      for (std::size_t d = 0; d < dim; ++d) s.projected.push_back(tied ? 1.5f : *score);
      for (std::size_t d = 0; d < dim; ++d) s.projected.push_back(*latent);
    }
    return s;
  });
}

rc::Gen<std::vector<std::size_t>> gen_partition(std::size_t n) {
  return gen::exec([n] {
    std::vector<std::size_t> chunks;
    std::size_t left = n, empty = 0;
    while (left > 0) {
      if (empty < 3 && *gen::inRange(0, 8) == 0) {  // an empty chunk: a placeholder row
        chunks.push_back(0);
        ++empty;
        continue;
      }
      const std::size_t len = *gen::inRange<std::size_t>(1, left + 1);
      chunks.push_back(len);
      left -= len;
    }
    return chunks;
  });
}

rc::Gen<VerifySchedule> gen_verify_schedule(std::size_t n, std::int64_t qmax) {
  return gen::exec([n, qmax] {
    VerifySchedule s{*gen::inRange<std::size_t>(0, n + 1), {}};
    std::size_t at = s.prefix;
    while (at < n && s.steps.size() < 12) {
      const std::size_t q = *gen::inRange<std::size_t>(1, std::size_t(qmax) + 1);
      const std::size_t accepted = std::min(n - at, *gen::inRange<std::size_t>(0, q + 1));
      s.steps.push_back({q, accepted});
      at += accepted;
    }
    return s;
  });
}

namespace {
// One single-request call on state slot 0; completed rows into run.rows.
Status<CompressError> step(const CompressBackend& backend, const CompressShape& shape, bool decode,
                           std::int64_t start, std::span<const float> positions, ImplRun& run,
                           std::size_t keep_rows = SIZE_MAX) {
  const CompressRequest q{0, start, std::int32_t(positions.size() / (2 * shape.dim))};
  const std::int64_t r = shape.ratio;
  const std::size_t out =
      decode ? std::size_t(q.tokens)
             : std::size_t(std::max<std::int64_t>(1, (start + q.tokens) / r - start / r));
  std::vector<std::uint16_t> rows(out * shape.dim, 0x5a5a);
  std::vector<std::int32_t> index(out, 0x5a5a5a5a), position(out, 0x5a5a5a5a);
  const auto call = decode ? backend.decode : backend.prefill;
  const auto status = call(std::span(&q, 1), positions, run.ring, shape, rows, index, position);
  if (!status) return status;
  run.reserved += out;
  for (std::size_t i = 0; i < out && i < keep_rows; ++i)
    if (index[i] >= 0)
      run.rows[index[i]] =
          std::vector<std::uint16_t>(rows.begin() + std::ptrdiff_t(i * shape.dim),
                                     rows.begin() + std::ptrdiff_t((i + 1) * shape.dim));
  return Ok{};
}
}  // namespace

Result<ImplRun, CompressError> run_chunks(const CompressBackend& backend,
                                          const CompressShape& shape, const Sequence& seq,
                                          std::span<const std::size_t> chunks) {
  ImplRun run;
  run.ring.assign(shape.state_slots * shape.ring * 2 * shape.dim, 0.0f);
  std::size_t start = 0;
  for (std::size_t len : chunks) {
    if (auto st = step(backend, shape, false, std::int64_t(start), seq.positions(start, len), run);
        !st)
      return st.error();
    start += len;
  }
  return run;
}

Result<ImplRun, CompressError> run_verify(const CompressBackend& backend,
                                          const CompressShape& shape, const Sequence& seq,
                                          std::size_t prefix, std::span<const VerifyStep> steps) {
  ImplRun run;
  run.ring.assign(shape.state_slots * shape.ring * 2 * shape.dim, 0.0f);
  if (auto st = step(backend, shape, false, 0, seq.positions(0, prefix), run); !st)
    return st.error();
  std::size_t start = prefix;
  for (const VerifyStep& v : steps) {
    if (auto st = step(backend, shape, true, std::int64_t(start), v.draft, run, v.accepted); !st)
      return st.error();
    start += v.accepted;
  }
  return run;
}

std::vector<model::Position> model_positions(const Sequence& seq) {
  std::vector<model::Position> out;
  for (std::size_t p = 0; p < seq.size(); ++p) {
    model::Position pos;
    for (std::size_t d = 0; d < seq.dim; ++d) {
      pos.gate.push_back(model::exact(seq.projected[p * 2 * seq.dim + d]));
      pos.value.push_back(model::exact(seq.projected[p * 2 * seq.dim + seq.dim + d]));
    }
    out.push_back(pos);
  }
  return out;
}

std::vector<float> ring_positions(const ImplRun& run, const CompressShape& shape,
                                  std::int64_t first, std::int64_t last) {
  std::vector<float> out;
  const std::size_t width = 2 * shape.dim;
  for (std::int64_t p = first; p < last; ++p) {
    const std::size_t at = ring_entry_offset(0, p, shape.ring, width);
    out.insert(out.end(), run.ring.begin() + std::ptrdiff_t(at),
               run.ring.begin() + std::ptrdiff_t(at + width));
  }
  return out;
}

std::string ring_report(std::span<const float> expected, std::span<const float> actual,
                        const CompressShape& shape, const std::set<std::size_t>& skip) {
  std::ostringstream os;
  if (expected.size() != actual.size()) {
    os << "ring: " << actual.size() << " floats, expected " << expected.size();
    return os.str();
  }
  // a refused shape (D or S zero) has no entries: its floats are named by index
  const bool entries = shape.dim > 0 && shape.ring > 0;
  const std::size_t D = entries ? shape.dim : 1, width = 2 * D, S = entries ? shape.ring : 1;
  std::vector<std::size_t> differ;
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (!skip.contains(i / width) &&
        std::bit_cast<std::uint32_t>(expected[i]) != std::bit_cast<std::uint32_t>(actual[i]))
      differ.push_back(i);
  if (differ.empty()) return {};
  os << "ring: " << differ.size() << " floats differ\n";
  for (std::size_t k = 0; k < differ.size(); ++k) {
    if (k == 4 && differ.size() > 8) {
      os << "  ...\n";
      k = differ.size() - 4;
    }
    const std::size_t i = differ[k], entry = i / width, c = i % width;
    if (entries)
      os << "  slot " << entry / S << " entry " << entry % S << " " << (c < D ? "score" : "latent")
         << " channel " << c % D;
    else
      os << "  float " << i;
    os << ": expected " << expected[i] << ", actual " << actual[i] << "\n";
  }
  return os.str();
}

}  // namespace aether::props
