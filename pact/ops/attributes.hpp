#pragma once
/// Op attributes: a small typed map read by shape rules, FLOP rules and kernels.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "pact/core/error.hpp"

namespace pact::ops {

/// The attribute types of the v1 schema.
enum class AttrType : std::uint8_t { i64, i64_list, f64, boolean, string };

/// "i64", "i64_list", "f64", "bool", "string".
std::string_view attr_type_name(AttrType type) noexcept;

using AttrValue = std::variant<std::int64_t, std::vector<std::int64_t>, double, bool, std::string>;

/// The type of a value.
AttrType attr_type_of(const AttrValue& value) noexcept;

/// One attribute of an op's schema.
struct AttrSpec {
  std::string_view name;
  AttrType type;
  bool required = false;
};

/// Named attribute values. Typed getters throw invalid_argument naming the op and attribute.
class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<const std::string, AttrValue>> values) : values_(values) {}

  /// Sets a value.
  Attributes& set(std::string name, AttrValue value);
  /// True when present.
  bool has(std::string_view name) const;
  /// All values, sorted by name.
  const std::map<std::string, AttrValue, std::less<>>& values() const noexcept { return values_; }

  std::int64_t get_int(std::string_view op, std::string_view name, std::optional<std::int64_t> fallback = {}) const;
  std::vector<std::int64_t> get_ints(std::string_view op, std::string_view name,
                                     std::optional<std::vector<std::int64_t>> fallback = {}) const;
  double get_float(std::string_view op, std::string_view name, std::optional<double> fallback = {}) const;
  /// An f64 attribute that may be absent (e.g. clamp's min).
  std::optional<double> get_optional_float(std::string_view op, std::string_view name) const;
  bool get_bool(std::string_view op, std::string_view name, std::optional<bool> fallback = {}) const;
  std::string get_string(std::string_view op, std::string_view name, std::optional<std::string> fallback = {}) const;

 private:
  const AttrValue* find(std::string_view op, std::string_view name, AttrType type, bool required) const;
  std::map<std::string, AttrValue, std::less<>> values_;
};

}  // namespace pact::ops
