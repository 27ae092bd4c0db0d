// Differential fuzz target for the indexer's selection path: bytes -> (scores
// with garbage past the valid ends, ends, K, candidate blocks). Every backend must
// equal the model on top-k and candidate top-k, refusals and untouched buffers
// included; any difference aborts with the comparison report.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "model/indexer.hpp"
#include "props/support/compare.hpp"
#include "props/support/indexer_backends.hpp"

namespace {

using I = std::int32_t;
using V = std::vector<I>;

void fail(const std::string& report) {
  std::fprintf(stderr, "indexer_fuzz: impl differs from model\n%s\n", report.c_str());
  std::abort();
}

float consume_score(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return std::bit_cast<float>(p.ConsumeIntegral<std::uint32_t>());  // anything, NaN too
    case 1:
      return p.ConsumeBool() ? 0.0f : -0.0f;
    case 2:
      return 1e30f;
    default:
      return float(p.ConsumeIntegralInRange(-4, 4));  // ties
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace aether;
  FuzzedDataProvider p(data, size);
  const std::size_t rows = p.ConsumeIntegralInRange<std::size_t>(0, 4);
  const std::size_t width = p.ConsumeIntegralInRange<std::size_t>(0, 64);
  const std::size_t k = p.ConsumeIntegralInRange<std::size_t>(0, 20);
  V ends;
  for (std::size_t r = 0; r < rows; ++r)
    ends.push_back(p.ConsumeIntegralInRange<I>(-1, I(width) + 1));
  std::vector<float> scores(rows * width);
  for (float& s : scores) s = consume_score(p);
  if (p.ConsumeIntegralInRange(0, 15) == 0) scores.push_back(0.0f);  // shape fault

  const std::size_t bs = p.ConsumeIntegralInRange<std::size_t>(0, 5);
  V retained;
  for (std::size_t i = p.ConsumeIntegralInRange<std::size_t>(0, 6); i > 0; --i)
    retained.push_back(p.ConsumeIntegralInRange<I>(-1, 20));
  const std::size_t end0 = rows ? std::size_t(std::max(ends[0], 0)) : 0;

  for (const auto& b : props::all_indexer_backends()) {
    if (b.name == "model") continue;
    const V before(rows * k, 0x5a5a5a5a);
    V out = before;
    const auto got = b.topk(scores, width, ends, k, out);
    const auto want = model::valid_prefix_topk(scores, width, ends, k);
    if (auto d = props::differential_report<I>(want, got, before, out, b.name + " topk");
        !d.empty())
      fail(d);
    if (rows > 0 && ends[0] >= 0 && std::size_t(ends[0]) <= width) {
      const auto row = std::span<const float>(scores).first(width);
      const V cbefore(k, 0x5a5a5a5a);
      V cout = cbefore;
      const auto cgot = b.candidate_topk(row, end0, retained, bs, k, cout);
      const auto cwant = model::candidate_topk(row, end0, retained, bs, k);
      if (auto d =
              props::differential_report<I>(cwant, cgot, cbefore, cout, b.name + " candidates");
          !d.empty())
        fail(d);
    }
  }
  return 0;
}
