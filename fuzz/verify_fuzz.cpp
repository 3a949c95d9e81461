// Fuzzes the JSON readers of pact/verify: the op oracle's case list (ops.json, against a small tensor file)
// and pact_mutation_gate's report. Any input must be read or refused with a typed pact::Error.

#include <cstdint>
#include <string_view>

#include "pact/core/json.hpp"
#include "pact/verify/gate.hpp"
#include "pact/verify/oracle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  pact::Json doc;
  try {
    doc = pact::parse_json(text, "fuzz");
  } catch (const pact::Error&) {
    return 0;
  }
  static const pact::ir::SafetensorsFile tensors = [] {
    pact::ir::SafetensorsFile st;
    for (const char* name : {"c0.in0", "c0.out", "c0.cot", "c0.grad0", "c0.state0"})
      st.tensors.emplace_back(name, pact::Tensor::from_values<double>(pact::Dims{2}, std::vector<double>{1.0, -2.0}));
    return st;
  }();
  try {
    for (const auto& c : pact::verify::parse_oracle_cases(doc, tensors, "fuzz")) {
      if (c.id.empty() && c.inputs.size() > 16) __builtin_trap();
    }
  } catch (const pact::Error&) {
  }
  try {
    for (const auto& [contract, m] : pact::verify::parse_mutation_report(doc, "fuzz")) {
      if (m.killed + m.equivalent + m.survivors.size() != m.generated) __builtin_trap();  // checked on read
    }
  } catch (const pact::Error&) {
  }
  return 0;
}
