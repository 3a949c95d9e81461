#include "pact/contract/capsule.hpp"

#include <fmt/format.h>

#include "pact/contract/provider_table.hpp"

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

std::string_view obligation_name(DescriptorKind o) noexcept {
  switch (o) {
    case DescriptorKind::shape:
      return "shape";
    case DescriptorKind::layout:
      return "layout";
    case DescriptorKind::forward_value:
      return "forward_value";
    case DescriptorKind::vjp:
      return "vjp";
  }
  return "?";
}

std::optional<std::string> unsupported_inputs(const Capsule& capsule, std::span<const ops::TensorType> inputs) {
  const ops::OpInfo& info = ops::op_info(capsule.op);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const DType d = inputs[i].dtype;
    const ops::InputRole role = info.input_role(i);
    // Indices, masks and any-dtype operands are the shape rule's to check; every other operand must be a dtype
    // the kernel computes.
    if (role == ops::InputRole::index || role == ops::InputRole::mask || role == ops::InputRole::any) continue;
    if (!capsule.dtypes.contains(d)) {
      return fmt::format("{} computes {} only; operand {} is {}", capsule.name, capsule.dtypes.to_string(), i,
                         dtype_name(d));
    }
  }
  return std::nullopt;
}

const CapsuleModule& reference_module() { return capsule_module("reference"); }
const CapsuleModule& native_module() { return capsule_module("native"); }
const CapsuleModule& attention_module() { return capsule_module("attention"); }
const CapsuleModule& blas_module() { return capsule_module("blas"); }
const CapsuleModule& cuda_module() { return capsule_module("cuda"); }
const CapsuleModule& libtorch_module() { return capsule_module("libtorch"); }

std::vector<const CapsuleModule*> maintained_modules() {
  std::vector<const CapsuleModule*> all;
  for (const auto& row : provider_table()) all.push_back(&capsule_module(row.module));
  return all;
}

const Capsule* find_maintained_capsule(std::string_view name) {
  for (const auto* m : maintained_modules()) {
    for (const auto& c : m->capsules) {
      if (c.name == name) return &c;
    }
  }
  return nullptr;
}

}  // namespace pact::contract
