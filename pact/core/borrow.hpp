#pragma once
/// The borrow tracker (SPEC §4): C++ cannot prove a borrow, so checked builds count shared and exclusive
/// borrows and turn a violation into pact::Error(borrow_conflict). Compiled in when PACT_BORROW_TRACKER is
/// defined (the release, debug and sanitizer presets; the bench preset leaves it out:
/// docs/guides/element-access.md has the measured cost); otherwise every operation is a no-op.
///
/// One tracker for all views of the same bytes: a view counts on the state of the bytes' current owner,
/// the claim's for a Tensor and the group's for an AllocationGroup (seed 001: view_mut borrows the whole
/// group). The bytes change owner only through a hand-off (into_storage, AllocationGroup::make and
/// insert, try_extract, into_tensor, Storage::split), and every hand-off refuses an owner with live views,
/// so no two states ever count views of the same bytes. Destroying an owner under a live view terminates
/// with a diagnostic in checked builds: the one place Pact aborts instead of raising (a destructor cannot
/// report, and continuing would leave a dangling view).
///
/// The counts are one atomic word per state, updated by compare-and-swap, so views may be taken and
/// dropped from several threads.

#include <atomic>
#include <cstdint>

namespace pact::core {

/// True when this build tracks borrows.
#ifdef PACT_BORROW_TRACKER
inline constexpr bool kBorrowTrackerEnabled = true;
#else
inline constexpr bool kBorrowTrackerEnabled = false;
#endif

/// A snapshot of one state's counts.
struct BorrowCounts {
  std::uint32_t shared = 0;     ///< live read views
  std::uint32_t exclusive = 0;  ///< live mutable views (0 or 1)
  std::uint32_t split = 0;      ///< live children of one split_mut
  std::uint32_t reborrow = 0;   ///< live read reborrows of the exclusive view (it may not write meanwhile)
  bool any() const noexcept { return shared + exclusive + split + reborrow != 0; }
};

/// Per-claim (or per-group) borrow counts: one atomic word (shared in bits 0-31, reborrows 32-47, split
/// children 48-62, the exclusive flag 63).
class BorrowState {
 public:
  BorrowState() noexcept = default;
  BorrowState(const BorrowState&) = delete;
  BorrowState& operator=(const BorrowState&) = delete;

  /// The current counts (a snapshot; other threads may change them at once).
  BorrowCounts counts() const noexcept;
  /// True while any view is live.
  bool live() const noexcept { return word_.load(std::memory_order_acquire) != 0; }

 private:
  friend class BorrowToken;
  std::atomic<std::uint64_t> word_{0};
};

/// What a token borrows. A split_mut registers its first child on each state as split_first (which needs
/// the state free of every borrow) and the rest as split_child.
enum class BorrowKind : std::uint8_t { shared, exclusive, split_first, split_child, reborrow };

/// RAII registration of one borrow. Shared and reborrow tokens copy (each copy is one more borrow); the
/// others only move.
class BorrowToken {
 public:
  BorrowToken() noexcept = default;
  /// Registers a borrow of `kind` on `state`; throws borrow_conflict naming `operation`.
  BorrowToken(BorrowState* state, BorrowKind kind, const char* operation);
  ~BorrowToken() { release(); }
  BorrowToken(const BorrowToken& other);
  BorrowToken& operator=(const BorrowToken& other);
  BorrowToken(BorrowToken&& other) noexcept;
  BorrowToken& operator=(BorrowToken&& other) noexcept;

  /// The tracked state (nullptr in untracked builds or for a default token).
  BorrowState* state() const noexcept {
#ifdef PACT_BORROW_TRACKER
    return state_;
#else
    return nullptr;
#endif
  }

 private:
  void release() noexcept;
#ifdef PACT_BORROW_TRACKER
  BorrowState* state_ = nullptr;
  BorrowKind kind_ = BorrowKind::shared;
#endif
};

/// Throws borrow_conflict when `state` (a mutable view's freeze state) has a live read reborrow.
void require_unfrozen(const char* operation, const BorrowState* state);

/// Throws borrow_conflict naming `operation` and `what` when `state` has any live view (a hand-off of an
/// owner, or a structural change of a group).
void require_no_views(const char* operation, const BorrowState& state, const char* what);

/// Checked builds: terminates with a diagnostic naming `owner` when `state` has a live view (an owner is
/// being destroyed under it). A no-op in untracked builds.
void check_owner_destroyed(const BorrowState& state, const char* owner) noexcept;

}  // namespace pact::core
