#pragma once
/// Reading TOML tables with an exact key set (SPEC §3: toml++ for the obligations ledger and the sealed
/// manifest). The one reader both use; each says what a schema fault becomes through a TomlFaults sink:
/// the ledger collects diagnostics and goes on, the sealed manifest throws at the first fault.
///
/// Header-only: a target that includes it links tomlplusplus::tomlplusplus itself.

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/error.hpp"

namespace pact {

/// Where schema faults go. `table` is the dotted path of the table, `field` the key.
class TomlFaults {
 public:
  virtual ~TomlFaults() = default;
  virtual void unknown_field(const std::string& table, std::string_view field) = 0;
  virtual void missing_field(const std::string& table, std::string_view field) = 0;
  virtual void wrong_type(const std::string& table, std::string_view field, std::string_view expected) = 0;
  virtual void too_many(const std::string& table, std::string_view field, std::size_t count, std::size_t max) = 0;
};

/// Faults that throw at the first one, naming the field path ("<table>.<field>: <why>") under `site`:
/// parse_error for an unknown, missing or mistyped field, invalid_argument for too many entries.
class ThrowingTomlFaults final : public TomlFaults {
 public:
  explicit ThrowingTomlFaults(std::string site) : site_(std::move(site)) {}
  void unknown_field(const std::string& table, std::string_view field) override {
    fail(ErrorCode::parse_error, table, field, "unknown field");
  }
  void missing_field(const std::string& table, std::string_view field) override {
    fail(ErrorCode::parse_error, table, field, "missing");
  }
  void wrong_type(const std::string& table, std::string_view field, std::string_view expected) override {
    fail(ErrorCode::parse_error, table, field, fmt::format("expected {}", expected));
  }
  void too_many(const std::string& table, std::string_view field, std::size_t count, std::size_t max) override {
    fail(ErrorCode::invalid_argument, table, field, fmt::format("{} entries; at most {}", count, max));
  }

 private:
  [[noreturn]] void fail(ErrorCode code, const std::string& table, std::string_view field,
                         const std::string& why) const {
    throw_error(code, site_, fmt::format("{}.{}: {}", table, field, why));
  }
  std::string site_;
};

/// One table. Accessors return nullopt (after reporting) when a value is absent or mistyped.
class TomlTable {
 public:
  TomlTable(const toml::table& t, std::string path, TomlFaults& faults)
      : t_(&t), path_(std::move(path)), faults_(&faults) {}

  const std::string& path() const noexcept { return path_; }
  std::string at(std::string_view key) const { return path_ + "." + std::string(key); }
  const toml::table& raw() const noexcept { return *t_; }
  TomlFaults& faults() const noexcept { return *faults_; }
  bool has(std::string_view key) const { return t_->contains(key); }
  const toml::node* node(std::string_view key) const { return t_->get(key); }

  /// Reports every key outside required ∪ optional, then every missing required key.
  void keys(std::initializer_list<std::string_view> required,
            std::initializer_list<std::string_view> optional = {}) const {
    for (auto&& [k, v] : *t_) {
      const std::string_view key = k.str();
      if (std::find(required.begin(), required.end(), key) == required.end() &&
          std::find(optional.begin(), optional.end(), key) == optional.end()) {
        faults_->unknown_field(path_, key);
      }
    }
    for (auto key : required) {
      if (!t_->contains(key)) faults_->missing_field(path_, key);
    }
  }
  /// A non-empty string (absent: nullopt without a report).
  std::optional<std::string> str(std::string_view key) const {
    const toml::node* n = t_->get(key);
    if (n == nullptr) return std::nullopt;
    const auto* s = n->as_string();
    if (s == nullptr || s->get().empty()) {
      faults_->wrong_type(path_, key, "non-empty string");
      return std::nullopt;
    }
    return s->get();
  }
  std::optional<std::int64_t> integer(std::string_view key) const {
    const toml::node* n = t_->get(key);
    if (n == nullptr) return std::nullopt;
    if (const auto* i = n->as_integer()) return i->get();
    faults_->wrong_type(path_, key, "integer");
    return std::nullopt;
  }
  /// An array of at most `max` entries (absent: nullptr without a report).
  const toml::array* array(std::string_view key, std::size_t max) const {
    const toml::node* n = t_->get(key);
    if (n == nullptr) return nullptr;
    const auto* a = n->as_array();
    if (a == nullptr) {
      faults_->wrong_type(path_, key, "array");
      return nullptr;
    }
    if (a->size() > max) {
      faults_->too_many(path_, key, a->size(), max);
      return nullptr;
    }
    return a;
  }
  /// Strings (non-empty each); `non_empty` also requires at least one.
  std::optional<std::vector<std::string>> strings(std::string_view key, bool non_empty,
                                                  std::size_t max = 1u << 20) const {
    const toml::node* n = t_->get(key);
    if (n == nullptr) return std::nullopt;
    const auto* a = n->as_array();
    std::vector<std::string> out;
    bool ok = a != nullptr && (!non_empty || !a->empty());
    if (ok) {
      for (const auto& e : *a) {
        const auto* s = e.as_string();
        if (s == nullptr || s->get().empty()) {
          ok = false;
          break;
        }
        out.push_back(s->get());
      }
    }
    if (!ok) {
      faults_->wrong_type(path_, key, non_empty ? "non-empty array of strings" : "array of strings");
      return std::nullopt;
    }
    if (out.size() > max) {
      faults_->too_many(path_, key, out.size(), max);
      return std::nullopt;
    }
    return out;
  }
  std::optional<std::vector<std::int64_t>> integers(std::string_view key) const {
    const toml::node* n = t_->get(key);
    if (n == nullptr) return std::nullopt;
    const auto* a = n->as_array();
    std::vector<std::int64_t> out;
    bool ok = a != nullptr;
    if (ok) {
      for (const auto& e : *a) {
        const auto* i = e.as_integer();
        if (i == nullptr) {
          ok = false;
          break;
        }
        out.push_back(i->get());
      }
    }
    if (!ok) {
      faults_->wrong_type(path_, key, "array of integers");
      return std::nullopt;
    }
    return out;
  }
  std::optional<TomlTable> table(std::string_view key) const {
    const toml::node* n = t_->get(key);
    if (n == nullptr) return std::nullopt;
    if (const auto* t = n->as_table()) return TomlTable(*t, at(key), *faults_);
    faults_->wrong_type(path_, key, "table");
    return std::nullopt;
  }
  /// The tables of an array of tables, at most `max` (absent: empty, reported missing when required).
  std::vector<TomlTable> tables(std::string_view key, bool required_non_empty, std::size_t max = 1u << 20) const {
    std::vector<TomlTable> out;
    const toml::node* n = t_->get(key);
    if (n == nullptr) {
      if (required_non_empty) faults_->missing_field(path_, key);
      return out;
    }
    const auto* a = n->as_array();
    if (a == nullptr || (required_non_empty && a->empty())) {
      faults_->wrong_type(path_, key, required_non_empty ? "non-empty array of tables" : "array of tables");
      return out;
    }
    if (a->size() > max) {
      faults_->too_many(path_, key, a->size(), max);
      return out;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto* t = (*a)[i].as_table();
      if (t == nullptr) {
        faults_->wrong_type(path_, key, "array of tables");
        return {};
      }
      out.emplace_back(*t, at(key) + "[" + std::to_string(i) + "]", *faults_);
    }
    return out;
  }

 private:
  const toml::table* t_;
  std::string path_;
  TomlFaults* faults_;
};

}  // namespace pact
