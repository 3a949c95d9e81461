#pragma once
/// Assurance policies, kernel policies, backend profiles, the evidence resolver interface, the
/// kernel-policy gate and contract check, handler binding, and numerical certificates (seed 000, SPEC §6).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pact/contract/capsule.hpp"
#include "pact/kernels/kernel.hpp"

namespace pact::contract {

/// Which evidence kinds a deployment accepts: checked admits runtimeGuard, testSuite, notApplicable;
/// external also admits trustedBoundary.
enum class AssurancePolicy : std::uint8_t { checked, external };
/// Whether a run needs VJPs.
enum class VjpMode : std::uint8_t { forward_only, with_vjp };

std::string_view assurance_policy_name(AssurancePolicy p) noexcept;
/// True when the policy admits the evidence kind.
bool admits(AssurancePolicy policy, EvidenceKind kind) noexcept;

struct KernelPolicy {
  DeviceKind device = DeviceKind::cpu;
  std::vector<std::string> provider_preference;  ///< most preferred first
  AssurancePolicy assurance = AssurancePolicy::checked;
  VjpMode vjp_mode = VjpMode::forward_only;
  /// Trusted boundaries admitted by name under the checked policy (cpu-checked-mpi admits
  /// "mpi.allreduce", and no other); the external policy admits every boundary.
  std::vector<std::string> admitted_boundaries = {};
};
/// Whether `policy` admits `evidence`: its assurance admits the kind, or the evidence is a trusted boundary
/// the policy admits by name.
bool admits(const KernelPolicy& policy, const Evidence& evidence) noexcept;

/// A backend profile: policy, what the deployment has available, and the planning registry.
struct BackendProfile {
  std::string name;
  KernelPolicy policy;
  std::vector<DeviceKind> devices;
  std::vector<std::string> providers;
  std::vector<const CapsuleModule*> modules;
  bool allow_cuda_stub = false;  ///< tests only: plan cuda-* profiles against the host-parity stub
};

/// Built-in profiles: "cpu-checked" (reference + native + attention, checked), "cpu-deterministic" (the
/// reference provider alone, numerical policy fixedLeft: bitwise-reproducible runs), "cpu-external" (adds blas
/// and libtorch, external), "cuda-checked", "cuda-external". Unknown names throw invalid_argument.
BackendProfile builtin_profile(std::string_view name);
/// The names of the built-in profiles.
std::vector<std::string> builtin_profile_names();

/// Whether one descriptor's evidence is backed, and why not.
struct EvidenceStatus {
  bool resolved = false;
  std::string reason;
  /// testSuite evidence only: true when a passing run of the suite at HEAD was verified (a ledger receipt,
  /// ReceiptEvidenceResolver); false when the suite was accepted by its name alone (DefaultEvidenceResolver).
  bool verified = false;
};

/// Resolves evidence ids. The contract check depends only on this interface, so stronger resolvers (the
/// obligations ledger requiring a passing receipt per cited suite) plug in without a dependency cycle.
class EvidenceResolver {
 public:
  virtual ~EvidenceResolver() = default;
  virtual EvidenceStatus resolve(const Capsule& capsule, const ContractDescriptor& descriptor) const = 0;
};

/// The built-in resolver: a runtimeGuard must be registered (pact::kernels::guards), a testSuite must be
/// one of the suites Pact ships (declared_test_suites(), kept in lockstep with the test binaries by a
/// test), a trustedBoundary must be a declared boundary, and CUDA device evidence needs a real device
/// (the cuda-stub never satisfies it).
class DefaultEvidenceResolver final : public EvidenceResolver {
 public:
  EvidenceStatus resolve(const Capsule& capsule, const ContractDescriptor& descriptor) const override;
};

/// The GoogleTest suites capsules may cite ("Suite.Case").
const std::vector<std::string>& declared_test_suites();
/// The trusted external boundaries capsules may cite.
const std::vector<std::string>& declared_trusted_boundaries();

/// One obligation's verdict in an audit.
struct ObligationReport {
  std::string node;  ///< graph node id ("" outside a plan)
  std::string capsule;
  DescriptorKind obligation;
  Evidence evidence;
  bool accepted = false;
  std::string reason;     ///< why it failed ("" when accepted)
  bool verified = false;  ///< accepted testSuite evidence: by a receipt at HEAD (true) or by name only (false)
};

/// How the accepted testSuite evidence of a check was accepted: suites whose passing run at HEAD a receipt
/// verified, and suites accepted by name only (counted per obligation report).
struct TestSuiteEvidence {
  int verified = 0;
  int by_name = 0;
};

/// The result of the contract check over a set of obligations.
struct ContractCheck {
  bool accepted = false;
  std::vector<ObligationReport> reports;  ///< every obligation, accepted or not
  /// The failing reports only.
  std::vector<ObligationReport> failures() const;
  /// The accepted testSuite reports, by how they were accepted.
  TestSuiteEvidence test_suite_evidence() const;
};

/// The kernel-policy gate for one planned kernel: op identity, forward support, VJP mode, trust,
/// provider, device and contract alignment (each descriptor filed under its own obligation), then the
/// evidence of every descriptor under the assurance policy. Appends one report per obligation (plus a
/// "policy" report under the shape obligation when identity/support fails) to `out`.
void check_kernel(const std::string& node, ops::OpTag op, const Capsule& capsule, const BackendProfile& profile,
                  const EvidenceResolver& resolver, std::vector<ObligationReport>& out);

/// What selection chose, or why it chose nothing.
struct Selection {
  const Capsule* capsule = nullptr;
  std::string refusal;  ///< when capsule is null: the op, device, profile, input types and each refusal
};

/// Selection (SPEC §6): among the profile's capsules for `op` whose device and provider the profile
/// declares available, that support the run (forward; VJP when needed) and that compute the node's input
/// types (unsupported_inputs), the one whose provider comes first in the policy's preference order.
/// Never filters by evidence.
Selection select_capsule(const BackendProfile& profile, ops::OpTag op, std::span<const ops::TensorType> inputs,
                         VjpMode vjp_mode);
/// "f32[2, 3]": one type as refusals, rejections and the audit JSON print it.
std::string describe_type(const ops::TensorType& type);
/// "(f32[2, 3], i64[2])": input types as selection refusals and plan rejections print them.
std::string describe_types(std::span<const ops::TensorType> types);

/// Checks that a capsule may bind a handler: op, provider and device agree. Throws provider_mismatch
/// naming both otherwise (a CUDA capsule with a CPU handler is rejected even when both say matmul).
void check_binding(const Capsule& capsule, const kernels::Handler& handler);
/// The handler a capsule binds to (find_capsule_handler), checked with check_binding; throws unsupported
/// when the provider has none for the capsule's op (e.g. a CUDA capsule before a CUDA build).
const kernels::Handler& handler_for(const Capsule& capsule);

// Note [Planner passkey]
// An executable kernel is a capsule that passed admission (Note [One admission]), bound to its handler;
// executing one is trusting that admission happened. So a BoundKernel, like an AcceptedGraphPlan, can be
// constructed only with a PlannerKey, and only pact::plan::Planner (whose members are private, used by
// plan::admit_kernel and plan::plan_graph) can make one. Copies of an admitted kernel or plan stay
// admitted; nothing outside the planner can forge one (tests/plan/forged_plan_probe.cpp proves it does
// not compile).
}  // namespace pact::contract
namespace pact::plan {
class Planner;
}  // namespace pact::plan
namespace pact::contract {

/// The planner's passkey (Note [Planner passkey]).
class PlannerKey {
  friend class ::pact::plan::Planner;
  PlannerKey() = default;
};

/// An executable kernel: a capsule bound to the handler with the same op, provider and device. Binding
/// adds no evidence; only admission makes one (Note [Planner passkey]).
class BoundKernel {
 public:
  /// Binds after check_binding (throws provider_mismatch when op, provider or device disagree).
  BoundKernel(PlannerKey, const Capsule& capsule, const kernels::Handler& handler);
  const Capsule* capsule() const noexcept { return capsule_; }
  const kernels::Handler* handler() const noexcept { return handler_; }

 private:
  const Capsule* capsule_;
  const kernels::Handler* handler_;
};

/// A numerical certificate for one op and input types under one numerical policy (e.g. a range trace).
struct NumericalCertificate {
  ops::OpTag op;
  std::vector<ops::TensorType> inputs;
  NumericalPolicy policy;
  std::string evidence;
};
/// Refuses (throws invalid_argument) when the certificate does not apply to this capsule and input types:
/// another op, other shapes, or another numerical policy (a fixedLeft certificate is not evidence for an
/// implementationDefined schedule, even for the same op and shapes).
void require_certificate_applies(const NumericalCertificate& certificate, const Capsule& capsule,
                                 const std::vector<ops::TensorType>& inputs);

}  // namespace pact::contract
