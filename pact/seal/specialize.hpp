#pragma once
/// Specialization of device plans (SPEC §11, seed 002 "Manifest execution model"): a plan variant
/// applies when every one of its exact-equality predicates holds for the live call. Variants may overlap
/// only as a strict fallback chain — whenever two variants can both apply, one's predicates are a strict
/// subset of the other's — and at run time the unique most specific matching variant is chosen. An
/// ambiguous choice or no matching variant is an error, never a reason to run anything else.

#include <span>
#include <string>
#include <vector>

#include "pact/seal/expr.hpp"

namespace pact::seal {

/// `expr == value`. Two predicates are the same when their expressions' texts agree ignoring whitespace.
struct Predicate {
  Expr expr;
  std::int64_t value;
  /// The expression text without whitespace (the predicate's key).
  std::string key() const;
};

struct Specialization {
  std::string plan;             ///< the device plan this variant selects
  std::vector<Predicate> when;  ///< all must hold; empty = the unconditional fallback
};

/// Admission of a variant set: unique plan names, no key twice within a variant, no two variants with
/// the same predicate set, and every pair that can apply together nested strictly (a fallback chain).
/// invalid_argument naming the variants otherwise.
void check_specializations(std::span<const Specialization> variants);

/// The unique most specific variant whose predicates all hold; invalid_argument when none matches or the
/// choice is ambiguous. Expression errors propagate typed.
const Specialization& select_specialization(std::span<const Specialization> variants, const CallData& call);

}  // namespace pact::seal
