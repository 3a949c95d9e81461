// Fuzzes `pact report`'s reader: any JSON text as a report.json, rendered to the HTML report. Invariants:
// malformed or mistyped input is a typed pact::Error (never a crash or another exception type), and a
// rendered page never carries a raw "<script" the document put in a name (names are data, not markup).

#include <cstdint>
#include <string>
#include <string_view>

#include "pact/core/json.hpp"
#include "pact/picture/report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const pact::Json report = pact::parse_json(text, "fuzz");
    const std::string page = pact::picture::render_run_report(report, "");
    // The page's own two script elements (its data block and its code) and nothing else.
    std::size_t scripts = 0;
    for (std::size_t at = page.find("<script"); at != std::string::npos; at = page.find("<script", at + 1)) ++scripts;
    if (scripts != 2) __builtin_trap();
  } catch (const pact::Error&) {
  }
  return 0;
}
