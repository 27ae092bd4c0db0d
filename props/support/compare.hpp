// The one comparison helper of every differential check (SPEC section 7): model
// result vs an impl's status and output buffer. An empty string means agreement;
// otherwise the report names both answers and the first and last differing
// positions. Nothing is ever accepted "mostly": one differing element fails.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "api/result.hpp"
#include "props/support/model_adapter.hpp"

namespace aether::props {

template <class T>
std::string show_span(std::span<const T> v, std::size_t limit = 48) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < v.size() && i < limit; ++i) os << (i ? ", " : "") << v[i];
  if (v.size() > limit) os << ", ... (" << v.size() << " elements)";
  os << "]";
  return os.str();
}

// Element-wise comparison; reports the first and last few differences.
template <class T>
std::string diff_report(std::span<const T> expected, std::span<const T> actual,
                        const std::string& what = "output") {
  std::ostringstream os;
  if (expected.size() != actual.size()) {
    os << what << ": size " << actual.size() << ", expected " << expected.size() << "\n"
       << "  expected " << show_span(expected) << "\n  actual   " << show_span(actual);
    return os.str();
  }
  std::vector<std::size_t> diff;
  for (std::size_t i = 0; i < expected.size(); ++i)
    if (!(expected[i] == actual[i])) diff.push_back(i);
  if (diff.empty()) return {};
  os << what << ": " << diff.size() << " of " << expected.size() << " positions differ\n";
  const auto line = [&](std::size_t i) {
    os << "  [" << i << "] expected " << expected[i] << ", actual " << actual[i] << "\n";
  };
  const std::size_t shown = 4;
  for (std::size_t k = 0; k < diff.size() && k < shown; ++k) line(diff[k]);
  if (diff.size() > 2 * shown) os << "  ...\n";
  for (std::size_t k = std::max(shown, diff.size() > shown ? diff.size() - shown : 0);
       k < diff.size(); ++k)
    line(diff[k]);
  os << "  expected " << show_span(expected) << "\n  actual   " << show_span(actual);
  return os.str();
}

// A caller buffer with guard elements on both sides, so that a backend writing past
// its output is reported as a counterexample (`overrun()`) instead of corrupting the
// property's own memory: `span()` is what the backend gets; `values()` a copy of it.
template <class T>
class Guarded {
 public:
  static constexpr std::size_t kGuard = 64;
  Guarded(std::span<const T> contents, T guard)
      : guard_(guard), all_(contents.size() + 2 * kGuard, guard) {
    std::copy(contents.begin(), contents.end(), all_.begin() + kGuard);
  }
  std::span<T> span() { return std::span<T>(all_).subspan(kGuard, all_.size() - 2 * kGuard); }
  std::vector<T> values() const {
    return std::vector<T>(all_.begin() + kGuard, all_.end() - kGuard);
  }
  // Empty, or where the backend wrote outside its buffer.
  std::string overrun(const std::string& what) const {
    const std::size_t n = all_.size() - 2 * kGuard;
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (!(all_[i] == guard_))
        return what + ": wrote " + std::to_string(kGuard - i) + " elements before its buffer";
      if (!(all_[kGuard + n + i] == guard_))
        return what + ": wrote at element " + std::to_string(n + i) + " of a buffer of " +
               std::to_string(n);
    }
    return {};
  }

 private:
  T guard_;
  std::vector<T> all_;
};

// "" when the impl's verdict is the model's (both accept, or both refuse with the
// same error); else what each said. Any two results or statuses of one error type.
template <class Impl, class Model>
std::string verdict_report(const Impl& impl, const Model& model, const std::string& backend) {
  std::ostringstream os;
  if (!model.ok() && impl.ok())
    os << backend << " accepted a call the model refuses with " << model.error();
  else if (!model.ok() && !(impl.error() == model.error()))
    os << backend << " refused with " << impl.error() << ", model with " << model.error();
  else if (model.ok() && !impl.ok())
    os << backend << " refused with " << impl.error() << " a call the model accepts";
  return os.str();
}

// Model says value or refusal; the impl must say the same, and on a refusal its
// output buffer must be bit-identical to what it held before the call.
template <class T, class E>
std::string differential_report(const Result<std::vector<T>, E>& model, const Status<E>& impl,
                                std::span<const T> out_before, std::span<const T> out_after,
                                const std::string& backend) {
  if (auto d = verdict_report(impl, model, backend); !d.empty()) return d;
  if (!model.ok())
    return diff_report(out_before, out_after, backend + " wrote into the buffer of a refused call");
  return diff_report(std::span<const T>(model.value()), out_after, backend);
}

}  // namespace aether::props
