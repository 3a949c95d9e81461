#pragma once
/// The graph interpreter (SPEC §8; Note [One interpreter]): runs an AcceptedGraphPlan through the kernels
/// its admission bound, releasing each value after its last use (liveness) and reporting peak live bytes.
/// With a session, every node runs through Session::run_admitted (its tape, kernel seeds, training mode
/// and observer) and checkpoint regions run through Session::checkpoint, so training, checkpointing,
/// imported-model runs and submission all interpret a graph here and nowhere else.

#include <map>
#include <string>
#include <vector>

#include "pact/plan/planner.hpp"
#include "pact/runtime/tape.hpp"

namespace pact::runtime {

class Session;

struct ExecutionResult {
  std::map<std::string, EagerTensor> outputs;
  std::uint64_t peak_bytes = 0;  ///< largest sum of live values the executor held at once
  /// Training mode with a training plan: the new running statistics of each batch_norm node, by the id of
  /// the source they were read from, computed by the plan's batch_norm_stats kernel from the node's own
  /// input (Note [Training kernels]). The caller stores them back.
  std::map<std::string, Tensor> running_stats;
};

/// How execute runs a plan.
struct ExecutionOptions {
  /// Runs every node through this session: recorded on its tape when gradients are enabled and an input
  /// requires them, seeded from it. Null: forward only, seeded from `context`, nothing recorded.
  Session* session = nullptr;
  /// Training mode and base seed when there is no session.
  kernels::KernelContext context;
  /// Checkpoint regions (needs a session): each a run of consecutive op nodes whose values are used after
  /// it through exactly one node, the region's output. Their interiors are released after forward use and
  /// recomputed in backward with the same kernels and seeds. A region that breaks these rules is
  /// invalid_argument naming it.
  std::vector<std::vector<std::string>> checkpoint_regions;
  /// When set, each op node's wall time in seconds is added to the entry of its position in the graph
  /// (the vector is resized to the graph's nodes when shorter; a checkpoint region's time goes to its
  /// first node). `pact run --time-nodes` reads it.
  std::vector<double>* node_seconds = nullptr;
};

/// Runs `plan`. `bindings` maps every source node id to its value (tracked leaves for parameters that
/// want gradients); a missing or mistyped binding is invalid_argument naming the node. A value whose only
/// handle is moved in is donated: an in-place kernel may write its result into it (Note [Donated operands]
/// in executor.cpp: a KV cache updated by index_copy).
ExecutionResult execute(const plan::AcceptedGraphPlan& plan, std::map<std::string, EagerTensor> bindings,
                        const ExecutionOptions& options = {});

}  // namespace pact::runtime
