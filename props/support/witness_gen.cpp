#include "props/support/witness_gen.hpp"

#include <algorithm>
#include <limits>

#include "props/support/compare.hpp"

namespace aether::props {

namespace gen = rc::gen;
using I = std::int32_t;

std::ostream& operator<<(std::ostream& os, const WitnessCall& c) {
  os << "WitnessCall{topk=" << c.topk << ", rows=" << c.rows()
     << ", context_lens=" << show_span(std::span<const I>(c.context_lens))
     << ", keep=" << c.learned_keep << ", S=" << c.num_segments
     << ", max_replacements=" << c.max_replacements;
  if (c.out_delta != 0) os << ", out_delta=" << c.out_delta;
  os << ", learned=";
  for (std::size_t r = 0; r * c.topk < c.learned.size() && c.topk; ++r)
    os << "\n    "
       << show_span(std::span<const I>(c.learned).subspan(
              r * c.topk, std::min(c.topk, c.learned.size() - r * c.topk)));
  if (c.topk == 0 || c.learned.size() % c.topk)
    os << " (flat " << show_span(std::span<const I>(c.learned)) << ")";
  return os << "}";
}

void showValue(const WitnessCall& call, std::ostream& os) { os << call; }

rc::Gen<I> gen_context_len() {
  constexpr I kMax = std::numeric_limits<I>::max();
  return gen::weightedOneOf<I>({
      {8, gen::inRange<I>(1, 65)},
      {3, gen::inRange<I>(65, 5000)},
      {1, gen::element<I>(0, -1, -7, I(std::numeric_limits<I>::min()))},
      // tile edges, primes and the top of the range
      {2, gen::element<I>(2, 3, 63, 64, 65, 127, 128, 129, 509, 511, 512, 513, 1023, 1024, 65536,
                          131071, 131072, I(kMax - 1), I(kMax))},
      {1, gen::inRange<I>(1 << 20, kMax)},
  });
}

rc::Gen<std::size_t> gen_valid_segments() {
  return gen::weightedOneOf<std::size_t>({
      {6, gen::inRange<std::size_t>(1, 9)},
      {3, gen::inRange<std::size_t>(9, 65)},
      {2, gen::element<std::size_t>(1, 2, 63, 64)},
  });
}

rc::Gen<std::size_t> gen_any_segments() {
  return gen::weightedOneOf<std::size_t>({
      {8, gen_valid_segments()},
      {1, gen::just<std::size_t>(0)},
      {1, gen::inRange<std::size_t>(65, 71)},
  });
}

namespace {
// One learned entry for a row of length L.
rc::Gen<I> gen_entry(I len, std::size_t num_segments) {
  constexpr I kMax = std::numeric_limits<I>::max();
  if (len <= 0)
    return gen::weightedOneOf<I>(
        {{3, gen::just<I>(-1)}, {3, gen::inRange<I>(0, 100)}, {1, gen::element<I>(I(kMax), -2)}});
  const auto s_eff = std::int64_t(std::min<std::size_t>(num_segments, std::size_t(len)));
  const I past_end_hi = I(std::min<std::int64_t>(std::int64_t(len) + 70, kMax));
  const auto edge = gen::map(
      gen::pair(gen::inRange<std::int64_t>(0, std::max<std::int64_t>(s_eff, 1)),
                gen::inRange<I>(-1, 1)),
      [=](std::pair<std::int64_t, I> p) {
        // on and just below a segment's left edge e_s = ceil(s L / S_eff)
        const std::int64_t e = (p.first * len + s_eff - 1) / std::max<std::int64_t>(s_eff, 1);
        return I(std::clamp<std::int64_t>(e + p.second, 0, len - 1));
      });
  // past the end when there is room: L .. L + 69, clamped to INT32_MAX
  const auto past_end = len < kMax ? gen::inRange<I>(len, past_end_hi) : gen::just<I>(-1);
  return gen::weightedOneOf<I>({
      {3, gen::just<I>(-1)},
      {6, gen::inRange<I>(0, len)},
      {2, edge},
      {1, gen::element<I>(-2, I(std::numeric_limits<I>::min()), I(kMax))},
      {1, past_end},
  });
}

rc::Gen<std::size_t> gen_topk() {
  return gen::weightedOneOf<std::size_t>({
      {5, gen::inRange<std::size_t>(0, 17)},
      {3, gen::inRange<std::size_t>(17, 80)},
      {1, gen::element<std::size_t>(127, 128, 129, 256, 257)},
  });
}
}  // namespace

rc::Gen<std::vector<I>> gen_learned_row(I len, std::size_t num_segments, std::size_t topk) {
  return gen::exec([=] {
    std::vector<I> row(topk);
    for (auto& x : row) x = *gen_entry(len, num_segments);
    // duplicates: copy a few entries over others
    const int copies = topk >= 2 ? *gen::inRange(0, 3) : 0;
    for (int k = 0; k < copies; ++k)
      row[*gen::inRange<std::size_t>(0, topk)] = row[*gen::inRange<std::size_t>(0, topk)];
    return row;
  });
}

rc::Gen<std::vector<I>> gen_row_with_padded_tail(I len, std::size_t num_segments, std::size_t topk,
                                                 std::size_t tail) {
  return gen::map(gen_learned_row(len, num_segments, topk), [=](std::vector<I> row) {
    std::fill(row.end() - std::ptrdiff_t(std::min(tail, topk)), row.end(), -1);
    return row;
  });
}

rc::Gen<WitnessCall> gen_well_formed_call() {
  return gen::exec([] {
    WitnessCall c;
    c.topk = *gen_topk();
    c.num_segments = *gen_valid_segments();
    const auto rows = *gen::weightedOneOf<std::size_t>({{6, gen::inRange<std::size_t>(1, 5)},
                                                        {1, gen::just<std::size_t>(0)},
                                                        {1, gen::inRange<std::size_t>(5, 12)}});
    for (std::size_t r = 0; r < rows; ++r) {
      const I len = *gen_context_len();
      c.context_lens.push_back(len);
      const auto row = *gen_learned_row(len, c.num_segments, c.topk);
      c.learned.insert(c.learned.end(), row.begin(), row.end());
    }
    c.learned_keep = *gen::weightedOneOf<std::size_t>(
        {{6, gen::inRange<std::size_t>(0, c.topk + 1)},
         {1, gen::just(c.topk)},
         {1, gen::just(c.topk - std::min(c.topk, c.num_segments))}});
    c.max_replacements =
        *gen::weightedOneOf<std::size_t>({{5, gen::inRange<std::size_t>(0, 70)},
                                          {1, gen::just(c.num_segments)},
                                          {1, gen::just(c.topk - c.learned_keep)},
                                          {1, gen::just(std::numeric_limits<std::size_t>::max())}});
    return c;
  });
}

rc::Gen<WitnessCall> gen_any_call() {
  // Faults drawn independently, so that a call often carries several at once: a
  // backend that checks them in another order than the model names another error.
  const auto faulty = gen::exec([] {
    auto c = *gen_well_formed_call();
    const auto faults = *gen::suchThat(gen::inRange(1, 16), [](int f) { return f != 0; });
    if (faults & 1) {  // rows mismatch: an entry too many or too few, or a row more
      switch (*gen::inRange(0, 3)) {
        case 0:
          c.learned.push_back(-1);
          break;
        case 1:
          if (!c.learned.empty())
            c.learned.pop_back();
          else
            c.learned.push_back(0);
          break;
        default:
          c.context_lens.push_back(*gen_context_len());
          break;
      }
      if (c.topk * c.rows() == c.learned.size()) c.learned.push_back(-1);
    }
    if (faults & 2) c.num_segments = *gen::element<std::size_t>(0, 65, 66, 128, 1000);
    if (faults & 4) c.learned_keep = c.topk + *gen::inRange<std::size_t>(1, 5);
    if (faults & 8) c.out_delta = *gen::element<std::ptrdiff_t>(-3, -1, 1, 2, 64);
    return c;
  });
  return gen::weightedOneOf<WitnessCall>({{3, gen_well_formed_call()}, {2, faulty}});
}

}  // namespace aether::props
