#include "pact/core/json.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cmath>
#include <cstdio>

#include "pact/core/error.hpp"

namespace pact {

Json parse_json(std::string_view text, std::string_view where) {
  // Bound nesting before parsing, so that no recursive consumer (destruction, canonicalisation) can
  // exhaust the stack on hostile input.
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw_error(ErrorCode::parse_error, "json.parse",
                    fmt::format("{}: byte {}: nesting deeper than {}", where, i, kMaxJsonDepth));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    throw_error(ErrorCode::parse_error, "json.parse", fmt::format("{}: byte {}: {}", where, e.byte, e.what()));
  } catch (const Json::exception& e) {  // e.g. out_of_range 406: a number overflows a double
    throw_error(ErrorCode::parse_error, "json.parse", fmt::format("{}: {}", where, e.what()));
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
