// Differential fuzz target for logical-row -> paged-slot conversion: bytes ->
// (rows with padding and out-of-table entries, valid counts, block tables with
// negative and huge ids, B small or huge, r). Every backend must equal the model, refusals
// and untouched buffers included, out of place and in place, in both the
// conversion and the masked conversion.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "model/paging.hpp"
#include "props/support/compare.hpp"
#include "props/support/paging_backends.hpp"

namespace {

using I = std::int32_t;
using V = std::vector<I>;

void fail(const std::string& report) {
  std::fprintf(stderr, "paging_fuzz: impl differs from model\n%s\n", report.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace aether;
  FuzzedDataProvider p(data, size);
  const std::size_t requests = p.ConsumeIntegralInRange<std::size_t>(0, 4);
  const std::size_t k = p.ConsumeIntegralInRange<std::size_t>(0, 20);
  const std::int64_t ratio = p.ConsumeIntegralInRange<std::int64_t>(-1, 4);
  // B up to 16 tokens, or now and then up to 2^40 (Bc past 2^32: block x Bc overflows 64 bits)
  const std::int64_t block_tokens =
      p.ConsumeIntegralInRange(0, 7) == 0
          ? p.ConsumeIntegralInRange<std::int64_t>(0, std::int64_t(1) << 40)
          : p.ConsumeIntegralInRange<std::int64_t>(0, 16);
  const std::size_t per = p.ConsumeIntegralInRange<std::size_t>(0, 4);
  V counts, table, rows;
  for (std::size_t n = 0; n < requests; ++n) {
    counts.push_back(p.ConsumeIntegralInRange<I>(-1, I(k) + 1));
    for (std::size_t b = 0; b < per; ++b)
      table.push_back(p.ConsumeBool() ? p.ConsumeIntegralInRange<I>(-1, 1 << 20)
                                      : p.ConsumeIntegral<I>());
    for (std::size_t i = 0; i < k; ++i) rows.push_back(p.ConsumeIntegralInRange<I>(-2, 40));
  }
  if (p.ConsumeIntegralInRange(0, 15) == 0) rows.push_back(0);  // shape fault

  const auto want = model::paged_slots(rows, k, counts, table, per, block_tokens, ratio);
  const auto want_masked =
      model::paged_slots_masked(rows, k, counts, table, per, block_tokens, ratio);
  for (const auto& b : props::all_paging_backends()) {
    if (b.name == "model") continue;
    for (const bool masked : {false, true}) {
      const auto& convert = masked ? b.masked : b.slots;
      const auto& expected = masked ? want_masked : want;
      const std::string name = b.name + (masked ? " masked" : " slots");
      const V before(rows.size(), 0x5a5a5a5a);
      V out = before;
      const auto got = convert(rows, k, counts, table, per, block_tokens, ratio, out);
      if (auto d = props::differential_report<I>(expected, got, before, out, name); !d.empty())
        fail(d);
      V in_place = rows;
      const auto again = convert(in_place, k, counts, table, per, block_tokens, ratio, in_place);
      if (auto d =
              props::differential_report<I>(expected, again, rows, in_place, name + " in place");
          !d.empty())
        fail(d);
    }
  }
  return 0;
}
