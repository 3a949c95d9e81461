#include "pact/core/borrow.hpp"

#include <fmt/format.h>

#include "pact/core/error.hpp"

namespace pact::core {

#ifdef PACT_BORROW_TRACKER

namespace {
[[noreturn]] void conflict(const char* operation, const BorrowState& s, const char* wanted) {
  throw_error(
      ErrorCode::borrow_conflict, operation,
      fmt::format("{} borrow requested while {} shared, {} exclusive, {} split and {} reborrowed views are live",
                  wanted, s.shared, s.exclusive, s.split, s.reborrow));
}
}  // namespace

BorrowToken::BorrowToken(BorrowState* state, BorrowKind kind, const char* operation) : state_(state), kind_(kind) {
  if (state_ == nullptr) return;
  BorrowState& s = *state_;
  switch (kind) {
    case BorrowKind::shared:
      if (s.exclusive != 0 || s.split != 0) {
        state_ = nullptr;
        conflict(operation, s, "shared");
      }
      ++s.shared;
      break;
    case BorrowKind::exclusive:
      if (s.shared != 0 || s.exclusive != 0 || s.split != 0) {
        state_ = nullptr;
        conflict(operation, s, "exclusive");
      }
      ++s.exclusive;
      break;
    case BorrowKind::split_child:
      // Children of one split are registered together by split_mut after its disjointness proof;
      // the first child must find the state free of any other borrow.
      if (s.shared != 0 || s.exclusive != 0) {
        state_ = nullptr;
        conflict(operation, s, "split");
      }
      ++s.split;
      break;
    case BorrowKind::reborrow:
      ++s.reborrow;
      break;
  }
}

BorrowToken::BorrowToken(const BorrowToken& other) : state_(other.state_), kind_(other.kind_) {
  if (state_ == nullptr) return;
  if (kind_ == BorrowKind::shared) {
    ++state_->shared;
  } else if (kind_ == BorrowKind::reborrow) {
    ++state_->reborrow;
  } else {
    state_ = nullptr;
    throw_error(ErrorCode::borrow_conflict, "borrow.copy", "an exclusive borrow cannot be copied");
  }
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
  if (state != nullptr && state->reborrow != 0) conflict(operation, *state, "write through an exclusive");
}

void BorrowToken::release() noexcept {
  if (state_ == nullptr) return;
  switch (kind_) {
    case BorrowKind::shared:
      --state_->shared;
      break;
    case BorrowKind::exclusive:
      --state_->exclusive;
      break;
    case BorrowKind::split_child:
      --state_->split;
      break;
    case BorrowKind::reborrow:
      --state_->reborrow;
      break;
  }
  state_ = nullptr;
}

#else

BorrowToken::BorrowToken(BorrowState*, BorrowKind, const char*) {}
BorrowToken::BorrowToken(const BorrowToken&) {}
BorrowToken& BorrowToken::operator=(const BorrowToken&) { return *this; }
BorrowToken::BorrowToken(BorrowToken&&) noexcept {}
BorrowToken& BorrowToken::operator=(BorrowToken&&) noexcept { return *this; }
void require_unfrozen(const char*, const BorrowState*) {}
void BorrowToken::release() noexcept {}

#endif

}  // namespace pact::core
