#pragma once
// The handler rows of the CPU providers, generated from the op table. PACT_CPU_HANDLER(ns, file, op, vjp) names
// the forward and VJP functions `op_forward` / `op_vjp` of namespace pact::kernels::cpu::<ns> (no VJP
// function, and a null vjp, for an op whose table row has none);
// Each row's in-place function is `in_place_kernel(op)` of the provider's namespace (nullptr for most ops).
// PACT_CPU_HANDLERS() makes one row per kernel, view and update op of PACT_OPS (sources and sinks execute no
// kernel and have none) for the provider named by PACT_CPU_NS and PACT_CPU_FILE, which the including file
// defines. A provider that lacks a kernel or view op's functions fails to compile.

#include "pact/kernels/kernel.hpp"

// clang-format off
#define PACT_CPU_VJP_true(ns, opname) &::pact::kernels::cpu::ns::opname##_vjp
#define PACT_CPU_VJP_false(ns, opname) nullptr
#define PACT_CPU_VJP_nograd(ns, opname) nullptr
#define PACT_CPU_HANDLER(ns, file, opname, vjp)                                                             \
  ::pact::kernels::Handler{::pact::ops::OpTag::opname,                                                      \
                           #ns,                                                                             \
                           ::pact::DeviceKind::cpu,                                                         \
                           &::pact::kernels::cpu::ns::opname##_forward,                                     \
                           PACT_CPU_VJP_##vjp(ns, opname),                                                  \
                           file,                                                                            \
                           "pact::kernels::cpu::" #ns "::" #opname "_forward",                           \
                           nullptr,                                                                         \
                           ::pact::kernels::cpu::ns::in_place_kernel(::pact::ops::OpTag::opname)},

// An update op's row names its in-place function `op_update` (forward and VJP null).
#define PACT_CPU_UPDATE_HANDLER(ns, file, opname)                                                           \
  ::pact::kernels::Handler{::pact::ops::OpTag::opname,                                                      \
                           #ns,                                                                             \
                           ::pact::DeviceKind::cpu,                                                         \
                           nullptr,                                                                         \
                           nullptr,                                                                         \
                           file,                                                                            \
                           "pact::kernels::cpu::" #ns "::" #opname "_update",                               \
                           &::pact::kernels::cpu::ns::opname##_update},

// One row per op-table role: kernels, views and updates get a handler row, sources and sinks none.
#define PACT_CPU_HANDLER_kernel(ns, file, opname, vjp) PACT_CPU_HANDLER(ns, file, opname, vjp)
#define PACT_CPU_HANDLER_view(ns, file, opname, vjp) PACT_CPU_HANDLER(ns, file, opname, vjp)
#define PACT_CPU_HANDLER_source(ns, file, opname, vjp)
#define PACT_CPU_HANDLER_sink(ns, file, opname, vjp)
#define PACT_CPU_HANDLER_update(ns, file, opname, vjp) PACT_CPU_UPDATE_HANDLER(ns, file, opname)
#define PACT_CPU_HANDLER_collective(ns, file, opname, vjp)
#define PACT_CPU_HANDLER_ROW(tag, kind, lo, hi, vjp, mode, role, tol, saves, pass, roles) \
  PACT_CPU_HANDLER_##role(PACT_CPU_NS, PACT_CPU_FILE, tag, vjp)
#define PACT_CPU_HANDLERS() PACT_OPS(PACT_CPU_HANDLER_ROW)
// clang-format on
