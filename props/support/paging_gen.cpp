#include "props/support/paging_gen.hpp"

#include <algorithm>
#include <limits>
#include <random>
#include <span>

#include "props/support/compare.hpp"

namespace aether::props {

namespace gen = rc::gen;
using I = std::int32_t;

void showValue(const PagingCall& c, std::ostream& os) {
  os << "PagingCall{B=" << c.block_tokens << ", r=" << c.ratio << ", k=" << c.k
     << ", valid_counts=" << show_span(std::span<const I>(c.valid_counts))
     << ", blocks_per_request=" << c.blocks_per_request
     << ", block_tables=" << show_span(std::span<const I>(c.block_tables))
     << ", rows=" << show_span(std::span<const I>(c.rows));
  if (c.out_delta != 0) os << ", out_delta=" << c.out_delta;
  os << "}";
}

namespace {
// Thousands of lanes over several requests (the CUDA kernels' vector loads, many
// blocks, the reverse pass): rows and tables from a seeded generator, every one
// valid, then a few drawn lanes and entries overwritten with padding, rows outside
// the table and bad blocks, so shrinking still isolates the lane that matters.
PagingCall wide_paging_call() {
  PagingCall c;
  c.ratio = *gen::element<std::int64_t>(1, 4);
  c.block_tokens = c.ratio * *gen::element<std::int64_t>(16, 64);
  const std::int64_t bc = c.block_tokens / c.ratio;
  const auto requests = *gen::inRange<std::size_t>(1, 9);
  c.k = *gen::element<std::size_t>(64, 1000, 2048, 2051);
  c.blocks_per_request = *gen::element<std::size_t>(1, 37, 1024);
  std::mt19937 rng{std::uint32_t(*gen::inRange<int>(0, 1 << 30))};
  std::uniform_int_distribution<I> row(0, I(std::int64_t(c.blocks_per_request) * bc - 1)),
      block(0, 1 << 20);
  c.rows.resize(requests * c.k);
  for (auto& r : c.rows) r = row(rng);
  c.block_tables.resize(requests * c.blocks_per_request);
  for (auto& b : c.block_tables) b = block(rng);
  for (std::size_t n = 0; n < requests; ++n)
    c.valid_counts.push_back(
        *gen::weightedOneOf<I>({{3, gen::just(I(c.k))}, {1, gen::inRange<I>(-1, I(c.k) + 2)}}));
  const auto padding =
      *gen::container<std::vector<std::size_t>>(gen::inRange<std::size_t>(0, c.rows.size()));
  for (std::size_t lane : padding) c.rows[lane] = -1;
  if (*gen::inRange(0, 4) == 0)  // a row outside the table, below -1 or past it
    c.rows[*gen::inRange<std::size_t>(0, c.rows.size())] = *gen::element<I>(
        -2, I(std::int64_t(c.blocks_per_request) * bc), std::numeric_limits<I>::max());
  if (*gen::inRange(0, 4) == 0)  // a negative block id, or one whose slots overflow
    c.block_tables[*gen::inRange<std::size_t>(0, c.block_tables.size())] =
        *gen::element<I>(-1, std::numeric_limits<I>::max());
  return c;
}
}  // namespace

rc::Gen<PagingCall> gen_paging_call() {
  const auto lanes_and_tables = gen::exec([] {
    if (*gen::inRange(0, 8) == 0) return wide_paging_call();
    PagingCall c;
    c.ratio = *gen::weightedOneOf<std::int64_t>(
        {{8, gen::element<std::int64_t>(1, 2, 4, 128)}, {1, gen::element<std::int64_t>(0, 3, -2)}});
    c.block_tokens = *gen::weightedOneOf<std::int64_t>(
        {{8, gen::map(gen::element<std::int64_t>(1, 2, 4, 16, 64),
                      [r = std::max<std::int64_t>(c.ratio, 1)](std::int64_t m) { return m * r; })},
         {1, gen::element<std::int64_t>(0, 1, 7, 256,
                                        std::int64_t(1) << 40)}});  // 2^40: block x Bc past 64 bits
    const std::int64_t bc =
        c.ratio > 0 && c.block_tokens > 0 ? std::max<std::int64_t>(c.block_tokens / c.ratio, 1) : 1;
    const auto requests = *gen::inRange<std::size_t>(0, 4);
    c.k = *gen::inRange<std::size_t>(0, 12);
    c.blocks_per_request = *gen::inRange<std::size_t>(0, 6);
    for (std::size_t n = 0; n < requests; ++n) {
      for (std::size_t b = 0; b < c.blocks_per_request; ++b)
        c.block_tables.push_back(
            *gen::weightedOneOf<I>({{12, gen::inRange<I>(0, 1000)},
                                    {1, gen::element<I>(-1, std::numeric_limits<I>::max())}}));
      const std::int64_t rows_in_table = std::int64_t(c.blocks_per_request) * bc;
      for (std::size_t i = 0; i < c.k; ++i)
        c.rows.push_back(*gen::weightedOneOf<I>(
            {{10, rows_in_table > 0
                      ? gen::inRange<I>(0, I(std::min<std::int64_t>(rows_in_table, 1 << 30)))
                      : gen::just<I>(-1)},
             {3, gen::just<I>(-1)},
             {1, gen::element<I>(-2, I(std::min<std::int64_t>(rows_in_table, 1 << 30)),
                                 std::numeric_limits<I>::max())}}));
      c.valid_counts.push_back(*gen::weightedOneOf<I>(
          {{6, gen::inRange<I>(0, I(c.k) + 1)}, {1, gen::element<I>(-1, I(c.k) + 5)}}));
    }
    return c;
  });
  return gen::exec([=] {
    PagingCall c = *lanes_and_tables;
    if (*gen::inRange(0, 4) != 0) return c;
    const int faults = *gen::inRange(1, 8);  // shape faults, independently
    if (faults & 1) {
      if (!c.rows.empty() && *gen::arbitrary<bool>())
        c.rows.pop_back();
      else
        c.rows.push_back(0);
    }
    if (faults & 2) {
      if (!c.block_tables.empty() && *gen::arbitrary<bool>())
        c.block_tables.pop_back();
      else
        c.block_tables.push_back(0);
    }
    if (faults & 4) c.out_delta = *gen::element<std::ptrdiff_t>(-1, 1, 4);
    return c;
  });
}

}  // namespace aether::props
