#include "pact/runtime/capabilities.hpp"

#include <fmt/format.h>

#include <array>

namespace pact::runtime {

namespace {

constexpr std::string_view kNone = "—";

// Note [Capability table]
// The seed's rows, with Pact's evidence. A status changes only by an amendment from the row's
// amend_owner at its flip_event (check_amendment); a claim never changes: a bigger claim is a new row.
constexpr std::array<CapabilityRow, 30> kTable{{
    {"graph_structure", "The op graph, edges, order, and module nesting of THIS meta execution are recorded exactly.",
     "supported_structural", "never", "tests/capture/capture_test.cpp (CaptureStructure)", "L7a", kNone},
    {"param_geometry",
     "Parameter/buffer names, shapes, dtypes are recorded as declared; the persistence partition is recorded IF V8 "
     "verifies meta-compatibility.",
     "supported_structural", "V8 verdict", "tests/capture/capture_test.cpp (CaptureStructure.ParameterGeometry)", "L7a",
     kNone},
    {"shapes_dtypes",
     "Per-op shapes/dtypes are HYPOTHESES: valid under meta propagation, unproven until discharged by a real capture "
     "of "
     "the same graph.",
     "supported_hypothesis", "discharge", "tests/capture/capture_test.cpp (CaptureDischarge)", "L7a", kNone},
    {"flops_estimates",
     "FLOPs/MACs are derived from hypothesis shapes; they inherit hypothesis status and are labelled estimated, never "
     "measured.",
     "supported_hypothesis", "discharge", "tests/capture/capture_test.cpp (CaptureHonesty)", "L7a", kNone},
    {"memory_estimates", "Memory figures are geometry estimates; measured-memory columns render unknown, never zero.",
     "supported_hypothesis", "discharge", "tests/capture/capture_test.cpp (CaptureHonesty)", "L7a", kNone},
    {"taken_path_conditionals",
     "Conditional structure of the taken path is recorded; any VALUE-dependent branch through the enumerated escape "
     "surface refuses typed at the user's source line REGARDLESS of the tensor's device; unenumerated meta deaths "
     "refuse "
     "typed via the backstop; unenumerated REAL-value escapes are undetectable and are priced by hypothesis status.",
     "supported_structural", "never", "tests/capture/capture_test.cpp (CaptureTeaching)", "L7a", kNone},
    {"meta_admission",
     "Meta-materialized models are ADMITTED if and only if structure-only is in force (scoped admission): the graph, "
     "module nesting, parameter geometry, and shape/dtype HYPOTHESES are recorded with no tensor values. Without "
     "structure_only the entry gate refuses meta unchanged.",
     "supported_structural", "D8 granted", "tests/capture/capture_test.cpp (CaptureEntry, CaptureParity)",
     "S2-amendment", kNone},
    {"value_payloads", "Activations, argument values, output values are never recorded; requests refuse typed.",
     "refuse:structure_only_values_unsupported", "never", "tests/capture/capture_test.cpp (CaptureEntry)", "L7a",
     "structure_only_values_unsupported"},
    {"previews", "Value previews/thumbnails require values; refused.", "refuse:structure_only_values_unsupported",
     "never", "tests/capture/capture_test.cpp (CaptureEntry)", "L7a", "structure_only_values_unsupported"},
    {"nonfinite_predicates",
     "raise_on_nan and nonfinite halt predicates have no values to test; the combination refuses typed at entry.",
     "refuse:structure_only_option_conflict", "never", "tests/capture/capture_test.cpp (CaptureEntry)", "L7a",
     "structure_only_option_conflict"},
    {"runnable_ready_composition",
     "structure_only + runnable_ready is refused at entry: runnable eligibility and the structure substrate are "
     "incompatible in v1.",
     "refuse:structure_only_option_conflict", "L7b amendment lands", "tests/capture/capture_test.cpp (CaptureEntry)",
     "L7b", "structure_only_option_conflict"},
    {"substrate_uniformity",
     "Admission requires a UNIFORM substrate: every input tensor leaf meta AND every registered parameter/buffer meta "
     "(tied objects deduplicated by identity; parameterless models judged by inputs). Mixed cells refuse typed in BOTH "
     "directions at entry with structure_only_substrate_mismatch, naming which side is which; a REAL tensor discovered "
     "mid-forward refuses through the same family at the user's source line.",
     "supported_structural", "D8 granted", "tests/capture/capture_test.cpp (CaptureSubstrate)", "S2-amendment", kNone},
    {"plan_shape_check",
     "The audit-only plan checker resolves selectors, checks multiplicity, and compares declared replacement geometry "
     "against hypothesis shapes/dtypes; the report is executable=false ALWAYS and never arms, replays, or lifts the "
     "late-bind refusal. REFUTED sources refuse through this row; callables and value-derived selection refuse typed "
     "(plan_check_unsupported).",
     "supported_hypothesis", "discharge", "tests/capture/capture_test.cpp (CapturePlanCheck)", "L7a", kNone},
    {"measurement_exports",
     "Measurement-shaped exports (chrome_trace, speedscope, flamegraph, memory_timeline) refuse typed: timings and "
     "allocator peaks are MEASUREMENTS, and a value-free capture has none.",
     "refuse:structure_only_measurements_unsupported", "never", "tests/capture/capture_test.cpp (CaptureHonesty)",
     "S2-amendment", "structure_only_measurements_unsupported"},
    {"viz_graph_render",
     "Graph rendering (incl. sizes consuming hypothesis shapes) works, carrying the structure-only banner.",
     "supported_hypothesis", "never", "tests/capture/capture_test.cpp (CaptureHonesty)", "L7a", kNone},
    {"viz_payload_visualizers",
     "Payload-consuming visualizers (activation heatmaps, custom value visualizers) require values; refused typed.",
     "refuse:structure_only_values_unsupported", "never", "tests/capture/capture_test.cpp (CaptureEntry)", "L7a",
     "structure_only_values_unsupported"},
    {"structure_digests",
     "Graph-shape and meta-domain content digests are always computed; they can never collide with value-bearing "
     "digests.",
     "supported_structural", "never", "tests/capture/capture_test.cpp (CaptureHonesty.DigestsAreDomainSeparated)",
     "L7a", kNone},
    {"discharge",
     "A real capture of the same graph upgrades hypothesis rows to corroborated or refutes them; upgrades happen ONLY "
     "via "
     "the discharge authority.",
     "supported_structural", "never", "tests/capture/capture_test.cpp (CaptureDischarge)", "L7a", kNone},
    {"refuted_rows", "Consumers that tolerate hypothesis rows refuse REFUTED rows typed.", "supported_structural",
     "never", "tests/capture/capture_test.cpp (CaptureDischarge)", "L7a", kNone},
    {"teaching_refusals",
     "Enumerated value escapes (device-neutral) and missing meta kernels refuse typed with the user source line; other "
     "meta-mechanism deaths are typed via the backstop; unenumerated real-value escapes are outside the detectable "
     "surface; user exceptions propagate unchanged.",
     "supported_structural", "never", "tests/capture/capture_test.cpp (CaptureTeaching)", "L7a", kNone},
    {"save_analysis_artifact",
     "Analysis-level artifacts persist the structure_only marker plainly; loads validate marker coherence and every "
     "value-claim on the loaded capture stays a HYPOTHESIS.",
     "supported_structural", "never", "tests/capture/capture_test.cpp (CaptureArtifacts)", "P1", kNone},
    {"save_runnable",
     "Runnable save is refused in v1; IF the late-bind posture lands, declared late-bind slots replace this refusal "
     "for "
     "eligible models.",
     "refuse:structure_only_runnable_unsupported", "L7b amendment lands",
     "tests/capture/capture_test.cpp (CaptureEntry)", "L7b", "structure_only_runnable_unsupported"},
    {"live_replay", "Replay requires values; refused unless and until late-bind provides them at bind time.",
     "refuse:structure_only_replay_unsupported", "L7b amendment lands", "tests/capture/capture_test.cpp (CaptureEntry)",
     "L7b", "structure_only_replay_unsupported"},
    {"validation_entry",
     "There is nothing to validate against; refused permanently by design (discharge is the verification story).",
     "refuse:structure_only_validation_unsupported", "never", "tests/capture/capture_test.cpp (CaptureEntry)", "L7a",
     "structure_only_validation_unsupported"},
    {"backward_grads",
     "Backward/gradient capture is refused in v1; any future support is an amendment, not implied here.",
     "refuse:structure_only_backward_unsupported", "S2 amendment", "tests/capture/capture_test.cpp (CaptureEntry)",
     "S2-amendment", "structure_only_backward_unsupported"},
    {"episode_composition",
     "Episode capture composes with structure-only ONLY if a later amendment rules it; refused in v1.",
     "refuse:structure_only_episode_unsupported", "S2 amendment", "reserved: no episode surface exists yet",
     "S2-amendment", "structure_only_episode_unsupported"},
    {"distributed", "Distributed structure-only capture is out of scope; the distributed refusal contract governs.",
     "out_of_scope:distributed-contract", "S2 amendment", "tests/capture/capture_test.cpp (CaptureEntry)",
     "S2-amendment", kNone},
    {"fake_tensor_substrate",
     "Capturing a REAL model structure-only via a fake-tensor mode is a VERIFY item, not a capability.", "verify:V1",
     "V1 verdict", "pending: V1 spike", "L7a", kNone},
    {"symbolic_shapes",
     "Symbolic/dynamic shapes remain refused at the variant gate; a range hypothesis is a VERIFY item.", "verify:V2",
     "V2 verdict", "tests/capture/capture_test.cpp (CaptureEntry.SymbolicShapesAreRefused)", "L7a", kNone},
    {"pytorch_meta_export",
     "A PyTorch module too large to materialise is exported structure-only by tools/torch_export.py "
     "--structure-only (constructed on the meta device, traced with make_fx on meta tensors): the same ATen graph, "
     "parameter geometry and shapes a real export records, and no values; pact capture plans and estimates it. "
     "Running it, a real capture of it and exporting its weights refuse typed.",
     "supported_structural", "never",
     "tests/interop/torch_reexport_test.cpp (TorchReexport.AStructureOnlyExportOfA13BLlamaPlansWithoutItsWeights, "
     "TorchReexport.StructureOnlyAndRealExportsRecordTheSameGraph)",
     "L7a", kNone},
}};

}  // namespace

Status Status::parse(std::string_view text) {
  auto bad = [&] {
    throw_error(ErrorCode::parse_error, "capability.status",
                fmt::format("'{}' is outside status_v1 (supported_structural | supported_hypothesis | refuse:<code> | "
                            "verify:<Vn> | out_of_scope:<ref>)",
                            text));
  };
  if (text == "supported_structural") return {Kind::supported_structural, ""};
  if (text == "supported_hypothesis") return {Kind::supported_hypothesis, ""};
  auto with = [&](std::string_view prefix, Kind kind) -> std::optional<Status> {
    if (text.substr(0, prefix.size()) != prefix) return std::nullopt;
    std::string_view arg = text.substr(prefix.size());
    if (arg.empty()) bad();
    for (char c : arg) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) bad();
    }
    if (kind == Kind::verify && (arg.size() < 2 || arg[0] != 'V')) bad();
    return Status{kind, std::string(arg)};
  };
  if (auto s = with("refuse:", Kind::refuse)) return *s;
  if (auto s = with("verify:", Kind::verify)) return *s;
  if (auto s = with("out_of_scope:", Kind::out_of_scope)) return *s;
  bad();
  return {};
}

std::string Status::to_string() const {
  switch (kind) {
    case Kind::supported_structural:
      return "supported_structural";
    case Kind::supported_hypothesis:
      return "supported_hypothesis";
    case Kind::refuse:
      return "refuse:" + argument;
    case Kind::verify:
      return "verify:" + argument;
    case Kind::out_of_scope:
      return "out_of_scope:" + argument;
  }
  return {};
}

std::span<const CapabilityRow> capability_table() noexcept { return kTable; }

const CapabilityRow& capability(std::string_view key) {
  for (const auto& r : kTable) {
    if (r.key == key) return r;
  }
  throw_error(ErrorCode::invalid_argument, "capability", fmt::format("unknown capability key '{}'", key));
}

Refusal::Refusal(std::string refusal_code, std::string operation, std::string detail)
    : Error(ErrorCode::unsupported, std::move(operation), fmt::format("{}: {}", refusal_code, detail)),
      refusal_code_(std::move(refusal_code)) {}

const CapabilityRow& require_structure_only_capability(std::string_view key, std::string_view context) {
  const CapabilityRow& row = capability(key);
  const Status status = Status::parse(row.status);
  if (status.supported()) return row;
  std::string code;
  switch (status.kind) {
    case Status::Kind::refuse:
      code = status.argument;
      break;
    case Status::Kind::verify:
      code = "structure_only_unverified:" + status.argument;
      break;
    default:
      code = "out_of_scope:" + status.argument;
      break;
  }
  throw Refusal(code, "structure_only." + std::string(key),
                fmt::format("{}{}{}", row.claim, context.empty() ? "" : " — ", context));
}

void refuse_structure_only(std::string_view code, std::string operation, std::string detail) {
  for (const std::string_view own : {kMetaOutsideStructureOnly, kBackstop, kForgedArtifact, kRefutedRow, kGraphMismatch,
                                     kSubstrateMismatch, kPlanCheckUnsupported}) {
    if (code == own) throw Refusal(std::string(code), std::move(operation), std::move(detail));
  }
  throw_error(ErrorCode::internal, "refuse_structure_only",
              fmt::format("'{}' is not a refusal code outside the capability table (a row refuses through "
                          "require_structure_only_capability)",
                          code));
}

std::string where(const SourceLocation& loc) { return fmt::format("{}:{}", loc.file_name(), loc.line()); }

Status check_amendment(const Amendment& a) {
  const CapabilityRow& row = capability(a.key);
  auto refuse = [&](const std::string& why) -> Status {
    throw_error(ErrorCode::invalid_argument, "capability.amend", fmt::format("row '{}': {}", a.key, why));
  };
  if (a.claim != row.claim) return refuse("an amendment may not change (or widen) the claim; write a new row");
  if (a.owner != row.amend_owner)
    return refuse(fmt::format("owner '{}' is not the row's amend_owner '{}'", a.owner, row.amend_owner));
  if (row.flip_event == "never") return refuse("the row has no flip event: its status never changes");
  if (a.flip_event != row.flip_event)
    return refuse(fmt::format("flip event '{}' is not the row's '{}'", a.flip_event, row.flip_event));
  if (a.evidence.empty()) return refuse("an amendment needs evidence");
  return Status::parse(a.new_status);
}

std::string render_capabilities_markdown() {
  std::string out =
      "# Structure-only capture: capability contract\n\n"
      "Generated from `pact/runtime/capabilities.cpp` (`pact capture --capabilities`); "
      "`tests/capture/capture_test.cpp` (CaptureCapabilities.DocMirrorsTheTable) fails when this file and the table "
      "differ.\n\n"
      "RULE: rows change STATUS only by amendment from their amend_owner at their flip_event, with evidence. No "
      "amendment "
      "may widen a CLAIM; a bigger claim is a new row.\n\n"
      "Status grammar (status_v1, closed): `supported_structural | supported_hypothesis | refuse:<code> | verify:<Vn> "
      "| "
      "out_of_scope:<contract-ref>`.\n\n"
      "| key | claim | status_v1 | flip_event | evidence | amend_owner | refusal_code |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const auto& r : kTable) {
    out +=
        fmt::format("| `{}` | {} | `{}` | {} | {} | {} | {} |\n", r.key, r.claim, r.status, r.flip_event, r.evidence,
                    r.amend_owner, r.refusal_code == kNone ? std::string(kNone) : fmt::format("`{}`", r.refusal_code));
  }
  out +=
      "\nRefusal codes outside the table: `structure_only_meta_outside_mode` (a meta tensor reaches the runtime while "
      "structure-only is not in force), `structure_only_meta_failure` (the typed backstop for other failures under "
      "meta), "
      "`structure_only_marker_incoherent` (a loaded artifact whose marker contradicts its contents), "
      "`structure_only_refuted_row` (a consumer met a refuted hypothesis), `structure_only_graph_mismatch` (discharge "
      "against a capture of a different graph), `plan_check_unsupported` (callable or value-derived plan selectors).\n";
  return out;
}

}  // namespace pact::runtime
