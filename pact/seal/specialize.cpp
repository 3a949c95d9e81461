#include "pact/seal/specialize.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace pact::seal {

std::string Predicate::key() const {
  std::string k;
  for (char c : expr.text()) {
    if (!std::isspace(static_cast<unsigned char>(c))) k += c;
  }
  return k;
}

namespace {

using PredicateSet = std::map<std::string, std::int64_t>;

PredicateSet set_of(const Specialization& s) {
  PredicateSet set;
  for (const auto& p : s.when) {
    if (!set.emplace(p.key(), p.value).second) {
      throw_error(ErrorCode::invalid_argument, "seal.specialize",
                  fmt::format("variant '{}' tests '{}' twice", s.plan, p.key()));
    }
  }
  return set;
}

// True when some call can satisfy both sets: no key with two different values.
bool can_overlap(const PredicateSet& a, const PredicateSet& b) {
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it != b.end() && it->second != v) return false;
  }
  return true;
}

// True when `a` is a strict subset of `b`.
bool strict_subset(const PredicateSet& a, const PredicateSet& b) {
  if (a.size() >= b.size()) return false;
  return std::all_of(a.begin(), a.end(), [&](const auto& kv) {
    auto it = b.find(kv.first);
    return it != b.end() && it->second == kv.second;
  });
}

}  // namespace

void check_specializations(std::span<const Specialization> variants) {
  std::set<std::string> names;
  std::vector<PredicateSet> sets;
  for (const auto& v : variants) {
    if (!names.insert(v.plan).second)
      throw_error(ErrorCode::invalid_argument, "seal.specialize",
                  fmt::format("plan '{}' is specialized twice", v.plan));
    sets.push_back(set_of(v));
  }
  for (std::size_t i = 0; i < variants.size(); ++i) {
    for (std::size_t j = i + 1; j < variants.size(); ++j) {
      if (sets[i] == sets[j]) {
        throw_error(ErrorCode::invalid_argument, "seal.specialize",
                    fmt::format("variants '{}' and '{}' have the same predicates: the choice would be ambiguous",
                                variants[i].plan, variants[j].plan));
      }
      if (can_overlap(sets[i], sets[j]) && !strict_subset(sets[i], sets[j]) && !strict_subset(sets[j], sets[i])) {
        throw_error(ErrorCode::invalid_argument, "seal.specialize",
                    fmt::format("variants '{}' and '{}' overlap without one being a strict fallback of the other",
                                variants[i].plan, variants[j].plan));
      }
    }
  }
}

const Specialization& select_specialization(std::span<const Specialization> variants, const CallData& call) {
  std::vector<std::size_t> matching;
  std::vector<PredicateSet> sets;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    sets.push_back(set_of(variants[i]));
    const bool all = std::all_of(variants[i].when.begin(), variants[i].when.end(),
                                 [&](const Predicate& p) { return p.expr.eval(call) == p.value; });
    if (all) matching.push_back(i);
  }
  if (matching.empty())
    throw_error(ErrorCode::invalid_argument, "seal.specialize", "no specialization matches the call");
  for (std::size_t i : matching) {
    const bool most_specific = std::all_of(matching.begin(), matching.end(),
                                           [&](std::size_t j) { return j == i || strict_subset(sets[j], sets[i]); });
    if (most_specific) return variants[i];
  }
  std::string names;
  for (std::size_t i : matching) names += (names.empty() ? "" : ", ") + variants[i].plan;
  throw_error(ErrorCode::invalid_argument, "seal.specialize",
              fmt::format("the call matches {} with no unique most specific one", names));
}

}  // namespace pact::seal
