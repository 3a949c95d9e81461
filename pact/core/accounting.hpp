#pragma once
/// Copy and allocation accountings (seed 001, "Copy and allocation accounting"). Every physical allocation
/// emits exactly one allocation event; every byte-preserving duplicate or transfer emits exactly one
/// copy event. Kernel results are allocations, never copies. Retention and aliasing emit nothing.

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

namespace pact {

/// Why bytes were duplicated.
enum class CopyReason : std::uint8_t { ExplicitDuplicate, Transfer };

/// Why a physical allocation was made.
enum class AllocationReason : std::uint8_t {
  OperationOutput,            ///< a fresh op result, including factory ops (empty, zeros, from values)
  CheckpointRecomputeOutput,  ///< recomputation under checkpointing
  ExplicitDuplicateDestination,
  TransferDestination,
  /// Host memory another runtime allocated and owns, adopted as a root (Storage::import_host): no bytes
  /// were allocated or copied; the event records that Pact now reads them.
  ExternalImport,
};

std::string_view copy_reason_name(CopyReason reason) noexcept;
std::string_view allocation_reason_name(AllocationReason reason) noexcept;

struct AllocationEvent {
  AllocationReason reason;
  std::uint64_t allocation_id;
  std::uint64_t bytes;
  std::string_view provider;
};

struct CopyEvent {
  CopyReason reason;
  std::uint64_t source_allocation;
  std::uint64_t destination_allocation;
  std::uint64_t bytes;
};

/// Collects the events emitted on any thread while it is alive — the caller's, a submission worker's, a
/// kernel's thread pool — so a recorder sees everything a piece of work allocated or copied. Recorders
/// nest: each event goes to every active recorder, so an outer scope sees what inner scopes saw; they
/// may end in any order, on any thread. Read a recorder's events once the threads it observed are done
/// with the work (recording is synchronised; reading alongside it is not).
class AccountingRecorder {
 public:
  AccountingRecorder();
  ~AccountingRecorder();
  AccountingRecorder(const AccountingRecorder&) = delete;
  AccountingRecorder& operator=(const AccountingRecorder&) = delete;

  const std::vector<AllocationEvent>& allocations() const noexcept { return allocations_; }
  const std::vector<CopyEvent>& copies() const noexcept { return copies_; }
  /// Allocation reasons as a multiset (reason -> count).
  std::map<AllocationReason, int> allocation_multiset() const;
  /// Copy reasons as a multiset (reason -> count).
  std::map<CopyReason, int> copy_multiset() const;

 private:
  friend void record_allocation(const AllocationEvent&);
  friend void record_copy(const CopyEvent&);
  std::vector<AllocationEvent> allocations_;
  std::vector<CopyEvent> copies_;
};

/// While alive, allocations this thread makes for fresh op results (reason OperationOutput) are made and
/// recorded with `reason` instead: checkpoint recomputation uses CheckpointRecomputeOutput. Explicit
/// duplicates and transfers keep their own reasons. Scopes nest.
class AllocationReasonScope {
 public:
  explicit AllocationReasonScope(AllocationReason reason) noexcept;
  ~AllocationReasonScope();
  AllocationReasonScope(const AllocationReasonScope&) = delete;
  AllocationReasonScope& operator=(const AllocationReasonScope&) = delete;

 private:
  AllocationReason previous_;
};
/// The reason this thread currently gives fresh op results (OperationOutput outside any scope).
AllocationReason operation_output_reason() noexcept;

/// Emits an allocation event to the active recorders (and the process totals).
void record_allocation(const AllocationEvent& event);
/// Emits a copy event to the active recorders (and the process totals).
void record_copy(const CopyEvent& event);

/// Process-wide totals since start.
std::uint64_t total_allocation_events() noexcept;
std::uint64_t total_copy_events() noexcept;

}  // namespace pact
