#pragma once
/// Running an imported PyTorch capture (SPEC §7): plan the imported graph under a profile, bind the
/// weights (moved, not copied) and the user inputs by name, execute, and measure agreement with PyTorch's
/// own outputs as max|pact − torch| / max(1, max|torch|) per output.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pact/contract/check.hpp"
#include "pact/ir/torch_import.hpp"
#include "pact/plan/fusion.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/runtime/retention.hpp"

namespace pact::runtime {

/// Agreement of one output with its reference.
struct OutputAgreement {
  std::string name;
  Dims shape;
  double max_abs_error = 0;      ///< max |got - want| (infinity when one side is non-finite and the other differs)
  double max_abs_reference = 0;  ///< max |want|
  double relative_error = 0;     ///< max_abs_error / max(1, max_abs_reference)
};

/// Compares `got` with `want` (any float dtypes; compared in f64). Different shapes are invalid_argument
/// naming `name`.
OutputAgreement compare_outputs(std::string name, const TensorView& got, const TensorView& want);

/// How run_imported runs: `repeat` warm runs after the first (cold) one, with `time_nodes` each op node's
/// time in every warm run, and with `fuse` the inference fusions of pact/plan/fusion.hpp (batch norms
/// folded into their convolutions, activations into conv2d_activation) made before planning.
struct RunTimingOptions {
  int repeat = 0;
  bool time_nodes = false;
  bool fuse = true;
  /// With `fuse`: which convolutions run on channels-last activations (plan::choose_channels_last).
  plan::Layout layout = plan::Layout::automatic;
};

/// One planned node's warm time (the median over the warm runs) and what ran it.
struct NodeTiming {
  std::string node;
  ops::OpTag op;
  std::vector<ops::TensorType> inputs;
  std::string capsule;
  std::string isa;  ///< plan::capsule_isa at the time of the run
  double warm_median_ms = 0;
};

/// The outcome of one run.
struct TorchRunResult {
  plan::PlanAudit audit;
  ir::Graph graph;                                 ///< as planned (after the fusions)
  std::map<std::string, std::string> module_of;    ///< node id -> PyTorch module path
  std::map<std::string, std::string> module_type;  ///< PyTorch module path -> its class
  bool accepted = false;                           ///< false: the plan was rejected (audit lists why); nothing ran
  std::map<std::string, Tensor> outputs;           ///< by output spec name, from the first (cold) run
  std::uint64_t peak_bytes = 0;
  double cold_ms = 0;             ///< the first execution (planning and binding excluded)
  std::vector<double> warm_ms;    ///< each warm execution, in order
  std::vector<NodeTiming> nodes;  ///< with time_nodes: every planned node, in plan order
};

/// An imported capture planned once and run many times (the Python module's pact.Model, and run_imported):
/// the inference fusions (with `fuse`), then one plan under `profile`; the weights and lowering constants
/// move in and are bound once. A rejected plan is not an error: accepted() is false, audit() says why and
/// run refuses. Runs are read-only on the model, so several may share it.
///
/// Under a profile whose device is cuda the values live on the device (cuda_provider()): the weights move
/// there once, each run's inputs as they arrive (one Transfer copy each), and run_imported brings the
/// outputs back to host memory; run() leaves them where the kernels wrote them.
class ImportedModel {
 public:
  ImportedModel(ir::TorchBundle&& bundle, const contract::BackendProfile& profile,
                const contract::EvidenceResolver& resolver, bool fuse = true,
                plan::Layout layout = plan::Layout::automatic);

  bool accepted() const noexcept { return plan_.has_value(); }
  /// The plan audit (with the fusions made, audit().rewrites), accepted or not.
  const plan::PlanAudit& audit() const noexcept { return audit_; }
  /// The user inputs in signature order (name, dtype, shape).
  const std::vector<ir::TorchSource>& inputs() const noexcept { return inputs_; }
  /// The user outputs in signature order.
  const std::vector<ir::TorchOutput>& outputs() const noexcept { return outputs_; }
  /// The capture method the graph came from.
  const std::string& capture_method() const noexcept { return capture_method_; }
  /// The plan (accepted models only).
  const plan::AcceptedGraphPlan& plan() const;
  /// The graph as planned (after the fusions), accepted or not: what the audit's nodes name.
  const ir::Graph& graph() const noexcept { return graph_; }
  /// Node id -> the PyTorch module path it came from (the import's).
  const std::map<std::string, std::string>& module_of() const noexcept { return module_of_; }
  /// PyTorch module path -> its class (the import's).
  const std::map<std::string, std::string>& module_type() const noexcept { return module_type_; }

  /// Runs on `inputs`, one per user input by name. A missing or extra input, or one whose dtype or shape
  /// differs from the capture, is invalid_argument naming it; a rejected plan is plan_rejected. Returns
  /// the execution (its outputs by output node) and each user output's value by output name; nothing
  /// is copied in or out.
  std::pair<ExecutionResult, std::map<std::string, EagerTensor>> run(const std::map<std::string, ValueRef>& inputs,
                                                                     const ExecutionOptions& options = {}) const;

 private:
  std::optional<plan::AcceptedGraphPlan> plan_;
  plan::PlanAudit audit_;
  std::vector<ir::TorchSource> inputs_;
  std::vector<ir::TorchOutput> outputs_;
  std::string capture_method_;
  ir::Graph graph_;
  std::map<std::string, std::string> module_of_;
  std::map<std::string, std::string> module_type_;
  std::map<std::string, EagerTensor> weights_;  ///< every source node but the user inputs, bound once
  DeviceKind device_ = DeviceKind::cpu;         ///< where the profile's values live
};

/// Plans and runs `bundle` on `inputs` (safetensors tensors named by the user inputs); the audit lists the
/// fusions made (audit.rewrites). A missing input, or
/// one whose dtype or shape differs from the capture, is invalid_argument naming it. The weights move
/// into the execution; the bundle is consumed.
/// A negative repeat is invalid_argument.
TorchRunResult run_imported(ir::TorchBundle&& bundle, ir::SafetensorsFile&& inputs,
                            const contract::BackendProfile& profile, const contract::EvidenceResolver& resolver,
                            const RunTimingOptions& timing = {});

/// Fits a capture to a user's inputs before run_imported. Each user input takes the file's tensor of its
/// name, or, for a model of one input and a file of one tensor, that tensor (renamed). A missing input
/// names itself and the file's tensors; a dtype other than the captured one names both dtypes; a shape
/// other than the captured one is accepted only when the leading (batch) dimension alone differs, the same
/// for every input, and the graph re-validates with it: input shapes change, reshapes that carried the
/// captured batch keep that dimension free (-1), constants of uniform value that stand for per-batch state
/// (an RNN's zero initial state) take the new batch, and every shape rule is run again (Note [Batch axes]
/// in torch_run.cpp); the first node whose rule refuses the new size is named (invalid_argument). `where`
/// names the file in messages.
void fit_inputs(ir::TorchBundle& bundle, ir::SafetensorsFile& inputs, std::string_view where);

/// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

}  // namespace pact::runtime
