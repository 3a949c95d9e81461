#pragma once
/// The parameter materializer (SPEC §11, seed 002 "Validator-owned materialization"): builds the exact
/// CUDA parameter frame of one launch from a live call, with Pact's closed primitives only:
///   pointer          an 8-byte device address projected from an admitted binding (never from the plan)
///   scalar           a checked expression packed as an exact integer type (range-checked)
///   packed_struct    a zeroed frame of declared size and alignment with fields written at checked offsets
///   fast_divmod_u32  Pact's fixed 12-byte record {divisor, multiplier, shift} (u32 each)
///   tma_descriptor   a 128-byte tensor map: encoded only on a CUDA machine (here: unsupported, fail closed)
///   group_handle     vocabulary only: no resolver is installed, so a plan needing it fails closed
/// Each parameter's byte width must equal the kernel contract's declared width exactly. The frame places
/// each parameter at its natural alignment; offsets and widths are reported with the bytes.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "pact/seal/expr.hpp"

namespace pact::seal {

enum class ScalarType : std::uint8_t { i32, u32, i64, u64 };
std::string_view scalar_type_name(ScalarType t) noexcept;
/// "i32" | "u32" | "i64" | "u64"; invalid_argument otherwise.
ScalarType parse_scalar_type(std::string_view name);
std::uint32_t scalar_width(ScalarType t) noexcept;

struct PointerParam {
  std::string binding;
};
struct ScalarParam {
  ScalarType type;
  Expr value;
};
struct PackedField {
  std::uint32_t offset;
  ScalarType type;
  Expr value;
};
struct PackedStructParam {
  std::uint32_t size;
  std::uint32_t alignment;  ///< power of two, at most 16
  std::vector<PackedField> fields;
};
struct FastDivmodParam {
  Expr divisor;
};
/// A tiled tensor map over a bound tensor: its element type (f32 | f16 | bf16 | f64 | i32 | u8), the box
/// (one checked expression per tensor dimension, outermost first, each in [1, 256]) and the swizzle
/// (none | 32B | 64B | 128B). Element strides are 1, no interleave, no L2 promotion, no NaN fill.
struct TmaDescriptorParam {
  std::string binding;
  std::string dtype = "f32";
  std::vector<Expr> box;
  std::string swizzle = "none";
};
struct GroupHandleParam {
  std::string group;
};
using ParamSpec =
    std::variant<PointerParam, ScalarParam, PackedStructParam, FastDivmodParam, TmaDescriptorParam, GroupHandleParam>;

/// The byte width a parameter occupies (pointer 8, scalar its type, struct its size, divmod 12, TMA 128,
/// group handle 8).
std::uint32_t param_width(const ParamSpec& p);

/// Checks a packed struct's declaration: power-of-two alignment <= 16, size a positive multiple of it and
/// at most 4,096 bytes, fields inside it at offsets aligned to their width and not overlapping.
void check_packed_struct(const PackedStructParam& p);

/// Pact's fast_divmod_u32 record for a divisor in [1, 2^32): for 0 <= n < 2^31 (the kernels' int range),
/// quotient(n) = d == 1 ? n : umulhi(n, multiplier) >> shift equals n / d.
struct FastDivmod {
  std::uint32_t divisor, multiplier, shift;
  std::uint32_t quotient(std::uint32_t n) const noexcept;
};
FastDivmod make_fast_divmod(std::int64_t divisor);

/// What a tensor map encodes, in the CUDA driver's order (innermost dimension first).
struct TmaRequest {
  std::string dtype;
  std::uint64_t address = 0;
  std::vector<std::uint64_t> dims;          ///< innermost first
  std::vector<std::uint64_t> stride_bytes;  ///< dimensions 1.. (the innermost is contiguous)
  std::vector<std::uint32_t> box;           ///< innermost first
  std::string swizzle;
};
/// The validator's encoder (admission installs one over cuTensorMapEncodeTiled): writes the 128-byte
/// descriptor or throws. Never candidate code.
using TmaEncoder = std::function<void(const TmaRequest&, std::byte* descriptor)>;
/// Element size of a TMA element type; invalid_argument for another name.
std::uint32_t tma_element_size(std::string_view dtype);
/// Checks the swizzle name; invalid_argument otherwise.
void require_tma_swizzle(std::string_view swizzle);

struct ParameterFrame {
  std::vector<std::byte> bytes;
  std::vector<std::uint32_t> offsets;
  std::vector<std::uint32_t> widths;
};

/// Materializes one launch's parameters. `declared_widths` is the kernel contract (one width per formal
/// parameter); `device_pointers` maps admitted binding names to device addresses.
/// A tma_descriptor parameter needs `tma` (a CUDA machine's encoder); without one it is unsupported and
/// fails closed. The tensor must be rank 1-5 with a contiguous innermost dimension, outer strides
/// multiples of 16 bytes, and the box's innermost extent a multiple of 16 bytes.
ParameterFrame materialize(std::span<const ParamSpec> params, std::span<const std::uint32_t> declared_widths,
                           const CallData& call,
                           const std::map<std::string, std::uint64_t, std::less<>>& device_pointers,
                           const TmaEncoder* tma = nullptr);

}  // namespace pact::seal
