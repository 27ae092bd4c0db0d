// Runs a model function (which returns a new vector) behind a backend's
// "write into this buffer" signature, so hand examples and properties treat the
// model as one more backend. A size mismatch is reported with the component's
// own error, built by `size_error(expected, actual)`.
#pragma once

#include <algorithm>
#include <span>
#include <vector>

#include "api/result.hpp"

namespace aether::props {

template <class T, class E, class SizeError>
Status<E> write_into(const Result<std::vector<T>, E>& result, std::span<T> out,
                     SizeError size_error) {
  if (!result) return result.error();
  if (result.value().size() != out.size()) return size_error(result.value().size(), out.size());
  std::copy(result.value().begin(), result.value().end(), out.begin());
  return Ok{};
}

}  // namespace aether::props
