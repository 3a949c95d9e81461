// Fuzzes the NumPy readers: the first byte picks .npy or .npz, the rest is the file. Malformed bytes are a
// typed pact::Error; an array that parses serialises and parses back to the same dtype, shape and bytes.

#include <cstdint>
#include <cstring>

#include "pact/ir/numpy.hpp"

namespace {

bool same(const pact::Tensor& a, const pact::Tensor& b) {
  if (a.dtype() != b.dtype() || !(a.shape() == b.shape())) return false;
  std::vector<std::byte> x, y;
  pact::ir::append_tensor_bytes(a.as_view(), x);
  pact::ir::append_tensor_bytes(b.as_view(), y);
  return x == y;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool npz = (data[0] & 1) != 0;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  try {
    if (npz) {
      const auto file = pact::ir::parse_npz(bytes, "fuzz");
      std::vector<std::pair<std::string, pact::TensorView>> views;
      for (const auto& [n, t] : file.tensors) views.emplace_back(n, t.as_view());
      const auto again = pact::ir::parse_npz(pact::ir::serialize_npz(views), "fuzz-roundtrip");
      if (again.tensors.size() != file.tensors.size()) __builtin_trap();
      for (std::size_t i = 0; i < file.tensors.size(); ++i) {
        if (again.tensors[i].first != file.tensors[i].first) __builtin_trap();
        if (!same(again.tensors[i].second, file.tensors[i].second)) __builtin_trap();
      }
    } else {
      const pact::Tensor t = pact::ir::parse_npy(bytes, "fuzz");
      if (!same(pact::ir::parse_npy(pact::ir::serialize_npy(t.as_view()), "fuzz-roundtrip"), t)) __builtin_trap();
    }
  } catch (const pact::Error&) {
    return 0;
  }
  return 0;
}
