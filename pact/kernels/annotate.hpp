#pragma once
/// PACT_CONTRACT("softmax-kernel-v1", "softmax"): marks a kernel as implementing a contract equation.
/// The annotation is checked when the project builds: the build generates pact_contract_bindings.hpp
/// from contracts/binding.yaml (tools/contract_bindgen), and under the AllImplemented policy an
/// annotation without an implemented binding, and not on the allowed-gaps list, is a compile error. A
/// consumer that builds without the contracts folder has no generated header: annotations compile
/// unchecked (CMake says so once, at configure time).

#include <string_view>

#if __has_include("pact_contract_bindings.hpp")
#include "pact_contract_bindings.hpp"
#define PACT_CONTRACTS_CHECKED 1
#else
#define PACT_CONTRACTS_CHECKED 0
#endif

namespace pact::contracts {

/// True when the annotation is admitted: an implemented binding or an allowed gap (always true unchecked).
consteval bool admitted(std::string_view contract, std::string_view equation) {
#if PACT_CONTRACTS_CHECKED
  for (const auto& [c, e] : generated::kAdmitted) {
    if (!c.empty() && c == contract && e == equation) return true;
  }
  return false;
#else
  (void)contract;
  (void)equation;
  return true;
#endif
}

}  // namespace pact::contracts

#define PACT_CONTRACT(contract, equation)                              \
  static_assert(::pact::contracts::admitted(contract, equation),       \
                "PACT_CONTRACT(" contract ", " equation                \
                "): no implemented binding in contracts/binding.yaml " \
                "(policy AllImplemented) and not an allowed gap")
