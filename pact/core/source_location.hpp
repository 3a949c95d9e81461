#pragma once
/// pact::SourceLocation: std::source_location where the standard library offers it, and the same
/// interface over the compiler builtins where it does not (clang 14 with libstdc++ 12 has no
/// __builtin_source_location, so libstdc++ hides std::source_location). Refusals name the user's line
/// with it.

#include <cstdint>
#include <version>
#if __has_include(<source_location>)
#include <source_location>
#endif

namespace pact {

#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          std::uint_least32_t line = __builtin_LINE()) noexcept {
    SourceLocation s;
    s.file_ = file;
    s.line_ = line;
    return s;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr std::uint_least32_t line() const noexcept { return line_; }

 private:
  const char* file_ = "";
  std::uint_least32_t line_ = 0;
};
#endif

}  // namespace pact
