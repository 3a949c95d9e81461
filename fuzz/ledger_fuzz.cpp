// Fuzzes the obligations-ledger parsers (toml++ underneath for the manifest, the JSON reader for receipts)
// and the structural checks that run on what they accept: any input must parse or yield diagnostics, and
// a parsed manifest or receipt must survive every check without a crash.

#include <cstdint>
#include <string_view>

#include "pact/ledger/ledger.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  pact::ledger::Diagnostics d;
  const auto m = pact::ledger::parse_manifest(text, "fuzz.toml", d);
  if (!m && d.empty()) __builtin_trap();  // a refusal always says why
  if (m) {
    pact::ledger::check_structure(*m, d);
    pact::ledger::check_transition(*m, *m, d);
    (void)pact::ledger::summarize(*m, nullptr, "head", std::nullopt);
  }
  pact::ledger::Diagnostics r;
  const auto receipt = pact::ledger::parse_receipt(text, "fuzz.json", r);
  if (!receipt && r.empty()) __builtin_trap();
  if (receipt && m) pact::ledger::check_receipt(*m, *receipt, "head", std::nullopt, r);
  return 0;
}
