#pragma once
/// AD value retention (seed 001 G7): a retained value is a shared read-only record over a container that
/// owns an AllocationGroup. Handles clone the record pointer only; storage, descriptor and write
/// authority are never cloned. The only ways to a standalone owner are into_value (unique ownership, then
/// G2 extraction) or an explicit duplicate.

#include <memory>
#include <optional>

#include "pact/core/group.hpp"

namespace pact::runtime {

class AdValueRecord;
using ValueRef = std::shared_ptr<const AdValueRecord>;
enum class IntoValueFailure;

/// Owns the group (and so the root resources) of retained values. Read-only to everyone who shares it:
/// the group is reached mutably only by consuming the last reference (into_group, into_value), so no
/// handle can write a retained value or move its owner out while another handle sees it.
class RetentionContainer {
 public:
  explicit RetentionContainer(AllocationGroup group) : group_(std::move(group)) {}
  const AllocationGroup& group() const noexcept { return group_; }
  /// Consumes the last reference and returns the group. Fails (borrow_conflict, the reference kept)
  /// while another reference to the container is live.
  static AllocationGroup into_group(std::shared_ptr<RetentionContainer>&& container);

 private:
  friend Expected<Tensor, std::pair<IntoValueFailure, ValueRef>> into_value(ValueRef&& ref);
  AllocationGroup group_;
};

/// A read-only descriptor reference plus shared ownership of its container.
class AdValueRecord {
 public:
  AdValueRecord(std::shared_ptr<RetentionContainer> container, DescriptorSlot slot)
      : container_(std::move(container)), slot_(slot) {}
  /// A record over a caller's borrowed view, for scoped read-only execution only: that call is
  /// synchronous through retirement, so the caller's borrow outlives every use. It owns nothing, retains
  /// nothing and can never become an owner (into_value refuses it with Extract).
  static std::shared_ptr<const AdValueRecord> borrowed(TensorView view);
  /// A record of `view`, a zero-copy view of `base`'s value (a view op's result: kernels::view_result),
  /// sharing base's container so the storage lives as long as either record. Read-only like every record;
  /// it owns no allocation of its own, so into_value refuses it with Extract (duplicate_value copies).
  static std::shared_ptr<const AdValueRecord> alias(std::shared_ptr<const AdValueRecord> base, TensorView view);
  /// A shared view of the value (valid while the record lives; for a borrowed record, while the caller's
  /// borrow does).
  TensorView view() const { return borrowed_ ? *borrowed_ : container_->group().view(slot_); }
  /// The container, read-only: a record never grants write access to what it retains.
  std::shared_ptr<const RetentionContainer> container() const noexcept { return container_; }
  DescriptorSlot slot() const noexcept { return slot_; }
  /// True for a borrowed record and for an alias: neither owns its allocation.
  bool is_borrowed() const noexcept { return borrowed_.has_value(); }

 private:
  explicit AdValueRecord(TensorView view) : borrowed_(std::move(view)) {}
  friend Expected<Tensor, std::pair<IntoValueFailure, ValueRef>> into_value(ValueRef&& ref);
  std::shared_ptr<RetentionContainer> container_;
  DescriptorSlot slot_;
  std::shared_ptr<const AdValueRecord> base_;  // an alias's base record (declared before the view it outlives)
  std::optional<TensorView> borrowed_;
};

/// An explicit copy of a retained value into a new owner (copy reason ExplicitDuplicate, allocation
/// reason ExplicitDuplicateDestination). The only copying path from a handle; retention never copies.
Tensor duplicate_value(const ValueRef& ref);

/// Moves an owner into a fresh container and returns its record. Retention itself allocates and copies
/// nothing (the tensor's storage moves into the group).
ValueRef retain(Tensor tensor);

/// Why into_value failed; the handle comes back in both cases.
enum class IntoValueFailure { NotUnique, Extract };

/// Consumes the last reference to a record and extracts its owner (G2 try_extract). Fails NotUnique,
/// returning the reference, while anyone else (tape, sibling handle) still holds the record or its
/// container; fails Extract when the group refuses (other descriptors alias the allocation).
Expected<Tensor, std::pair<IntoValueFailure, ValueRef>> into_value(ValueRef&& ref);

}  // namespace pact::runtime
