#pragma once
// The handler rows of the CPU providers, written once. PACT_CPU_HANDLER(ns, file, op) names the forward
// and VJP functions `op_forward` / `op_vjp` of namespace pact::kernels::cpu::<ns>; PACT_CPU_HANDLERS lists
// every kernel and view op of the op table (sources and sinks execute no kernel and have no handler).

#include "pact/kernels/kernel.hpp"

// clang-format off
#define PACT_CPU_HANDLER(ns, file, opname)                                                                  \
  ::pact::kernels::Handler{::pact::ops::OpTag::opname,                                                      \
                           #ns,                                                                             \
                           ::pact::DeviceKind::cpu,                                                         \
                           &::pact::kernels::cpu::ns::opname##_forward,                                     \
                           &::pact::kernels::cpu::ns::opname##_vjp,                                         \
                           file,                                                                            \
                           "pact::kernels::cpu::" #ns "::" #opname "_forward"},

#define PACT_CPU_HANDLERS(ns, file)                                                                         \
  PACT_CPU_HANDLER(ns, file, add) PACT_CPU_HANDLER(ns, file, sub) PACT_CPU_HANDLER(ns, file, mul)           \
  PACT_CPU_HANDLER(ns, file, div) PACT_CPU_HANDLER(ns, file, neg) PACT_CPU_HANDLER(ns, file, matmul)        \
  PACT_CPU_HANDLER(ns, file, linear) PACT_CPU_HANDLER(ns, file, relu) PACT_CPU_HANDLER(ns, file, gelu)      \
  PACT_CPU_HANDLER(ns, file, silu) PACT_CPU_HANDLER(ns, file, tanh) PACT_CPU_HANDLER(ns, file, sigmoid)     \
  PACT_CPU_HANDLER(ns, file, clamp) PACT_CPU_HANDLER(ns, file, exp) PACT_CPU_HANDLER(ns, file, log)         \
  PACT_CPU_HANDLER(ns, file, sqrt) PACT_CPU_HANDLER(ns, file, softmax) PACT_CPU_HANDLER(ns, file, log_softmax) \
  PACT_CPU_HANDLER(ns, file, cross_entropy) PACT_CPU_HANDLER(ns, file, mse_loss)                           \
  PACT_CPU_HANDLER(ns, file, layer_norm) PACT_CPU_HANDLER(ns, file, rms_norm)                              \
  PACT_CPU_HANDLER(ns, file, batch_norm) PACT_CPU_HANDLER(ns, file, dropout)                               \
  PACT_CPU_HANDLER(ns, file, embedding) PACT_CPU_HANDLER(ns, file, scaled_dot_product_attention)           \
  PACT_CPU_HANDLER(ns, file, conv2d) PACT_CPU_HANDLER(ns, file, max_pool2d)                                \
  PACT_CPU_HANDLER(ns, file, avg_pool2d) PACT_CPU_HANDLER(ns, file, adaptive_avg_pool2d)                   \
  PACT_CPU_HANDLER(ns, file, reshape) PACT_CPU_HANDLER(ns, file, permute) PACT_CPU_HANDLER(ns, file, transpose) \
  PACT_CPU_HANDLER(ns, file, flatten) PACT_CPU_HANDLER(ns, file, concat) PACT_CPU_HANDLER(ns, file, slice)  \
  PACT_CPU_HANDLER(ns, file, sum) PACT_CPU_HANDLER(ns, file, mean) PACT_CPU_HANDLER(ns, file, max)
// clang-format on
