#include "pact/core/accounting.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>

namespace pact {

namespace {
// The active recorders, process-wide (AccountingRecorder records every thread's events). The count lets an
// allocation with no recorder alive skip the lock.
std::mutex g_recorders_mutex;
std::vector<AccountingRecorder*>& recorders() {
  static std::vector<AccountingRecorder*> r;
  return r;
}
std::atomic<int> g_active_recorders{0};
thread_local AllocationReason t_operation_output = AllocationReason::OperationOutput;
std::atomic<std::uint64_t> g_allocations{0};
std::atomic<std::uint64_t> g_copies{0};
}  // namespace

std::string_view copy_reason_name(CopyReason reason) noexcept {
  switch (reason) {
    case CopyReason::ExplicitDuplicate:
      return "ExplicitDuplicate";
    case CopyReason::Transfer:
      return "Transfer";
  }
  return "unknown";
}

std::string_view allocation_reason_name(AllocationReason reason) noexcept {
  switch (reason) {
    case AllocationReason::OperationOutput:
      return "OperationOutput";
    case AllocationReason::CheckpointRecomputeOutput:
      return "CheckpointRecomputeOutput";
    case AllocationReason::ExplicitDuplicateDestination:
      return "ExplicitDuplicateDestination";
    case AllocationReason::TransferDestination:
      return "TransferDestination";
    case AllocationReason::ExternalImport:
      return "ExternalImport";
  }
  return "unknown";
}

AccountingRecorder::AccountingRecorder() {
  std::lock_guard lock(g_recorders_mutex);
  recorders().push_back(this);
  g_active_recorders.fetch_add(1, std::memory_order_release);
}
AccountingRecorder::~AccountingRecorder() {
  std::lock_guard lock(g_recorders_mutex);
  auto& all = recorders();
  all.erase(std::remove(all.begin(), all.end(), this), all.end());
  g_active_recorders.fetch_sub(1, std::memory_order_release);
}

std::map<AllocationReason, int> AccountingRecorder::allocation_multiset() const {
  std::map<AllocationReason, int> m;
  for (const auto& e : allocations_) ++m[e.reason];
  return m;
}

std::map<CopyReason, int> AccountingRecorder::copy_multiset() const {
  std::map<CopyReason, int> m;
  for (const auto& e : copies_) ++m[e.reason];
  return m;
}

AllocationReasonScope::AllocationReasonScope(AllocationReason reason) noexcept : previous_(t_operation_output) {
  t_operation_output = reason;
}
AllocationReasonScope::~AllocationReasonScope() { t_operation_output = previous_; }
AllocationReason operation_output_reason() noexcept { return t_operation_output; }

void record_allocation(const AllocationEvent& event) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (g_active_recorders.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(g_recorders_mutex);
  for (auto* r : recorders()) r->allocations_.push_back(event);
}

void record_copy(const CopyEvent& event) {
  g_copies.fetch_add(1, std::memory_order_relaxed);
  if (g_active_recorders.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(g_recorders_mutex);
  for (auto* r : recorders()) r->copies_.push_back(event);
}

std::uint64_t total_allocation_events() noexcept { return g_allocations.load(); }
std::uint64_t total_copy_events() noexcept { return g_copies.load(); }

}  // namespace pact
