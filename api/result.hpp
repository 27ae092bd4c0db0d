// Result<T, E>: the typed outcome every public call returns. No exceptions cross
// the API; a refusal is a value of the component's error variant.
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>
#include <variant>

namespace aether {

struct Ok {
  friend bool operator==(Ok, Ok) { return true; }
};

template <class T, class E>
class Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(E error) : v_(std::in_place_index<1>, std::move(error)) {}
  // A bare error alternative (e.g. witness_error::RowsMismatch{...}) converts.
  template <class U>
  requires(std::constructible_from<E, U> && !std::constructible_from<T, U> &&
           !std::same_as<std::remove_cvref_t<U>, E>) Result(U&& error)
      : v_(std::in_place_index<1>, E(std::forward<U>(error))) {}

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  [[nodiscard]] const T& value() const { return std::get<0>(v_); }
  [[nodiscard]] T& value() { return std::get<0>(v_); }
  [[nodiscard]] const E& error() const { return std::get<1>(v_); }

  friend bool operator==(const Result& a, const Result& b) { return a.v_ == b.v_; }

 private:
  std::variant<T, E> v_;
};

// A call whose only output is written into caller buffers.
template <class E>
using Status = Result<Ok, E>;

}  // namespace aether
