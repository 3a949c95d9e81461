// Fuzzes the IR wire-format parser and validator (and planning of whatever parses): malformed input must
// be a typed pact::Error; a graph that parses must survive a to_json -> parse round trip with the same
// node count, and plan without crashing under cpu-checked.

#include <cstdint>
#include <string_view>

#include "pact/plan/planner.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  pact::ir::Graph g;
  try {
    g = pact::ir::parse_graph(text, "fuzz");
  } catch (const pact::Error&) {
    return 0;
  }
  pact::ir::Graph again = pact::ir::parse_graph(pact::ir::to_json(g).dump(), "fuzz-roundtrip");
  if (again.nodes.size() != g.nodes.size()) __builtin_trap();
  static const auto profile = pact::contract::builtin_profile("cpu-checked");
  static const pact::contract::DefaultEvidenceResolver resolver;
  auto plan = pact::plan::plan_graph(g, profile, resolver);
  (void)plan;
  return 0;
}
