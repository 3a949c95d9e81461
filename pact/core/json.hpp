#pragma once
/// Shared JSON utilities (SPEC §14): parsing with typed errors, canonical JSON, SHA-256 digests.
///
/// Note [Canonical JSON]
/// The canonical form of a JSON value is its compact serialization with object keys sorted by bytes,
/// strings as UTF-8 (invalid UTF-8 is rejected), integers in decimal, and every floating-point number
/// written as the type-tagged exact object {"$f64": "<C99 hex float>"} (e.g. 1.5 -> {"$f64":"0x1.8p+0"}),
/// so that no decimal rounding enters a digest. Non-finite floats are rejected (non_finite). Objects
/// that already use the reserved key "$f64" are rejected as ambiguous. Digests are SHA-256 over a
/// domain string, one 0x00 byte, and the canonical text, so digests of different domains never collide.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "pact/core/error.hpp"

namespace pact {

using Json = nlohmann::json;

/// Deepest nesting of arrays and objects accepted by parse_json and canonical_json.
inline constexpr int kMaxJsonDepth = 256;
/// Longest JSON text parse_json accepts (docs/limits.md): the parsed document costs about twenty times
/// its text, so a limit on the text bounds the memory before it is spent.
inline constexpr std::size_t kMaxJsonTextBytes = 64u << 20;

/// Parses JSON text; malformed input (including nesting deeper than kMaxJsonDepth) throws
/// pact::Error(parse_error) naming `where` and the byte offset.
Json parse_json(std::string_view text, std::string_view where);

/// A JSON integer as int64, or nullopt for anything else: a float, a non-number, or an unsigned value above
/// INT64_MAX (which nlohmann's get<std::int64_t>() would silently wrap, 2^64 - 1 becoming -1).
inline std::optional<std::int64_t> json_int64(const Json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  return std::nullopt;
}

/// The canonical serialization (see Note [Canonical JSON]).
std::string canonical_json(const Json& value);

/// SHA-256 of bytes.
std::array<std::uint8_t, 32> sha256(std::span<const std::byte> bytes);
/// SHA-256 of text, lowercase hex.
std::string sha256_hex(std::string_view text);
/// Lowercase hex of a digest.
std::string to_hex(std::span<const std::uint8_t> digest);
/// "sha256:<hex>" of raw bytes (the form digest_json returns, without a domain): file and artifact digests.
std::string sha256_digest(std::span<const std::byte> bytes);

/// Incremental SHA-256 (OpenSSL EVP).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  /// Absorbs bytes.
  void update(std::span<const std::byte> bytes);
  void update(std::string_view text);
  /// Finishes and returns the digest; the object may not be updated afterwards.
  std::array<std::uint8_t, 32> finish();

 private:
  void* ctx_;
};

/// "sha256:<hex>" of domain || 0x00 || canonical_json(value).
std::string digest_json(std::string_view domain, const Json& value);

}  // namespace pact
