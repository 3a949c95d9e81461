#include "pact/contract/check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "pact/contract/provider_table.hpp"
#include "pact/kernels/cublas.hpp"
#include "pact/kernels/cublaslt.hpp"
#include "pact/kernels/cudnn.hpp"
#include "pact/kernels/guards.hpp"

namespace pact::contract {

std::string_view assurance_policy_name(AssurancePolicy p) noexcept {
  return p == AssurancePolicy::checked ? "checked" : "external";
}

bool admits(AssurancePolicy policy, EvidenceKind kind) noexcept {
  if (kind == EvidenceKind::trustedBoundary) return policy == AssurancePolicy::external;
  return true;
}

bool admits(const KernelPolicy& policy, const Evidence& evidence) noexcept {
  if (admits(policy.assurance, evidence.kind)) return true;
  return evidence.kind == EvidenceKind::trustedBoundary &&
         std::find(policy.admitted_boundaries.begin(), policy.admitted_boundaries.end(), evidence.id) !=
             policy.admitted_boundaries.end();
}

std::vector<std::string> builtin_profile_names() {
  return {"cpu-checked",           "cpu-deterministic", "cpu-external", "cpu-checked-mpi",
          "cpu-deterministic-mpi", "cuda-checked",      "cuda-external"};
}

BackendProfile builtin_profile(std::string_view name) {
  // Each built-in profile is a device and an assurance policy; its modules and provider preference come
  // from the provider table (Note [Provider table]): the device's rows, only trust-checked ones under the
  // checked policy, providers ordered by the table's preference rank. cpu-deterministic is cpu-checked held
  // to the rows of numerical policy fixedLeft (the reference provider: plain loops, left folds in index
  // order, no threads), so a run's every value is bitwise the same from run to run and at any thread count.
  // The -mpi profiles are their base profile plus the one collective row of the same numerical policy
  // (data-parallel training's gradient mean over the ranks) and its trusted boundary, mpi.allreduce,
  // admitted by name; no other profile has a collective row (data-parallel training is asked for by name).
  const bool mpi = name.ends_with("-mpi");
  const std::string_view base = mpi ? name.substr(0, name.size() - 4) : name;
  const bool fixed_left = base == "cpu-deterministic";
  const bool cpu = base == "cpu-checked" || base == "cpu-external" || fixed_left;
  const bool cuda = !mpi && (base == "cuda-checked" || base == "cuda-external");
  if (!(cpu || cuda) || (mpi && base == "cpu-external")) {  // cpu-external admits every boundary already
    throw_error(ErrorCode::invalid_argument, "profile",
                fmt::format("unknown profile '{}' (known: {})", name, fmt::join(builtin_profile_names(), ", ")));
  }
  const DeviceKind device = cpu ? DeviceKind::cpu : DeviceKind::cuda;
  const AssurancePolicy assurance = base.ends_with("-external") ? AssurancePolicy::external : AssurancePolicy::checked;
  std::vector<const ProviderRow*> rows;
  for (const auto& row : provider_table()) {
    if (row.collective) {
      if (mpi && row.policy == (fixed_left ? NumericalPolicy::fixedLeft : NumericalPolicy::implementationDefined))
        rows.push_back(&row);
      continue;
    }
    if (row.device == device && (assurance == AssurancePolicy::external || row.trust == Trust::checked) &&
        (!fixed_left || row.policy == NumericalPolicy::fixedLeft)) {
      rows.push_back(&row);
    }
  }
  BackendProfile p;
  p.name = std::string(name);
  p.policy = {device, {}, assurance, VjpMode::forward_only};
  p.devices = {device};
  for (const auto* row : rows) p.modules.push_back(&capsule_module(row->module));
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto* a, const auto* b) { return a->preference < b->preference; });
  for (const auto* row : rows) {
    const std::string provider(row->provider);
    if (std::find(p.providers.begin(), p.providers.end(), provider) == p.providers.end())
      p.providers.push_back(provider);
  }
  p.policy.provider_preference = p.providers;
  if (mpi) p.policy.admitted_boundaries = {"mpi.allreduce"};
  return p;
}

const std::vector<std::string>& declared_test_suites() {
  static const std::vector<std::string> suites{
      "OpOracle.ReferenceMatchesPyTorchFloat64",
      "OpOracle.NativeMatchesPyTorchFloat64",
      "OpOracle.BlasMatchesPyTorchFloat64",
      "OpOracle.HalfMatchesPyTorchFloat64",
  };
  return suites;
}

const std::vector<std::string>& declared_trusted_boundaries() {
  static const std::vector<std::string> boundaries = [] {
    std::vector<std::string> b{"openblas.cblas_sgemm", "mpi.allreduce", "cublas.sgemm", "cublaslt.matmul",
                               "cudnn.convolution"};
    if (kernels::libtorch_built()) b.push_back("libtorch.aten");
    return b;
  }();
  return boundaries;
}

EvidenceStatus DefaultEvidenceResolver::resolve(const Capsule&, const ContractDescriptor& d) const {
  const Evidence& e = d.evidence;
  auto contains = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  switch (e.kind) {
    case EvidenceKind::notApplicable:
      return {true, ""};
    case EvidenceKind::runtimeGuard:
      if (e.id.rfind("cuda.", 0) == 0) {
        if (cuda_provider()->name() == "cuda-stub")
          return {false, "no CUDA device: the cuda-stub never satisfies CUDA evidence"};
        if (e.id == "cuda.cublas_loaded" && kernels::cublas() == nullptr)
          return {false, kernels::cublas_unavailable_reason()};
        if (e.id == "cuda.cublaslt_loaded" && kernels::cublaslt() == nullptr)
          return {false, kernels::cublaslt_unavailable_reason()};
        if (e.id == "cuda.cudnn_loaded" && kernels::cudnn() == nullptr)
          return {false, kernels::cudnn_unavailable_reason()};
        return {true, ""};
      }
      if (kernels::find_guard(e.id) == nullptr) return {false, fmt::format("no guard '{}' is registered", e.id)};
      return {true, ""};
    case EvidenceKind::testSuite:
      if (!contains(declared_test_suites(), e.id))
        return {false, fmt::format("test suite '{}' is not one Pact ships", e.id)};
      return {true, ""};
    case EvidenceKind::trustedBoundary:
      if (!contains(declared_trusted_boundaries(), e.id))
        return {false, fmt::format("unknown trusted boundary '{}'", e.id)};
      return {true, ""};
  }
  return {false, "unknown evidence kind"};
}

std::vector<ObligationReport> ContractCheck::failures() const {
  std::vector<ObligationReport> f;
  for (const auto& r : reports) {
    if (!r.accepted) f.push_back(r);
  }
  return f;
}

TestSuiteEvidence ContractCheck::test_suite_evidence() const {
  TestSuiteEvidence t;
  for (const auto& r : reports) {
    if (!r.accepted || r.evidence.kind != EvidenceKind::testSuite) continue;
    ++(r.verified ? t.verified : t.by_name);
  }
  return t;
}

void check_kernel(const std::string& node, ops::OpTag op, const Capsule& capsule, const BackendProfile& profile,
                  const EvidenceResolver& resolver, std::vector<ObligationReport>& out) {
  const KernelPolicy& policy = profile.policy;
  // Identity and support: reported under the shape obligation with the capsule's own shape evidence.
  std::vector<std::string> problems;
  if (capsule.op != op)
    problems.push_back(fmt::format("capsule is for '{}', node is '{}'", ops::op_kind(capsule.op), ops::op_kind(op)));
  if (!capsule.forward) problems.push_back("capsule has no forward support");
  if (policy.vjp_mode == VjpMode::with_vjp && !capsule.vjp)
    problems.push_back("the run needs a VJP the capsule does not support");
  if (capsule.device != policy.device) {
    problems.push_back(fmt::format("capsule device {} differs from the policy's {}", device_name(capsule.device),
                                   device_name(policy.device)));
  }
  if (std::find(profile.providers.begin(), profile.providers.end(), capsule.provider) == profile.providers.end()) {
    problems.push_back(fmt::format("provider '{}' is not available in profile {}", capsule.provider, profile.name));
  }
  // A trusted-external capsule passes the checked policy only when the policy admits its boundary by name
  // (the -mpi profiles' mpi.allreduce): every trusted boundary it cites.
  const bool named_boundary =
      std::any_of(capsule.descriptors.begin(), capsule.descriptors.end(),
                  [](const ContractDescriptor& d) { return d.evidence.kind == EvidenceKind::trustedBoundary; }) &&
      std::all_of(capsule.descriptors.begin(), capsule.descriptors.end(), [&](const ContractDescriptor& d) {
        return d.evidence.kind != EvidenceKind::trustedBoundary || admits(policy, d.evidence);
      });
  if (policy.assurance == AssurancePolicy::checked && capsule.trust != Trust::checked && !named_boundary) {
    problems.push_back(fmt::format("trust {} is not admitted by the checked policy", trust_name(capsule.trust)));
  }
  if (!problems.empty()) {
    std::string reason;
    for (const auto& p : problems) reason += (reason.empty() ? "" : "; ") + p;
    out.push_back(
        {node, capsule.name, DescriptorKind::shape, capsule.descriptors[0].evidence, false, "policy gate: " + reason});
  }
  static constexpr DescriptorKind kOrder[] = {DescriptorKind::shape, DescriptorKind::layout,
                                              DescriptorKind::forward_value, DescriptorKind::vjp};
  for (std::size_t i = 0; i < 4; ++i) {
    const ContractDescriptor& d = capsule.descriptors[i];
    ObligationReport r{node, capsule.name, kOrder[i], d.evidence, false, ""};
    if (d.obligation != kOrder[i]) {
      r.reason = fmt::format("contract misaligned: descriptor {} is filed under '{}', expected '{}'", i,
                             obligation_name(d.obligation), obligation_name(kOrder[i]));
    } else if (!admits(policy, d.evidence)) {
      r.reason =
          fmt::format("{} evidence '{}' is not admitted by the {} assurance policy",
                      evidence_kind_name(d.evidence.kind), d.evidence.id, assurance_policy_name(policy.assurance));
    } else {
      auto s = resolver.resolve(capsule, d);
      r.accepted = s.resolved;
      r.reason = s.reason;
      r.verified = s.resolved && s.verified && d.evidence.kind == EvidenceKind::testSuite;
    }
    out.push_back(std::move(r));
  }
}

std::string describe_type(const ops::TensorType& type) {
  return fmt::format("{}{}", dtype_name(type.dtype), type.shape.to_string());
}

std::string describe_types(std::span<const ops::TensorType> types) {
  std::string s = "(";
  for (std::size_t i = 0; i < types.size(); ++i) s += (i == 0 ? "" : ", ") + describe_type(types[i]);
  return s + ")";
}

Selection select_capsule(const BackendProfile& profile, ops::OpTag op, std::span<const ops::TensorType> inputs,
                         VjpMode vjp_mode) {
  auto rank = [&](const std::string& provider) {
    auto it = std::find(profile.policy.provider_preference.begin(), profile.policy.provider_preference.end(), provider);
    return static_cast<std::size_t>(it - profile.policy.provider_preference.begin());
  };
  Selection best;
  std::string refused;  // the capsules that were available but cannot serve these input types, and why
  for (const auto* m : profile.modules) {
    for (const auto& c : m->capsules) {
      if (c.op != op) continue;
      const bool available =
          std::find(profile.devices.begin(), profile.devices.end(), c.device) != profile.devices.end() &&
          std::find(profile.providers.begin(), profile.providers.end(), c.provider) != profile.providers.end();
      if (!available || !c.forward || (vjp_mode == VjpMode::with_vjp && !c.vjp)) continue;
      if (auto why = unsupported_inputs(c, inputs)) {
        refused += fmt::format("; {}", *why);
        continue;
      }
      if (best.capsule == nullptr || rank(c.provider) < rank(best.capsule->provider)) best.capsule = &c;
    }
  }
  if (best.capsule == nullptr) {
    best.refusal = fmt::format("no capsule for '{}' on {} in profile {}{} serves inputs {}{}", ops::op_kind(op),
                               device_name(profile.policy.device), profile.name,
                               vjp_mode == VjpMode::with_vjp ? " with VJP support" : "", describe_types(inputs),
                               refused.empty() ? "" : refused);
  }
  return best;
}

void check_binding(const Capsule& capsule, const kernels::Handler& handler) {
  if (capsule.op != handler.op || capsule.provider != handler.provider || capsule.device != handler.device) {
    throw_error(ErrorCode::provider_mismatch, "bind",
                fmt::format("capsule {} ({}, {}, {}) cannot bind handler ({}, {}, {})", capsule.name,
                            ops::op_kind(capsule.op), capsule.provider, device_name(capsule.device),
                            ops::op_kind(handler.op), handler.provider, device_name(handler.device)));
  }
}

const kernels::Handler& handler_for(const Capsule& capsule) {
  if (const kernels::Handler* found = find_capsule_handler(capsule)) {
    const kernels::Handler& h = kernels::substituted(*found);  // a falsification's mutant, in its scope
    check_binding(capsule, h);
    return h;
  }
  throw_error(ErrorCode::unsupported, "bind",
              fmt::format("no {} handler for {} on {}", capsule.provider, ops::op_kind(capsule.op),
                          device_name(capsule.device)));
}

BoundKernel::BoundKernel(PlannerKey, const Capsule& capsule, const kernels::Handler& handler)
    : capsule_(&capsule), handler_(&handler) {
  check_binding(capsule, handler);
}

void require_certificate_applies(const NumericalCertificate& certificate, const Capsule& capsule,
                                 const std::vector<ops::TensorType>& inputs) {
  if (certificate.op != capsule.op) {
    throw_error(ErrorCode::invalid_argument, "certificate",
                fmt::format("certificate for {} offered for {}", ops::op_kind(certificate.op), capsule.name));
  }
  if (certificate.inputs != inputs)
    throw_error(ErrorCode::invalid_argument, "certificate", "certificate input types differ");
  if (certificate.policy != capsule.numerical_policy) {
    throw_error(ErrorCode::invalid_argument, "certificate",
                fmt::format("a {} certificate is not evidence for {} ({}): the accumulation order differs",
                            numerical_policy_name(certificate.policy), capsule.name,
                            numerical_policy_name(capsule.numerical_policy)));
  }
}

}  // namespace pact::contract
