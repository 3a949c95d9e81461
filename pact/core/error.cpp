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

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c1 = c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c1) {
      out += fmt::format("\\xc2\\x{:02x}", static_cast<unsigned char>(text[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

bool has_control_characters(std::string_view text) noexcept {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) return true;
    if (c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9F)
      return true;
  }
  return false;
}

namespace {
std::string render(ErrorCode code, const std::string& op, const std::string& detail,
                   const std::optional<SpanIdentity>& span) {
  std::string text = printable(fmt::format("[{}] {}: {}", op, error_code_name(code), detail));
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
