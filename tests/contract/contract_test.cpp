// Capsules, assurance policies, the evidence resolver, runtime guards, the kernel-policy gate, binding,
// numerical certificates and built-in profiles (issue 4, items 1-5; SPEC §6; seed 000). Every rule has a
// case that passes and one that fails.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../support/expect_error.hpp"
#include "pact/contract/check.hpp"
#include "pact/contract/provider_table.hpp"
#include "pact/kernels/guards.hpp"

namespace pact::contract {
namespace {

using ::pact::test::code_of;
using ::pact::test::message_of;

using ::pact::test::mentions;

constexpr DescriptorKind kOrder[] = {DescriptorKind::shape, DescriptorKind::layout, DescriptorKind::forward_value,
                                     DescriptorKind::vjp};

const Capsule& capsule_named(const CapsuleModule& m, const std::string& name) {
  for (const auto& c : m.capsules) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "module " << m.name << " has no capsule " << name;
  static const Capsule none{};
  return none;
}

const kernels::Handler& handler_of(std::span<const kernels::Handler> handlers, ops::OpTag op) {
  const kernels::Handler* h = kernels::find_handler(handlers, op);
  if (h == nullptr) {
    ADD_FAILURE() << "no handler for " << ops::op_kind(op);
    return kernels::reference_handlers()[0];
  }
  return *h;
}

std::vector<ObligationReport> gate(const std::string& node, ops::OpTag op, const Capsule& c, const BackendProfile& p) {
  std::vector<ObligationReport> out;
  check_kernel(node, op, c, p, DefaultEvidenceResolver{}, out);
  return out;
}

std::vector<ObligationReport> failing(const std::vector<ObligationReport>& reports) {
  std::vector<ObligationReport> f;
  for (const auto& r : reports) {
    if (!r.accepted) f.push_back(r);
  }
  return f;
}

bool any_reason(const std::vector<ObligationReport>& reports, const std::string& needle) {
  return std::any_of(reports.begin(), reports.end(),
                     [&](const auto& r) { return !r.accepted && mentions(r.reason, needle); });
}

// ---- capsules and modules ----------------------------------------------------------------------------

TEST(Capsules, ModulesAreNonEmptyWhereTheyShouldBe) {
  EXPECT_FALSE(reference_module().capsules.empty());
  EXPECT_FALSE(native_module().capsules.empty());
  EXPECT_FALSE(attention_module().capsules.empty());
  EXPECT_FALSE(blas_module().capsules.empty());
  EXPECT_FALSE(cuda_module().capsules.empty());
  // LibTorch capsules exist exactly when the build links LibTorch (-DPACT_WITH_LIBTORCH=ON).
  EXPECT_EQ(libtorch_module().capsules.empty(), !kernels::libtorch_built());
  const auto mods = maintained_modules();
  std::vector<std::string> names;
  for (const auto* m : mods) names.push_back(m->name);
  EXPECT_EQ(names, (std::vector<std::string>{"reference", "native", "attention", "half", "blas", "cudnn", "cublaslt",
                                             "cublas", "cuda", "libtorch", "mpi", "mpi_ordered"}));
}

TEST(Capsules, ModulesHoldTheirProvidersCapsules) {
  for (const auto& c : reference_module().capsules) {
    EXPECT_EQ(c.provider, "reference") << c.name;
    EXPECT_EQ(c.trust, Trust::checked) << c.name;
    EXPECT_EQ(c.numerical_policy, NumericalPolicy::fixedLeft) << c.name;
    EXPECT_EQ(c.device, DeviceKind::cpu) << c.name;
  }
  for (const auto& c : native_module().capsules) {
    EXPECT_EQ(c.provider, "native") << c.name;
    EXPECT_NE(c.op, ops::OpTag::scaled_dot_product_attention) << "attention lives in its own module";
    EXPECT_EQ(c.numerical_policy, NumericalPolicy::implementationDefined) << c.name;
  }
  ASSERT_EQ(attention_module().capsules.size(), 1u);
  EXPECT_EQ(attention_module().capsules[0].op, ops::OpTag::scaled_dot_product_attention);
  std::set<ops::OpTag> blas_ops;
  for (const auto& c : blas_module().capsules) {
    blas_ops.insert(c.op);
    EXPECT_EQ(c.provider, "blas");
    EXPECT_EQ(c.trust, Trust::trustedExternal) << c.name;
    EXPECT_EQ(c.descriptors[2].evidence.kind, EvidenceKind::trustedBoundary) << c.name;
  }
  EXPECT_EQ(blas_ops, (std::set<ops::OpTag>{ops::OpTag::matmul, ops::OpTag::linear, ops::OpTag::conv2d}));
  for (const auto& c : cuda_module().capsules) {
    EXPECT_EQ(c.provider, "cuda");
    EXPECT_EQ(c.device, DeviceKind::cuda) << c.name;
  }
  // cuBLAS's products are a trusted boundary; the device and the library's presence are runtime guards.
  std::set<ops::OpTag> cublas_ops;
  for (const auto& c : capsule_module("cublas").capsules) {
    cublas_ops.insert(c.op);
    EXPECT_EQ(c.provider, "cublas");
    EXPECT_EQ(c.device, DeviceKind::cuda) << c.name;
    EXPECT_EQ(c.trust, Trust::trustedExternal) << c.name;
    EXPECT_EQ(c.descriptors[1].evidence.id, "cuda.cublas_loaded") << c.name;
    EXPECT_EQ(c.descriptors[2].evidence.kind, EvidenceKind::trustedBoundary) << c.name;
    EXPECT_EQ(c.descriptors[2].evidence.id, "cublas.sgemm") << c.name;
    EXPECT_TRUE(c.vjp) << c.name;
  }
  EXPECT_EQ(cublas_ops, (std::set<ops::OpTag>{ops::OpTag::matmul, ops::OpTag::linear, ops::OpTag::conv2d}));
  // cuDNN's convolutions likewise: conv2d alone, with its VJP; and cuBLASLt's: linear alone (its bias and the
  // bias's gradient in the products' epilogues).
  for (auto [module, op, guard, boundary] :
       {std::tuple{"cudnn", ops::OpTag::conv2d, "cuda.cudnn_loaded", "cudnn.convolution"},
        std::tuple{"cublaslt", ops::OpTag::linear, "cuda.cublaslt_loaded", "cublaslt.matmul"}}) {
    ASSERT_EQ(capsule_module(module).capsules.size(), 1u) << module;
    for (const auto& c : capsule_module(module).capsules) {
      EXPECT_EQ(c.op, op) << c.name;
      EXPECT_EQ(c.provider, module);
      EXPECT_EQ(c.device, DeviceKind::cuda) << c.name;
      EXPECT_EQ(c.trust, Trust::trustedExternal) << c.name;
      EXPECT_EQ(c.descriptors[1].evidence.id, guard) << c.name;
      EXPECT_EQ(c.descriptors[2].evidence.kind, EvidenceKind::trustedBoundary) << c.name;
      EXPECT_EQ(c.descriptors[2].evidence.id, boundary) << c.name;
      EXPECT_TRUE(c.vjp) << c.name;
    }
  }
  // Capsules exist for kernel ops; the reference module covers every kernel op of the table.
  for (const auto& info : ops::op_table()) {
    if (!info.runtime_relevant()) continue;
    bool found = false;
    for (const auto& c : reference_module().capsules) found = found || c.op == info.tag;
    EXPECT_TRUE(found) << "no reference capsule for " << info.kind;
  }
}

TEST(Capsules, LibTorchIsTrustedExternalForwardOnlyAndAdmittedOnlyUnderExternal) {
  const auto checked = builtin_profile("cpu-checked");
  const auto external = builtin_profile("cpu-external");
  // Never under the checked profile, whatever the build.
  for (const auto& info : ops::op_table()) {
    if (!info.runtime_relevant()) continue;
    const Capsule* c = select_capsule(checked, info.tag, {}, VjpMode::forward_only).capsule;
    if (c != nullptr) {
      EXPECT_NE(c->provider, "libtorch") << info.kind;
    }
  }
  if (!kernels::libtorch_built()) {
    GTEST_SKIP() << "built without -DPACT_WITH_LIBTORCH=ON (cmake --preset libtorch): the libtorch module is empty";
  }
  std::set<ops::OpTag> ops_seen;
  for (const auto& c : libtorch_module().capsules) {
    ops_seen.insert(c.op);
    EXPECT_EQ(c.provider, "libtorch");
    EXPECT_EQ(c.trust, Trust::trustedExternal) << c.name;
    EXPECT_FALSE(c.vjp) << c.name;
    EXPECT_EQ(c.descriptors[2].evidence.kind, EvidenceKind::trustedBoundary) << c.name;
    EXPECT_EQ(c.descriptors[2].evidence.id, "libtorch.aten") << c.name;
  }
  EXPECT_EQ(ops_seen.size(), 8u);
  // cpu-external prefers blas, then libtorch: attention (no blas capsule) goes to LibTorch for inference,
  // and to the native attention capsule when a VJP is needed.
  const Capsule* fwd =
      select_capsule(external, ops::OpTag::scaled_dot_product_attention, {}, VjpMode::forward_only).capsule;
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->provider, "libtorch");
  const Capsule* train =
      select_capsule(external, ops::OpTag::scaled_dot_product_attention, {}, VjpMode::with_vjp).capsule;
  ASSERT_NE(train, nullptr);
  EXPECT_NE(train->provider, "libtorch");
}

TEST(Capsules, EveryCapsuleHasFourDescriptorsInObligationOrder) {
  std::set<std::string> names;
  int count = 0;
  for (const auto* m : maintained_modules()) {
    for (const auto& c : m->capsules) {
      SCOPED_TRACE(c.name);
      ++count;
      EXPECT_TRUE(names.insert(c.name).second) << "duplicate capsule name";
      EXPECT_TRUE(c.forward);
      for (std::size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(c.descriptors[i].obligation, kOrder[i]) << "descriptor " << i;
        EXPECT_FALSE(c.descriptors[i].claim.empty()) << "descriptor " << i;
      }
      if (!c.vjp) {
        EXPECT_EQ(c.descriptors[3].evidence.kind, EvidenceKind::notApplicable);
      }
      EXPECT_FALSE(c.provenance.file.empty());
      EXPECT_FALSE(c.provenance.symbol.empty());
      EXPECT_NE(c.numerical_policy, NumericalPolicy::notApplicable);
    }
  }
  EXPECT_GT(count, 0);
}

TEST(Capsules, NamesOfEnumsAreStable) {
  EXPECT_EQ(trust_name(Trust::checked), "checked");
  EXPECT_EQ(trust_name(Trust::trustedExternal), "trustedExternal");
  EXPECT_EQ(numerical_policy_name(NumericalPolicy::fixedLeft), "fixedLeft");
  EXPECT_EQ(numerical_policy_name(NumericalPolicy::implementationDefined), "implementationDefined");
  EXPECT_EQ(evidence_kind_name(EvidenceKind::trustedBoundary), "trustedBoundary");
  EXPECT_EQ(evidence_kind_name(EvidenceKind::runtimeGuard), "runtimeGuard");
  EXPECT_EQ(obligation_name(DescriptorKind::forward_value), "forward_value");
  EXPECT_EQ(obligation_name(DescriptorKind::vjp), "vjp");
  EXPECT_EQ(assurance_policy_name(AssurancePolicy::checked), "checked");
  EXPECT_EQ(assurance_policy_name(AssurancePolicy::external), "external");
}

// ---- assurance policies and evidence -----------------------------------------------------------------

TEST(Assurance, CheckedRejectsOnlyTrustedBoundaryExternalAdmitsAll) {
  EXPECT_TRUE(admits(AssurancePolicy::checked, EvidenceKind::runtimeGuard));
  EXPECT_TRUE(admits(AssurancePolicy::checked, EvidenceKind::testSuite));
  EXPECT_TRUE(admits(AssurancePolicy::checked, EvidenceKind::notApplicable));
  EXPECT_FALSE(admits(AssurancePolicy::checked, EvidenceKind::trustedBoundary));
  for (auto k : {EvidenceKind::runtimeGuard, EvidenceKind::testSuite, EvidenceKind::notApplicable,
                 EvidenceKind::trustedBoundary}) {
    EXPECT_TRUE(admits(AssurancePolicy::external, k)) << evidence_kind_name(k);
  }
}

EvidenceStatus resolve(const Capsule& c, EvidenceKind kind, std::string id) {
  ContractDescriptor d{DescriptorKind::forward_value, "claim", {kind, std::move(id)}};
  return DefaultEvidenceResolver{}.resolve(c, d);
}

TEST(Evidence, DefaultResolverBacksOnlyRealEvidence) {
  const Capsule& c = capsule_named(native_module(), "native.matmul");
  // Guards: registered resolves, unknown does not.
  EXPECT_TRUE(resolve(c, EvidenceKind::runtimeGuard, "kernel.shape_rule").resolved);
  EXPECT_TRUE(resolve(c, EvidenceKind::runtimeGuard, "kernel.prepared_layout").resolved);
  auto g = resolve(c, EvidenceKind::runtimeGuard, "kernel.no_such_guard");
  EXPECT_FALSE(g.resolved);
  EXPECT_TRUE(mentions(g.reason, "kernel.no_such_guard")) << g.reason;
  // Test suites: declared resolves, undeclared does not.
  ASSERT_FALSE(declared_test_suites().empty());
  for (const auto& suite : declared_test_suites())
    EXPECT_TRUE(resolve(c, EvidenceKind::testSuite, suite).resolved) << suite;
  auto t = resolve(c, EvidenceKind::testSuite, "Providers.NoSuchCase");
  EXPECT_FALSE(t.resolved);
  EXPECT_TRUE(mentions(t.reason, "Providers.NoSuchCase")) << t.reason;
  // Trusted boundaries: declared resolves, unknown does not.
  EXPECT_TRUE(resolve(c, EvidenceKind::trustedBoundary, "openblas.cblas_sgemm").resolved);
  auto b = resolve(c, EvidenceKind::trustedBoundary, "mkl.sgemm");
  EXPECT_FALSE(b.resolved);
  EXPECT_TRUE(mentions(b.reason, "mkl.sgemm")) << b.reason;
  // notApplicable needs nothing.
  EXPECT_TRUE(resolve(c, EvidenceKind::notApplicable, "").resolved);
}

TEST(Evidence, CudaEvidenceNeverResolvesOnTheStub) {
  ASSERT_EQ(cuda_provider()->name(), "cuda-stub") << "this build has no CUDA device path";
  for (const auto& c : cuda_module().capsules) {
    for (const auto& d : c.descriptors) {
      if (d.evidence.kind == EvidenceKind::notApplicable) continue;
      auto s = DefaultEvidenceResolver{}.resolve(c, d);
      EXPECT_FALSE(s.resolved) << c.name << " " << d.evidence.id;
      EXPECT_TRUE(mentions(s.reason, "cuda-stub")) << s.reason;
    }
  }
  // The cublas capsules' guards fail the same way (cuBLAS is never looked for without a device); their
  // value evidence is the declared boundary, which admits them only where the guards pass.
  for (const char* module : {"cublas", "cublaslt", "cudnn"}) {
    for (const auto& c : capsule_module(module).capsules) {
      for (const auto& d : c.descriptors) {
        auto s = DefaultEvidenceResolver{}.resolve(c, d);
        if (d.evidence.kind == EvidenceKind::trustedBoundary) {
          EXPECT_TRUE(s.resolved) << c.name << " " << d.evidence.id << ": " << s.reason;
          continue;
        }
        EXPECT_FALSE(s.resolved) << c.name << " " << d.evidence.id;
        EXPECT_TRUE(mentions(s.reason, "cuda-stub")) << s.reason;
      }
    }
  }
  // Any cuda.* guard id, even on a CPU capsule.
  EXPECT_FALSE(
      resolve(capsule_named(native_module(), "native.relu"), EvidenceKind::runtimeGuard, "cuda.anything").resolved);
}

TEST(Evidence, EveryCitedCpuGuardAndBoundaryIsRegistered) {
  for (const auto* m : {&reference_module(), &native_module(), &attention_module(), &blas_module()}) {
    for (const auto& c : m->capsules) {
      for (const auto& d : c.descriptors) {
        SCOPED_TRACE(c.name + " " + std::string(obligation_name(d.obligation)));
        EXPECT_TRUE(DefaultEvidenceResolver{}.resolve(c, d).resolved) << d.evidence.id;
        if (d.evidence.kind == EvidenceKind::runtimeGuard) {
          EXPECT_NE(kernels::find_guard(d.evidence.id), nullptr);
        }
      }
    }
  }
}

// ---- runtime guards ----------------------------------------------------------------------------------

std::uint64_t hits(std::string_view id) {
  const kernels::Guard* g = kernels::find_guard(id);
  if (g == nullptr) {
    ADD_FAILURE() << "guard " << id << " is not registered";
    return 0;
  }
  return g->hits->load();
}

TEST(Guards, RegistryHoldsTheKernelGuards) {
  std::set<std::string_view> ids;
  for (const auto& g : kernels::guards()) {
    EXPECT_TRUE(ids.insert(g.id).second) << g.id;
    EXPECT_FALSE(g.what.empty());
    EXPECT_NE(g.hits, nullptr);
  }
  for (const char* id : {"kernel.shape_rule", "kernel.input_device", "kernel.prepared_layout", "kernel.vjp_shapes"}) {
    EXPECT_TRUE(ids.count(id)) << id;
  }
  EXPECT_EQ(kernels::find_guard("kernel.none"), nullptr);
  EXPECT_EQ(kernels::guards()[kernels::kGuardShapeRule].id, "kernel.shape_rule");
  EXPECT_EQ(kernels::guards()[kernels::kGuardInputDevice].id, "kernel.input_device");
  EXPECT_EQ(kernels::guards()[kernels::kGuardPreparedLayout].id, "kernel.prepared_layout");
  EXPECT_EQ(kernels::guards()[kernels::kGuardVjpShapes].id, "kernel.vjp_shapes");
}

Tensor filled(const Dims& shape, float start) {
  std::vector<float> v(static_cast<std::size_t>(ops::numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + 0.25f * static_cast<float>(i % 7) - 0.5f;
  return Tensor::from_values<float>(shape, std::span<const float>(v));
}

TEST(Guards, HandlersInvokeTheGuardsTheirCapsulesCite) {
  for (auto handlers : {kernels::reference_handlers(), kernels::native_handlers(), kernels::blas_handlers()}) {
    const kernels::Handler& h = handler_of(handlers, ops::OpTag::linear);
    SCOPED_TRACE(std::string(h.provider));
    Tensor x = filled({3, 4}, 0.f), w = filled({5, 4}, 1.f), b = filled({5}, 2.f);
    std::vector<TensorView> in{x.as_view(), w.as_view(), b.as_view()};
    const auto shape0 = hits("kernel.shape_rule"), device0 = hits("kernel.input_device"),
               layout0 = hits("kernel.prepared_layout"), vjp0 = hits("kernel.vjp_shapes");
    Tensor y = kernels::run_forward(h, in, {});
    EXPECT_GT(hits("kernel.shape_rule"), shape0);
    EXPECT_GT(hits("kernel.input_device"), device0);
    EXPECT_GT(hits("kernel.prepared_layout"), layout0);
    EXPECT_EQ(hits("kernel.vjp_shapes"), vjp0) << "a forward does not run the VJP guard";
    Tensor g = filled(y.shape(), 0.5f);
    const auto layout1 = hits("kernel.prepared_layout");
    auto grads = kernels::run_vjp(h, in, y.as_view(), g.as_view(), {});
    EXPECT_GT(hits("kernel.vjp_shapes"), vjp0);
    EXPECT_GT(hits("kernel.prepared_layout"), layout1);
    EXPECT_EQ(grads.size(), 3u);
  }
}

TEST(Guards, GuardsRejectWhatTheyCheck) {
  const kernels::Handler& relu = handler_of(kernels::native_handlers(), ops::OpTag::relu);
  // input_device: a cuda-stub input at a CPU handler.
  Tensor dev = Tensor::zeros({4}, DType::f32, cuda_provider());
  const auto device0 = hits("kernel.input_device");
  EXPECT_EQ(code_of([&] { kernels::run_forward(relu, std::vector{dev.as_view()}, {}); }), ErrorCode::provider_mismatch);
  EXPECT_GT(hits("kernel.input_device"), device0);
  // vjp_shapes: a cotangent of the wrong shape.
  Tensor x = filled({2, 3}, 0.f);
  Tensor y = kernels::run_forward(relu, std::vector{x.as_view()}, {});
  Tensor bad = filled({3, 2}, 0.f);
  const auto vjp0 = hits("kernel.vjp_shapes");
  EXPECT_EQ(code_of([&] { kernels::run_vjp(relu, std::vector{x.as_view()}, y.as_view(), bad.as_view(), {}); }),
            ErrorCode::invalid_argument);
  EXPECT_GT(hits("kernel.vjp_shapes"), vjp0);
  Tensor good = filled({2, 3}, 0.f);
  EXPECT_NO_THROW(kernels::run_vjp(relu, std::vector{x.as_view()}, y.as_view(), good.as_view(), {}));
}

// ---- the kernel-policy gate --------------------------------------------------------------------------

TEST(Gate, AMatchingCapsulePassesEveryObligation) {
  const BackendProfile p = builtin_profile("cpu-checked");
  for (const char* name : {"native.linear", "native.relu"}) {
    const Capsule& c = capsule_named(native_module(), name);
    auto reports = gate("n1", c.op, c, p);
    ASSERT_EQ(reports.size(), 4u) << name;
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(reports[i].accepted) << name << " " << reports[i].reason;
      EXPECT_EQ(reports[i].obligation, kOrder[i]);
      EXPECT_EQ(reports[i].node, "n1");
      EXPECT_EQ(reports[i].capsule, name);
      EXPECT_TRUE(reports[i].reason.empty());
    }
  }
  // The gate appends: earlier reports stay.
  std::vector<ObligationReport> out(1);
  const Capsule& c = capsule_named(reference_module(), "reference.add");
  check_kernel("n2", ops::OpTag::add, c, p, DefaultEvidenceResolver{}, out);
  EXPECT_EQ(out.size(), 5u);
}

TEST(Gate, OpIdentityMismatchFails) {
  const BackendProfile p = builtin_profile("cpu-checked");
  const Capsule& c = capsule_named(native_module(), "native.linear");
  auto reports = gate("mm", ops::OpTag::matmul, c, p);
  ASSERT_FALSE(failing(reports).empty());
  EXPECT_TRUE(any_reason(reports, "policy gate")) << "identity failure is reported";
  EXPECT_TRUE(any_reason(reports, "'linear'"));
  EXPECT_EQ(failing(reports)[0].node, "mm");
  EXPECT_EQ(failing(reports)[0].capsule, "native.linear");
}

TEST(Gate, DeviceMismatchFails) {
  const BackendProfile p = builtin_profile("cpu-checked");
  Capsule c = capsule_named(native_module(), "native.relu");
  EXPECT_TRUE(failing(gate("r", c.op, c, p)).empty());
  c.device = DeviceKind::cuda;
  auto reports = gate("r", c.op, c, p);
  EXPECT_FALSE(failing(reports).empty());
  EXPECT_TRUE(any_reason(reports, "device")) << "device mismatch";
}

TEST(Gate, ProviderNotInProfileFails) {
  BackendProfile p = builtin_profile("cpu-checked");
  const Capsule& c = capsule_named(native_module(), "native.relu");
  p.providers = {"reference"};
  auto reports = gate("r", c.op, c, p);
  EXPECT_FALSE(failing(reports).empty());
  EXPECT_TRUE(any_reason(reports, "provider 'native' is not available")) << "provider";
  const Capsule& ref = capsule_named(reference_module(), "reference.relu");
  EXPECT_TRUE(failing(gate("r", ref.op, ref, p)).empty());
}

TEST(Gate, TrustedExternalCapsuleFailsUnderCheckedPassesUnderExternal) {
  BackendProfile checked = builtin_profile("cpu-checked");
  checked.providers.push_back("blas");
  const Capsule& c = capsule_named(blas_module(), "blas.matmul");
  auto reports = gate("mm", ops::OpTag::matmul, c, checked);
  EXPECT_TRUE(any_reason(reports, "trust trustedExternal")) << "trust gate";
  bool forward_fails = false, vjp_fails = false;
  for (const auto& r : failing(reports)) {
    if (r.obligation == DescriptorKind::forward_value && r.evidence.kind == EvidenceKind::trustedBoundary)
      forward_fails = true;
    if (r.obligation == DescriptorKind::vjp && r.evidence.kind == EvidenceKind::trustedBoundary) vjp_fails = true;
  }
  EXPECT_TRUE(forward_fails);
  EXPECT_TRUE(vjp_fails);
  EXPECT_TRUE(failing(gate("mm", ops::OpTag::matmul, c, builtin_profile("cpu-external"))).empty());
}

TEST(Gate, MissingVjpFailsOnlyWhenTheRunNeedsIt) {
  BackendProfile p = builtin_profile("cpu-checked");
  Capsule c = capsule_named(native_module(), "native.relu");
  c.vjp = false;
  c.descriptors[3] = ContractDescriptor{DescriptorKind::vjp, "no VJP", {EvidenceKind::notApplicable, ""}};
  EXPECT_TRUE(failing(gate("r", c.op, c, p)).empty()) << "forward only";
  p.policy.vjp_mode = VjpMode::with_vjp;
  auto reports = gate("r", c.op, c, p);
  EXPECT_FALSE(failing(reports).empty());
  EXPECT_TRUE(any_reason(reports, "VJP"));
  const Capsule& with = capsule_named(native_module(), "native.relu");
  EXPECT_TRUE(failing(gate("r", with.op, with, p)).empty()) << "a capsule with a VJP passes with_vjp";
}

TEST(Gate, MissingForwardSupportFails) {
  const BackendProfile p = builtin_profile("cpu-checked");
  Capsule c = capsule_named(native_module(), "native.relu");
  c.forward = false;
  auto reports = gate("r", c.op, c, p);
  EXPECT_FALSE(failing(reports).empty());
  EXPECT_TRUE(any_reason(reports, "forward"));
}

TEST(Gate, MisalignedContractFails) {
  const BackendProfile p = builtin_profile("cpu-checked");
  Capsule c = capsule_named(native_module(), "native.relu");
  std::swap(c.descriptors[1], c.descriptors[2]);  // layout evidence filed under forward_value and back
  auto reports = gate("r", c.op, c, p);
  auto f = failing(reports);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].obligation, DescriptorKind::layout);
  EXPECT_EQ(f[1].obligation, DescriptorKind::forward_value);
  EXPECT_TRUE(mentions(f[0].reason, "misaligned")) << f[0].reason;
  // One descriptor filed under another obligation, same evidence otherwise.
  Capsule d = capsule_named(native_module(), "native.relu");
  d.descriptors[0].obligation = DescriptorKind::vjp;
  EXPECT_TRUE(any_reason(gate("r", d.op, d, p), "misaligned"));
}

TEST(Gate, EvidenceCitingAMissingTestSuiteFails) {
  const BackendProfile p = builtin_profile("cpu-checked");
  Capsule c = capsule_named(native_module(), "native.relu");
  c.descriptors[2].evidence.id = "Providers.NativeIsFastEnough";
  auto f = failing(gate("r", c.op, c, p));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].obligation, DescriptorKind::forward_value);
  EXPECT_EQ(f[0].evidence.id, "Providers.NativeIsFastEnough");
  EXPECT_TRUE(mentions(f[0].reason, "Providers.NativeIsFastEnough"));
  // An unregistered guard fails likewise.
  Capsule g = capsule_named(native_module(), "native.relu");
  g.descriptors[0].evidence.id = "kernel.imaginary";
  auto fg = failing(gate("r", g.op, g, p));
  ASSERT_EQ(fg.size(), 1u);
  EXPECT_EQ(fg[0].obligation, DescriptorKind::shape);
}

TEST(Gate, TheCheckUsesTheResolverInterface) {
  struct Refuse final : EvidenceResolver {
    EvidenceStatus resolve(const Capsule&, const ContractDescriptor&) const override {
      return {false, "refused by test"};
    }
  };
  const BackendProfile p = builtin_profile("cpu-checked");
  const Capsule& c = capsule_named(native_module(), "native.relu");
  std::vector<ObligationReport> out;
  check_kernel("r", c.op, c, p, Refuse{}, out);
  ASSERT_EQ(out.size(), 4u);
  for (const auto& r : out) {
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(r.reason, "refused by test");
  }
}

TEST(Gate, ContractCheckFailuresListsOnlyFailingReports) {
  ContractCheck check;
  ObligationReport ok;
  ok.node = "a";
  ok.obligation = DescriptorKind::shape;
  ok.accepted = true;
  ObligationReport bad;
  bad.node = "b";
  bad.obligation = DescriptorKind::vjp;
  bad.reason = "no";
  check.reports.push_back(ok);
  check.reports.push_back(bad);
  auto f = check.failures();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].node, "b");
}

// ---- binding -----------------------------------------------------------------------------------------

TEST(Bind, MatchingCapsuleAndHandlerBind) {
  const Capsule& c = capsule_named(native_module(), "native.matmul");
  const kernels::Handler& h = handler_of(kernels::native_handlers(), ops::OpTag::matmul);
  EXPECT_NO_THROW(check_binding(c, h));
  EXPECT_EQ(&handler_for(c), &h);
  for (const auto* m : {&reference_module(), &native_module(), &attention_module(), &blas_module()}) {
    for (const auto& cap : m->capsules) {
      const kernels::Handler& b = handler_for(cap);
      EXPECT_EQ(b.op, cap.op) << cap.name;
      EXPECT_EQ(b.provider, cap.provider) << cap.name;
      EXPECT_EQ(b.device, cap.device) << cap.name;
    }
  }
}

TEST(Bind, DisagreeingIdentityIsProviderMismatch) {
  const Capsule& native_mm = capsule_named(native_module(), "native.matmul");
  EXPECT_EQ(code_of([&] { check_binding(native_mm, handler_of(kernels::reference_handlers(), ops::OpTag::matmul)); }),
            ErrorCode::provider_mismatch);  // provider
  EXPECT_EQ(code_of([&] { check_binding(native_mm, handler_of(kernels::native_handlers(), ops::OpTag::linear)); }),
            ErrorCode::provider_mismatch);  // op
}

TEST(Bind, CudaCapsuleWithCpuHandlerIsRejected) {
  const Capsule& cuda_mm = capsule_named(cuda_module(), "cuda.matmul");
  ASSERT_EQ(cuda_mm.op, ops::OpTag::matmul);
  Capsule same_provider = cuda_mm;  // even with the provider label forged to match, the device differs
  same_provider.provider = "native";
  for (const Capsule* c : std::vector<const Capsule*>{&cuda_mm, &same_provider}) {
    const std::string m =
        message_of([&] { check_binding(*c, handler_of(kernels::native_handlers(), ops::OpTag::matmul)); });
    EXPECT_EQ(code_of([&] { check_binding(*c, handler_of(kernels::native_handlers(), ops::OpTag::matmul)); }),
              ErrorCode::provider_mismatch);
    EXPECT_TRUE(mentions(m, "cuda")) << m;
  }
  // The capsule binds to the cuda provider's own handler (pact/kernels/cuda), device cuda.
  const kernels::Handler& bound = handler_for(cuda_mm);
  EXPECT_EQ(bound.provider, "cuda");
  EXPECT_EQ(bound.device, DeviceKind::cuda);
  EXPECT_EQ(bound.op, ops::OpTag::matmul);
}

// ---- numerical certificates --------------------------------------------------------------------------

TEST(Certificates, KeyedByNumericalPolicy) {
  const std::vector<ops::TensorType> shapes{{DType::f32, Dims{4, 3}}, {DType::f32, Dims{3, 5}}};
  const NumericalCertificate fixed{ops::OpTag::matmul, shapes, NumericalPolicy::fixedLeft, "range trace"};
  const Capsule& ref = capsule_named(reference_module(), "reference.matmul");
  const Capsule& native = capsule_named(native_module(), "native.matmul");
  ASSERT_EQ(ref.numerical_policy, NumericalPolicy::fixedLeft);
  ASSERT_EQ(native.numerical_policy, NumericalPolicy::implementationDefined);
  EXPECT_NO_THROW(require_certificate_applies(fixed, ref, shapes));
  EXPECT_EQ(code_of([&] { require_certificate_applies(fixed, native, shapes); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { require_certificate_applies(fixed, native, shapes); });
  EXPECT_TRUE(mentions(m, "fixedLeft")) << m;
  EXPECT_TRUE(mentions(m, "native.matmul")) << m;
  // Other shapes, other dtype, other op.
  const std::vector<ops::TensorType> other{{DType::f32, Dims{4, 3}}, {DType::f32, Dims{3, 6}}};
  EXPECT_EQ(code_of([&] { require_certificate_applies(fixed, ref, other); }), ErrorCode::invalid_argument);
  const std::vector<ops::TensorType> f64{{DType::f64, Dims{4, 3}}, {DType::f64, Dims{3, 5}}};
  EXPECT_EQ(code_of([&] { require_certificate_applies(fixed, ref, f64); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              require_certificate_applies(fixed, capsule_named(reference_module(), "reference.linear"), shapes);
            }),
            ErrorCode::invalid_argument);
  // An implementationDefined certificate applies to the native capsule and not to the reference one.
  const NumericalCertificate impl{ops::OpTag::matmul, shapes, NumericalPolicy::implementationDefined, "measured"};
  EXPECT_NO_THROW(require_certificate_applies(impl, native, shapes));
  EXPECT_EQ(code_of([&] { require_certificate_applies(impl, ref, shapes); }), ErrorCode::invalid_argument);
}

// ---- profiles ----------------------------------------------------------------------------------------

bool has_module(const BackendProfile& p, const CapsuleModule& m) {
  return std::find(p.modules.begin(), p.modules.end(), &m) != p.modules.end();
}

TEST(Profiles, BuiltinProfiles) {
  EXPECT_EQ(builtin_profile_names(),
            (std::vector<std::string>{"cpu-checked", "cpu-deterministic", "cpu-external", "cpu-checked-mpi",
                                      "cpu-deterministic-mpi", "cuda-checked", "cuda-external"}));
  for (const auto& name : builtin_profile_names()) {
    BackendProfile p = builtin_profile(name);
    EXPECT_EQ(p.name, name);
    EXPECT_FALSE(p.modules.empty()) << name;
    EXPECT_FALSE(p.providers.empty()) << name;
    EXPECT_FALSE(p.allow_cuda_stub) << name;
    EXPECT_EQ(p.policy.vjp_mode, VjpMode::forward_only) << name;
    ASSERT_EQ(p.devices.size(), 1u) << name;
    EXPECT_EQ(p.devices[0], p.policy.device) << name;
  }
  BackendProfile cc = builtin_profile("cpu-checked");
  EXPECT_EQ(cc.policy.assurance, AssurancePolicy::checked);
  EXPECT_EQ(cc.policy.device, DeviceKind::cpu);
  EXPECT_EQ(cc.policy.provider_preference, (std::vector<std::string>{"native", "half", "reference"}));
  EXPECT_TRUE(has_module(cc, reference_module()) && has_module(cc, native_module()) &&
              has_module(cc, attention_module()));
  EXPECT_FALSE(has_module(cc, blas_module()));
  BackendProfile cd = builtin_profile("cpu-deterministic");  // fixedLeft rows only: the reference provider
  EXPECT_EQ(cd.policy.assurance, AssurancePolicy::checked);
  EXPECT_EQ(cd.policy.provider_preference, (std::vector<std::string>{"reference"}));
  EXPECT_TRUE(has_module(cd, reference_module()));
  EXPECT_FALSE(has_module(cd, native_module()) || has_module(cd, attention_module()) || has_module(cd, blas_module()));
  // The -mpi profiles: the base profile plus the one collective row of its numerical policy, and the
  // mpi.allreduce boundary admitted by name under the checked policy. No other profile has a collective row.
  BackendProfile cm = builtin_profile("cpu-checked-mpi");
  EXPECT_EQ(cm.policy.assurance, AssurancePolicy::checked);
  EXPECT_EQ(cm.policy.admitted_boundaries, (std::vector<std::string>{"mpi.allreduce"}));
  EXPECT_TRUE(has_module(cm, native_module()) && has_module(cm, capsule_module("mpi")));
  EXPECT_FALSE(has_module(cm, capsule_module("mpi_ordered")) || has_module(cm, blas_module()));
  BackendProfile dm = builtin_profile("cpu-deterministic-mpi");
  EXPECT_TRUE(has_module(dm, reference_module()) && has_module(dm, capsule_module("mpi_ordered")));
  EXPECT_FALSE(has_module(dm, capsule_module("mpi")) || has_module(dm, native_module()));
  for (const char* name : {"cpu-checked", "cpu-deterministic", "cpu-external"}) {
    EXPECT_FALSE(has_module(builtin_profile(name), capsule_module("mpi"))) << name;
    EXPECT_TRUE(builtin_profile(name).policy.admitted_boundaries.empty()) << name;
  }
  EXPECT_EQ(code_of([] { builtin_profile("cpu-external-mpi"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { builtin_profile("cuda-checked-mpi"); }), ErrorCode::invalid_argument);
  BackendProfile ce = builtin_profile("cpu-external");
  EXPECT_EQ(ce.policy.assurance, AssurancePolicy::external);
  EXPECT_TRUE(has_module(ce, blas_module()) && has_module(ce, libtorch_module()) && has_module(ce, native_module()));
  EXPECT_EQ(ce.policy.provider_preference.front(), "blas");
  BackendProfile uc = builtin_profile("cuda-checked");
  EXPECT_EQ(uc.policy.device, DeviceKind::cuda);
  EXPECT_EQ(uc.policy.assurance, AssurancePolicy::checked);
  EXPECT_TRUE(has_module(uc, cuda_module()));
  EXPECT_FALSE(has_module(uc, capsule_module("cublas")));  // trusted external: not under a checked policy
  BackendProfile ue = builtin_profile("cuda-external");
  EXPECT_EQ(ue.policy.assurance, AssurancePolicy::external);
  EXPECT_TRUE(has_module(ue, cuda_module()) && has_module(ue, capsule_module("cublas")) &&
              has_module(ue, capsule_module("cublaslt")) && has_module(ue, capsule_module("cudnn")));
  EXPECT_FALSE(has_module(uc, capsule_module("cudnn")) || has_module(uc, capsule_module("cublaslt")));
  EXPECT_EQ(ue.policy.provider_preference, (std::vector<std::string>{"cudnn", "cublaslt", "cublas", "cuda"}));
}

// ---- typed selection (the provider table's dtype column) ----------------------------------------------

ops::TensorType typed(DType d, Dims shape) { return {d, std::move(shape)}; }

TEST(Selection, PicksByTheNodesInputDtypes) {
  const auto external = builtin_profile("cpu-external");
  const std::vector<ops::TensorType> f32{typed(DType::f32, {4, 64}), typed(DType::f32, {128, 64})};
  const std::vector<ops::TensorType> f64{typed(DType::f64, {4, 64}), typed(DType::f64, {128, 64})};
  // blas is most preferred and computes f32: it serves the f32 node and is passed over for the f64 one,
  // which the only provider computing f64 (reference) serves.
  const Selection a = select_capsule(external, ops::OpTag::linear, f32, VjpMode::with_vjp);
  ASSERT_NE(a.capsule, nullptr) << a.refusal;
  EXPECT_EQ(a.capsule->name, "blas.linear");
  const Selection b = select_capsule(external, ops::OpTag::linear, f64, VjpMode::with_vjp);
  ASSERT_NE(b.capsule, nullptr) << b.refusal;
  EXPECT_EQ(b.capsule->name, "reference.linear");
  EXPECT_TRUE(b.capsule->dtypes.contains(DType::f64));
  const Selection c = select_capsule(builtin_profile("cpu-checked"), ops::OpTag::linear, f64, VjpMode::with_vjp);
  ASSERT_NE(c.capsule, nullptr);
  EXPECT_EQ(c.capsule->name, "reference.linear");
  // Integer operands (targets, indices) do not narrow selection: the shape rule checks them.
  const Selection ce =
      select_capsule(builtin_profile("cpu-checked"), ops::OpTag::cross_entropy,
                     std::vector{typed(DType::f32, {8, 10}), typed(DType::i64, {8})}, VjpMode::with_vjp);
  ASSERT_NE(ce.capsule, nullptr) << ce.refusal;
  EXPECT_EQ(ce.capsule->name, "native.cross_entropy");
}

TEST(Selection, RefusesWithTheOpTheTypesAndEachCapsulesReason) {
  // bf16 linear is the half provider's; bf16 conv2d is no provider's.
  const std::vector<ops::TensorType> bf16{typed(DType::bf16, {4, 64}), typed(DType::bf16, {128, 64})};
  const Selection h = select_capsule(builtin_profile("cpu-external"), ops::OpTag::linear, bf16, VjpMode::with_vjp);
  ASSERT_NE(h.capsule, nullptr) << h.refusal;
  EXPECT_EQ(h.capsule->name, "half.linear");
  const std::vector<ops::TensorType> conv{typed(DType::bf16, {1, 3, 8, 8}), typed(DType::bf16, {4, 3, 3, 3})};
  const Selection s = select_capsule(builtin_profile("cpu-external"), ops::OpTag::conv2d, conv, VjpMode::forward_only);
  EXPECT_EQ(s.capsule, nullptr);
  EXPECT_TRUE(mentions(s.refusal, "'conv2d'")) << s.refusal;
  EXPECT_TRUE(mentions(s.refusal, "(bf16[1, 3, 8, 8], bf16[4, 3, 3, 3])")) << s.refusal;
  EXPECT_TRUE(mentions(s.refusal, "blas.conv2d computes f32 only; operand 0 is bf16")) << s.refusal;
  EXPECT_TRUE(mentions(s.refusal, "reference.conv2d computes f32/f64 only")) << s.refusal;
  // f64 under a profile whose only provider computes f32.
  BackendProfile native_only = builtin_profile("cpu-checked");
  native_only.modules = {&native_module()};
  native_only.providers = {"native"};
  native_only.policy.provider_preference = {"native"};
  const std::vector<ops::TensorType> f64{typed(DType::f64, {3}), typed(DType::f64, {3})};
  const Selection n = select_capsule(native_only, ops::OpTag::add, f64, VjpMode::forward_only);
  EXPECT_EQ(n.capsule, nullptr);
  EXPECT_TRUE(mentions(n.refusal, "native.add computes f32 only; operand 0 is f64")) << n.refusal;
}

TEST(ProviderTable, TheBlasBoundaryCoversOnlyTheExternalCall) {
  // OpenBLAS is trusted for cblas_sgemm alone; the packing, im2col and bias code around it is Pact's, so
  // each blas capsule also cites the test suite that holds that code to the reference (and only the
  // external policy admits the capsule at all).
  ASSERT_FALSE(blas_module().capsules.empty());
  for (const auto& c : blas_module().capsules) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.descriptors[1].evidence.kind, EvidenceKind::testSuite);
    EXPECT_EQ(c.descriptors[1].evidence.id, "OpOracle.BlasMatchesPyTorchFloat64");
    EXPECT_TRUE(mentions(c.descriptors[1].claim, "packing, im2col, bias"));
    EXPECT_EQ(c.descriptors[2].evidence.kind, EvidenceKind::trustedBoundary);
    EXPECT_EQ(c.descriptors[2].evidence.id, "openblas.cblas_sgemm");
  }
  std::vector<ObligationReport> reports;
  check_kernel("n", ops::OpTag::matmul, capsule_named(blas_module(), "blas.matmul"), builtin_profile("cpu-external"),
               DefaultEvidenceResolver{}, reports);
  for (const auto& r : reports) EXPECT_TRUE(r.accepted) << r.reason;
}

TEST(ProviderTable, GeneratesModulesProfilesAndTheHandlerSearch) {
  // Every row's module is a maintained module with the row's identity on each capsule.
  ASSERT_EQ(provider_table().size(), maintained_modules().size());
  for (const auto& row : provider_table()) {
    SCOPED_TRACE(std::string(row.module));
    const CapsuleModule& m = capsule_module(row.module);
    EXPECT_EQ(m.name, row.module);
    for (const auto& c : m.capsules) {
      EXPECT_EQ(c.provider, row.provider);
      EXPECT_EQ(c.device, row.device);
      EXPECT_EQ(c.trust, row.trust);
      const DTypeSet& served = ops::op_info(c.op).role == ops::OpRole::view ? row.view_dtypes : row.dtypes;
      EXPECT_EQ(c.dtypes, served);
      EXPECT_TRUE(mentions(c.descriptors[2].claim, served.to_string())) << c.descriptors[2].claim;
      // Binding finds the row's own handler, or (a provider without handlers) none.
      const kernels::Handler* h = find_capsule_handler(c);
      if (row.handlers == nullptr) {
        EXPECT_EQ(h, nullptr);
      } else {
        ASSERT_NE(h, nullptr) << c.name;
        EXPECT_EQ(h->op, c.op);
        EXPECT_EQ(h->provider, c.provider);
      }
    }
  }
  EXPECT_EQ(code_of([] { capsule_module("no-such-module"); }), ErrorCode::invalid_argument);
  // Checked profiles hold only trust-checked rows of their device; external ones every row of it.
  for (const auto& name : builtin_profile_names()) {
    const BackendProfile p = builtin_profile(name);
    for (const auto* m : p.modules) {
      const ProviderRow* row = provider_row(m->name);
      ASSERT_NE(row, nullptr) << m->name;
      EXPECT_EQ(row->device, p.policy.device) << name << " " << m->name;
      if (p.policy.assurance == AssurancePolicy::checked && !row->collective) {
        EXPECT_EQ(row->trust, Trust::checked) << name;
      }
    }
  }
}

TEST(Profiles, UnknownProfileIsTypedAndNamed) {
  EXPECT_EQ(code_of([] { builtin_profile("gpu-fast"); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([] { builtin_profile("gpu-fast"); }), "gpu-fast"));
  EXPECT_EQ(code_of([] { builtin_profile(""); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { builtin_profile("CPU-CHECKED"); }), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace pact::contract
