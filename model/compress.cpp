#include "model/compress.hpp"

#include <algorithm>

namespace aether::model {

namespace {
constexpr int kBits = 120;  // significant bits kept by the outward roundings

Integer pow2(int n) { return Integer(1) << n; }

// q rounded to kBits significant bits, down (up = false) or up; q != 0.
Rational round_outward(const Rational& q, bool up) {
  const Integer num = abs(numerator(q)), den = denominator(q);
  const int exponent = int(msb(num)) - int(msb(den));  // 2^(e-1) < |q| < 2^(e+1)
  const int shift = kBits - exponent;
  Integer scaled_num = shift >= 0 ? Integer(num << shift) : num;
  Integer scaled_den = shift >= 0 ? den : Integer(den << -shift);
  Integer n = scaled_num / scaled_den;  // floor of |q| 2^shift
  const bool inexact = n * scaled_den != scaled_num;
  const bool negative = q < 0;
  if (inexact && (up != negative)) n += 1;  // away from zero when rounding |q| outward
  const Rational magnitude = shift >= 0 ? Rational(n, pow2(shift)) : Rational(Integer(n << -shift));
  return negative ? Rational(-magnitude) : magnitude;
}

Rational round_down(const Rational& q) { return q == 0 ? q : round_outward(q, false); }
Rational round_up(const Rational& q) { return q == 0 ? q : round_outward(q, true); }

// min and max of Σ w_t v_t / Σ w_t over w_t in [lo_t, hi_t] (a box vertex attains
// each: the mean is monotone in every weight); Σ w_t > 0 at every vertex.
Interval weighted_mean_range(const std::vector<Interval>& w, const std::vector<Rational>& v) {
  std::optional<Interval> range;
  for (std::size_t mask = 0; mask < (std::size_t(1) << w.size()); ++mask) {
    Rational num = 0, den = 0;
    for (std::size_t t = 0; t < w.size(); ++t) {
      const Rational& wt = mask >> t & 1 ? w[t].hi : w[t].lo;
      num += wt * v[t];
      den += wt;
    }
    const Rational z = num / den;
    if (!range) range = Interval{z, z};
    range->lo = std::min(range->lo, z);
    range->hi = std::max(range->hi, z);
  }
  return *range;
}

// A group: its positions, in position order (pointers: groups read ring entries
// and chunk positions in place).
using Group = boost::container::small_vector<const Position*, 8>;

// The group's channel d: scores/weights and latents.
std::pair<std::vector<Rational>, std::vector<Rational>> channel(const Group& group, std::size_t d) {
  std::vector<Rational> g, v;
  for (const Position* p : group) {
    g.push_back(p->gate[d]);
    v.push_back(p->value[d]);
  }
  return {g, v};
}

Rational max_of(const std::vector<Rational>& g) { return *std::max_element(g.begin(), g.end()); }

std::size_t dim_of(const Group& group) { return group.empty() ? 0 : group.front()->value.size(); }

Group group_of(std::span<const Position> positions) {
  Group g;
  for (const Position& p : positions) g.push_back(&p);
  return g;
}

std::vector<Interval> compress_fp32(const Group& group);

// z_d = Σ_t g_t v_t / Σ_t g_t
std::vector<Interval> compress(const Group& group, Gate gate) {
  if (gate == Gate::ScoreFp32) return compress_fp32(group);
  std::vector<Interval> z;
  z.reserve(dim_of(group));
  for (std::size_t d = 0; d < dim_of(group); ++d) {
    const bool equal = std::all_of(group.begin(), group.end(), [&](const Position* p) {
      return p->gate[d] == group.front()->gate[d];
    });
    if (gate == Gate::Weight || equal) {  // exact; equal scores are equal weights
      Rational num = 0, den = 0;
      const Rational one = 1;
      for (const Position* p : group) {
        const Rational& w = gate == Gate::Weight ? p->gate[d] : one;
        num += w * p->value[d];
        den += w;
      }
      z.push_back({num / den, num / den});
      continue;
    }
    const auto [g, v] = channel(group, d);
    const Rational m = max_of(g);  // e^(s - m): the common factor e^-m cancels
    std::vector<Interval> w;
    for (const Rational& s : g) w.push_back(exp_enclosure(s - m));
    z.push_back(weighted_mean_range(w, v));
  }
  return z;
}
}  // namespace

// e^x = (e^(x / 2^m))^(2^m), |y| = |x / 2^m| <= 1/2: Taylor to N = 24 terms with
// remainder |y|^N / N! e^(1/2) < 2 |y|^N / N!, then m squarings, each rounded
// outward. With y = a / b the partial sum is one fraction,
// Σ_k a^k b^(N-1-k) (N-1)! / k! over b^(N-1) (N-1)!: integers only until the end.
Interval exp_enclosure(const Rational& x) {
  constexpr int N = 24;
  int m = 0;
  Rational y = x;
  while (abs(y) > Rational(1, 2)) {
    y /= 2;
    ++m;
  }
  const Integer a = numerator(y), b = denominator(y);
  Integer sum = 0, a_power = 1, factorial_ratio = 1;  // (N-1)! / k! for k = N - 1 downwards
  std::vector<Integer> a_powers(N), b_powers(N);
  for (int k = 0; k < N; ++k) {
    a_powers[std::size_t(k)] = a_power;
    a_power *= a;
  }
  Integer b_power = 1;
  for (int k = 0; k < N; ++k) {
    b_powers[std::size_t(k)] = b_power;
    b_power *= b;
  }
  for (int k = N - 1; k >= 0; --k) {
    sum += a_powers[std::size_t(k)] * b_powers[std::size_t(N - 1 - k)] * factorial_ratio;
    factorial_ratio *= k;
  }
  Integer n_factorial = 1;
  for (int k = 2; k < N; ++k) n_factorial *= k;  // (N-1)!
  const Rational partial(sum, b_powers[std::size_t(N - 1)] * n_factorial);
  const Rational remainder =
      2 * Rational(abs(a_power), b_power * n_factorial * N);  // |y|^N / N!, doubled
  Interval e{round_down(partial - remainder), round_up(partial + remainder)};
  for (int i = 0; i < m; ++i) e = Interval{round_down(e.lo * e.lo), round_up(e.hi * e.hi)};
  return e;
}

std::vector<Interval> compress_group(std::span<const Position> group, Gate gate) {
  return compress(group_of(group), gate);
}

// e_t in e^(s_t - m) [(1 - 2^-21)(1 - 2u|x_t|), (1 + 2^-21)(1 + 2u|x_t|)] ± 2^-147;
// z in range(e, v) ± γ_{4r+4} max_t |v_t|
std::vector<Interval> compress_group_fp32(std::span<const Position> group) {
  return compress_fp32(group_of(group));
}

namespace {
std::vector<Interval> compress_fp32(const Group& group) {
  const Rational u(1, pow2(24)), exp_error(1, pow2(21)), underflow(1, pow2(147));
  const Rational nu = Rational(Integer(4 * group.size() + 4)) * u, gamma = nu / (1 - nu);
  std::vector<Interval> z;
  for (std::size_t d = 0; d < dim_of(group); ++d) {
    const auto [s, v] = channel(group, d);
    const Rational m = max_of(s);
    std::vector<Interval> w;
    for (const Rational& st : s) {
      const Rational shift = 2 * u * abs(st - m);
      const Interval e = exp_enclosure(st - m);
      const Rational lo = e.lo * (1 - exp_error) * (1 - shift) - underflow;
      w.push_back(
          {lo > 0 ? lo : Rational(0), Rational(e.hi * (1 + exp_error) * (1 + shift) + underflow)});
    }
    Rational largest = 0;
    for (const Rational& x : v) largest = std::max(largest, Rational(abs(x)));
    const Interval range = weighted_mean_range(w, v);
    z.push_back({range.lo - gamma * largest, range.hi + gamma * largest});
  }
  return z;
}

Row zero_row(std::size_t dim) { return Row{std::vector<Interval>(dim, Interval{0, 0}), -1, 0}; }

const Position& entry(const Ring& ring, std::int64_t p) {
  return ring.entries[std::size_t(p % std::int64_t(ring.entries.size()))].value();
}

Row completed_row(const Group& group, std::int64_t j, std::int64_t ratio, Gate gate) {
  return Row{compress(group, gate), std::int32_t(j), std::int32_t(j * ratio)};
}
}  // namespace

std::vector<Row> prefill(Ring& ring, std::int64_t ratio, std::span<const Position> chunk,
                         Gate gate) {
  const std::int64_t s = ring.length, e = s + std::int64_t(chunk.size());
  const std::int64_t S = std::int64_t(ring.entries.size());
  const auto input = [&](std::int64_t p) -> const Position& {
    return p < s ? entry(ring, p) : chunk[std::size_t(p - s)];
  };
  std::vector<Row> rows;
  for (std::int64_t j = s / ratio; j < e / ratio; ++j) {
    Group group;
    group.reserve(std::size_t(ratio));
    for (std::int64_t p = j * ratio; p < (j + 1) * ratio; ++p) group.push_back(&input(p));
    rows.push_back(completed_row(group, j, ratio, gate));
  }
  if (rows.empty()) rows.push_back(zero_row(chunk.empty() ? 0 : chunk.front().value.size()));
  for (std::int64_t p = std::max(s, e - S); p < e; ++p)
    ring.entries[std::size_t(p % S)] = chunk[std::size_t(p - s)];
  ring.length = e;
  return rows;
}

std::vector<Row> decode(Ring& ring, std::int64_t ratio, std::span<const Position> step, Gate gate) {
  const std::int64_t s = ring.length, S = std::int64_t(ring.entries.size());
  for (std::size_t i = 0; i < step.size(); ++i)
    ring.entries[std::size_t((s + std::int64_t(i)) % S)] = step[i];
  std::vector<Row> rows;
  for (std::size_t i = 0; i < step.size(); ++i) {
    const std::int64_t p = s + std::int64_t(i);
    if (p % ratio != ratio - 1) {
      rows.push_back(zero_row(step[i].value.size()));
      continue;
    }
    Group group;
    group.reserve(std::size_t(ratio));
    for (std::int64_t q = p - ratio + 1; q <= p; ++q) group.push_back(&entry(ring, q));
    rows.push_back(completed_row(group, p / ratio, ratio, gate));
  }
  ring.length = s + std::int64_t(step.size());
  return rows;
}

std::vector<Row> verify(Ring& ring, std::int64_t ratio, std::span<const Position> draft,
                        std::size_t accepted, Gate gate) {
  const std::int64_t s = ring.length;
  std::vector<Row> rows = decode(ring, ratio, draft, gate);
  rows.resize(std::min(accepted, rows.size()));
  ring.length = s + std::int64_t(rows.size());
  return rows;
}

std::vector<Position> pending(const Ring& ring, std::int64_t ratio) {
  std::vector<Position> out;
  for (std::int64_t p = ring.length / ratio * ratio; p < ring.length; ++p)
    out.push_back(entry(ring, p));
  return out;
}

std::vector<std::vector<Interval>> whole_sequence_rows(std::span<const Position> inputs,
                                                       std::int64_t ratio, Gate gate) {
  std::vector<std::vector<Interval>> rows;
  for (std::size_t j = 0; (j + 1) * std::size_t(ratio) <= inputs.size(); ++j)
    rows.push_back(
        compress_group(inputs.subspan(j * std::size_t(ratio), std::size_t(ratio)), gate));
  return rows;
}

}  // namespace aether::model
