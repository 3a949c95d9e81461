// The reference provider (numerical policy fixedLeft): the generic kernels compiled single-threaded with
// -ffp-contract=off and no fast-math (see CMakeLists.txt), so every reduction is a left fold in index
// order and results are bitwise reproducible across runs and thread counts.

#include <algorithm>
#include <cmath>
#include <limits>

#include "pact/kernels/cpu/common.hpp"
#include "pact/kernels/cpu/handler_table.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/kernels/ranks.hpp"

#if defined(__FAST_MATH__)
#error "the reference provider must not be compiled with fast-math"
#endif

namespace pact::kernels::cpu::reference {
#include "pact/kernels/cpu/generic_kernels.inc"
}  // namespace pact::kernels::cpu::reference

namespace pact::kernels {

std::span<const Handler> reference_handlers() {
#define PACT_CPU_NS reference
#define PACT_CPU_FILE "pact/kernels/cpu/reference.cpp"
  static const Handler table[] = {PACT_CPU_HANDLERS()};
#undef PACT_CPU_FILE
#undef PACT_CPU_NS
  return table;
}

}  // namespace pact::kernels
