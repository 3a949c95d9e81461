#pragma once
/// safetensors read and write (SPEC §7): an 8-byte little-endian header length, a JSON header mapping each
/// tensor name to {dtype, shape, data_offsets} (plus optional string "__metadata__"), then the data. One
/// reader/writer serves checkpoints and PyTorch import.

#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pact/core/tensor.hpp"

namespace pact::ir {

/// Largest header accepted (docs/limits.md): 16 MiB, a few hundred thousand tensors. The reference
/// implementation allows 100 MB, but a parsed header costs about twenty times its text, so the limit is
/// the memory bound. Weights files themselves have no size limit beyond the host's memory.
inline constexpr std::uint64_t kMaxSafetensorsHeader = 16ull << 20;

/// A parsed file: tensors in file order (by data offset) and the string metadata.
struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  /// The tensor with this name, or nullptr.
  const Tensor* find(std::string_view name) const noexcept;
};

/// Parses bytes. Malformed input is pact::Error(parse_error) naming `where` and the field: header length
/// beyond the file or the limit, non-object header, unknown dtype, shape/offset disagreement, offsets
/// outside the data, overlapping or gapped offsets, duplicate names, non-string metadata.
SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, std::string_view where);
/// Reads and parses a file (io_error when unreadable).
SafetensorsFile read_safetensors(const std::string& path);

/// Serialises tensors (any layout; written contiguous) and metadata.
std::vector<std::byte> serialize_safetensors(const std::vector<std::pair<std::string, TensorView>>& tensors,
                                             const std::map<std::string, std::string>& metadata);
/// Writes atomically: a temporary file beside `path`, fsync, rename over `path`, fsync of the directory.
/// `before_rename` (tests) runs after the temporary file is durable and before the rename.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::function<void()>& before_rename = {});

/// The safetensors dtype string of a Pact dtype ("F32", "BF16", ...); c64 is "C64".
std::string_view safetensors_dtype(DType dtype);

/// A fresh contiguous tensor whose elements are `bytes` (little-endian, row-major); the byte count must be
/// the shape's (invalid_argument otherwise). The one place file readers turn raw bytes into a tensor.
Tensor tensor_from_bytes(DType dtype, const Dims& shape, std::span<const std::byte> bytes);
/// Appends the elements of a view (any layout) to `out`, row-major, little-endian.
void append_tensor_bytes(const TensorView& view, std::vector<std::byte>& out);

}  // namespace pact::ir
