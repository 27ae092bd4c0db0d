// Differential fuzz target for the cache formats' codecs: bytes -> (format, rounding
// profile, a row of arbitrary float bit patterns: NaN, infinities, subnormals,
// signed zeros, every exponent; lengths not whole groups now and then). The CPU
// must quantize, refuse, dequantize and pack exactly as the model does.
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
#else
  if (want.ok() &&
      !(model::unpack_row(format, model::pack_row(format, want.value())) == want.value()))
    fail("model layout round trip");
#endif
  return 0;
}
