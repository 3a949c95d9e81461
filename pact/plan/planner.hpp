#pragma once
/// Graph planning (SPEC §6): select a capsule per runtime-relevant node by the profile's provider
/// preference, group the choices by provider and device, run the contract check under the profile's
/// assurance policy, and return an AcceptedGraphPlan or a rejection listing every failing obligation.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pact/contract/check.hpp"
#include "pact/ir/graph.hpp"
#include "pact/plan/fusion.hpp"

namespace pact::plan {

// Note [Training kernels]
// Everything a training step computes is admitted, not only the graph's nodes. A training plan
// (plan_graph with TrainingUpdates) also admits, through the one admission, the update ops of the op
// table (role update: they write their state in place): accumulate_grad once per floating dtype of the
// graph (backward sums the gradients that meet at a value with it), batch_norm_stats once per batch_norm
// node (execute runs it in training mode on the node's own input and returns the new running
// statistics: ExecutionResult::running_stats), and the optimizer's op (sgd or adam) once per
// differentiable parameter (train::sgd_step / adam_step run it). Each is a PlannedKernel with its purpose
// and shows in the audit; a profile that admits none for a dtype rejects the plan, and a kernel swapped
// for a failing one fails the step (tests/train/training_kernels_test.cpp). Checkpoint recompute runs
// the plan's own bound kernels again (execute's region bodies hold copies of them). A data-parallel plan
// also admits the collective allreduce_mean once per dtype of the trained parameters: only a communicator's
// row serves it (the -mpi profiles, trusted boundary mpi.allreduce), and the session's communicator, whose
// boundary and reduction order must be the admitted capsule's, runs it (Note [Gradient buckets]). When its
// batch norms are synchronised, once more for their statistics ("allreduce:batch_norm", the f64 sums of
// pact/kernels/ranks.hpp), if the graph has a batch norm.

/// What a planned kernel is for.
enum class KernelPurpose : std::uint8_t {
  node,           ///< a graph node's forward (and VJP)
  accumulate,     ///< backward's gradient accumulation for one dtype (`node` names the dtype)
  running_stats,  ///< a batch_norm node's running statistics (`node` names the batch_norm node)
  update,         ///< the optimizer update of one parameter (`node` names the parameter)
  allreduce,      ///< data-parallel: the gradient mean over the ranks for one dtype (`node` names the dtype, or
                  ///< batch_norm: the synchronised batch norms' statistics)
};
std::string_view kernel_purpose_name(KernelPurpose purpose) noexcept;
/// A training kernel's audit label: "<purpose>:<subject>" ("accumulate:f32", "update:w1").
std::string training_label(KernelPurpose purpose, std::string_view subject);

/// What a training plan admits besides its nodes (Note [Training kernels]).
struct TrainingUpdates {
  ops::OpTag optimizer = ops::OpTag::adam;  ///< sgd or adam (AdamW is adam with decoupled decay)
  bool momentum = false;                    ///< sgd with a velocity operand
  bool allreduce = false;                   ///< data-parallel: the gradients' mean over the ranks (collective)
  bool sync_batch_norm = false;             ///< data-parallel: batch-norm statistics summed over the ranks
};

/// One node's choice.
struct PlannedKernel {
  std::string node;
  ops::OpTag op;
  const contract::Capsule* capsule = nullptr;   ///< nullptr when no capsule matched (a failing obligation)
  std::vector<ops::TensorType> inputs;          ///< the node's input types, as selection saw them
  KernelPurpose purpose = KernelPurpose::node;  ///< other purposes label `node` with training_label
};

/// Everything the planner decided and checked, for humans (table) and machines (JSON).
struct PlanAudit {
  std::string profile;
  contract::AssurancePolicy assurance;
  contract::VjpMode vjp_mode;
  std::vector<PlannedKernel> kernels;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> groups;  ///< (provider, device) -> nodes
  contract::ContractCheck check;
  std::vector<Rewrite> rewrites;  ///< the inference fusions made before planning (fusion.hpp), if any
};

/// How the interpreter walks a plan (Note [One interpreter]), worked out once when the plan is made, so a
/// run looks nothing up by name: per node position, its inputs' positions, its bound kernel, and the
/// values that die after it.
struct Schedule {
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  std::vector<std::vector<std::uint32_t>> inputs;  ///< per node: the positions of its inputs, in order
  std::vector<std::uint32_t> kernel;               ///< per node: its index in bound(), kNone when none
  /// Per value: the position of the last node that reads it; the node count for a graph output (it lives to
  /// the end), kNone when nothing reads it.
  std::vector<std::uint32_t> last_use;
  std::vector<std::vector<std::uint32_t>> dies_after;  ///< per node: the values whose last use it is, once each
  std::vector<std::uint32_t> outputs;                  ///< the graph outputs' positions, in order
};

/// A plan whose every kernel passed the kernel-policy gate and the evidence check, bound to handlers. Only
/// plan_graph makes one (Note [Planner passkey]); executing it trusts that it did.
class AcceptedGraphPlan {
 public:
  AcceptedGraphPlan(contract::PlannerKey, ir::Graph graph, PlanAudit audit, std::vector<contract::BoundKernel> bound);
  /// The validated graph the plan was made for.
  const ir::Graph& graph() const noexcept { return graph_; }
  /// Every choice and every obligation's verdict.
  const PlanAudit& audit() const noexcept { return audit_; }
  /// The bound kernels, parallel to audit().kernels.
  std::span<const contract::BoundKernel> bound() const noexcept { return bound_; }
  /// The graph by position, for the interpreter.
  const Schedule& schedule() const noexcept { return schedule_; }
  /// The bound kernel of a purpose other than `node` for `subject` (a dtype name, a batch_norm node, a
  /// parameter: Note [Training kernels]), or nullptr when the plan admitted none.
  const contract::BoundKernel* training_kernel(KernelPurpose purpose, std::string_view subject) const {
    const std::string label = training_label(purpose, subject);
    for (std::size_t k = 0; k < audit_.kernels.size() && k < bound_.size(); ++k) {
      if (audit_.kernels[k].purpose == purpose && audit_.kernels[k].node == label) return &bound_[k];
    }
    return nullptr;
  }

 private:
  ir::Graph graph_;
  PlanAudit audit_;
  std::vector<contract::BoundKernel> bound_;
  Schedule schedule_;
};

/// A rejected plan: the audit, whose check lists every failing obligation.
struct PlanRejection {
  PlanAudit audit;
};

/// One kernel's admission: the selected capsule, every obligation's report, and the bound kernel when all
/// passed.
struct KernelAdmission {
  const contract::Capsule* capsule = nullptr;       ///< nullptr when selection found none (see reports)
  std::vector<contract::ObligationReport> reports;  ///< every obligation, accepted or not
  std::optional<contract::BoundKernel> bound;       ///< set only when every report is accepted
};

// Note [One admission]
// admit_kernel is the only path from an op and its input types to an executable kernel: the planner calls
// it per node, the eager session per op signature. Selection by op and input types (contract::select_capsule),
// the kernel-policy gate and evidence check under the profile's assurance policy (contract::check_kernel),
// then binding to the handler; a selection refusal or a binding failure is a failing report.
/// Admits one kernel (Note [One admission]). `node` labels the reports ("eager" outside a plan).
KernelAdmission admit_kernel(const std::string& node, ops::OpTag op, std::span<const ops::TensorType> inputs,
                             const contract::BackendProfile& profile, const contract::EvidenceResolver& resolver,
                             contract::VjpMode vjp_mode);

/// Plans `graph` under `profile`. Throws (typed) for an invalid registry (duplicate capsule names) or a
/// cuda-* profile without a device (no_device) unless the profile asks for the stub explicitly.
/// With `training` (which needs VjpMode::with_vjp) the plan also admits the training kernels (Note
/// [Training kernels]).
Expected<AcceptedGraphPlan, PlanRejection> plan_graph(const ir::Graph& graph, const contract::BackendProfile& profile,
                                                      const contract::EvidenceResolver& resolver,
                                                      contract::VjpMode vjp_mode = contract::VjpMode::forward_only,
                                                      std::optional<TrainingUpdates> training = std::nullopt);

/// Mints the planner's passkeys (Note [Planner passkey]): its one member is private, and only the two
/// functions above, which admit what they bind, are its friends.
class Planner {
  static contract::PlannerKey key() noexcept { return {}; }
  friend KernelAdmission admit_kernel(const std::string& node, ops::OpTag op, std::span<const ops::TensorType> inputs,
                                      const contract::BackendProfile& profile,
                                      const contract::EvidenceResolver& resolver, contract::VjpMode vjp_mode);
  friend Expected<AcceptedGraphPlan, PlanRejection> plan_graph(const ir::Graph& graph,
                                                               const contract::BackendProfile& profile,
                                                               const contract::EvidenceResolver& resolver,
                                                               contract::VjpMode vjp_mode,
                                                               std::optional<TrainingUpdates> training);
};

/// The audit as a readable table: node, op, capsule, provider, trust, evidence per descriptor,
/// numerical policy, verdict; then the failing obligations.
std::string render_audit_table(const PlanAudit& audit);
/// The ISA level a capsule's kernel runs at now: the active level (pact/core/cpu.hpp) for a native kernel
/// that goes through the SIMD dispatch table, "portable" for plain C++ loops, "external" for a trusted
/// external library (it picks its own), "none" off the CPU.
std::string_view capsule_isa(const contract::Capsule& capsule) noexcept;
/// The audit as JSON ("pact.plan-audit.v1"); each kernel names the ISA level it runs at ("isa").
Json render_audit_json(const PlanAudit& audit);

}  // namespace pact::plan
