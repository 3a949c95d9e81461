#pragma once
/// The provider table (SPEC §6): every capsule module declared once — its provider, device, trust,
/// numerical policy, preference rank, the dtypes its kernels compute, the evidence each of its four
/// descriptors cites, and where its handlers are. The capsule modules, the handler search that binding
/// uses and each built-in profile's provider list are all generated from it.

#include <span>
#include <string_view>

#include "pact/contract/capsule.hpp"
#include "pact/kernels/kernel.hpp"

namespace pact::contract {

/// Which of a provider's handlers a module turns into capsules.
enum class HandlerSelection : std::uint8_t { all, attention_only, all_but_attention };

/// One row of the provider table.
// Note [Provider table]
// A row is a capsule module. Its capsules are generated from its handlers (one per handler that the
// selection keeps), or, for a provider that declares contracts before it has handlers (cuda), from
// `declared_ops`; such capsules fail binding typed. `dtypes` is the set of dtypes the module's kernels
// compute: selection refuses a capsule for a node with an operand outside it, so an f64 node never
// reaches a kernel that only computes f32 (operands whose op-table role is index or mask are the shape
// rule's to check). Every CPU handler reads any checked layout through prepared access, so layouts
// do not narrow selection today. `preference` orders providers within a profile (lower first).
struct ProviderRow {
  std::string_view module;    ///< module name and capsule-name prefix ("native" -> "native.matmul")
  std::string_view provider;  ///< the handlers' provider name
  DeviceKind device;
  Trust trust;
  NumericalPolicy policy;
  int preference;
  /// Which of its kernels run code of the SIMD dispatch table, so at the active ISA level (nullptr: none)
  bool (*simd_dispatched)(ops::OpTag) noexcept;
  DTypeSet dtypes;       ///< what its kernel ops compute
  DTypeSet view_dtypes;  ///< what its view ops (reshape, permute, ...) move: their kernels copy elements
  std::array<EvidenceKind, 4> evidence_kinds;    ///< shape, layout, forward value, VJP
  std::array<std::string_view, 4> evidence_ids;  ///< parallel to evidence_kinds
  std::span<const kernels::Handler> (*handlers)();
  HandlerSelection selection;
  std::span<const ops::OpTag> declared_ops;  ///< capsules without handlers (only when handlers is null)
  /// A communicator's row (collective ops: data-parallel training's gradient mean); only the -mpi profiles
  /// hold one, each the row of its own numerical policy.
  bool collective;
};

/// Every provider row, in module order: reference, native, attention, half, blas, cuda, libtorch, mpi,
/// mpi_ordered.
std::span<const ProviderRow> provider_table() noexcept;
/// The row of a module name, or nullptr.
const ProviderRow* provider_row(std::string_view module) noexcept;
/// The capsule module a row generates (built once).
const CapsuleModule& capsule_module(std::string_view module);
/// The handler a capsule binds to: the one with the capsule's op among the handlers of a row with the
/// capsule's provider and device (a sealed capsule: kernels::sealed_handlers()), or nullptr when there is none.
const kernels::Handler* find_capsule_handler(const Capsule& capsule) noexcept;

}  // namespace pact::contract
