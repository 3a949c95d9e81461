#include "pact/runtime/retention.hpp"

#include <fmt/format.h>

namespace pact::runtime {

ValueRef retain(Tensor tensor) {
  const CheckedLayout layout = tensor.layout();
  std::vector<Storage> owners;
  owners.push_back(std::move(tensor).into_storage());
  const DescriptorSpec spec{AllocationSlot{0},
                            LayoutRequest{layout.dtype(), layout.shape(), layout.strides(), layout.byte_offset()}};
  auto group = AllocationGroup::make(std::move(owners), std::span<const DescriptorSpec>(&spec, 1));
  if (!group) throw std::move(group).error().error;  // cannot happen: the layout was checked against this claim
  auto container = std::make_shared<RetentionContainer>(std::move(group).value());
  const DescriptorSlot slot = container->group().slot(0);
  return std::make_shared<const AdValueRecord>(std::move(container), slot);
}

std::shared_ptr<const AdValueRecord> AdValueRecord::borrowed(TensorView view) {
  return std::shared_ptr<const AdValueRecord>(new AdValueRecord(std::move(view)));
}

std::shared_ptr<const AdValueRecord> AdValueRecord::alias(std::shared_ptr<const AdValueRecord> base, TensorView view) {
  auto record = std::shared_ptr<AdValueRecord>(new AdValueRecord(std::move(view)));
  record->container_ = base->container_;
  record->slot_ = base->slot_;
  record->base_ = std::move(base);
  return record;
}

AllocationGroup RetentionContainer::into_group(std::shared_ptr<RetentionContainer>&& container) {
  if (container.use_count() != 1) {
    throw_error(ErrorCode::borrow_conflict, "retention.into_group",
                fmt::format("the container has {} holders; only the last may take its group", container.use_count()));
  }
  AllocationGroup group = std::move(container->group_);
  container.reset();
  return group;
}

Tensor duplicate_value(const ValueRef& ref) { return ref->view().duplicate(); }

Expected<Tensor, std::pair<IntoValueFailure, ValueRef>> into_value(ValueRef&& ref) {
  if (ref->is_borrowed()) return Unexpected(std::pair{IntoValueFailure::Extract, std::move(ref)});  // owns nothing
  if (ref.use_count() != 1 || ref->container_.use_count() != 1) {
    return Unexpected(std::pair{IntoValueFailure::NotUnique, std::move(ref)});
  }
  // Unique: this call holds the only record and the only container reference.
  RetentionContainer& container = *ref->container_;
  const DescriptorSlot slot = ref->slot();
  try {
    Tensor out = container.group_.try_extract(slot);
    return out;
  } catch (const Error&) {
    return Unexpected(std::pair{IntoValueFailure::Extract, std::move(ref)});
  }
}

}  // namespace pact::runtime
