#pragma once
/// AD value retention (seed 001 G7): a retained value is a shared read-only record over a container that
/// owns an AllocationGroup. Handles clone the record pointer only; storage, descriptor and write
/// authority are never cloned. The only ways to a standalone owner are into_value (unique ownership, then
/// G2 extraction) or an explicit duplicate.

#include <memory>

#include "pact/core/group.hpp"

namespace pact::runtime {

/// Owns the group (and so the root resources) of retained values.
class RetentionContainer {
 public:
  explicit RetentionContainer(AllocationGroup group) : group_(std::move(group)) {}
  const AllocationGroup& group() const noexcept { return group_; }
  AllocationGroup& group_mut() noexcept { return group_; }

 private:
  AllocationGroup group_;
};

/// A read-only descriptor reference plus shared ownership of its container.
class AdValueRecord {
 public:
  AdValueRecord(std::shared_ptr<RetentionContainer> container, DescriptorSlot slot)
      : container_(std::move(container)), slot_(slot) {}
  /// A shared view of the value (valid while the record lives).
  TensorView view() const { return container_->group().view(slot_); }
  const std::shared_ptr<RetentionContainer>& container() const noexcept { return container_; }
  DescriptorSlot slot() const noexcept { return slot_; }

 private:
  std::shared_ptr<RetentionContainer> container_;
  DescriptorSlot slot_;
};

using ValueRef = std::shared_ptr<const AdValueRecord>;

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
