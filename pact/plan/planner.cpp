#include "pact/plan/planner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "pact/contract/provider_table.hpp"
#include "pact/core/cpu.hpp"
#include "pact/core/cuda_device.hpp"
#include "pact/core/cuda_probe.hpp"

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

KernelAdmission admit_kernel(const std::string& node, ops::OpTag op, std::span<const ops::TensorType> inputs,
                             const contract::BackendProfile& profile, const contract::EvidenceResolver& resolver,
                             contract::VjpMode vjp_mode) {
  KernelAdmission a;
  const contract::Selection selection = contract::select_capsule(profile, op, inputs, vjp_mode);
  a.capsule = selection.capsule;
  if (a.capsule == nullptr) {
    contract::ObligationReport missing;
    missing.node = node;
    missing.obligation = contract::DescriptorKind::shape;
    missing.reason = selection.refusal;
    a.reports.push_back(std::move(missing));
    return a;
  }
  contract::BackendProfile effective = profile;
  effective.policy.vjp_mode = vjp_mode;
  contract::check_kernel(node, op, *a.capsule, effective, resolver, a.reports);
  if (!std::all_of(a.reports.begin(), a.reports.end(), [](const auto& r) { return r.accepted; })) return a;
  // A capsule without a handler (a CUDA capsule before a CUDA build) is a failing report, not an exception.
  try {
    a.bound.emplace(Planner::key(), *a.capsule, contract::handler_for(*a.capsule));
  } catch (const Error& e) {
    a.reports.push_back({node, a.capsule->name, contract::DescriptorKind::forward_value,
                         a.capsule->descriptors[2].evidence, false, fmt::format("binding failed: {}", e.what())});
  }
  return a;
}

std::string_view kernel_purpose_name(KernelPurpose purpose) noexcept {
  switch (purpose) {
    case KernelPurpose::node:
      return "node";
    case KernelPurpose::accumulate:
      return "accumulate";
    case KernelPurpose::running_stats:
      return "running_stats";
    case KernelPurpose::update:
      return "update";
    case KernelPurpose::allreduce:
      return "allreduce";
  }
  return "?";
}

std::string training_label(KernelPurpose purpose, std::string_view subject) {
  return fmt::format("{}:{}", kernel_purpose_name(purpose), subject);
}

namespace {

// The kernels a training step runs besides the graph's nodes (Note [Training kernels]), with the input
// types each is admitted for.
std::vector<PlannedKernel> training_kernels(const ir::Graph& graph, const TrainingUpdates& training) {
  std::vector<PlannedKernel> out;
  std::set<DType> floating;
  for (const auto& n : graph.nodes) {
    if (is_floating(n.type.dtype)) floating.insert(n.type.dtype);
  }
  for (DType d : floating) {
    const ops::TensorType t{d, Dims{}};
    out.push_back({training_label(KernelPurpose::accumulate, dtype_name(d)),
                   ops::OpTag::accumulate_grad,
                   nullptr,
                   {t, t},
                   KernelPurpose::accumulate});
  }
  for (const auto& n : graph.nodes) {
    if (n.op != ops::OpTag::batch_norm || n.inputs.size() != 5) continue;
    std::vector<ops::TensorType> in;
    for (const auto& id : {n.inputs[3], n.inputs[4], n.inputs[0]}) in.push_back(graph.find(id)->type);
    out.push_back({training_label(KernelPurpose::running_stats, n.id), ops::OpTag::batch_norm_stats, nullptr,
                   std::move(in), KernelPurpose::running_stats});
  }
  if (training.allreduce) {  // one collective per dtype of the trained parameters (Note [Gradient buckets])
    std::set<DType> trained;
    for (const auto& n : graph.nodes)
      if (n.op == ops::OpTag::parameter && n.differentiable) trained.insert(n.type.dtype);
    for (DType d : trained)
      out.push_back({training_label(KernelPurpose::allreduce, dtype_name(d)),
                     ops::OpTag::allreduce_mean,
                     nullptr,
                     {ops::TensorType{d, Dims{}}},
                     KernelPurpose::allreduce});
    const bool batch_norms = std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const ir::Node& n) {
      return n.op == ops::OpTag::batch_norm && n.inputs.size() == 5;
    });
    if (training.sync_batch_norm && batch_norms)
      out.push_back({training_label(KernelPurpose::allreduce, "batch_norm"),
                     ops::OpTag::allreduce_mean,
                     nullptr,
                     {ops::TensorType{DType::f64, Dims{}}},
                     KernelPurpose::allreduce});
  }
  for (const auto& n : graph.nodes) {
    if (n.op != ops::OpTag::parameter || !n.differentiable) continue;
    const std::size_t arity = training.optimizer == ops::OpTag::adam ? 4 : training.momentum ? 3 : 2;
    out.push_back({training_label(KernelPurpose::update, n.id), training.optimizer, nullptr,
                   std::vector<ops::TensorType>(arity, n.type), KernelPurpose::update});
  }
  return out;
}

// The interpreter's walk of `graph` (Schedule): names resolved to positions once, here.
Schedule schedule_of(const ir::Graph& graph, const PlanAudit& audit) {
  const std::size_t count = graph.nodes.size();
  std::unordered_map<std::string_view, std::uint32_t> position;
  position.reserve(count);
  for (std::size_t i = 0; i < count; ++i) position.emplace(graph.nodes[i].id, static_cast<std::uint32_t>(i));
  Schedule s;
  s.inputs.resize(count);
  s.kernel.assign(count, Schedule::kNone);
  s.last_use.assign(count, Schedule::kNone);
  s.dies_after.resize(count);
  for (std::size_t k = 0; k < audit.kernels.size(); ++k) {
    if (audit.kernels[k].purpose != KernelPurpose::node) continue;
    if (auto it = position.find(audit.kernels[k].node); it != position.end())
      s.kernel[it->second] = static_cast<std::uint32_t>(k);
  }
  for (std::size_t i = 0; i < count; ++i) {
    for (const auto& id : graph.nodes[i].inputs) {
      const std::uint32_t v = position.at(id);  // a validated graph's inputs exist
      s.inputs[i].push_back(v);
      s.last_use[v] = static_cast<std::uint32_t>(i);
    }
  }
  for (const auto& o : graph.outputs) {
    const std::uint32_t v = position.at(o);
    s.outputs.push_back(v);
    s.last_use[v] = static_cast<std::uint32_t>(count);
  }
  for (std::size_t v = 0; v < count; ++v) {
    if (s.last_use[v] < count) s.dies_after[s.last_use[v]].push_back(static_cast<std::uint32_t>(v));
  }
  return s;
}

}  // namespace

AcceptedGraphPlan::AcceptedGraphPlan(contract::PlannerKey, ir::Graph graph, PlanAudit audit,
                                     std::vector<contract::BoundKernel> bound)
    : graph_(std::move(graph)),
      audit_(std::move(audit)),
      bound_(std::move(bound)),
      schedule_(schedule_of(graph_, audit_)) {}

Expected<AcceptedGraphPlan, PlanRejection> plan_graph(const ir::Graph& input_graph,
                                                      const contract::BackendProfile& profile,
                                                      const contract::EvidenceResolver& resolver,
                                                      contract::VjpMode vjp_mode,
                                                      std::optional<TrainingUpdates> training) {
  validate_modules(profile);
  if (training && (training->optimizer != ops::OpTag::sgd && training->optimizer != ops::OpTag::adam)) {
    throw_error(ErrorCode::invalid_argument, "plan",
                fmt::format("'{}' is not an optimizer op (sgd, adam)", ops::op_kind(training->optimizer)));
  }
  if (training && vjp_mode != contract::VjpMode::with_vjp) {
    throw_error(ErrorCode::invalid_argument, "plan", "a training plan needs VJP support (VjpMode::with_vjp)");
  }
  // Planning requires a well-formed graph: ir::Graph is a plain struct, so check it again here.
  const ir::Graph graph = ir::validate(input_graph.nodes, input_graph.outputs);
  const bool wants_cuda =
      std::find(profile.devices.begin(), profile.devices.end(), DeviceKind::cuda) != profile.devices.end();
  if (wants_cuda && cuda_provider()->name() == "cuda-stub" && !profile.allow_cuda_stub) {
    // What is missing, probed: no device could be opened (the driver's answer, or why it did not load), so
    // the cuda provider is the host-parity stub.
    throw_error(ErrorCode::no_device, "plan",
                fmt::format("profile {} needs a CUDA device, and this process has only the host-parity stub; "
                            "probed: {}",
                            profile.name, CudaDevice::unavailable_reason()));
  }

  // Every node that executes a kernel goes through the one admission, with its input types; nodes of
  // one op and input dtypes share a selection (admission is deterministic), so the audit stays small
  // to compute for large graphs.
  std::unordered_map<std::string, const ops::TensorType*> type_of;
  for (const auto& n : graph.nodes) type_of[n.id] = &n.type;
  std::map<std::pair<int, std::vector<int>>, KernelAdmission> admitted;
  PlanAudit audit{profile.name, profile.policy.assurance, vjp_mode, {}, {}, {}, {}};
  std::vector<contract::ObligationReport>& reports = audit.check.reports;
  std::vector<contract::BoundKernel> bound;
  auto admit_planned = [&](PlannedKernel k, contract::VjpMode mode) {
    std::vector<int> key_types{static_cast<int>(mode)};
    for (const auto& t : k.inputs) key_types.push_back(static_cast<int>(t.dtype));
    const auto key = std::make_pair(static_cast<int>(k.op), std::move(key_types));
    auto it = admitted.find(key);
    if (it == admitted.end())
      it = admitted.emplace(key, admit_kernel(k.node, k.op, k.inputs, profile, resolver, mode)).first;
    const KernelAdmission& a = it->second;
    k.capsule = a.capsule;
    for (auto r : a.reports) {
      r.node = k.node;
      if (r.capsule.empty() && a.capsule == nullptr) {
        // The refusal names the node: which node, which op, which input types.
        r.reason =
            fmt::format("{} '{}': {}", k.purpose == KernelPurpose::node ? "node" : kernel_purpose_name(k.purpose),
                        k.node, r.reason);
      }
      reports.push_back(std::move(r));
    }
    if (a.capsule != nullptr)
      audit.groups[{a.capsule->provider, std::string(device_name(a.capsule->device))}].push_back(k.node);
    if (a.bound) bound.push_back(*a.bound);
    audit.kernels.push_back(std::move(k));
  };
  for (const auto& n : graph.nodes) {
    if (!ops::op_info(n.op).runtime_relevant()) continue;
    PlannedKernel k{n.id, n.op, nullptr, {}};
    for (const auto& in : n.inputs) k.inputs.push_back(*type_of.at(in));
    // No gradient flows through a gradient-free op (Note [Op table]): it needs no VJP even in training.
    admit_planned(std::move(k), ops::op_info(n.op).gradient_free ? contract::VjpMode::forward_only : vjp_mode);
  }
  // Update ops have no VJP: they are admitted forward only.
  if (training) {
    for (auto& k : training_kernels(graph, *training)) admit_planned(std::move(k), contract::VjpMode::forward_only);
  }
  audit.check.accepted = bound.size() == audit.kernels.size() &&
                         std::all_of(reports.begin(), reports.end(), [](const auto& r) { return r.accepted; });
  if (!audit.check.accepted) return Unexpected(PlanRejection{std::move(audit)});
  return AcceptedGraphPlan{Planner::key(), graph, std::move(audit), std::move(bound)};
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
      evidence += fmt::format("{}{}{}{}", contract::evidence_kind_name(r.evidence.kind),
                              r.evidence.id.empty() ? "" : ":" + r.evidence.id,
                              r.accepted && r.evidence.kind == contract::EvidenceKind::testSuite
                                  ? (r.verified ? " (receipt)" : " (name only)")
                                  : "",
                              r.accepted ? "" : " ✗");
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
  const contract::TestSuiteEvidence suites = audit.check.test_suite_evidence();
  s += fmt::format(
      "verdict: {} ({} kernels, {} obligations, {} failing; testSuite evidence: {} verified by a receipt at HEAD, "
      "{} accepted by name only)\n",
      audit.check.accepted ? "accepted" : "rejected", audit.kernels.size(), audit.check.reports.size(), failures.size(),
      suites.verified, suites.by_name);
  for (const auto& f : failures) {
    s += fmt::format("  ✗ node {} capsule {} obligation {} evidence {}{}: {}\n", f.node,
                     f.capsule.empty() ? "(none)" : f.capsule, contract::obligation_name(f.obligation),
                     contract::evidence_kind_name(f.evidence.kind), f.evidence.id.empty() ? "" : ":" + f.evidence.id,
                     f.reason);
  }
  return s;
}

std::string_view capsule_isa(const contract::Capsule& capsule) noexcept {
  const contract::ProviderRow* row = nullptr;
  for (const auto& r : contract::provider_table())
    if (r.provider == capsule.provider && r.device == capsule.device) row = &r;
  if (row == nullptr || row->device != DeviceKind::cpu) return "none";
  if (row->simd_dispatched != nullptr && row->simd_dispatched(capsule.op)) return isa_name(active_isa());
  return row->trust == contract::Trust::trustedExternal ? "external" : "portable";
}

Json render_audit_json(const PlanAudit& audit) {
  Json kernels = Json::array();
  for (const auto& k : audit.kernels) {
    Json inputs = Json::array();
    for (const auto& t : k.inputs) inputs.push_back(contract::describe_type(t));
    Json jk{{"node", k.node},
            {"op", std::string(ops::op_kind(k.op))},
            {"purpose", std::string(kernel_purpose_name(k.purpose))},
            {"inputs", std::move(inputs)}};
    if (k.capsule) {
      jk["capsule"] = k.capsule->name;
      jk["provider"] = k.capsule->provider;
      jk["device"] = std::string(device_name(k.capsule->device));
      jk["trust"] = std::string(contract::trust_name(k.capsule->trust));
      jk["numerical_policy"] = std::string(contract::numerical_policy_name(k.capsule->numerical_policy));
      jk["provenance"] = Json{{"file", k.capsule->provenance.file}, {"symbol", k.capsule->provenance.symbol}};
      jk["dtypes"] = k.capsule->dtypes.to_string();
      jk["isa"] = std::string(capsule_isa(*k.capsule));
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
        {"reason", r.reason},
        {"verified", r.verified}});
  }
  const contract::TestSuiteEvidence suites = audit.check.test_suite_evidence();
  Json rewrites = Json::array();
  for (const auto& r : audit.rewrites)
    rewrites.push_back(Json{{"kind", r.kind}, {"nodes", r.nodes}, {"into", r.into}, {"evidence", r.evidence}});
  Json groups = Json::array();
  for (const auto& [key, nodes] : audit.groups)
    groups.push_back(Json{{"provider", key.first}, {"device", key.second}, {"nodes", nodes}});
  return Json{{"schema", "pact.plan-audit.v1"},
              {"profile", audit.profile},
              {"assurance", std::string(contract::assurance_policy_name(audit.assurance))},
              {"vjp", audit.vjp_mode == contract::VjpMode::with_vjp},
              {"verdict", audit.check.accepted ? "accepted" : "rejected"},
              {"test_suite_evidence", Json{{"verified", suites.verified}, {"by_name", suites.by_name}}},
              {"kernels", kernels},
              {"groups", groups},
              {"rewrites", rewrites},
              {"obligations", obligations}};
}

}  // namespace pact::plan
