// Fuzzes the safetensors parser: malformed bytes are a typed pact::Error; a file that parses serialises
// and parses back to the same tensor names and shapes.

#include <cstdint>

#include "pact/ir/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  pact::ir::SafetensorsFile f;
  try {
    f = pact::ir::parse_safetensors(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  } catch (const pact::Error&) {
    return 0;
  }
  std::vector<std::pair<std::string, pact::TensorView>> views;
  for (const auto& [n, t] : f.tensors) views.emplace_back(n, t.as_view());
  auto again = pact::ir::parse_safetensors(pact::ir::serialize_safetensors(views, f.metadata), "fuzz-roundtrip");
  if (again.tensors.size() != f.tensors.size()) __builtin_trap();
  for (std::size_t i = 0; i < f.tensors.size(); ++i) {
    if (!(again.find(f.tensors[i].first)->shape() == f.tensors[i].second.shape())) __builtin_trap();
  }
  return 0;
}
