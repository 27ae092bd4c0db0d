// The model's answers (new vectors) against a backend's caller buffers: what a
// buffer of a given length must receive (model_into_buffer), the model run behind
// a backend's "write into this buffer" signature (write_into), so hand examples
// and properties treat the model as one more backend, and the lengths the faulty
// calls of the generators give their buffers (off_by). A size mismatch is reported
// with the component's own error, built by `size_error(expected, actual)`.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "api/result.hpp"

namespace aether::props {

// What a backend writing into a buffer of `out_len` elements must answer where the
// model answers `want`: the same, or the size refusal when the model accepts and the
// buffer has the wrong length (backends check their output after the model's
// refusals).
template <class T, class E, class SizeError>
Result<std::vector<T>, E> model_into_buffer(Result<std::vector<T>, E> want, std::size_t out_len,
                                            SizeError size_error) {
  if (want.ok() && want.value().size() != out_len) return size_error(want.value().size(), out_len);
  return want;
}

template <class T, class E, class SizeError>
Status<E> write_into(const Result<std::vector<T>, E>& result, std::span<T> out,
                     SizeError size_error) {
  const auto answer = model_into_buffer(result, out.size(), size_error);
  if (!answer) return answer.error();
  std::copy(answer.value().begin(), answer.value().end(), out.begin());
  return Ok{};
}

// A buffer `delta` elements off the `needed` length, and never the needed length
// unless `delta` is 0: a buffer shorter than empty is made longer instead.
inline std::size_t off_by(std::size_t needed, std::ptrdiff_t delta) {
  if (delta < 0 && std::size_t(-delta) > needed) return needed + std::size_t(-delta);
  return std::size_t(std::ptrdiff_t(needed) + delta);
}

}  // namespace aether::props
