#include "pact/contract/capsule.hpp"

#include <fmt/format.h>

#include "pact/kernels/kernel.hpp"

namespace pact::contract {

std::string_view trust_name(Trust t) noexcept { return t == Trust::checked ? "checked" : "trustedExternal"; }

std::string_view numerical_policy_name(NumericalPolicy p) noexcept {
  switch (p) {
    case NumericalPolicy::fixedLeft:
      return "fixedLeft";
    case NumericalPolicy::implementationDefined:
      return "implementationDefined";
    case NumericalPolicy::notApplicable:
      return "notApplicable";
  }
  return "?";
}

std::string_view evidence_kind_name(EvidenceKind k) noexcept {
  switch (k) {
    case EvidenceKind::runtimeGuard:
      return "runtimeGuard";
    case EvidenceKind::testSuite:
      return "testSuite";
    case EvidenceKind::trustedBoundary:
      return "trustedBoundary";
    case EvidenceKind::notApplicable:
      return "notApplicable";
  }
  return "?";
}

std::string_view obligation_name(Obligation o) noexcept {
  switch (o) {
    case Obligation::shape:
      return "shape";
    case Obligation::layout:
      return "layout";
    case Obligation::forward_value:
      return "forward_value";
    case Obligation::vjp:
      return "vjp";
  }
  return "?";
}

namespace {

// How a module turns its provider's handlers into capsules: trust, numerical policy and the evidence
// cited for the forward value and the VJP.
struct ModuleRecipe {
  std::string_view module;
  Trust trust;
  NumericalPolicy policy;
  Evidence forward;
  Evidence vjp;
};

Capsule capsule_for(const kernels::Handler& h, const ModuleRecipe& r) {
  const auto& info = ops::op_info(h.op);
  Capsule c;
  c.name = fmt::format("{}.{}", r.module, info.kind);
  c.op = h.op;
  c.provider = std::string(h.provider);
  c.device = h.device;
  c.trust = r.trust;
  c.forward = true;
  c.vjp = h.vjp != nullptr;
  c.descriptors = {
      ContractDescriptor{Obligation::shape,
                         fmt::format("output type = {} shape rule", info.kind),
                         {EvidenceKind::runtimeGuard, "kernel.shape_rule"}},
      ContractDescriptor{Obligation::layout,
                         "inputs read through checked prepared access; output contiguous",
                         {EvidenceKind::runtimeGuard, "kernel.prepared_layout"}},
      ContractDescriptor{Obligation::forward_value,
                         fmt::format("forward value of {} within the op's tolerance", info.kind), r.forward},
      c.vjp ? ContractDescriptor{Obligation::vjp, fmt::format("VJP of {} within the op's VJP tolerance", info.kind),
                                 r.vjp}
            : ContractDescriptor{Obligation::vjp, "no VJP", {EvidenceKind::notApplicable, ""}},
  };
  c.numerical_policy = r.policy;
  // The symbol as the symbol table names it (tests check it with nm).
  c.provenance = {std::string(h.source_file), fmt::format("pact::kernels::cpu::{}::{}_forward", h.provider, info.kind)};
  return c;
}

CapsuleModule module_from(std::span<const kernels::Handler> handlers, const ModuleRecipe& r, bool attention_only,
                          bool skip_attention) {
  CapsuleModule m{std::string(r.module), {}};
  for (const auto& h : handlers) {
    const bool is_attention = h.op == ops::OpTag::scaled_dot_product_attention;
    if ((attention_only && !is_attention) || (skip_attention && is_attention)) continue;
    m.capsules.push_back(capsule_for(h, r));
  }
  return m;
}

}  // namespace

const CapsuleModule& reference_module() {
  static const CapsuleModule m =
      module_from(kernels::reference_handlers(),
                  {"reference",
                   Trust::checked,
                   NumericalPolicy::fixedLeft,
                   {EvidenceKind::testSuite, "OpSweep.ReferenceIsBitwiseDeterministic"},
                   {EvidenceKind::testSuite, "OpSweep.ReferenceGradientsMatchFiniteDifferences"}},
                  false, false);
  return m;
}

const CapsuleModule& native_module() {
  static const CapsuleModule m = module_from(kernels::native_handlers(),
                                             {"native",
                                              Trust::checked,
                                              NumericalPolicy::implementationDefined,
                                              {EvidenceKind::testSuite, "Providers.NativeMatchesReference"},
                                              {EvidenceKind::testSuite, "Providers.NativeMatchesReference"}},
                                             false, true);
  return m;
}

const CapsuleModule& attention_module() {
  static const CapsuleModule m = module_from(kernels::native_handlers(),
                                             {"attention",
                                              Trust::checked,
                                              NumericalPolicy::implementationDefined,
                                              {EvidenceKind::testSuite, "Providers.NativeMatchesReference"},
                                              {EvidenceKind::testSuite, "Providers.NativeMatchesReference"}},
                                             true, false);
  return m;
}

const CapsuleModule& blas_module() {
  static const CapsuleModule m = module_from(kernels::blas_handlers(),
                                             {"blas",
                                              Trust::trustedExternal,
                                              NumericalPolicy::implementationDefined,
                                              {EvidenceKind::trustedBoundary, "openblas.cblas_sgemm"},
                                              {EvidenceKind::trustedBoundary, "openblas.cblas_sgemm"}},
                                             false, false);
  return m;
}

// Native CUDA capsules: declared contracts for the CUDA provider. Their evidence is a device guard that
// only a real device satisfies; the host-parity stub never does. No CUDA handlers exist yet, so binding
// one fails typed.
const CapsuleModule& cuda_module() {
  static const CapsuleModule m = [] {
    CapsuleModule mod{"cuda", {}};
    for (ops::OpTag op : {ops::OpTag::matmul, ops::OpTag::linear, ops::OpTag::add, ops::OpTag::relu,
                          ops::OpTag::softmax, ops::OpTag::cross_entropy}) {
      const auto& info = ops::op_info(op);
      Capsule c;
      c.name = fmt::format("cuda.{}", info.kind);
      c.op = op;
      c.provider = "cuda";
      c.device = DeviceKind::cuda;
      c.trust = Trust::checked;
      c.vjp = info.has_vjp;
      const Evidence device{EvidenceKind::runtimeGuard, "cuda.device_present"};
      c.descriptors = {ContractDescriptor{Obligation::shape, "output type = shape rule", device},
                       ContractDescriptor{Obligation::layout, "contiguous device buffers", device},
                       ContractDescriptor{Obligation::forward_value, "forward value on a CUDA device", device},
                       ContractDescriptor{Obligation::vjp, "VJP on a CUDA device", device}};
      c.numerical_policy = NumericalPolicy::implementationDefined;
      c.provenance = {"pact/contract/capsule.cpp", "pact::contract::cuda_module"};
      mod.capsules.push_back(std::move(c));
    }
    return mod;
  }();
  return m;
}

// LibTorch capsules (the optional -DPACT_WITH_LIBTORCH=ON build; empty otherwise): forward only, a
// trusted external boundary, admitted only under an external assurance policy (cpu-external).
const CapsuleModule& libtorch_module() {
  static const CapsuleModule m = module_from(kernels::libtorch_handlers(),
                                             {"libtorch",
                                              Trust::trustedExternal,
                                              NumericalPolicy::implementationDefined,
                                              {EvidenceKind::trustedBoundary, "libtorch.aten"},
                                              {EvidenceKind::notApplicable, ""}},
                                             false, false);
  return m;
}

std::vector<const CapsuleModule*> maintained_modules() {
  return {&reference_module(), &native_module(), &attention_module(),
          &blas_module(),      &cuda_module(),   &libtorch_module()};
}

}  // namespace pact::contract
