#pragma once
/// The borrow tracker (SPEC §4): C++ cannot prove a borrow, so debug and test builds count shared and
/// exclusive borrows per claim and turn a violation into pact::Error(borrow_conflict). Compiled in when
/// PACT_BORROW_TRACKER is defined; otherwise every operation is a no-op and BorrowToken is empty.

#include <cstdint>

namespace pact::core {

/// True when this build tracks borrows.
#ifdef PACT_BORROW_TRACKER
inline constexpr bool kBorrowTrackerEnabled = true;
#else
inline constexpr bool kBorrowTrackerEnabled = false;
#endif

/// Per-claim (or per-group) borrow counts.
struct BorrowState {
  std::int32_t shared = 0;     ///< live read views
  std::int32_t exclusive = 0;  ///< live mutable views (0 or 1)
  std::int32_t split = 0;      ///< live children of one split_mut
  std::int32_t reborrow = 0;   ///< live read reborrows of the exclusive view (it may not write meanwhile)
};

enum class BorrowKind : std::uint8_t { shared, exclusive, split_child, reborrow };

/// RAII registration of one borrow. Shared tokens copy (each copy is one more shared borrow);
/// the others only move.
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

}  // namespace pact::core
