#include "pact/plan/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>

namespace pact::plan {

namespace {

void validate_modules(const contract::BackendProfile& profile) {
  std::set<std::string> names;
  for (const auto* m : profile.modules) {
    for (const auto& c : m->capsules) {
      if (!names.insert(c.name).second) {
        throw_error(ErrorCode::invalid_argument, "plan",
                    fmt::format("profile {}: duplicate capsule name '{}' (module {})", profile.name, c.name, m->name));
      }
    }
  }
}

}  // namespace

Expected<AcceptedGraphPlan, PlanRejection> plan_graph(const ir::Graph& input_graph,
                                                      const contract::BackendProfile& profile,
                                                      const contract::EvidenceResolver& resolver,
                                                      contract::VjpMode vjp_mode) {
  validate_modules(profile);
  // Planning requires a well-formed graph: ir::Graph is a plain struct, so check it again here.
  const ir::Graph graph = ir::validate(input_graph.nodes, input_graph.outputs);
  const bool wants_cuda =
      std::find(profile.devices.begin(), profile.devices.end(), DeviceKind::cuda) != profile.devices.end();
  if (wants_cuda && cuda_provider()->name() == "cuda-stub" && !profile.allow_cuda_stub) {
    throw_error(
        ErrorCode::no_device, "plan",
        fmt::format("profile {} needs a CUDA device; this machine has none (the cuda provider is the host-parity stub)",
                    profile.name));
  }
  contract::BackendProfile effective = profile;
  effective.policy.vjp_mode = vjp_mode;

  // One selection per op (contract::select_capsule: preference order, availability and support only).
  std::unordered_map<int, const contract::Capsule*> choice;
  for (const auto& n : graph.nodes) {
    const int key = static_cast<int>(n.op);
    if (ops::op_info(n.op).runtime_relevant() && !choice.count(key))
      choice[key] = contract::select_capsule(profile, n.op, vjp_mode);
  }

  PlanAudit audit{profile.name, profile.policy.assurance, vjp_mode, {}, {}, {}};
  std::vector<contract::ObligationReport>& reports = audit.check.reports;
  for (const auto& n : graph.nodes) {
    if (!ops::op_info(n.op).runtime_relevant()) continue;
    auto it = choice.find(static_cast<int>(n.op));
    const contract::Capsule* c = it == choice.end() ? nullptr : it->second;
    audit.kernels.push_back({n.id, n.op, c});
    if (c == nullptr) {
      contract::ObligationReport missing;
      missing.node = n.id;
      missing.obligation = contract::Obligation::shape;
      missing.reason = fmt::format("no capsule for '{}' on {} among the profile's modules{}", ops::op_kind(n.op),
                                   device_name(profile.policy.device),
                                   vjp_mode == contract::VjpMode::with_vjp ? " with VJP support" : "");
      reports.push_back(std::move(missing));
      continue;
    }
    audit.groups[{c->provider, std::string(device_name(c->device))}].push_back(n.id);
    contract::check_kernel(n.id, n.op, *c, effective, resolver, reports);
  }
  audit.check.accepted = std::all_of(reports.begin(), reports.end(), [](const auto& r) { return r.accepted; });
  if (!audit.check.accepted) return Unexpected(PlanRejection{std::move(audit)});
  // Bind every admitted capsule; a capsule without a handler (e.g. a CUDA capsule before a CUDA build)
  // turns into a failing report rather than an exception.
  std::vector<contract::BoundKernel> bound;
  for (const auto& k : audit.kernels) {
    try {
      bound.push_back(contract::bind(*k.capsule));
    } catch (const Error& e) {
      contract::ObligationReport r;
      r.node = k.node;
      r.capsule = k.capsule->name;
      r.obligation = contract::Obligation::forward_value;
      r.evidence = k.capsule->descriptors[2].evidence;
      r.reason = fmt::format("binding failed: {}", e.what());
      reports.push_back(std::move(r));
    }
  }
  if (bound.size() != audit.kernels.size()) {
    audit.check.accepted = false;
    return Unexpected(PlanRejection{std::move(audit)});
  }
  return AcceptedGraphPlan{graph, std::move(audit), std::move(bound)};
}

std::string render_audit_table(const PlanAudit& audit) {
  std::string s = fmt::format("plan audit: profile {}, assurance {}, {}\n", audit.profile,
                              contract::assurance_policy_name(audit.assurance),
                              audit.vjp_mode == contract::VjpMode::with_vjp ? "forward + VJP" : "forward only");
  s += fmt::format("{:<16} {:<28} {:<34} {:<10} {:<16} {:<22} {}\n", "node", "op", "capsule", "provider", "trust",
                   "numerical policy", "evidence (shape | layout | forward | vjp)");
  // Reports by (node, capsule): the verdict of each descriptor.
  for (const auto& k : audit.kernels) {
    std::string evidence;
    bool ok = true;
    for (const auto& r : audit.check.reports) {
      if (r.node != k.node) continue;
      ok = ok && r.accepted;
      if (r.reason.rfind("policy gate", 0) == 0) continue;
      if (!evidence.empty()) evidence += " | ";
      evidence += fmt::format("{}{}{}", contract::evidence_kind_name(r.evidence.kind),
                              r.evidence.id.empty() ? "" : ":" + r.evidence.id, r.accepted ? "" : " ✗");
    }
    const auto* c = k.capsule;
    s += fmt::format("{:<16} {:<28} {:<34} {:<10} {:<16} {:<22} {}  {}\n", k.node, ops::op_kind(k.op),
                     c ? c->name : "(none)", c ? c->provider : "-", c ? contract::trust_name(c->trust) : "-",
                     c ? contract::numerical_policy_name(c->numerical_policy) : "-", evidence.empty() ? "-" : evidence,
                     ok ? "accepted" : "REJECTED");
  }
  s += "groups:";
  for (const auto& [key, nodes] : audit.groups)
    s += fmt::format(" {}/{} ({} nodes)", key.first, key.second, nodes.size());
  s += "\n";
  const auto failures = audit.check.failures();
  s += fmt::format("verdict: {} ({} kernels, {} obligations, {} failing)\n",
                   audit.check.accepted ? "accepted" : "rejected", audit.kernels.size(), audit.check.reports.size(),
                   failures.size());
  for (const auto& f : failures) {
    s += fmt::format("  ✗ node {} capsule {} obligation {} evidence {}{}: {}\n", f.node,
                     f.capsule.empty() ? "(none)" : f.capsule, contract::obligation_name(f.obligation),
                     contract::evidence_kind_name(f.evidence.kind), f.evidence.id.empty() ? "" : ":" + f.evidence.id,
                     f.reason);
  }
  return s;
}

Json render_audit_json(const PlanAudit& audit) {
  Json kernels = Json::array();
  for (const auto& k : audit.kernels) {
    Json jk{{"node", k.node}, {"op", std::string(ops::op_kind(k.op))}};
    if (k.capsule) {
      jk["capsule"] = k.capsule->name;
      jk["provider"] = k.capsule->provider;
      jk["device"] = std::string(device_name(k.capsule->device));
      jk["trust"] = std::string(contract::trust_name(k.capsule->trust));
      jk["numerical_policy"] = std::string(contract::numerical_policy_name(k.capsule->numerical_policy));
      jk["provenance"] = Json{{"file", k.capsule->provenance.file}, {"symbol", k.capsule->provenance.symbol}};
    } else {
      jk["capsule"] = nullptr;
    }
    kernels.push_back(std::move(jk));
  }
  Json obligations = Json::array();
  for (const auto& r : audit.check.reports) {
    obligations.push_back(Json{
        {"node", r.node},
        {"capsule", r.capsule},
        {"obligation", std::string(contract::obligation_name(r.obligation))},
        {"evidence", Json{{"kind", std::string(contract::evidence_kind_name(r.evidence.kind))}, {"id", r.evidence.id}}},
        {"accepted", r.accepted},
        {"reason", r.reason}});
  }
  Json groups = Json::array();
  for (const auto& [key, nodes] : audit.groups)
    groups.push_back(Json{{"provider", key.first}, {"device", key.second}, {"nodes", nodes}});
  return Json{{"schema", "pact.plan-audit.v1"},
              {"profile", audit.profile},
              {"assurance", std::string(contract::assurance_policy_name(audit.assurance))},
              {"vjp", audit.vjp_mode == contract::VjpMode::with_vjp},
              {"verdict", audit.check.accepted ? "accepted" : "rejected"},
              {"kernels", kernels},
              {"groups", groups},
              {"obligations", obligations}};
}

}  // namespace pact::plan
