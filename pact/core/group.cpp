#include "pact/core/group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <numeric>

namespace pact {

namespace {
std::atomic<std::uint64_t> g_next_group{0};
}

std::size_t AllocationGroup::live_allocations() const noexcept {
  return static_cast<std::size_t>(std::count_if(inner_->allocations.begin(), inner_->allocations.end(),
                                                [](const auto& a) { return a.has_value(); }));
}

Expected<AllocationGroup, GroupConstructionFailure> AllocationGroup::make(std::vector<Storage> owners,
                                                                          std::span<const DescriptorSpec> descriptors) {
  constexpr const char* op = "group.make";
  auto inner = std::make_unique<Inner>();
  inner->id = g_next_group.fetch_add(1, std::memory_order_relaxed) + 1;
  try {
    for (std::size_t i = 0; i < owners.size(); ++i) {
      if (owners[i].empty()) throw_error(ErrorCode::invalid_argument, op, fmt::format("owner {} is moved-from", i));
      const core::Claim& a = *owners[i].claim_;
      core::require_no_views(op, a.borrows, fmt::format("owner {}", i).c_str());
      for (std::size_t j = 0; j < i; ++j) {
        const core::Claim& b = *owners[j].claim_;
        if (a.root == b.root && a.begin < b.end && b.begin < a.end) {
          throw_error(ErrorCode::overlap, op, fmt::format("owners {} and {} claim overlapping bytes of one root", j, i),
                      a.identity());
        }
      }
    }
    std::vector<std::optional<Record>> records;
    records.reserve(descriptors.size());
    for (std::size_t i = 0; i < descriptors.size(); ++i) {
      const auto& spec = descriptors[i];
      if (spec.allocation.index >= owners.size()) {
        throw_error(ErrorCode::invalid_slot, op,
                    fmt::format("descriptor {} names allocation {} of {}", i, spec.allocation.index, owners.size()));
      }
      records.emplace_back(Record{spec.allocation.index, owners[spec.allocation.index].claim_->check(op, spec.layout)});
      ++inner->counters.descriptor_validations;
    }
    // Publish only after every check passed.
    inner->descriptors = std::move(records);
    inner->allocations.reserve(owners.size());
    for (auto& o : owners) inner->allocations.emplace_back(std::move(o));
    return AllocationGroup(std::move(inner));
  } catch (Error& e) {
    return Unexpected(GroupConstructionFailure{std::move(owners), std::move(e)});
  }
}

AllocationGroup::Inner::~Inner() { core::check_owner_destroyed(borrows, "an allocation group"); }

void AllocationGroup::require_unborrowed(const char* operation) const {
  core::require_no_views(operation, inner_->borrows, "the group");
}

const AllocationGroup::Record& AllocationGroup::resolve(const char* operation, DescriptorSlot slot) const {
  if (slot.group != inner_->id) {
    throw_error(
        ErrorCode::foreign_slot, operation,
        fmt::format("descriptor slot {} belongs to group {}, not group {}", slot.index, slot.group, inner_->id));
  }
  if (slot.index >= inner_->descriptors.size()) {
    throw_error(ErrorCode::invalid_slot, operation,
                fmt::format("descriptor slot {} of {}", slot.index, inner_->descriptors.size()));
  }
  const auto& record = inner_->descriptors[slot.index];
  if (!record) throw_error(ErrorCode::empty_slot, operation, fmt::format("descriptor slot {} is vacant", slot.index));
  return *record;
}

DescriptorSlot AllocationGroup::add_descriptor(const DescriptorSpec& spec) {
  constexpr const char* op = "group.add_descriptor";
  require_unborrowed(op);
  if (spec.allocation.index >= inner_->allocations.size() || !inner_->allocations[spec.allocation.index]) {
    throw_error(ErrorCode::invalid_slot, op, fmt::format("allocation slot {} is not occupied", spec.allocation.index));
  }
  CheckedLayout layout = inner_->allocations[spec.allocation.index]->claim_->check(op, spec.layout);
  ++inner_->counters.descriptor_validations;
  inner_->descriptors.emplace_back(Record{spec.allocation.index, layout});
  return DescriptorSlot{inner_->id, static_cast<std::uint32_t>(inner_->descriptors.size() - 1)};
}

TensorView AllocationGroup::view(DescriptorSlot slot) const {
  const Record& r = resolve("group.view", slot);
  return TensorView(inner_->allocations[r.allocation]->claim_.get(), r.layout,
                    core::BorrowToken(&inner_->borrows, core::BorrowKind::shared, "group.view"));
}

TensorViewMut AllocationGroup::view_mut(DescriptorSlot slot) {
  constexpr const char* op = "group.view_mut";
  const Record& r = resolve(op, slot);
  if (!r.layout.is_injective()) {
    throw_error(ErrorCode::not_injective, op, fmt::format("descriptor slot {} is not provably injective", slot.index),
                inner_->allocations[r.allocation]->claim_->identity());
  }
  return TensorViewMut(inner_->allocations[r.allocation]->claim_.get(), r.layout,
                       core::BorrowToken(&inner_->borrows, core::BorrowKind::exclusive, op));
}

// Note [Central disjointness proof]
// The one place that proves mutable views disjoint. Order (seed 001 G2): resolve every slot; read the
// retained layout (no revalidation); use the retained injectivity proof; partition by allocation;
// treat empty descriptors as disjoint from everything; compare byte envelopes pairwise. Contiguous
// envelopes are the exact byte sets, so an intersection is a real overlap; strided envelopes over-
// approximate, so an intersection is "not provably disjoint" (interleaved requests are rejected,
// never enumerated). Pairs are examined in slot order so the verdict does not depend on request order.
std::vector<TensorViewMut> AllocationGroup::split_mut(std::span<const DescriptorSlot> slots) {
  constexpr const char* op = "group.split_mut";
  require_unborrowed(op);
  // Resolve and check in slot order, so that which error a bad request reports does not depend on the
  // order of the request.
  std::vector<std::size_t> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(slots[a].group, slots[a].index) < std::pair(slots[b].group, slots[b].index);
  });
  std::vector<const Record*> records(slots.size());
  for (std::size_t i : order) records[i] = &resolve(op, slots[i]);
  for (std::size_t i : order) {
    if (!records[i]->layout.is_injective()) {
      throw_error(ErrorCode::not_injective, op,
                  fmt::format("descriptor slot {} is not provably injective", slots[i].index),
                  inner_->allocations[records[i]->allocation]->claim_->identity());
    }
  }
  for (std::size_t x = 0; x < order.size(); ++x) {
    for (std::size_t y = x + 1; y < order.size(); ++y) {
      const std::size_t i = order[x], j = order[y];
      const Record& a = *records[i];
      const Record& b = *records[j];
      ++inner_->counters.pair_checks;
      if (slots[i].index == slots[j].index) {
        if (a.layout.numel() == 0) continue;
        throw_error(ErrorCode::overlap, op, fmt::format("descriptor slot {} requested twice", slots[i].index));
      }
      if (a.allocation != b.allocation || a.layout.numel() == 0 || b.layout.numel() == 0) continue;
      const bool intersect =
          a.layout.envelope_begin() < b.layout.envelope_end() && b.layout.envelope_begin() < a.layout.envelope_end();
      if (!intersect) continue;
      const auto& claim = *inner_->allocations[a.allocation]->claim_;
      const SpanIdentity span{claim.root->diagnostics().id,
                              claim.begin + std::max(a.layout.envelope_begin(), b.layout.envelope_begin()),
                              claim.begin + std::min(a.layout.envelope_end(), b.layout.envelope_end())};
      if (a.layout.is_contiguous() && b.layout.is_contiguous()) {
        throw_error(ErrorCode::overlap, op,
                    fmt::format("descriptor slots {} and {} overlap", slots[i].index, slots[j].index), span);
      }
      throw_error(ErrorCode::not_provably_disjoint, op,
                  fmt::format("byte envelopes of descriptor slots {} and {} intersect", slots[i].index, slots[j].index),
                  span);
    }
  }
  // The proof precedes construction: from here nothing throws except the borrow check of the first child.
  std::shared_ptr<core::BorrowState[]> freeze;
  if (core::kBorrowTrackerEnabled && !slots.empty()) freeze.reset(new core::BorrowState[slots.size()]);
  std::vector<TensorViewMut> views;
  views.reserve(slots.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto kind = i == 0 ? core::BorrowKind::split_first : core::BorrowKind::split_child;
    TensorViewMut view(inner_->allocations[records[i]->allocation]->claim_.get(), records[i]->layout,
                       core::BorrowToken(&inner_->borrows, kind, op));
    if (freeze) {
      view.freeze_ = &freeze[i];
      view.freeze_block_ = freeze;
    }
    views.push_back(std::move(view));
  }
  return views;
}

Tensor AllocationGroup::try_extract(DescriptorSlot slot) {
  constexpr const char* op = "group.try_extract";
  require_unborrowed(op);
  const Record& r = resolve(op, slot);
  std::size_t aliases = 0;
  for (const auto& d : inner_->descriptors) {
    if (d && d->allocation == r.allocation) ++aliases;
  }
  if (aliases != 1) {
    throw_error(ErrorCode::aliased_allocation, op,
                fmt::format("allocation {} has {} descriptors; extraction needs exactly one", r.allocation, aliases),
                inner_->allocations[r.allocation]->claim_->identity());
  }
  CheckedLayout layout = r.layout;
  const std::uint32_t allocation = r.allocation;
  Tensor out(std::move(*inner_->allocations[allocation]), layout);
  inner_->allocations[allocation].reset();
  inner_->descriptors[slot.index].reset();
  return out;
}

Expected<DescriptorSlot, Returned<Tensor>> AllocationGroup::insert(AllocationGroup& group, Tensor&& owner) {
  constexpr const char* op = "group.insert";
  try {
    group.require_unborrowed(op);
    if (owner.storage_.empty()) throw_error(ErrorCode::invalid_argument, op, "the owner is moved-from");
    const core::Claim& a = *owner.storage_.claim_;
    core::require_no_views(op, a.borrows, "the owner");
    for (const auto& other : group.inner_->allocations) {
      if (other && other->claim_->root == a.root && a.begin < other->claim_->end && other->claim_->begin < a.end) {
        throw_error(ErrorCode::overlap, op, "the owner claims bytes another allocation entry claims", a.identity());
      }
    }
    group.inner_->allocations.reserve(group.inner_->allocations.size() + 1);
    group.inner_->descriptors.reserve(group.inner_->descriptors.size() + 1);
    const auto index = static_cast<std::uint32_t>(group.inner_->allocations.size());
    group.inner_->descriptors.emplace_back(Record{index, owner.layout_});
    group.inner_->allocations.emplace_back(std::move(owner.storage_));
    return DescriptorSlot{group.inner_->id, static_cast<std::uint32_t>(group.inner_->descriptors.size() - 1)};
  } catch (Error& e) {
    return Unexpected(Returned<Tensor>{std::move(owner), std::move(e)});
  }
}

Expected<Tensor, Returned<AllocationGroup>> AllocationGroup::into_tensor(AllocationGroup&& group, DescriptorSlot slot) {
  constexpr const char* op = "group.into_tensor";
  try {
    group.require_unborrowed(op);
    const Record& r = group.resolve(op, slot);
    CheckedLayout layout = r.layout;
    Tensor out(std::move(*group.inner_->allocations[r.allocation]), layout);
    group.inner_.reset();  // discards every other record and drops the other owners exactly once
    return out;
  } catch (Error& e) {
    return Unexpected(Returned<AllocationGroup>{std::move(group), std::move(e)});
  }
}

}  // namespace pact
