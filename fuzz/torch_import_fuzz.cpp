// Fuzzes the PyTorch captured-graph adapter (pact.torch-export.v1 -> IR): malformed, inconsistent or
// unsupported captures must be a typed pact::Error; a capture that imports must give a graph that
// survives a wire-format round trip with the same node count.

#include <cstdint>
#include <string_view>

#include "pact/ir/torch_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  pact::ir::TorchImport m;
  try {
    m = pact::ir::import_torch_graph(text, "fuzz");
  } catch (const pact::Error&) {
    return 0;
  }
  pact::ir::Graph again = pact::ir::parse_graph(pact::ir::to_json(m.graph).dump(), "fuzz-roundtrip");
  if (again.nodes.size() != m.graph.nodes.size()) __builtin_trap();
  for (const auto& o : m.outputs) {
    if (m.graph.find(o.node) == nullptr) __builtin_trap();
  }
  return 0;
}
