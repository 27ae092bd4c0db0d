// Differential fuzz target for cross-layer sharing: bytes -> (layer settings with
// formats, dimensions, ratios and block sizes some of which no format holds,
// YOCO boundaries, four layer -> source maps of any length and any sources). The
// CPU must refuse exactly as the model refuses and account exactly as it does.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "impl/cpu/sharing.hpp"
#include "model/sharing.hpp"

namespace {

[[noreturn]] void fail(const std::string& report) {
  std::fprintf(stderr, "sharing_fuzz: impl differs from model\n%s\n", report.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace aether;
  FuzzedDataProvider p(data, size);
  const std::size_t n = p.ConsumeIntegralInRange<std::size_t>(0, 10);
  std::vector<LayerSettings> layers(n);
  for (LayerSettings& s : layers) {
    s.kv_format = CacheFormat(p.ConsumeIntegralInRange(0, 3));
    s.index_format = CacheFormat(p.ConsumeIntegralInRange(0, 3));
    s.ratio = p.ConsumeIntegralInRange<std::int64_t>(-1, 4);
    s.block_size = p.ConsumeIntegralInRange<std::int64_t>(-1, 8) * 16;
    s.kv_dim = p.ConsumeIntegralInRange<std::int64_t>(-1, 3) * 256 + p.ConsumeIntegralInRange(0, 1);
    s.index_dim = p.ConsumeIntegralInRange<std::int64_t>(-1, 2) * 64;
    s.topk = p.ConsumeIntegralInRange<std::int64_t>(-1, 2) * 1024;
    s.candidate_blocks = p.ConsumeIntegralInRange<std::int64_t>(-1, 16);
    s.candidate_block = p.ConsumeIntegralInRange<std::int64_t>(-1, 1) * 64;
    s.yoco_boundary = p.ConsumeIntegralInRange(0, 7) == 0;
  }
  SharingMaps maps;
  for (auto& map : maps.maps) {
    const std::size_t length =
        p.ConsumeIntegralInRange(0, 15) == 0 ? p.ConsumeIntegralInRange<std::size_t>(0, 12) : n;
    for (std::size_t l = 0; l < length; ++l)
      // mostly a segment's start or itself; now and then anywhere
      map.push_back(p.ConsumeBool() ? std::int32_t(l)
                                    : p.ConsumeIntegralInRange<std::int32_t>(-1, std::int32_t(n)));
  }
  const auto blocks = p.ConsumeIntegralInRange<std::uint64_t>(0, 1 << 20);
  const auto positions = p.ConsumeIntegralInRange<std::uint64_t>(0, 1 << 16);
  const auto alignment = p.ConsumeIntegralInRange<std::uint64_t>(0, 4096);

  const auto want = model::sharing_allocation(layers, maps, blocks, positions, alignment);
  const auto got = cpu::sharing_allocation(layers, maps, blocks, positions, alignment);
  std::ostringstream report;
  if (want.ok() != got.ok()) {
    report << "model " << (want.ok() ? "accepts" : "refuses") << ", cpu "
           << (got.ok() ? "accepts" : "refuses");
    fail(report.str());
  }
  if (!want.ok() && !(want.error() == got.error())) {
    report << "model " << want.error() << "\ncpu   " << got.error();
    fail(report.str());
  }
  if (want.ok() && !(want.value() == got.value())) {
    report << "model total " << want.value().total << ", cpu total " << got.value().total;
    fail(report.str());
  }
  if (model::check_sharing(layers, maps).ok() != want.ok()) fail("check and allocation disagree");
  return 0;
}
