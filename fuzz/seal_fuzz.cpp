// Fuzzes the sealed-artifact parsers: the device-plan expression language (pact/seal/expr.hpp; a parsed
// expression must also evaluate or fail typed against a fixed call) and the compile profile
// (pact/seal/profile.hpp), the manifest (pact/seal/manifest.hpp, toml++ underneath; the collecting
// scan must agree with the throwing parse), the publication index and the CUBIN reader
// (pact/seal/publication.hpp: ELF header, section table, .nv.info records), a source's include directives
// and the preprocessor's dependency rule (manifest.hpp, prebuild.hpp), and the binding file of sealed
// kernels in plans against the example manifest (sealed_kernels.hpp). Any input must parse or fail with a
// typed pact::Error.

#include <cstdint>
#include <span>
#include <string_view>

#include "pact/seal/expr.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/prebuild.hpp"
#include "pact/seal/profile.hpp"
#include "pact/seal/publication.hpp"
#include "pact/seal/sealed_kernels.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const pact::seal::CallData call = [] {
    pact::seal::CallData c;
    c.tensors["x"] = {pact::Dims{8, 3, 5}, pact::Dims{15, 5, 1}};
    c.tensors["big"] = {pact::Dims{1LL << 40, 1LL << 30}, pact::Dims{1LL << 30, 1}};
    c.scalars["heads"] = 4;
    c.scalars["min"] = INT64_MIN;
    return c;
  }();
  try {
    const auto e = pact::seal::Expr::parse(text, "fuzz");
    try {
      (void)e.eval(call);
    } catch (const pact::Error&) {
    }
  } catch (const pact::Error&) {
  }
  try {
    const auto p = pact::seal::parse_compile_profile(text, "fuzz.json");
    if (pact::seal::compile_profile_digest(p).size() != 71) __builtin_trap();
  } catch (const pact::Error&) {
  }
  const auto scan = pact::seal::scan_manifest(text, "fuzz.toml");
  if (scan.manifest.has_value() != scan.problems.empty()) __builtin_trap();
  try {
    const auto m = pact::seal::parse_manifest(text, "fuzz.toml");
    if (!scan.manifest) __builtin_trap();  // the scan found a problem the parse did not
    pact::seal::require_capability_requirements(m, m.capability_requirements);
  } catch (const pact::Error& e) {
    if (scan.problems.empty() || scan.problems.front().code() != e.code()) __builtin_trap();
  }
  try {
    const auto index = pact::seal::parse_publication_index(text, "fuzz/index.json");
    if (index.kernels.empty()) __builtin_trap();  // a valid index declares at least one export
  } catch (const pact::Error&) {
  }
  try {
    (void)pact::seal::read_cubin_kernels(std::as_bytes(std::span(data, size)), "fuzz.cubin");
  } catch (const pact::Error&) {
  }
  static const pact::seal::Manifest example = pact::seal::parse_manifest(R"toml(
[[ops]]
name = "add"
entry = "e"
[[ops.aot_exports]]
provider = "nvcc.cubin.v1"
name = "vadd_run"
factory = "vadd.cu"
profile_inputs = ["max_active_clusters.cluster_size_1"]
bindings = ["a", "b", "out"]
role = "run"
[ops.aot_exports.device_plan]
schema = "pact.device-launch-plan.v1"
kernels = [ { name = "vadd", param_widths = [8, 8, 8, 4] } ]
[[ops.aot_exports.device_plan.launches]]
kernel = "vadd"
grid = ["ceil_div(numel(a), 256)", 1, 1]
block = [256, 1, 1]
dynamic_smem = 0
params = [ { kind = "pointer", binding = "a" }, { kind = "pointer", binding = "b" },
           { kind = "pointer", binding = "out" }, { kind = "scalar", type = "i32", value = "numel(a)" } ]
)toml",
                                                                         "example.toml");
  try {
    for (const auto& b : pact::seal::parse_sealed_bindings(text, "fuzz-bindings.toml", example)) {
      if (b.inputs.size() != 2 || b.output.empty()) __builtin_trap();  // add: two operands, one result
    }
  } catch (const pact::Error&) {
  }
  const std::string source(text);
  try {
    for (const auto& d : pact::seal::include_directives(source, "fuzz.cu")) {
      if (d.line == 0 || d.path.find('\n') != std::string::npos) __builtin_trap();  // a line, one line's path
    }
  } catch (const pact::Error&) {
  }
  try {
    for (const auto& p : pact::seal::make_prerequisites(source, "fuzz.d")) {
      if (p.empty()) __builtin_trap();
    }
  } catch (const pact::Error&) {
  }
  return 0;
}
