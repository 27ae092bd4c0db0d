// Differential fuzz target for the cache formats' codecs and store: bytes ->
// (format, rounding profile, a row of arbitrary float bit patterns: NaN,
// infinities, subnormals, signed zeros, every exponent; lengths not whole groups
// now and then), then a store of that row and a copy of it into a small paged cache
// at fuzzed slots, and reads. The CPU must quantize, refuse, dequantize, pack,
// store and gather exactly as the model does.
#include <fuzzer/FuzzedDataProvider.h>

#include <bit>
#include <cstdio>
#include <cstdlib>

#include "model/formats.hpp"
#if defined(AETHER_HAVE_FP_CONVERSIONS)
#include "impl/cpu/formats.hpp"
#endif

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "formats_fuzz: impl differs from model: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace aether;
  FuzzedDataProvider p(data, size);
  const auto format = CacheFormat(p.ConsumeIntegralInRange(0, 3));
  const auto profile = RoundingProfile(p.ConsumeIntegralInRange(0, 1));
  const std::size_t groups = p.ConsumeIntegralInRange<std::size_t>(0, 4);
  std::size_t n = groups * group_format(format).group;
  if (p.ConsumeIntegralInRange(0, 15) == 0) n += p.ConsumeIntegralInRange<std::size_t>(1, 3);
  std::vector<float> row;
  // a group's values share a scale: small offsets around one exponent, or any bits
  const int exponent = p.ConsumeIntegralInRange(0, 254);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t bits =
        p.ConsumeBool()
            ? p.ConsumeIntegral<std::uint32_t>()
            : (p.ConsumeIntegral<std::uint32_t>() & 0x807fffffu) |
                  std::uint32_t(std::max(0, exponent - p.ConsumeIntegralInRange(0, 12))) << 23;
    row.push_back(std::bit_cast<float>(bits));
  }
  const auto want = model::quantize_row(format, row, profile);
#if defined(AETHER_HAVE_FP_CONVERSIONS)
  const auto got = cpu::quantize_row(format, row, profile);
  if (want.ok() != got.ok()) fail("one refuses, the other does not");
  if (!want.ok()) {
    if (!(want.error() == got.error())) fail("different refusals");
    return 0;
  }
  if (!(want.value() == got.value())) fail("codes or scales");
  const auto values = model::dequantize_row(format, want.value());
  const auto doubles = cpu::dequantize_row(format, got.value());
  for (std::size_t i = 0; i < values.size(); ++i)
    if (model::exact(doubles[i]) != values[i]) fail("dequantized value");
  const auto bytes = model::pack_row(format, want.value());
  if (cpu::pack_row(format, got.value()) != bytes) fail("packed bytes");
  if (!(cpu::unpack_row(format, bytes) == want.value())) fail("unpacked row");
  if (format == CacheFormat::IndexFp8 || n == 0) return 0;
  // the row twice into a cache of 2 blocks of 2 rows, at fuzzed slots
  const CacheGeometry cache{format, n, 2, 2};
  std::vector<float> rows(row);
  rows.insert(rows.end(), row.begin(), row.end());
  const std::vector<std::int32_t> slots{p.ConsumeIntegralInRange<std::int32_t>(-2, 4),
                                        p.ConsumeIntegralInRange<std::int32_t>(-2, 4)};
  std::vector<std::byte> model_cache(cache.bytes(), std::byte{0x3c}), cpu_cache = model_cache;
  const auto stored = model::store_rows(cache, rows, slots, model_cache, profile);
  const auto cpu_stored = cpu::store_rows(cache, rows, slots, cpu_cache, profile);
  if (stored.ok() != cpu_stored.ok()) fail("store: one refuses, the other does not");
  if (!stored.ok() && !(stored.error() == cpu_stored.error())) fail("store: different refusals");
  if (cpu_cache != model_cache) fail("store: cache bytes");
  const std::vector<std::int32_t> reads{p.ConsumeIntegralInRange<std::int32_t>(-2, 4)};
  const auto read = model::gather_rows(cache, model_cache, reads);
  const auto cpu_read = cpu::gather_rows(cache, model_cache, reads);
  if (read.ok() != cpu_read.ok()) fail("gather: one refuses, the other does not");
  if (!read.ok()) {
    if (!(read.error() == cpu_read.error())) fail("gather: different refusals");
    return 0;
  }
  for (std::size_t i = 0; i < read.value().size(); ++i)
    if (model::exact(cpu_read.value()[i]) != read.value()[i]) fail("gather: value");
#else
  if (want.ok() &&
      !(model::unpack_row(format, model::pack_row(format, want.value())) == want.value()))
    fail("model layout round trip");
#endif
  return 0;
}
