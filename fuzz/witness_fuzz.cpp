// Differential fuzz target for segment witnesses: bytes -> (context lengths,
// rows, topk, keep, S, budget); the CPU backend (and CUDA when a device is
// visible) must equal the model on apply, scatter and the witness table,
// refusals included. Any difference aborts with the comparison report.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "model/witness.hpp"
#include "props/support/compare.hpp"
#include "props/support/witness_backends.hpp"

namespace {

using I = std::int32_t;
using V = std::vector<I>;

I consume_len(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return p.ConsumeIntegralInRange<I>(std::numeric_limits<I>::min(), 0);
    case 1:
      return p.ConsumeIntegralInRange<I>(1, std::numeric_limits<I>::max());
    case 2:
      return p.ConsumeIntegralInRange<I>(65, 5000);
    default:
      return p.ConsumeIntegralInRange<I>(1, 64);
  }
}

I consume_entry(FuzzedDataProvider& p, I len) {
  switch (p.ConsumeIntegralInRange(0, 5)) {
    case 0:
      return -1;
    case 1:
      return p.ConsumeIntegral<I>();  // anything: negatives, far out of range
    default:
      return len > 0 ? p.ConsumeIntegralInRange<I>(0, len - 1) : -1;
  }
}

void fail(const std::string& report) {
  std::fprintf(stderr, "witness_fuzz: impl differs from model\n%s\n", report.c_str());
  std::abort();
}

void check(const aether::props::WitnessBackend& b, const V& learned, std::size_t topk,
           const V& lens, std::size_t keep, std::size_t s, std::size_t budget) {
  using namespace aether;
  const V poison(learned.size(), 0x5a5a5a5a);
  V out = poison;
  const auto st = b.apply(learned, topk, lens, keep, s, budget, out);
  const auto want = model::apply_topology_witnesses(learned, topk, lens, keep, s, budget);
  if (auto d = props::differential_report<I>(want, st, poison, out, b.name + " apply"); !d.empty())
    fail(d);

  V buf = learned, want_buf = learned;
  const auto sst = b.scatter(buf, topk, lens, s);
  const auto swant = model::scatter_topology_witnesses(want_buf, topk, lens, s);
  if (sst.ok() != swant.ok() || (!sst.ok() && !(sst.error() == swant.error())))
    fail(b.name + " scatter: status differs from the model's");
  if (auto d = props::diff_report<I>(want_buf, buf, b.name + " scatter"); !d.empty()) fail(d);

  const V tpoison(lens.size() * s, 0x5a5a5a5a);
  V table = tpoison;
  const auto tst = b.indices(learned, topk, lens, s, table);
  const auto twant = model::topology_witness_indices(learned, topk, lens, s);
  if (auto d = props::differential_report<I>(twant, tst, tpoison, table, b.name + " indices");
      !d.empty())
    fail(d);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider p(data, size);
  const std::size_t rows = p.ConsumeIntegralInRange<std::size_t>(0, 8);
  const std::size_t topk = p.ConsumeIntegralInRange<std::size_t>(0, 300);
  const std::size_t s = p.ConsumeIntegralInRange<std::size_t>(0, 70);
  const std::size_t keep = p.ConsumeIntegralInRange<std::size_t>(0, topk + 2);
  const std::size_t budget = p.ConsumeIntegralInRange<std::size_t>(0, 80);
  const int shape_fault = p.ConsumeIntegralInRange(0, 15);  // 0: one entry short, 1: one extra
  V lens, learned;
  for (std::size_t r = 0; r < rows; ++r) lens.push_back(consume_len(p));
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < topk; ++i) learned.push_back(consume_entry(p, lens[r]));
  if (shape_fault == 0 && !learned.empty()) learned.pop_back();
  if (shape_fault == 1) learned.push_back(-1);
  for (const auto& backend : aether::props::impl_witness_backends())
    check(backend, learned, topk, lens, keep, s, budget);
  return 0;
}
