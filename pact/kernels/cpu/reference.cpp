// The reference provider (numerical policy fixedLeft): the generic kernels compiled single-threaded with
// -ffp-contract=off and no fast-math (see CMakeLists.txt), so every reduction is a left fold in index
// order and results are bitwise reproducible across runs and thread counts.

#include <algorithm>
#include <cmath>
#include <limits>

#include "pact/verify/annotate.hpp"
#include "pact/kernels/cpu/common.hpp"
#include "pact/kernels/cpu/handler_table.hpp"
#include "pact/kernels/kernel.hpp"

#if defined(__FAST_MATH__)
#error "the reference provider must not be compiled with fast-math"
#endif

namespace pact::kernels::cpu::reference {
#include "pact/kernels/cpu/generic_kernels.inc"
}  // namespace pact::kernels::cpu::reference

// The contracts these kernels implement (contracts/*.yaml); checked against contracts/binding.yaml at build time.
PACT_CONTRACT("softmax-kernel-v1", "softmax");
PACT_CONTRACT("log-softmax-kernel-v1", "log_softmax");
PACT_CONTRACT("cross-entropy-kernel-v1", "cross_entropy");
PACT_CONTRACT("layernorm-kernel-v1", "layer_norm");
PACT_CONTRACT("rmsnorm-kernel-v1", "rms_norm");
PACT_CONTRACT("matmul-kernel-v1", "matmul");
PACT_CONTRACT("attention-kernel-v1", "attention");
PACT_CONTRACT("gelu-kernel-v1", "gelu");
PACT_CONTRACT("conv2d-kernel-v1", "conv2d");

namespace pact::kernels {

std::span<const Handler> reference_handlers() {
  static const Handler table[] = {PACT_CPU_HANDLERS(reference, "pact/kernels/cpu/reference.cpp")};
  return table;
}

}  // namespace pact::kernels
