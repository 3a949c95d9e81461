// Expected<T, E>'s value() on a failure, and PACT_DCHECK (compiled in here: NDEBUG is undefined before the
// first include, as in the debug preset).

#undef NDEBUG

#include "pact/core/expected.hpp"

#include <gtest/gtest.h>

#include "pact/core/error.hpp"

namespace pact {
namespace {

TEST(Expected, ValueOfAFailureThrowsItsErrorAndKeepsTheReturnedInput) {
  Expected<int, Returned<std::string>> e =
      Unexpected(Returned<std::string>{"the caller's input", Error(ErrorCode::overlap, "group.split", "overlap")});
  try {
    (void)e.value();
    FAIL() << "value() of a failure returned";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::overlap);
    EXPECT_EQ(err.operation(), "group.split");
  }
  EXPECT_EQ(e.error().input, "the caller's input");  // nothing handed back was lost
  Expected<int, Error> plain = Unexpected(Error(ErrorCode::io_error, "read", "gone"));
  try {
    (void)plain.value();
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::io_error);
  }
  Expected<int, int> other = Unexpected(7);
  try {
    (void)other.value();
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::internal);
  }
  Expected<int, Error> ok = 3;
  EXPECT_EQ(ok.value(), 3);
}

TEST(Dcheck, AFailedInvariantIsATypedInternalErrorNamingIt) {
  const int rows = 3;
  EXPECT_NO_THROW(PACT_DCHECK(rows == 3, "test"));
  try {
    PACT_DCHECK(rows == 4, "test.op");
    FAIL() << "a false invariant passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::internal);
    EXPECT_NE(std::string(e.what()).find("rows == 4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected_test.cpp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pact
