#include "pact/core/json.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cmath>
#include <cstdio>

#include "pact/core/cpu.hpp"
#include "pact/core/error.hpp"

namespace pact {

Json parse_json(std::string_view text, std::string_view where) {
  if (text.size() > kMaxJsonTextBytes) {
    throw_error(
        ErrorCode::parse_error, "json.parse",
        fmt::format("{}: {} bytes of JSON; the limit is {} (docs/limits.md)", where, text.size(), kMaxJsonTextBytes));
  }
  // Bound nesting before parsing, so that no recursive consumer (destruction, canonicalisation) can
  // exhaust the stack on hostile input.
  // The same pass counts values and members, for an estimate of what the parsed document will cost.
  int depth = 0;
  bool in_string = false;
  std::uint64_t values = 1, members = 0, string_bytes = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      ++string_bytes;
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      ++values;
      if (++depth > kMaxJsonDepth) {
        throw_error(ErrorCode::parse_error, "json.parse",
                    fmt::format("{}: byte {}: nesting deeper than {}", where, i, kMaxJsonDepth));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',') {
      ++values;
    } else if (c == ':') {
      ++members;
    }
  }
  // nlohmann's document: 16 bytes a value, doubled by vector growth, plus a map node and a key per
  // member, plus the strings. A document the host cannot hold is refused now: once memory runs out
  // mid-parse, even destroying the partial document allocates, and the process would abort.
  const std::uint64_t estimate = 40 * values + 96 * members + 2 * string_bytes;
  if (estimate > (std::uint64_t{64} << 20) && estimate > host_memory_budget()) {
    throw_error(ErrorCode::out_of_memory, "json.parse",
                fmt::format("{}: parsing {} bytes of JSON needs about {} bytes; this process can allocate {} "
                            "(docs/limits.md)",
                            where, text.size(), estimate, host_memory_budget()));
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    throw_error(ErrorCode::parse_error, "json.parse", fmt::format("{}: byte {}: {}", where, e.byte, e.what()));
  } catch (const Json::exception& e) {  // e.g. out_of_range 406: a number overflows a double
    throw_error(ErrorCode::parse_error, "json.parse", fmt::format("{}: {}", where, e.what()));
  } catch (const std::bad_alloc&) {
    throw_error(ErrorCode::out_of_memory, "json.parse",
                fmt::format("{}: the host ran out of memory parsing {} bytes of JSON", where, text.size()));
  }
}

namespace {

void write_canonical(const Json& v, std::string& out, int depth) {
  if (depth > kMaxJsonDepth) {
    throw_error(ErrorCode::invalid_argument, "json.canonical", fmt::format("nesting deeper than {}", kMaxJsonDepth));
  }
  switch (v.type()) {
    case Json::value_t::object: {
      if (v.contains("$f64")) {
        throw_error(ErrorCode::invalid_argument, "json.canonical", "object uses the reserved key \"$f64\"");
      }
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {  // nlohmann's object is a std::map: byte-sorted keys
        if (!first) out.push_back(',');
        first = false;
        write_canonical(Json(key), out, depth + 1);
        out.push_back(':');
        write_canonical(item, out, depth + 1);
      }
      out.push_back('}');
      return;
    }
    case Json::value_t::array: {
      out.push_back('[');
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out.push_back(',');
        write_canonical(v[i], out, depth + 1);
      }
      out.push_back(']');
      return;
    }
    case Json::value_t::number_float: {
      double d = v.get<double>();
      if (!std::isfinite(d)) throw_error(ErrorCode::non_finite, "json.canonical", "non-finite number");
      char buf[64];
      std::snprintf(buf, sizeof buf, "%a", d);
      out += "{\"$f64\":\"";
      out += buf;
      out += "\"}";
      return;
    }
    case Json::value_t::string:
      try {
        out += v.dump(-1, ' ', false, Json::error_handler_t::strict);
      } catch (const Json::type_error& e) {
        throw_error(ErrorCode::invalid_argument, "json.canonical", fmt::format("invalid UTF-8: {}", e.what()));
      }
      return;
    case Json::value_t::discarded:
    case Json::value_t::binary:
      throw_error(ErrorCode::invalid_argument, "json.canonical", "binary or discarded values have no canonical form");
    default:
      out += v.dump();  // null, bool, integers
      return;
  }
}

}  // namespace

std::string canonical_json(const Json& value) {
  std::string out;
  write_canonical(value, out, 0);
  return out;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1) {
    throw_error(ErrorCode::unsupported, "sha256", "OpenSSL could not initialise SHA-256");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(std::span<const std::byte> bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size());
}

void Sha256::update(std::string_view text) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), text.data(), text.size());
}

std::array<std::uint8_t, 32> Sha256::finish() {
  std::array<std::uint8_t, 32> digest{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest.data(), &n);
  return digest;
}

std::array<std::uint8_t, 32> sha256(std::span<const std::byte> bytes) {
  Sha256 h;
  h.update(bytes);
  return h.finish();
}

std::string to_hex(std::span<const std::uint8_t> digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(digest.size() * 2);
  for (auto b : digest) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

std::string sha256_digest(std::span<const std::byte> bytes) { return "sha256:" + to_hex(sha256(bytes)); }

std::string sha256_hex(std::string_view text) {
  Sha256 h;
  h.update(text);
  return to_hex(h.finish());
}

std::string digest_json(std::string_view domain, const Json& value) {
  Sha256 h;
  h.update(domain);
  const std::byte zero{0};
  h.update(std::span<const std::byte>(&zero, 1));
  h.update(canonical_json(value));
  return "sha256:" + to_hex(h.finish());
}

}  // namespace pact
