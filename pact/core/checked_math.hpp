#pragma once
/// Overflow-checked integer arithmetic for layout computations (SPEC §4: descriptors are checked once).

#include <cstdint>
#include <optional>

namespace pact::core {

/// a + b, or nullopt on overflow.
inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a * b, or nullopt on overflow.
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) noexcept {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace pact::core
