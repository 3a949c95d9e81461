#include "pact/core/borrow.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "pact/core/error.hpp"

namespace pact::core {

namespace {
// The packed word: shared in bits 0-31, reborrows in 32-47, split children in 48-62, exclusive in 63.
constexpr std::uint64_t kSharedUnit = 1;
constexpr std::uint64_t kReborrowUnit = std::uint64_t{1} << 32;
constexpr std::uint64_t kSplitUnit = std::uint64_t{1} << 48;
constexpr std::uint64_t kExclusiveBit = std::uint64_t{1} << 63;

BorrowCounts decode(std::uint64_t w) noexcept {
  return BorrowCounts{static_cast<std::uint32_t>(w & 0xFFFF'FFFFU), static_cast<std::uint32_t>(w >> 63),
                      static_cast<std::uint32_t>((w >> 48) & 0x7FFFU), static_cast<std::uint32_t>((w >> 32) & 0xFFFFU)};
}

std::string describe(const BorrowCounts& c) {
  return fmt::format("{} shared, {} exclusive, {} split and {} reborrowed views are live", c.shared, c.exclusive,
                     c.split, c.reborrow);
}
}  // namespace

BorrowCounts BorrowState::counts() const noexcept { return decode(word_.load(std::memory_order_acquire)); }

void require_no_views(const char* operation, const BorrowState& state, const char* what) {
  const BorrowCounts c = state.counts();
  if (c.any())
    throw_error(ErrorCode::borrow_conflict, operation, fmt::format("{} has live views: {}", what, describe(c)));
}

#ifdef PACT_BORROW_TRACKER

namespace {
[[noreturn]] void conflict(const char* operation, const BorrowCounts& c, const char* wanted) {
  throw_error(ErrorCode::borrow_conflict, operation, fmt::format("{} borrow requested while {}", wanted, describe(c)));
}

std::uint64_t unit_of(BorrowKind kind) noexcept {
  switch (kind) {
    case BorrowKind::shared:
      return kSharedUnit;
    case BorrowKind::exclusive:
      return kExclusiveBit;
    case BorrowKind::split_first:
    case BorrowKind::split_child:
      return kSplitUnit;
    case BorrowKind::reborrow:
      return kReborrowUnit;
  }
  return 0;
}

/// Registers one borrow of `kind`: a compare-and-swap loop, so a concurrent taker sees either the state
/// before or after, never a half-checked one.
void acquire(std::atomic<std::uint64_t>& word, BorrowKind kind, const char* operation) {
  std::uint64_t old = word.load(std::memory_order_relaxed);
  for (;;) {
    const BorrowCounts c = decode(old);
    bool full = false;
    switch (kind) {
      case BorrowKind::shared:
        if (c.exclusive != 0 || c.split != 0) conflict(operation, c, "shared");
        full = c.shared == 0xFFFF'FFFFU;
        break;
      case BorrowKind::exclusive:
        if (c.shared != 0 || c.exclusive != 0 || c.split != 0) conflict(operation, c, "exclusive");
        break;
      case BorrowKind::split_first:
        // The first child of a split_mut finds the state free of every borrow, another split's included.
        if (c.any()) conflict(operation, c, "split");
        break;
      case BorrowKind::split_child:
        if (c.shared != 0 || c.exclusive != 0) conflict(operation, c, "split");
        full = c.split == 0x7FFFU;
        break;
      case BorrowKind::reborrow:
        full = c.reborrow == 0xFFFFU;
        break;
    }
    if (full) throw_error(ErrorCode::borrow_conflict, operation, "too many live views of one owner: " + describe(c));
    if (word.compare_exchange_weak(old, old + unit_of(kind), std::memory_order_acq_rel, std::memory_order_relaxed)) {
      return;
    }
  }
}
}  // namespace

BorrowToken::BorrowToken(BorrowState* state, BorrowKind kind, const char* operation) : kind_(kind) {
  if (state == nullptr) return;
  acquire(state->word_, kind, operation);
  state_ = state;
}

BorrowToken::BorrowToken(const BorrowToken& other) : kind_(other.kind_) {
  if (other.state_ == nullptr) return;
  if (kind_ != BorrowKind::shared && kind_ != BorrowKind::reborrow) {
    throw_error(ErrorCode::borrow_conflict, "borrow.copy", "an exclusive borrow cannot be copied");
  }
  acquire(other.state_->word_, kind_, "borrow.copy");
  state_ = other.state_;
}

BorrowToken& BorrowToken::operator=(const BorrowToken& other) {
  if (this != &other) {
    BorrowToken copy(other);
    *this = std::move(copy);
  }
  return *this;
}

BorrowToken::BorrowToken(BorrowToken&& other) noexcept : state_(other.state_), kind_(other.kind_) {
  other.state_ = nullptr;
}

BorrowToken& BorrowToken::operator=(BorrowToken&& other) noexcept {
  if (this != &other) {
    release();
    state_ = other.state_;
    kind_ = other.kind_;
    other.state_ = nullptr;
  }
  return *this;
}

void require_unfrozen(const char* operation, const BorrowState* state) {
  if (state == nullptr) return;
  const BorrowCounts c = state->counts();
  if (c.reborrow != 0) conflict(operation, c, "write through an exclusive");
}

void BorrowToken::release() noexcept {
  if (state_ == nullptr) return;
  state_->word_.fetch_sub(unit_of(kind_), std::memory_order_acq_rel);
  state_ = nullptr;
}

void check_owner_destroyed(const BorrowState& state, const char* owner) noexcept {
  const BorrowCounts c = state.counts();
  if (!c.any()) return;
  // A destructor cannot raise, and going on would leave the views dangling: the documented abort.
  std::fprintf(stderr,
               "pact: fatal: %s destroyed while views of its bytes are live (%u shared, %u exclusive, %u split, %u "
               "reborrowed); an owner must outlive every view of it (seed 001)\n",
               owner, c.shared, c.exclusive, c.split, c.reborrow);
  std::fflush(stderr);
  std::abort();
}

#else

BorrowToken::BorrowToken(BorrowState*, BorrowKind, const char*) {}
BorrowToken::BorrowToken(const BorrowToken&) {}
BorrowToken& BorrowToken::operator=(const BorrowToken&) { return *this; }
BorrowToken::BorrowToken(BorrowToken&&) noexcept {}
BorrowToken& BorrowToken::operator=(BorrowToken&&) noexcept { return *this; }
void require_unfrozen(const char*, const BorrowState*) {}
void BorrowToken::release() noexcept {}
void check_owner_destroyed(const BorrowState&, const char*) noexcept {}

#endif

}  // namespace pact::core
