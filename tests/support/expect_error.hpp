#pragma once
// The one helper every test suite uses to assert a typed pact::Error.

#include <gtest/gtest.h>

#include <string>

#include "pact/core/error.hpp"

namespace pact::test {

/// Runs f and returns the code of the pact::Error it throws; fails the test when nothing is thrown.
template <class F>
ErrorCode code_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected a pact::Error";
  return ErrorCode::invalid_argument;
}

/// Runs f and returns the message of the pact::Error it throws; "" (and a test failure) when none is thrown.
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a pact::Error";
  return "";
}

/// True when `text` contains `needle` (error messages name the field, node or operand).
inline bool mentions(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

}  // namespace pact::test
