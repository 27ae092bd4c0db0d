#include "props/support/formats_gen.hpp"

#include <cmath>
#include <limits>
#include <sstream>

#include "model/formats.hpp"

namespace aether::props {

using namespace rc;

const char* format_name(CacheFormat f) {
  static const char* names[] = {"MainFp8", "MainFp4", "IndexFp4", "IndexFp8"};
  return names[int(f)];
}

void showValue(const FormatsCase& c, std::ostream& os) {
  const auto precision = os.precision(9);  // every float's digits
  os << "format " << format_name(c.format) << ", profile " << c.profile << ", row";
  for (float x : c.row) os << " " << x;
  os.precision(precision);
}

namespace {
// The finite non-negative values of an element, ascending.
std::vector<float> element_values(Element e) {
  if (e == Element::E2M1) return {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  std::vector<float> v;
  for (int code = 0; code < 0x7f; ++code) {
    const int ex = code >> 3, m = code & 7;
    v.push_back(ex == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), ex - 10));
  }
  return v;
}

// One group of `n` values in one of the shapes the header names, around scale s.
std::vector<float> group_values(Element e, std::size_t n, float s) {
  const auto values = element_values(e);
  const float top = values.back();
  std::vector<float> g(n);
  for (float& x : g) {
    const float sign = *gen::arbitrary<bool>() ? -1.0f : 1.0f;
    const auto i = *gen::inRange<std::size_t>(0, values.size() - 1);
    switch (*gen::inRange(0, 6)) {
      case 0:
        x = sign * values[i] * s;
        break;  // a code exactly
      case 1:
        x = sign * (values[i] + values[i + 1]) / 2 * s;
        break;  // a tie exactly
      case 2:   // one float either side of a tie
        x = sign * std::nextafter((values[i] + values[i + 1]) / 2 * s,
                                  *gen::arbitrary<bool>() ? 0.0f : 1e30f);
        break;
      case 3:
        x = sign * *gen::element(0.0f, top * s * 2, top * s * 8);
        break;  // saturating
      case 4:
        x = sign * std::ldexp(*gen::inRange(1, 1000) / 1000.0f, *gen::inRange(-30, 20));
        break;
      default:
        x = *gen::element(0.0f, -0.0f, std::numeric_limits<float>::denorm_min());
    }
  }
  // amax exactly top * s, or one ulp past it, now and then
  if (*gen::inRange(0, 3) == 0) {
    g[*gen::inRange<std::size_t>(0, n)] =
        *gen::arbitrary<bool>() ? top * s : std::nextafter(top * s, 1e30f);
  }
  return g;
}

// A row of `groups` groups of format f, each around a scale of its own: a UE8M0
// scale is a power of two, an E4M3 scale any E4M3 value.
std::vector<float> row_values(GroupFormat f, std::size_t groups) {
  std::vector<float> row;
  for (std::size_t g = 0; g < groups; ++g) {
    const float s = f.scale == ScaleKind::UE8M0
                        ? std::ldexp(1.0f, *gen::inRange(-40, 100))
                        : *gen::element(1.0f, 1.5f, 0.1875f, 448.0f, std::ldexp(1.0f, -9), 13.0f);
    const auto values = group_values(f.element, f.group, s);
    row.insert(row.end(), values.begin(), values.end());
  }
  return row;
}
}  // namespace

Gen<FormatsCase> gen_formats_row() {
  return gen::exec([] {
    FormatsCase c;
    c.format = *gen::element(CacheFormat::MainFp8, CacheFormat::MainFp4, CacheFormat::IndexFp4);
    c.profile = *gen::element(RoundingProfile::Cuda, RoundingProfile::TiesTowardZero);
    c.row = row_values(group_format(c.format), *gen::inRange<std::size_t>(1, 5));
    return c;
  });
}

Gen<FormatsCase> gen_faulty_formats_row() {
  return gen::exec([] {
    FormatsCase c = *gen_formats_row();
    switch (*gen::inRange(0, 8)) {
      case 0:
        c.row[*gen::inRange<std::size_t>(0, c.row.size())] = *gen::element(
            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
            -std::numeric_limits<float>::infinity());
        break;
      case 1:
        c.row.pop_back();
        break;
      case 2:
        c.format = CacheFormat::IndexFp8;
        break;
      default:
        break;
    }
    return c;
  });
}

void showValue(const StoreCase& c, std::ostream& os) {
  const auto precision = os.precision(9);  // every float's digits
  os << "format " << format_name(c.cache.format) << ", D " << c.cache.dim << ", "
     << c.cache.rows_per_block << " rows a block, " << c.cache.blocks << " blocks, profile "
     << c.profile << "\nslots";
  for (auto s : c.slots) os << " " << s;
  os << "\nreads";
  for (auto s : c.reads) os << " " << s;
  os << "\nrows";
  for (float x : c.rows) os << " " << x;
  os.precision(precision);
}

Gen<StoreCase> gen_store_case() {
  return gen::exec([] {
    StoreCase c;
    const auto format =
        *gen::element(CacheFormat::MainFp8, CacheFormat::MainFp4, CacheFormat::IndexFp4);
    c.cache = {format, group_format(format).group * *gen::inRange<std::size_t>(1, 5),
               *gen::inRange<std::size_t>(1, 5), *gen::inRange<std::size_t>(1, 4)};
    c.profile = *gen::element(RoundingProfile::Cuda, RoundingProfile::TiesTowardZero);
    const auto n = *gen::inRange<std::size_t>(0, 7);
    for (std::size_t j = 0; j < n; ++j) {
      auto row = row_values(group_format(format), c.cache.dim / group_format(format).group);
      if (*gen::inRange(0, 8) == 0)
        row[*gen::inRange<std::size_t>(0, row.size())] = *gen::element(
            std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity());
      c.rows.insert(c.rows.end(), row.begin(), row.end());
    }
    for (std::size_t j = 0; j < n; ++j)
      c.slots.push_back(*gen::inRange<std::int32_t>(-2, std::int32_t(c.cache.slots()) + 1));
    for (std::size_t b = 0; b < c.cache.bytes(); ++b)
      c.before.push_back(std::byte(*gen::arbitrary<std::uint8_t>()));
    for (int j = 0; j < 4; ++j)
      c.reads.push_back(*gen::inRange<std::int32_t>(-1, std::int32_t(c.cache.slots())));
    return c;
  });
}

std::string cache_report(const CacheGeometry& g, const std::vector<std::byte>& want,
                         const std::vector<std::byte>& got, const std::vector<bool>& ignored) {
  if (got.size() != want.size())
    return "cache of " + std::to_string(got.size()) + " bytes, expected " +
           std::to_string(want.size());
  std::vector<std::int64_t> slot_of(want.size(), -1);
  for (std::size_t s = 0; s < g.slots(); ++s)
    for (const std::size_t b : model::bytes_of_slot(g, s)) slot_of[b] = std::int64_t(s);
  std::ostringstream os;
  int shown = 0;
  for (std::size_t b = 0; b < want.size() && shown < 8; ++b) {
    if (want[b] == got[b] || (!ignored.empty() && ignored[b])) continue;
    os << "byte " << b << " (slot " << slot_of[b] << "): want 0x" << std::hex << int(want[b])
       << ", got 0x" << int(got[b]) << std::dec << "\n";
    ++shown;
  }
  return os.str();
}

std::vector<bool> bytes_a_refused_store_may_change(const CacheGeometry& g,
                                                   const std::vector<std::int32_t>& slots) {
  std::vector<bool> marked(g.bytes(), false);
  for (const std::size_t s : model::slots_a_refused_store_may_change(g, slots))
    for (const std::size_t b : model::bytes_of_slot(g, s)) marked[b] = true;
  return marked;
}

}  // namespace aether::props
