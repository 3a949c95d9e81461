#pragma once
/// pact::Error: the one exception hierarchy of the library, with stable codes (SPEC §13).

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pact {

// Note [Stable error codes]
// Each code's string is part of the public contract (CLI output, JSON diagnostics, tests). Append new
// codes; never rename or reuse one. The list is declared once here.
#define PACT_ERROR_CODES(X)                                                              \
  X(invalid_argument)      /* a caller-supplied value is malformed */                    \
  X(layout_overflow)       /* shape/stride/offset arithmetic overflows */                \
  X(out_of_span)           /* a descriptor reaches outside its root-bound span */        \
  X(misaligned)            /* an element address violates the dtype's alignment */       \
  X(dtype_mismatch)        /* the dtype does not match what the operation needs */       \
  X(provider_mismatch)     /* descriptor placement and storage provider disagree */      \
  X(not_injective)         /* a write layout maps two elements to one address */         \
  X(rank_exceeded)         /* more dimensions than kMaxRank */                           \
  X(index_out_of_range)    /* a checked element index is out of bounds */                \
  X(no_host_bytes)         /* meta storage has geometry only */                          \
  X(not_host_accessible)   /* device storage offers no host access */                    \
  X(unsupported)           /* a provider or dtype cannot offer the requested mode */     \
  X(invalid_slot)          /* a descriptor or allocation slot does not exist */          \
  X(foreign_slot)          /* a slot made by another group */                            \
  X(empty_slot)            /* a vacated slot */                                          \
  X(aliased_allocation)    /* extraction while other descriptors share the allocation */ \
  X(overlap)               /* requested mutable views overlap */                         \
  X(not_provably_disjoint) /* byte envelopes overlap; disjointness cannot be proven */   \
  X(borrow_conflict)       /* shared/exclusive borrow rule violated */                   \
  X(reinterpret_invalid)   /* a reinterpretation's byte/shape rule fails */              \
  X(allocation_failed)     /* the provider could not allocate */                         \
  X(out_of_memory)         /* the host could not allocate (std::bad_alloc), typed */     \
  X(parse_error)           /* malformed serialized input */                              \
  X(non_finite)            /* NaN or infinity where only finite values are allowed */    \
  X(io_error)              /* a file could not be read or written */                     \
  X(no_device)             /* no device of the requested kind is present */              \
  X(poisoned)              /* a provider context after launch or cleanup uncertainty */  \
  X(internal)              /* an internal invariant failed (PACT_DCHECK): a bug in Pact */

enum class ErrorCode : std::uint16_t {
#define PACT_ERROR_ENUM(name) name,
  PACT_ERROR_CODES(PACT_ERROR_ENUM)
#undef PACT_ERROR_ENUM
};

/// The stable string of an error code.
std::string_view error_code_name(ErrorCode code) noexcept;

/// `text` with every control character a terminal would act on written out as \xNN: C0 controls but
/// newline and tab (ESC, BEL, CR, backspace...), DEL, and the C1 controls U+0080..U+009F as UTF-8. Names
/// read from files pass through it before they reach a terminal or a log; every Error's message does.
std::string printable(std::string_view text);
/// True when `text` holds a character printable() would escape, or a newline or tab: a name from a file
/// that does is refused where it is read.
bool has_control_characters(std::string_view text) noexcept;

/// Identity of a resolved span: allocation id and byte range within its root. Never an address.
struct SpanIdentity {
  std::uint64_t allocation_id = 0;
  std::uint64_t byte_begin = 0;
  std::uint64_t byte_end = 0;
  bool operator==(const SpanIdentity&) const = default;
};

/// Base of every error the library throws or returns. `what()` reads
/// "[operation] code: detail (allocation A bytes [b, e))".
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string operation, std::string detail, std::optional<SpanIdentity> span = std::nullopt);

  /// The stable code.
  ErrorCode code() const noexcept { return code_; }
  /// The operation that failed, e.g. "descriptor.check".
  const std::string& operation() const noexcept { return operation_; }
  /// The human detail: the requested range or ids.
  const std::string& detail() const noexcept { return detail_; }
  /// The resolved span, when the failure concerns one.
  const std::optional<SpanIdentity>& span() const noexcept { return span_; }

 private:
  ErrorCode code_;
  std::string operation_;
  std::string detail_;
  std::optional<SpanIdentity> span_;
};

[[noreturn]] void throw_error(ErrorCode code, std::string operation, std::string detail,
                              std::optional<SpanIdentity> span = std::nullopt);

}  // namespace pact

/// Internal invariant (STYLE.md: PACT_CHECK at the front door, PACT_DCHECK inside): in builds without
/// NDEBUG (the debug preset) a false `cond` throws pact::Error(internal) naming the condition and its
/// source line; Release and RelWithDebInfo compile it out, so `cond` must have no side effects. The
/// library never aborts the process.
#ifdef NDEBUG
#define PACT_DCHECK(cond, op) \
  do {                        \
  } while (false)
#else
#define PACT_DCHECK(cond, op)                                                                                      \
  do {                                                                                                             \
    if (!(cond))                                                                                                   \
      ::pact::throw_error(::pact::ErrorCode::internal, (op),                                                       \
                          std::string("invariant failed: " #cond " at " __FILE__ ":") + std::to_string(__LINE__)); \
  } while (false)
#endif

/// Front-door check: throws pact::Error with the code and a "[op]" tag when `cond` is false.
#define PACT_CHECK(cond, code, op, detail)                                     \
  do {                                                                         \
    if (!(cond)) ::pact::throw_error(::pact::ErrorCode::code, (op), (detail)); \
  } while (false)
