#pragma once
/// Expected<T, E>: a value or the typed failure that hands the caller's inputs back (SPEC §13).
/// libstdc++ 12 has no std::expected in C++20; this is the minimal subset Pact uses.

#include <type_traits>
#include <utility>
#include <variant>

#include "pact/core/error.hpp"

namespace pact {

/// Wraps a failure value so that Expected<T, E> can be built from it unambiguously.
template <class E>
struct Unexpected {
  explicit Unexpected(E e) : error(std::move(e)) {}  // a constructor, not aggregate init: clang 14 lacks P0960
  E error;
};
template <class E>
Unexpected(E) -> Unexpected<E>;

/// Either a T or an E. Move-only when either is.
template <class T, class E>
class Expected {
 public:
  Expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  template <class F>
  Expected(Unexpected<F> failure) : state_(std::in_place_index<1>, std::move(failure.error)) {}

  /// True when a value is held.
  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  /// The value. Without one it throws a copy of the failure's pact::Error (E itself, or E's `error` member
  /// as in Returned<Input>), or pact::Error(internal) for another E; the failure, and any input it hands
  /// back, stays in place for error().
  T& value() & {
    if (!has_value()) throw_failure();
    return std::get<0>(state_);
  }
  T&& value() && {
    if (!has_value()) throw_failure();
    return std::get<0>(std::move(state_));
  }
  const T& value() const& {
    if (!has_value()) throw_failure();
    return std::get<0>(state_);
  }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  /// The failure. Precondition: !has_value(); with a value it throws std::bad_variant_access.
  E& error() & { return std::get<1>(state_); }
  E&& error() && { return std::get<1>(std::move(state_)); }
  const E& error() const& { return std::get<1>(state_); }

 private:
  [[noreturn]] void throw_failure() const {
    const E& e = std::get<1>(state_);
    if constexpr (std::is_base_of_v<Error, E>) {
      throw e;
    } else if constexpr (requires { e.error; }) {
      if constexpr (std::is_base_of_v<Error, std::decay_t<decltype(e.error)>>) throw e.error;
    }
    throw_error(ErrorCode::internal, "expected.value", "value() of an Expected that holds a failure");
  }

  std::variant<T, E> state_;
};

/// A failure that returns the caller's input unchanged together with the error.
template <class Input>
struct Returned {
  Input input;
  Error error;
};

}  // namespace pact
