#pragma once
/// NumPy's file formats, for users' own inputs and outputs: .npy (one array: the magic "\x93NUMPY", a
/// version, a little-endian header length, a Python-literal header {'descr': '<f4', 'fortran_order': False,
/// 'shape': (2, 3)}, then the C-order data) and .npz (a zip archive of NAME.npy members, stored or
/// deflated, read through libzip). And the one entry point that reads a tensor file by its extension.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/tensor.hpp"
#include "pact/ir/safetensors.hpp"

namespace pact::ir {

/// Largest .npy header accepted (docs/limits.md): NumPy's own reader stops at 10,000 bytes.
inline constexpr std::uint64_t kMaxNpyHeader = 64ull << 10;
/// Most members of an .npz archive.
inline constexpr std::uint64_t kMaxNpzMembers = 65536;
/// Largest total of the bytes an .npz archive's members inflate to, checked from the archive's directory
/// before any member is read and again while reading (a member that inflates past its declared size fails).
inline constexpr std::uint64_t kMaxNpzInflatedBytes = 8ull << 30;

/// Parses one .npy array: dtypes f4 f8 f2 i8 i4 u1 b1 (little-endian or byte-free), C order. Malformed
/// input is pact::Error(parse_error) naming `where` and the field; a big-endian, Fortran-order, object or
/// other dtype array is unsupported, saying which.
Tensor parse_npy(std::span<const std::byte> bytes, std::string_view where);
/// Serialises a tensor as .npy version 1.0 (any layout, written C-order). bf16 and c64 have no NumPy
/// dtype: invalid_argument.
std::vector<std::byte> serialize_npy(const TensorView& view);
/// Parses an .npz archive: one tensor per NAME.npy member, named NAME, in archive order.
SafetensorsFile parse_npz(std::span<const std::byte> bytes, std::string_view where);
/// Serialises named tensors as an .npz archive (stored members), as numpy.savez writes.
std::vector<std::byte> serialize_npz(const std::vector<std::pair<std::string, TensorView>>& tensors);

/// Reads the tensors of a .safetensors, .npz or .npy file, by the path's extension (a .npy file's one
/// tensor is named after the file's stem). Another extension is invalid_argument naming the path.
SafetensorsFile read_tensor_file(const std::string& path);
/// Writes named tensors to a .safetensors, .npz or .npy file (one tensor only), atomically, by extension.
void write_tensor_file(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors);

}  // namespace pact::ir
