// The formats' checks of props/support/agreement.hpp: a row quantizer, and a
// store with its read side.
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <vector>

#include "model/formats.hpp"
#include "props/support/agreement.hpp"
#include "props/support/compare.hpp"

namespace aether::props {

namespace {
// "0x0b (-3/2)": a code and its value
std::string code_text(Element element, std::uint8_t code) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(2) << std::setfill('0') << int(code) << std::dec << " ("
     << model::element_value(element, code).str() << ")";
  return os.str();
}

// The store given again with what a caller fixes after a refusal: NaN/inf stored
// as 0, a slot outside the cache and every later row on a slot made placeholders.
StoreCase repaired(StoreCase c) {
  std::vector<bool> taken(c.cache.slots(), false);
  for (std::size_t j = 0; j < c.slots.size(); ++j) {
    auto& s = c.slots[j];
    if (s < -1 || s >= std::int32_t(c.cache.slots()) || (s >= 0 && taken[std::size_t(s)])) s = -1;
    if (s >= 0) taken[std::size_t(s)] = true;
    for (std::size_t e = 0; e < c.cache.dim; ++e)
      if (!std::isfinite(c.rows[j * c.cache.dim + e])) c.rows[j * c.cache.dim + e] = 0;
  }
  return c;
}

// `what` failed: the message with the backend's name, unless `report` is empty
void fail_on(const std::string& report, const std::string& name, const std::string& what) {
  if (!report.empty()) RC_FAIL(name + ": " + what + "\n" + report);
}

}  // namespace

std::vector<RoundingProfile> profiles_followed(CacheFormat format, std::span<const float> row,
                                               const QuantizedRow& got) {
  std::vector<RoundingProfile> followed;
  for (RoundingProfile p : {RoundingProfile::Cuda, RoundingProfile::TiesTowardZero})
    if (const auto want = model::quantize_row(format, row, p); want.ok() && want.value() == got)
      followed.push_back(p);
  return followed;
}

void check_quantizer_agreement(const Quantizer& quantize, const FormatsCase& c,
                               RoundingProfile profile, const std::string& name) {
  const auto want = model::quantize_row(c.format, c.row, profile);
  const auto got = quantize(c.format, c.row);
  std::ostringstream os;
  os << std::setprecision(9) << name << ", profile " << profile;
  if (auto d = verdict_report(got, want, os.str()); !d.empty()) RC_FAIL(d);
  if (!want.ok()) return;
  os << ": ";
  const QuantizedRow &w = want.value(), &g = got.value();
  if (g == w) return;
  if (g.codes.size() != w.codes.size() || g.scales.size() != w.scales.size()) {
    os << g.codes.size() << " codes and " << g.scales.size() << " scales, the model's "
       << w.codes.size() << " and " << w.scales.size();
    RC_FAIL(os.str());
  }
  const GroupFormat f = group_format(c.format);
  std::vector<std::size_t> codes, scales;  // the differing places
  for (std::size_t i = 0; i < w.codes.size(); ++i)
    if (g.codes[i] != w.codes[i]) codes.push_back(i);
  for (std::size_t s = 0; s < w.scales.size(); ++s)
    if (g.scales[s] != w.scales[s]) scales.push_back(s);
  os << codes.size() << " of " << w.codes.size() << " codes and " << scales.size() << " of "
     << w.scales.size() << " scales differ; the row follows ";
  const auto followed = profiles_followed(c.format, c.row, g);
  if (followed.empty()) os << "no named profile";
  for (std::size_t i = 0; i < followed.size(); ++i) os << (i ? " and " : "") << followed[i];
  for (std::size_t n = 0; n < std::min<std::size_t>(scales.size(), 4); ++n) {
    const std::size_t s = scales[n];
    os << "\n  scale [" << s << "] of elements [" << s * f.group << ", " << (s + 1) * f.group
       << "): expected byte " << int(w.scales[s]) << " ("
       << model::scale_value(f.scale, w.scales[s]).str() << "), actual " << int(g.scales[s]) << " ("
       << model::scale_value(f.scale, g.scales[s]).str() << ")";
  }
  for (std::size_t n = 0; n < std::min<std::size_t>(codes.size(), 8); ++n) {
    const std::size_t i = codes[n], group = i / f.group;
    const model::Rational scale = model::scale_value(f.scale, w.scales[group]);
    const model::Rational q = model::exact(c.row[i]) / scale;
    os << "\n  code [" << i << "] (group " << group << "): x = " << c.row[i] << ", scale "
       << scale.str() << ", x / scale = " << q.str() << ": expected "
       << code_text(f.element, w.codes[i]) << ", actual " << code_text(f.element, g.codes[i]);
    const model::Rational e = model::element_value(f.element, w.codes[i]),
                          a = model::element_value(f.element, g.codes[i]);
    if (g.scales[group] == w.scales[group] && e != a && abs(q - e) == abs(q - a))
      os << " (a tie: x / scale is halfway between them)";
  }
  RC_FAIL(os.str());
}

void check_store_agreement(const StoreBackend& b, const StoreCase& c) {
  if (!b.store) return;  // left empty: not checked
  auto model_cache = c.before, cache = c.before;
  const auto want = model::store_rows(c.cache, c.rows, c.slots, model_cache, c.profile);
  const auto got = b.store(c, cache);
  RC_TAG(want.ok() ? "stored" : "refused");
  if (auto d = verdict_report(got, want, b.name + " store"); !d.empty()) RC_FAIL(d);
  if (!want.ok()) {
    if (b.transactional)
      fail_on(cache_report(c.cache, c.before, cache), b.name, "a refused store changed the cache");
    fail_on(
        cache_report(c.cache, c.before, cache, bytes_a_refused_store_may_change(c.cache, c.slots)),
        b.name, "a refused store changed bytes outside its own slots");
    auto fixed = repaired(c);
    auto without = c.before;
    if (!b.store(fixed, cache).ok() || !b.store(fixed, without).ok())
      RC_FAIL(b.name + ": the repaired store was refused");
    fail_on(cache_report(c.cache, without, cache), b.name,
            "after a refused store, the repaired one leaves another cache than it does alone");
    return;
  }
  fail_on(cache_report(c.cache, model_cache, cache), b.name, "the stored cache differs");
  if (!b.gather) return;
  const auto values = model::gather_rows(c.cache, model_cache, c.reads);
  const auto doubles = b.gather(c, model_cache);
  if (auto d = verdict_report(doubles, values, b.name + " gather"); !d.empty()) RC_FAIL(d);
  if (!values.ok()) return;
  for (std::size_t i = 0; i < values.value().size(); ++i)
    if (model::exact(doubles.value()[i]) != values.value()[i]) {
      std::ostringstream os;
      os << std::setprecision(17) << b.name << " gather: value " << i << " (slot "
         << c.reads[i / c.cache.dim] << ", element " << i % c.cache.dim << "): expected "
         << values.value()[i].str() << " (" << values.value()[i].convert_to<double>()
         << "), actual " << doubles.value()[i];
      RC_FAIL(os.str());
    }
}

}  // namespace aether::props
