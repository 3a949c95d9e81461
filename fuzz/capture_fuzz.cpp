// Fuzzes the capture artifact loader (pact.capture.v1): malformed or forged documents must be a typed
// pact::Error (parse_error, or a Refusal for incoherent markers); a document that loads must re-serialise
// and load again with the same graph-shape digest.

#include <cstdint>
#include <string_view>

#include "pact/capture/capture.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  pact::capture::StructureCapture c;
  try {
    c = pact::capture::load_capture(text, "fuzz");
  } catch (const pact::Error&) {
    return 0;
  }
  const auto again = pact::capture::load_capture(pact::capture::to_json(c).dump(), "fuzz-roundtrip");
  if (again.graph_shape_digest != c.graph_shape_digest || again.ops.size() != c.ops.size()) __builtin_trap();
  return 0;
}
