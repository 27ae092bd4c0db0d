// Differential fuzz target for DoSA: bytes -> (one query's heads and weights, keys
// stored in any format as raw bytes, K, seeds, a plan). Against the model: the same
// refusal and an untouched output; on the integer grid, the same lanes. Always: the
// CPU's float bound is at least its scorer's score of every key, and its pruned
// lanes equal its full scoring's, with and without the cost rule's fallback. Any
// difference aborts with a description.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "impl/cpu/dosa.hpp"
#include "impl/cpu/indexer.hpp"
#include "model/dosa.hpp"

namespace {

using I = std::int32_t;
using V = std::vector<I>;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "dosa_fuzz: %s\n", what);
  std::abort();
}

float consume_value(FuzzedDataProvider& p, bool grid) {
  if (grid) return float(p.ConsumeIntegralInRange(-4, 4));
  switch (p.ConsumeIntegralInRange(0, 3)) {
    case 0:  // refused: scores stay finite inside the contract (docs/dosa.md)
      return p.ConsumeBool() ? std::numeric_limits<float>::quiet_NaN()
                             : std::numeric_limits<float>::infinity();
    case 1:
      return std::ldexp(float(p.ConsumeIntegralInRange(-64, 64)),
                        p.ConsumeIntegralInRange(-20, 20));
    default:
      return float(p.ConsumeIntegralInRange(-4, 4));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace aether;
  FuzzedDataProvider p(data, size);
  const bool grid = p.ConsumeBool();
  const std::size_t heads = p.ConsumeIntegralInRange<std::size_t>(1, 5);
  const std::size_t dim = p.ConsumeIntegralInRange<std::size_t>(1, 4);
  const std::size_t count = p.ConsumeIntegralInRange<std::size_t>(0, 24);
  const std::size_t k = p.ConsumeIntegralInRange<std::size_t>(1, 8);
  const auto format = grid ? KeyFormat::F32 : KeyFormat(p.ConsumeIntegralInRange(0, 2));
  std::vector<float> queries(heads * dim), weights(heads);
  for (float& x : queries) x = consume_value(p, grid);
  for (float& x : weights) x = consume_value(p, grid);
  std::vector<std::byte> key_bytes(count * key_row_bytes(format, dim));
  const std::size_t row_bytes = key_row_bytes(format, dim);
  for (std::size_t j = 0; j < count; ++j) {
    std::byte* row = key_bytes.data() + j * row_bytes;
    for (std::size_t d = 0; d < dim; ++d) {
      const float x = consume_value(p, grid);
      if (format == KeyFormat::F32) std::memcpy(row + 4 * d, &x, 4);
      if (format == KeyFormat::BF16)
        std::memcpy(row + 2 * d, reinterpret_cast<const char*>(&x) + 2, 2);
      if (format == KeyFormat::E4M3) row[d] = std::byte(p.ConsumeIntegral<std::uint8_t>());
    }
    if (format == KeyFormat::E4M3) {
      const float scale = consume_value(p, false);
      std::memcpy(row + dim, &scale, 4);
    }
  }
  const IndexKeys keys{format, key_bytes, dim};
  V seeds;
  for (std::size_t n = p.ConsumeIntegralInRange<std::size_t>(0, count + 1); n > 0; --n)
    seeds.push_back(p.ConsumeIntegralInRange<I>(-1, I(count)));
  DosaPlan plan;
  for (std::uint32_t h = 0; h < heads; ++h) {
    switch (p.ConsumeIntegralInRange(0, 3)) {
      case 0:
        plan.retained.push_back(h);
        break;
      case 1: {
        const std::uint32_t anchor =
            p.ConsumeIntegralInRange<std::uint32_t>(0, std::uint32_t(heads));
        plan.anchors.push_back(
            {h, anchor == heads ? kNoAnchor : anchor, float(p.ConsumeIntegralInRange(-1, 8)) / 4});
        break;
      }
      case 2:
        plan.aggregated.push_back(h);
        break;
      default:  // omitted with no entry
        break;
    }
  }

  const auto want = model::dosa_topk(queries, weights, keys, k, seeds, plan);
  const std::vector<DosaPlan> plans{plan};
  for (const bool fall_back : {true, false}) {
    V out(k, 0x5a5a5a5a);
    const auto got = cpu::dosa_topk(queries, weights, 1, keys, k, seeds, plans, out,
                                    cpu::DosaOptions{fall_back});
    if (got.ok() != want.ok()) fail("the CPU and the model disagree on refusing");
    if (!want.ok()) {
      if (!(got.error() == want.error())) fail("the CPU refuses with another error");
      if (out != V(k, 0x5a5a5a5a)) fail("a refusal wrote the output");
      continue;
    }
    if (grid && out != want.value()) fail("the CPU's lanes differ from the model's on the grid");
    std::vector<float> scores(count);
    if (!cpu::index_scores(queries, weights, keys, scores).ok()) fail("the scorer refused");
    V full(k);
    if (!cpu::valid_prefix_topk(scores, count, V{I(count)}, k, full).ok()) fail("top-k refused");
    if (out != full) fail("the pruned lanes differ from full scoring's");
    std::vector<double> bounds(count);
    cpu::dosa_bounds(queries, weights, keys, plan, bounds);
    for (std::size_t j = 0; j < count; ++j)
      if (!(bounds[j] >= double(scores[j]))) fail("a float bound is below the scorer's score");
  }
  return 0;
}
