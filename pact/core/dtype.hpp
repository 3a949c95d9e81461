#pragma once
/// Element types (SPEC §4): f32 (all kernels), f64, bf16, f16 (the half provider's compute dtypes), c64
/// (storage and reinterpretation), i64, i32, u8, bool, i8 (quantized weights: linear_int8).

#include <complex>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace pact {

// Note [DType list]
// Declared once: name, C++ storage type, size in bytes. The wire name is the first column.
#define PACT_DTYPES(X)                  \
  X(f32, "f32", float, 4)               \
  X(f64, "f64", double, 8)              \
  X(bf16, "bf16", ::pact::BFloat16, 2)  \
  X(f16, "f16", ::pact::Half, 2)        \
  X(c64, "c64", std::complex<float>, 8) \
  X(i64, "i64", std::int64_t, 8)        \
  X(i32, "i32", std::int32_t, 4)        \
  X(u8, "u8", std::uint8_t, 1)          \
  X(boolean, "bool", bool, 1)           \
  X(i8, "i8", std::int8_t, 1)

/// bfloat16 storage: the upper 16 bits of an IEEE f32. Conversion rounds to nearest even.
struct BFloat16 {
  std::uint16_t bits = 0;
  bool operator==(const BFloat16&) const = default;
};

/// IEEE 754 binary16 storage. Conversion rounds to nearest even, with subnormals, inf and NaN.
struct Half {
  std::uint16_t bits = 0;
  bool operator==(const Half&) const = default;
};

enum class DType : std::uint8_t {
#define PACT_DTYPE_ENUM(name, wire, type, size) name,
  PACT_DTYPES(PACT_DTYPE_ENUM)
#undef PACT_DTYPE_ENUM
};

inline constexpr int kDTypeCount = 10;

/// Size of one element in bytes.
std::size_t dtype_size(DType dtype) noexcept;
/// Required alignment of one element in bytes (its natural alignment).
std::size_t dtype_alignment(DType dtype) noexcept;
/// The wire name: "f32", "f64", "bf16", "f16", "c64", "i64", "i32", "u8", "bool", "i8".
std::string_view dtype_name(DType dtype) noexcept;
/// Parses a wire name; throws pact::Error(parse_error) naming the text.
DType parse_dtype(std::string_view name);
/// True for f32, f64, bf16, f16.
bool is_floating(DType dtype) noexcept;

/// A set of dtypes (one bit per DType): what a provider's kernels compute, as the provider table declares.
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr DTypeSet(std::initializer_list<DType> dtypes) {
    for (DType d : dtypes) bits_ |= bit(d);
  }
  constexpr bool contains(DType dtype) const noexcept { return (bits_ & bit(dtype)) != 0; }
  constexpr bool empty() const noexcept { return bits_ == 0; }
  constexpr bool operator==(const DTypeSet&) const = default;
  /// The members' wire names joined by "/", in DType order ("f32/f64"); "none" when empty.
  std::string to_string() const;

 private:
  static constexpr std::uint32_t bit(DType d) noexcept { return std::uint32_t{1} << static_cast<unsigned>(d); }
  std::uint32_t bits_ = 0;
};

/// The DType of a C++ element type.
template <class T>
struct dtype_of;
#define PACT_DTYPE_OF(name, wire, type, size)                   \
  template <>                                                   \
  struct dtype_of<type> {                                       \
    static constexpr DType value = DType::name;                 \
    static_assert(sizeof(type) == size, "dtype size mismatch"); \
  };
PACT_DTYPES(PACT_DTYPE_OF)
#undef PACT_DTYPE_OF
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

/// f32 -> bf16, round to nearest even; NaN stays NaN.
BFloat16 to_bf16(float value) noexcept;
/// bf16 -> f32, exact.
float from_bf16(BFloat16 value) noexcept;
/// f32 -> f16, round to nearest even; overflow goes to infinity; NaN stays NaN.
Half to_f16(float value) noexcept;
/// f16 -> f32, exact.
float from_f16(Half value) noexcept;

/// Converts one element between real dtypes (everything except c64, which converts only to c64).
/// Float -> integer truncates toward zero as static_cast does; out-of-range values saturate;
/// NaN -> integer is 0; anything -> bool is (value != 0).
/// Throws pact::Error(unsupported) for c64 <-> real.
void convert_element(DType from, const std::byte* src, DType to, std::byte* dst);

}  // namespace pact
