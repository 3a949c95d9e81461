#pragma once
/// Kernel capsules (seed 000, SPEC §6): a capsule states the contract of one handler — operation,
/// provider, device, trust, forward/VJP support, four contract descriptors (shape, layout, forward value,
/// VJP) each a claim plus evidence, a numerical policy and a provenance reference. It proves nothing by
/// itself: the contract check asks an evidence resolver about each descriptor.

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/provider.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::contract {

enum class Trust : std::uint8_t { checked, trustedExternal };
enum class NumericalPolicy : std::uint8_t { fixedLeft, implementationDefined, notApplicable };
enum class EvidenceKind : std::uint8_t { runtimeGuard, testSuite, trustedBoundary, notApplicable };
/// The four descriptors every capsule carries, in order; each files one proof obligation (contract::DescriptorKind,
/// not the obligations ledger's ledger::Obligation).
enum class DescriptorKind : std::uint8_t { shape, layout, forward_value, vjp };

std::string_view trust_name(Trust t) noexcept;
std::string_view numerical_policy_name(NumericalPolicy p) noexcept;
std::string_view evidence_kind_name(EvidenceKind k) noexcept;
std::string_view obligation_name(DescriptorKind o) noexcept;

/// Evidence behind one descriptor: a guard id, a test-suite id (GoogleTest "Suite.Case" or "Suite.*"),
/// a trusted-boundary id, or nothing (notApplicable).
struct Evidence {
  EvidenceKind kind = EvidenceKind::notApplicable;
  std::string id;
};

/// A structured claim plus its evidence, filed under one obligation.
struct ContractDescriptor {
  DescriptorKind obligation;
  std::string claim;
  Evidence evidence;
};

/// Where the handler is: repository-relative source file and its symbol (as the symbol table names it).
struct Provenance {
  std::string file;
  std::string symbol;
};

struct Capsule {
  std::string name;  ///< unique within a planning registry, e.g. "native.matmul"
  ops::OpTag op;
  std::string provider;  ///< "reference", "native", "blas", "cuda", "libtorch"
  DeviceKind device;
  Trust trust;
  bool forward = true;
  bool vjp = false;
  std::array<ContractDescriptor, 4> descriptors;  ///< shape, layout, forward value, VJP
  NumericalPolicy numerical_policy = NumericalPolicy::notApplicable;
  Provenance provenance;
  DTypeSet dtypes;  ///< the floating dtypes the kernel computes (Note [Provider table])
};

/// Why `capsule` cannot serve a node with these input types — an operand whose dtype it does not compute —
/// or nullopt when it can. Operands whose op-table role is index or mask are the shape rule's to check.
std::optional<std::string> unsupported_inputs(const Capsule& capsule, std::span<const ops::TensorType> inputs);

/// A named group of capsules contributed by one provider area.
struct CapsuleModule {
  std::string name;
  std::vector<Capsule> capsules;
};

/// The maintained modules, generated from the provider table (pact/contract/provider_table.hpp):
/// reference, native (cpu), attention, blas, cuda (native CUDA; declared contracts without handlers until
/// a CUDA build exists), and libtorch (the optional -DPACT_WITH_LIBTORCH=ON build; empty otherwise).
const CapsuleModule& reference_module();
const CapsuleModule& native_module();
const CapsuleModule& attention_module();
const CapsuleModule& blas_module();
const CapsuleModule& cuda_module();
const CapsuleModule& libtorch_module();
/// Every maintained module, in the order above.
std::vector<const CapsuleModule*> maintained_modules();
/// The maintained capsule named `name` ("native.softmax"), or nullptr.
const Capsule* find_maintained_capsule(std::string_view name);

}  // namespace pact::contract
