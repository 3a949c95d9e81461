#pragma once
/// The graph executor (SPEC §8): runs an AcceptedGraphPlan through its bound kernels, releasing each
/// value after its last use (liveness) and reporting peak live bytes. With a tape it records each node's
/// forward value and VJP exactly as the eager session does, so backward is the tape's one implementation.
/// It is the one executor: submission (a later issue) wraps it.

#include <map>
#include <string>

#include "pact/plan/planner.hpp"
#include "pact/runtime/tape.hpp"

namespace pact::runtime {

struct ExecutionResult {
  std::map<std::string, EagerTensor> outputs;
  std::uint64_t peak_bytes = 0;  ///< largest sum of live values the executor held at once
};

/// Runs `plan`. `bindings` maps every source node id to its value (tracked leaves for parameters that
/// want gradients). With `tape`, ops whose inputs require gradients are recorded on it.
ExecutionResult execute(const plan::AcceptedGraphPlan& plan, const std::map<std::string, EagerTensor>& bindings,
                        Tape* tape = nullptr, const kernels::KernelContext& ctx = {});

}  // namespace pact::runtime
