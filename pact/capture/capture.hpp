#pragma once
/// Structure-only capture (SPEC §9, seed 003): run model code (the eager API) or an IR graph on meta
/// storage and record the op graph, module nesting, parameter geometry and per-op shapes as hypotheses,
/// with FLOP and memory estimates labelled estimated; digests; discharge of the hypotheses by a real
/// capture of the same graph; an audit-only plan check; artifacts with the structure-only marker. Every
/// refusal goes through the capability table (pact/runtime/capabilities.hpp).

#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pact/core/json.hpp"
#include "pact/ir/graph.hpp"
#include "pact/runtime/capabilities.hpp"
#include "pact/runtime/session.hpp"

namespace pact::capture {

// The capability table and its refusals have one home, the runtime (whose value-escape surface refuses
// through them); the capture's API names them as its own.
using runtime::Amendment;
using runtime::capability;
using runtime::capability_table;
using runtime::CapabilityRow;
using runtime::check_amendment;
using runtime::kBackstop;
using runtime::kForgedArtifact;
using runtime::kGraphMismatch;
using runtime::kMetaOutsideStructureOnly;
using runtime::kPlanCheckUnsupported;
using runtime::kRefutedRow;
using runtime::kSubstrateMismatch;
using runtime::Refusal;
using runtime::refuse_structure_only;
using runtime::render_capabilities_markdown;
using runtime::require_structure_only_capability;
using runtime::Status;
using runtime::where;

/// How model code makes its tensors: meta under structure-only, real (seeded random) otherwise.
class Substrate {
 public:
  Substrate(bool meta, std::uint64_t seed) : meta_(meta), rng_(seed) {}
  bool meta() const noexcept { return meta_; }
  /// A parameter: normal values times `scale` (real), or geometry only (meta).
  Tensor parameter(const Dims& shape, double scale = 0.02, DType dtype = DType::f32);
  /// A tensor of one value (norm weights, running variances).
  Tensor filled(const Dims& shape, double value, DType dtype = DType::f32);
  /// An input: normal values (floats) or integers in [0, bound) (integer dtypes).
  Tensor input(const Dims& shape, DType dtype = DType::f32, std::int64_t bound = 2);

 private:
  bool meta_;
  std::mt19937_64 rng_;
};

/// Model code: declares its inputs, parameters and buffers through the session (input, parameter, tie,
/// buffer), opens module scopes, applies ops, and returns its outputs.
using ModelFn = std::function<std::vector<runtime::EagerTensor>(runtime::Session&, Substrate&)>;

/// What a capture is asked to do. Everything but structure_only, the optimizer and the seed is a request
/// the structure-only table refuses at entry.
struct CaptureOptions {
  bool structure_only = true;
  std::string optimizer = "adamw";  ///< sgd | sgd-momentum | adam | adamw (memory estimate)
  std::uint64_t seed = 0;           ///< real captures: the values of parameters and inputs
  bool values = false;              ///< record activation values
  bool previews = false;            ///< value previews
  bool nonfinite_halt = false;      ///< halt on NaN/inf
  bool runnable_save = false;       ///< save a runnable artifact
  bool runnable_ready = false;      ///< compose with runnable eligibility
  bool replay = false;
  bool validate = false;
  bool backward = false;
  bool episode = false;
  bool distributed = false;
  bool fake_tensor = false;  ///< capture a real model through a fake-tensor mode
  bool symbolic_shapes = false;
};

/// A hypothesis row's state; only discharge() changes it.
enum class RowState { hypothesis, corroborated, refuted };
std::string_view row_state_name(RowState s) noexcept;

struct CapturedSource {
  std::string name;
  runtime::SourceKind kind = runtime::SourceKind::input;
  ops::TensorType type;
  bool persistent = true;
  bool trainable = false;         ///< a parameter that wants a gradient
  std::vector<std::string> tied;  ///< further names of the same parameter (counted once)
  std::string module;
};

class CapturedOp {
 public:
  std::string id;
  ops::OpTag op = ops::OpTag::add;
  std::vector<std::string> inputs;  ///< ids of sources or earlier ops
  ops::Attributes attrs;
  std::string module;       ///< the module path of the op ("" at top level)
  ops::TensorType type;     ///< hypothesis (structure-only) or observed (real)
  std::int64_t flops = 0;   ///< estimated from the op table
  double measured_us = -1;  ///< real captures: wall time of the op; structure-only: unknown (-1)
  /// Real captures: multiply-accumulates the kernels counted while the op ran (kernels::macs_performed);
  /// structure-only: unknown (-1).
  std::int64_t measured_macs = -1;

  RowState state() const noexcept { return state_; }
  /// The real type a discharge observed (nullopt before discharge).
  const std::optional<ops::TensorType>& observed() const noexcept { return observed_; }

 private:
  friend struct DischargeAuthority;
  RowState state_ = RowState::hypothesis;
  std::optional<ops::TensorType> observed_;
};

/// Memory figures: geometry estimates in bytes.
struct MemoryEstimate {
  std::int64_t parameters = 0;
  std::int64_t buffers = 0;
  std::int64_t activations_peak = 0;  ///< forward liveness peak of inputs and op outputs (views alias)
  /// Bytes of the op outputs a training tape retains for backward: those the saves column of an op that
  /// is recorded (one of its inputs derives from a trainable parameter) names, each value once.
  std::int64_t activations_saved = 0;
  std::int64_t gradients = 0;        ///< one per trainable parameter element
  std::int64_t optimizer_state = 0;  ///< per the optimizer
  std::string optimizer;
  std::int64_t training_total() const noexcept {
    return parameters + buffers + activations_saved + gradients + optimizer_state;
  }
};

/// A recorded capture.
struct StructureCapture {
  bool structure_only = true;
  std::vector<CapturedSource> sources;
  std::vector<CapturedOp> ops;
  std::vector<std::string> outputs;
  std::string graph_shape_digest;  ///< ops, edges, order, modules, attributes and source geometry; no per-op shapes
  std::string content_digest;      ///< meta-domain (structure-only) or value-domain (real)
  std::string content_domain;
  std::string discharged_against;  ///< the content digest of the real capture that discharged this one
  double measured_total_us = -1;   ///< real captures only
  /// Real captures: bytes of the parameter tensors the model loaded (a checkpoint's or seeded ones), each
  /// tied parameter once; -1 under structure-only.
  std::int64_t measured_parameter_bytes = -1;
  /// Real captures: bytes of the op outputs the run's tape retained for backward (Tape::retained_bytes
  /// less the sources it retains); -1 under structure-only or when an op has no VJP to record.
  std::int64_t measured_saved_bytes = -1;

  const CapturedSource* find_source(std::string_view name) const noexcept;
  const CapturedOp* find_op(std::string_view id) const noexcept;
  /// Parameter bytes at the declared dtypes, tied parameters once (buffers excluded).
  std::int64_t parameter_bytes() const noexcept;
  /// Parameter elements, tied parameters once (buffers excluded).
  std::int64_t parameter_count() const noexcept;
  /// Forward FLOPs, estimated (SPEC §9's convention, from the op table).
  std::int64_t flops() const noexcept;
  /// Forward multiply-accumulates of the contraction ops (matmul, linear, conv2d, attention), estimated:
  /// half their FLOPs.
  std::int64_t macs() const noexcept;
  /// Bytes a training tape retains for backward (MemoryEstimate::activations_saved), estimated.
  std::int64_t saved_for_backward_bytes() const;
  /// Memory estimate for training with `optimizer`. A consumer of hypotheses: refuses refuted rows.
  MemoryEstimate memory(const std::string& optimizer) const;
  /// Parameter elements per module path prefix ("" is the whole model), for the module tree.
  std::vector<std::pair<std::string, std::int64_t>> module_tree() const;
};

/// Digest domains: the three can never collide (digest_json is domain-separated).
inline constexpr std::string_view kGraphShapeDomain = "pact.capture.graph-shape.v1";
inline constexpr std::string_view kMetaContentDomain = "pact.capture.meta-content.v1";
inline constexpr std::string_view kValueContentDomain = "pact.capture.value-content.v1";

/// Captures model code. Under structure_only every input and parameter must be meta, no kernel runs and
/// no tensor bytes are allocated; refused options throw Refusal at entry; value escapes refuse at the
/// user's line; other pact::Errors under meta refuse through the backstop (structure_only_meta_failure);
/// exceptions that are not pact::Error (the user's) propagate unchanged.
StructureCapture capture(const ModelFn& model, const CaptureOptions& options);

/// The model code of an IR graph: inputs, parameters (buffers for buffer nodes) and constants from the
/// substrate, or from `weights` (by node id) in a real capture when given.
ModelFn graph_model(const ir::Graph& graph, const std::map<std::string, TensorView>* weights = nullptr);

/// One comparison a discharge makes besides the op rows: a source's declared type against the tensor
/// the real run loaded, or an estimate against what the real run measured.
struct DischargeCheck {
  std::string row;       ///< "parameter fc1.weight", "parameter bytes", "multiply-accumulates of fc1"
  std::string estimate;  ///< the hypothesis or estimate
  std::string measured;  ///< what the real run had
  std::string margin;    ///< the stated margin
  bool ok = true;
};

/// Result of a discharge. Rows are the op rows and the checks; `refuted_rows` names each refuted one with
/// its estimate and measurement.
struct DischargeReport {
  std::size_t corroborated = 0;
  std::size_t refuted = 0;
  std::vector<std::string> refuted_ops;
  std::vector<DischargeCheck> checks;
  std::vector<std::string> refuted_rows;
  std::string against;  ///< the real capture's content digest
};

/// Margins of the estimate checks (docs/guides/structure-only-capture.md): the kernels' counted
/// multiply-accumulates of an op lie within [low, high] times the op table's estimate (half its FLOPs for
/// a contraction, none for any other op): the FLOP rule counts bias, softmax and activation terms and
/// every tap and key, where a kernel may skip padding taps (reference) or key blocks past a causal
/// diagonal (native), so the measurement may fall to half, never above it by more than rounding.
inline constexpr double kMacsMarginLow = 0.5;
inline constexpr double kMacsMarginHigh = 1.05;

/// The one authority that upgrades hypothesis rows. The real capture must be of the same graph (ops,
/// edges, order, modules, attributes, source names and kinds; otherwise Refusal
/// structure_only_graph_mismatch). Each op's hypothesis type is compared with the observed one; each
/// source's declared dtype and shape with the tensor the real run loaded; the estimated parameter bytes
/// with the bytes loaded (exactly); each op's estimated multiply-accumulates with the kernels' count
/// (kMacsMargin*). A disagreement refutes its row.
DischargeReport discharge(StructureCapture& hypotheses, const StructureCapture& real);

/// An audit-only plan entry: which nodes (selector), how many (multiplicity), and the geometry a
/// replacement declares. Selectors: "node:<id>", "op:<kind>", "module:<path>"; callables ("fn:") and
/// value-derived selection ("value:") refuse (plan_check_unsupported).
struct PlanEntry {
  std::string selector;
  std::optional<std::size_t> multiplicity;
  ops::TensorType declared;
};
struct PlanCheckRow {
  std::string selector;
  std::vector<std::string> matched;
  bool multiplicity_ok = true;
  std::vector<std::string> disagreements;  ///< "id: hypothesis f32[..] vs declared f32[..]"
};
struct PlanCheckReport {
  bool executable = false;  ///< always false: the check never arms, replays or lifts a refusal
  std::vector<PlanCheckRow> rows;
  bool consistent() const noexcept;
};
PlanCheckReport check_plan(const StructureCapture& capture, const std::vector<PlanEntry>& plan);

/// The capture as an analysis artifact ("pact.capture.v1"), with the structure-only marker, the banner,
/// estimates labelled estimated and measured columns "unknown" under structure-only.
Json to_json(const StructureCapture& capture);
/// Loads an artifact and validates marker coherence (a structure-only file carrying values, measurements
/// or a value-domain digest, a real file with a meta-domain digest, or digests that do not match the
/// contents refuse structure_only_marker_incoherent). Loaded rows stay hypotheses: corroborated claims
/// in a file are not discharge authority and load as hypothesis (refuted ones stay refuted).
StructureCapture load_capture(std::string_view text, std::string_view where = "capture");
/// The same for a document already parsed (a caller that reads other fields of it parses it once).
StructureCapture load_capture_document(const Json& doc, std::string_view where = "capture");

/// The banner every structure-only rendering carries.
inline constexpr std::string_view kBanner =
    "STRUCTURE-ONLY CAPTURE: no values were computed; shapes are hypotheses until discharged; FLOPs and memory are "
    "estimated; measured columns are unknown";

/// A readable rendering: banner, module tree with parameter counts, per-op shapes and estimated FLOPs,
/// memory estimate for `optimizer`, measured columns.
std::string render(const StructureCapture& capture, const std::string& optimizer);

/// Measurement exports of a real capture: a Chrome trace of measured per-op wall times. Under
/// structure-only it refuses (structure_only_measurements_unsupported).
Json chrome_trace(const StructureCapture& capture);

}  // namespace pact::capture
