#pragma once
/// Graph planning (SPEC §6): select a capsule per runtime-relevant node by the profile's provider
/// preference, group the choices by provider and device, run the contract check under the profile's
/// assurance policy, and return an AcceptedGraphPlan or a rejection listing every failing obligation.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pact/contract/check.hpp"
#include "pact/ir/graph.hpp"

namespace pact::plan {

/// One node's choice.
struct PlannedKernel {
  std::string node;
  ops::OpTag op;
  const contract::Capsule* capsule = nullptr;  ///< nullptr when no capsule matched (a failing obligation)
};

/// Everything the planner decided and checked, for humans (table) and machines (JSON).
struct PlanAudit {
  std::string profile;
  contract::AssurancePolicy assurance;
  contract::VjpMode vjp_mode;
  std::vector<PlannedKernel> kernels;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> groups;  ///< (provider, device) -> nodes
  contract::ContractCheck check;
};

/// A plan whose every kernel passed the kernel-policy gate and the evidence check, bound to handlers.
struct AcceptedGraphPlan {
  ir::Graph graph;
  PlanAudit audit;
  std::vector<contract::BoundKernel> bound;  ///< parallel to audit.kernels
};

/// A rejected plan: the audit, whose check lists every failing obligation.
struct PlanRejection {
  PlanAudit audit;
};

/// Plans `graph` under `profile`. Throws (typed) for an invalid registry (duplicate capsule names) or a
/// cuda-* profile without a device (no_device) unless the profile asks for the stub explicitly.
Expected<AcceptedGraphPlan, PlanRejection> plan_graph(const ir::Graph& graph, const contract::BackendProfile& profile,
                                                      const contract::EvidenceResolver& resolver,
                                                      contract::VjpMode vjp_mode = contract::VjpMode::forward_only);

/// The audit as a readable table: node, op, capsule, provider, trust, evidence per descriptor,
/// numerical policy, verdict; then the failing obligations.
std::string render_audit_table(const PlanAudit& audit);
/// The audit as JSON ("pact.plan-audit.v1").
Json render_audit_json(const PlanAudit& audit);

}  // namespace pact::plan
