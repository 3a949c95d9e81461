#pragma once
/// AllocationGroup (SPEC §4, seed 001 G2): the only representation of "one allocation, many logical
/// values". Stable allocation slots, append-only descriptor slots, views, split_mut with one central
/// disjointness proof, try_extract and into_tensor. Every failure leaves the group unchanged.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "pact/core/tensor.hpp"

namespace pact {

/// Index of an allocation entry in a group. Stable: moving an owner out never renumbers another.
struct AllocationSlot {
  std::uint32_t index = 0;
};

/// A local lookup key for a descriptor record. Carries its group's identity, grants no capability,
/// and is meaningful only when resolved through that group.
struct DescriptorSlot {
  std::uint64_t group = 0;
  std::uint32_t index = 0;
  bool operator==(const DescriptorSlot&) const = default;
};

/// A descriptor to publish: which allocation entry and how to read it.
struct DescriptorSpec {
  AllocationSlot allocation;
  LayoutRequest layout;
};

class AllocationGroup;

/// A failed group construction: the owners handed back, in the order given, and the error.
struct GroupConstructionFailure {
  std::vector<Storage> owners;
  Error error;
};

/// Counters of the checks a group performed (tests use them to show what split_mut does not redo).
struct GroupCounters {
  std::uint64_t descriptor_validations = 0;  ///< full descriptor checks (construction, add_descriptor)
  std::uint64_t injectivity_proofs = 0;      ///< computed during split_mut when no proof was retained
  std::uint64_t pair_checks = 0;             ///< pairwise envelope comparisons
};

class AllocationGroup {
 public:
  /// Takes the owners (one allocation entry each, in order) and publishes each descriptor after checking
  /// it against its entry's exact claim. Owners over overlapping bytes of one root, and owners with live
  /// views (a hand-off, borrow.hpp), are rejected. Failure returns every owner unchanged.
  static Expected<AllocationGroup, GroupConstructionFailure> make(std::vector<Storage> owners,
                                                                  std::span<const DescriptorSpec> descriptors);

  AllocationGroup(AllocationGroup&&) noexcept = default;
  AllocationGroup& operator=(AllocationGroup&&) noexcept = default;
  AllocationGroup(const AllocationGroup&) = delete;
  AllocationGroup& operator=(const AllocationGroup&) = delete;

  /// Appends a descriptor (never reuses a slot). Failure leaves the group unchanged.
  DescriptorSlot add_descriptor(const DescriptorSpec& spec);
  /// The slot of the i-th descriptor given to make().
  DescriptorSlot slot(std::uint32_t index) const noexcept { return DescriptorSlot{inner_->id, index}; }
  /// Number of descriptor slots ever published (vacant ones included).
  std::size_t descriptor_slots() const noexcept { return inner_->descriptors.size(); }
  /// Number of occupied allocation entries.
  std::size_t live_allocations() const noexcept;

  /// A shared read view of a descriptor.
  TensorView view(DescriptorSlot slot) const;
  /// An exclusive write view (exclusively borrows the whole group).
  TensorViewMut view_mut(DescriptorSlot slot);
  /// N simultaneous mutable views after the central disjointness proof. Errors: invalid/foreign/empty
  /// slot, not_injective, overlap (a slot requested twice, or contiguous envelopes that intersect),
  /// not_provably_disjoint (strided envelopes that intersect). The result does not depend on the order
  /// of the request; views come back in request order.
  std::vector<TensorViewMut> split_mut(std::span<const DescriptorSlot> slots);
  /// Inserts a fresh owner as a new allocation entry with one descriptor for its own (already checked)
  /// layout; no revalidation, no copy. Failure (a borrowed group, an owner with live views, an owner over
  /// bytes another entry claims) returns the owner unchanged.
  static Expected<DescriptorSlot, Returned<Tensor>> insert(AllocationGroup& group, Tensor&& owner);
  /// Moves the allocation out when `slot` is its only descriptor; the descriptor and allocation entries
  /// become vacant. Fails (aliased_allocation) when another descriptor refers to it.
  Tensor try_extract(DescriptorSlot slot);
  /// Consumes the group, returns one descriptor's tensor and discards the other records. Failure
  /// returns the group unchanged.
  static Expected<Tensor, Returned<AllocationGroup>> into_tensor(AllocationGroup&& group, DescriptorSlot slot);

  /// Check counters.
  const GroupCounters& counters() const noexcept { return inner_->counters; }

 private:
  struct Record {
    std::uint32_t allocation;
    CheckedLayout layout;
  };
  struct Inner {
    Inner() = default;
    Inner(const Inner&) = delete;
    Inner& operator=(const Inner&) = delete;
    /// Checked builds terminate with a diagnostic when the group dies under a live view (borrow.hpp).
    ~Inner();
    std::uint64_t id = 0;
    std::vector<std::optional<Storage>> allocations;
    std::vector<std::optional<Record>> descriptors;
    core::BorrowState borrows;
    GroupCounters counters;
  };
  explicit AllocationGroup(std::unique_ptr<Inner> inner) noexcept : inner_(std::move(inner)) {}
  const Record& resolve(const char* operation, DescriptorSlot slot) const;
  void require_unborrowed(const char* operation) const;
  std::unique_ptr<Inner> inner_;
};

}  // namespace pact
