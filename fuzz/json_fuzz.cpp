// Fuzzes the shared JSON front door: parse_json then canonical_json. Invariants: malformed input is a
// typed pact::Error (never a crash or another exception type); canonicalisation is idempotent under
// re-parsing (parse(canonical(x)) canonicalises to the same text).

#include <cstdint>
#include <string_view>

#include "pact/core/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  pact::Json value;
  try {
    value = pact::parse_json(text, "fuzz");
  } catch (const pact::Error&) {
    return 0;
  }
  std::string canonical;
  try {
    canonical = pact::canonical_json(value);
  } catch (const pact::Error&) {
    return 0;  // non-finite, reserved key or invalid UTF-8: typed refusal
  }
  pact::Json again = pact::parse_json(canonical, "fuzz-canonical");
  // A re-parsed canonical text holds {"$f64": ...} objects, whose key is reserved: canonicalising it
  // must refuse (typed) or, when no float was present, reproduce the text exactly.
  try {
    if (pact::canonical_json(again) != canonical) __builtin_trap();
  } catch (const pact::Error&) {
    if (canonical.find("{\"$f64\":") == std::string::npos) __builtin_trap();
  }
  return 0;
}
