#include "pact/ops/attributes.hpp"

#include <fmt/format.h>

namespace pact::ops {

std::string_view attr_type_name(AttrType type) noexcept {
  switch (type) {
    case AttrType::i64:
      return "i64";
    case AttrType::i64_list:
      return "i64_list";
    case AttrType::f64:
      return "f64";
    case AttrType::boolean:
      return "bool";
    case AttrType::string:
      return "string";
  }
  return "unknown";
}

AttrType attr_type_of(const AttrValue& value) noexcept { return static_cast<AttrType>(value.index()); }

Attributes& Attributes::set(std::string name, AttrValue value) {
  values_.insert_or_assign(std::move(name), std::move(value));
  return *this;
}

bool Attributes::has(std::string_view name) const { return values_.find(name) != values_.end(); }

const AttrValue* Attributes::find(std::string_view op, std::string_view name, AttrType type, bool required) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    if (required) {
      throw_error(ErrorCode::invalid_argument, std::string(op), fmt::format("missing attribute '{}'", name));
    }
    return nullptr;
  }
  if (attr_type_of(it->second) != type) {
    // An integer where a float is expected is accepted and widened by get_float.
    if (!(type == AttrType::f64 && attr_type_of(it->second) == AttrType::i64)) {
      throw_error(ErrorCode::invalid_argument, std::string(op),
                  fmt::format("attribute '{}' is {}, expected {}", name, attr_type_name(attr_type_of(it->second)),
                              attr_type_name(type)));
    }
  }
  return &it->second;
}

std::int64_t Attributes::get_int(std::string_view op, std::string_view name,
                                 std::optional<std::int64_t> fallback) const {
  const AttrValue* v = find(op, name, AttrType::i64, !fallback);
  return v ? std::get<std::int64_t>(*v) : *fallback;
}

std::vector<std::int64_t> Attributes::get_ints(std::string_view op, std::string_view name,
                                               std::optional<std::vector<std::int64_t>> fallback) const {
  const AttrValue* v = find(op, name, AttrType::i64_list, !fallback);
  return v ? std::get<std::vector<std::int64_t>>(*v) : *fallback;
}

double Attributes::get_float(std::string_view op, std::string_view name, std::optional<double> fallback) const {
  const AttrValue* v = find(op, name, AttrType::f64, !fallback);
  if (!v) return *fallback;
  if (auto* i = std::get_if<std::int64_t>(v)) return static_cast<double>(*i);
  return std::get<double>(*v);
}

std::optional<double> Attributes::get_optional_float(std::string_view op, std::string_view name) const {
  const AttrValue* v = find(op, name, AttrType::f64, false);
  if (!v) return std::nullopt;
  if (auto* i = std::get_if<std::int64_t>(v)) return static_cast<double>(*i);
  return std::get<double>(*v);
}

bool Attributes::get_bool(std::string_view op, std::string_view name, std::optional<bool> fallback) const {
  const AttrValue* v = find(op, name, AttrType::boolean, !fallback);
  return v ? std::get<bool>(*v) : *fallback;
}

std::string Attributes::get_string(std::string_view op, std::string_view name,
                                   std::optional<std::string> fallback) const {
  const AttrValue* v = find(op, name, AttrType::string, !fallback);
  return v ? std::get<std::string>(*v) : *fallback;
}

}  // namespace pact::ops
