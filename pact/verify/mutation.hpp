#pragma once
/// The run-time switch of the mutant schemata (tools/mutate.py, issue 20 item 5): every mutated site of the
/// rewritten kernel sources reads `::pact_mut(ID) ? (MUTATED) : (ORIGINAL)`. pact_mut records that site ID
/// was reached (when a record is attached) and says whether mutant ID is the active one. Only the mutation
/// gate's build (pact_mutation_gate) includes this header; the library's kernels are never rewritten.

#include <cstdint>

namespace pact::mutation {
/// The active mutant (0: none).
inline int active = 0;
/// One byte per mutant id, set to 1 when its site is evaluated; nullptr: not recorded.
inline volatile std::uint8_t* reached = nullptr;
}  // namespace pact::mutation

inline bool pact_mut(int id) noexcept {
  if (pact::mutation::reached != nullptr) pact::mutation::reached[id] = 1;
  return id == pact::mutation::active;
}
