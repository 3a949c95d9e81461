// Fuzzes the contract YAML and binding parsers (yaml-cpp underneath): any input must parse or fail with a
// typed pact::Error; nesting and size are bounded before yaml-cpp sees the text.

#include <cstdint>
#include <string_view>

#include "pact/spec/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto c = pact::spec::parse_contract(text, "fuzz.yaml");
    if (c.obligations.empty() || c.gate.must_catch.empty()) __builtin_trap();
  } catch (const pact::Error&) {
  }
  try {
    const auto b = pact::spec::parse_bindings(text, "fuzz.yaml");
    if (b.policy != "AllImplemented") __builtin_trap();
  } catch (const pact::Error&) {
  }
  return 0;
}
