#include "pact/core/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "pact/core/error.hpp"

namespace pact {

// NOLINTBEGIN(bugprone-branch-clone): generated cases; dtypes of one size return the same value
std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
#define PACT_DTYPE_SIZE(name, wire, type, size) \
  case DType::name:                             \
    return size;
    PACT_DTYPES(PACT_DTYPE_SIZE)
#undef PACT_DTYPE_SIZE
  }
  return 0;
}
// NOLINTEND(bugprone-branch-clone)

std::size_t dtype_alignment(DType dtype) noexcept {
  switch (dtype) {
#define PACT_DTYPE_ALIGN(name, wire, type, size) \
  case DType::name:                              \
    return alignof(type);
    PACT_DTYPES(PACT_DTYPE_ALIGN)
#undef PACT_DTYPE_ALIGN
  }
  return 1;
}

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
#define PACT_DTYPE_NAME(name, wire, type, size) \
  case DType::name:                             \
    return wire;
    PACT_DTYPES(PACT_DTYPE_NAME)
#undef PACT_DTYPE_NAME
  }
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  for (int i = 0; i < kDTypeCount; ++i) {
    auto d = static_cast<DType>(i);
    if (dtype_name(d) == name) return d;
  }
  throw_error(ErrorCode::parse_error, "dtype.parse", "unknown dtype '" + std::string(name) + "'");
}

bool is_floating(DType dtype) noexcept {
  return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::bf16 || dtype == DType::f16;
}

std::string DTypeSet::to_string() const {
  std::string s;
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto d = static_cast<DType>(i);
    if (!contains(d)) continue;
    if (!s.empty()) s += '/';
    s += dtype_name(d);
  }
  return s.empty() ? "none" : s;
}

BFloat16 to_bf16(float value) noexcept {
  auto bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return BFloat16{static_cast<std::uint16_t>((bits >> 16) | 0x40u)};
  std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>((bits + rounding) >> 16)};
}

float from_bf16(BFloat16 value) noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16); }

Half to_f16(float value) noexcept {
  auto x = std::bit_cast<std::uint32_t>(value);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return Half{static_cast<std::uint16_t>(sign | 0x7e00u)};   // NaN
  if (abs >= 0x47800000u) return Half{static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65536: inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value = m * 2^-24, round to nearest even.
    if (abs < 0x33000000u) return Half{static_cast<std::uint16_t>(sign)};  // < 2^-25 rounds to 0
    std::uint32_t exp = abs >> 23;
    std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    std::uint32_t shift = 126u - exp;  // 14..24 for exp 102..112
    std::uint32_t half_mant = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1u);
    std::uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return Half{static_cast<std::uint16_t>(sign | half_mant)};
  }
  // Normal: rebias exponent 127 -> 15 and round the 13 dropped mantissa bits to nearest even.
  std::uint32_t rebased = abs - 0x38000000u;
  std::uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
  std::uint32_t h = rounded >> 13;  // carries into the exponent correctly, up to inf (0x7c00)
  return Half{static_cast<std::uint16_t>(sign | h)};
}

float from_f16(Half value) noexcept {
  std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000u) << 16;
  std::uint32_t exp = (value.bits >> 10) & 0x1fu;
  std::uint32_t mant = value.bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

namespace {

// Reads any real dtype as long double: exact for every f32/f64/f16/bf16 and for i64 on x86-64.
long double load_real(DType dtype, const std::byte* src) {
  switch (dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, src, 4);
      return v;
    }
    case DType::f64: {
      double v;
      std::memcpy(&v, src, 8);
      return v;
    }
    case DType::bf16: {
      BFloat16 v;
      std::memcpy(&v, src, 2);
      return from_bf16(v);
    }
    case DType::f16: {
      Half v;
      std::memcpy(&v, src, 2);
      return from_f16(v);
    }
    case DType::i64: {
      std::int64_t v;
      std::memcpy(&v, src, 8);
      return static_cast<long double>(v);
    }
    case DType::i32: {
      std::int32_t v;
      std::memcpy(&v, src, 4);
      return v;
    }
    case DType::u8: {
      std::uint8_t v;
      std::memcpy(&v, src, 1);
      return v;
    }
    case DType::i8: {
      std::int8_t v;
      std::memcpy(&v, src, 1);
      return v;
    }
    case DType::boolean: {
      std::uint8_t v;
      std::memcpy(&v, src, 1);
      return v != 0 ? 1 : 0;
    }
    case DType::c64:
      break;
  }
  throw_error(ErrorCode::unsupported, "dtype.convert", "c64 has no real value");
}

template <class I>
I saturate(long double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<long double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<long double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

void store_real(DType dtype, long double v, std::byte* dst) {
  switch (dtype) {
    case DType::f32: {
      float x = static_cast<float>(v);
      std::memcpy(dst, &x, 4);
      return;
    }
    case DType::f64: {
      double x = static_cast<double>(v);
      std::memcpy(dst, &x, 8);
      return;
    }
    case DType::bf16: {
      BFloat16 x = to_bf16(static_cast<float>(static_cast<double>(v)));
      std::memcpy(dst, &x, 2);
      return;
    }
    case DType::f16: {
      Half x = to_f16(static_cast<float>(static_cast<double>(v)));
      std::memcpy(dst, &x, 2);
      return;
    }
    case DType::i64: {
      auto x = saturate<std::int64_t>(v);
      std::memcpy(dst, &x, 8);
      return;
    }
    case DType::i32: {
      auto x = saturate<std::int32_t>(v);
      std::memcpy(dst, &x, 4);
      return;
    }
    case DType::u8: {
      auto x = saturate<std::uint8_t>(v);
      std::memcpy(dst, &x, 1);
      return;
    }
    case DType::i8: {
      auto x = saturate<std::int8_t>(v);
      std::memcpy(dst, &x, 1);
      return;
    }
    case DType::boolean: {
      std::uint8_t x = (v != 0) ? 1 : 0;
      std::memcpy(dst, &x, 1);
      return;
    }
    case DType::c64:
      break;
  }
  throw_error(ErrorCode::unsupported, "dtype.convert", "c64 has no real value");
}

}  // namespace

void convert_element(DType from, const std::byte* src, DType to, std::byte* dst) {
  if (from == DType::c64 || to == DType::c64) {
    if (from != to) {
      throw_error(ErrorCode::unsupported, "dtype.convert",
                  std::string("no conversion ") + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)) +
                      "; reinterpret c64 as f32 pairs instead");
    }
    std::memcpy(dst, src, 8);
    return;
  }
  if (from == to) {
    std::memcpy(dst, src, dtype_size(from));
    return;
  }
  store_real(to, load_real(from, src), dst);
}

}  // namespace pact
