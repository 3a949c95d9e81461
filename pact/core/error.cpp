#include "pact/core/error.hpp"

#include <fmt/format.h>

namespace pact {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
#define PACT_ERROR_NAME(name) \
  case ErrorCode::name:       \
    return #name;
    PACT_ERROR_CODES(PACT_ERROR_NAME)
#undef PACT_ERROR_NAME
  }
  return "unknown";
}

namespace {
std::string render(ErrorCode code, const std::string& op, const std::string& detail,
                   const std::optional<SpanIdentity>& span) {
  std::string text = fmt::format("[{}] {}: {}", op, error_code_name(code), detail);
  if (span) {
    text += fmt::format(" (allocation {} bytes [{}, {}))", span->allocation_id, span->byte_begin, span->byte_end);
  }
  return text;
}
}  // namespace

Error::Error(ErrorCode code, std::string operation, std::string detail, std::optional<SpanIdentity> span)
    : std::runtime_error(render(code, operation, detail, span)),
      code_(code),
      operation_(std::move(operation)),
      detail_(std::move(detail)),
      span_(span) {}

void throw_error(ErrorCode code, std::string operation, std::string detail, std::optional<SpanIdentity> span) {
  throw Error(code, std::move(operation), std::move(detail), span);
}

}  // namespace pact
