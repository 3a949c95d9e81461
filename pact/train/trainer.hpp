#pragma once
/// Training (SPEC §8, seed 000): an Objective (the loss program per batch size plus options), a
/// shape-indexed parameter pack (parameters and persistent buffers; differentiability flags decide which
/// get gradients), and a TrainingSession with step_batch, loss, predict and finish. The loss program runs
/// eagerly (runtime::Session, op by op) or as a planned graph (runtime::execute over an
/// AcceptedGraphPlan); both record on the same tape, so both give the same losses and gradients.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pact/kernels/ranks.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/runtime/session.hpp"
#include "pact/train/communicator.hpp"
#include "pact/train/optim.hpp"
#include "pact/train/reducer.hpp"

namespace pact::train {

struct TrainerOptions {
  std::string optimizer = "adam";  ///< sgd | adam | adamw
  double lr = 0.01;
  double momentum = 0.9;  ///< sgd
  double weight_decay = 0.0;
  Schedule schedule;
  std::uint64_t seed = 0;
  std::string profile = "cpu-checked";
};

/// The loss program: for a batch size, an IR graph with sources `input` (features) and `target`, and
/// outputs `logits` and `loss` (a scalar).
struct Objective {
  std::function<ir::Graph(std::int64_t batch)> graph;
  std::string input = "x";
  std::string target = "target";
  std::string logits = "logits";
  std::string loss = "loss";
  TrainerOptions options;
  /// Checkpoint regions of the loss program (runtime::ExecutionOptions's rules): their interior values are
  /// released after forward use and recomputed in backward.
  std::vector<std::vector<std::string>> checkpoint_regions;
};

/// Parameters and buffers in graph order, by name.
struct ParameterPack {
  std::vector<std::string> names;
  std::vector<Tensor> values;
  std::vector<bool> differentiable;
  std::vector<bool> buffer;
  std::int64_t count() const;  ///< total elements of differentiable parameters
};

/// PyTorch-style initialisation: weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)), biases with their weight's
/// fan-in, norm weights 1 and biases 0, running mean 0 and variance 1. Seeded.
ParameterPack init_parameters(const ir::Graph& graph, std::uint64_t seed);

/// The optimizer's state (seed 000: passed to each update and returned from it, never stored in the
/// session): the velocity (SGD with momentum) or the moments and step count (Adam, AdamW) of each parameter.
/// A fresh state starts the optimizer from zero; one returned by an update resumes it.
struct OptimizerState {
  SgdState sgd;
  AdamState adam;
};

/// What one update returns: the batch loss and the gradients (returned to the caller, by pack index).
struct StepResult {
  double loss = 0;
  std::vector<std::optional<Tensor>> gradients;
  /// Bytes the tape retained for backward when forward ended: the distinct values the VJPs read (each
  /// op's saves column; a checkpoint region only its boundary), from their allocations' sizes.
  std::uint64_t retained_bytes = 0;
  OptimizerState state;  ///< the optimizer state after this update
  /// Data-parallel updates: how the gradient reduction went (the loss is then the mean over the ranks).
  std::optional<ReductionTiming> reduction;
};

/// What steps(n) returns: each update's loss, the largest retained bytes, and the final optimizer state.
struct StepsResult {
  std::vector<double> losses;
  std::uint64_t retained_bytes_peak = 0;
  OptimizerState state;
};

/// The features and targets of the update numbered `step` (the session's step count when it is asked).
using BatchSource = std::function<std::pair<Tensor, Tensor>(std::int64_t step)>;

/// Under a profile whose device is cuda (cuda-checked) the session trains on the GPU: the parameters move to
/// the device when the session starts, each batch as it arrives, and optimizer state resumed from a
/// checkpoint before its first update; losses come back as numbers and predictions as host tensors.
/// parameters() and a step's gradients stay where the kernels wrote them (a checkpoint reads them back).
class TrainingSession {
 public:
  TrainingSession(Objective objective, ParameterPack parameters);

  /// One update on a batch in training mode, from optimizer state `state` (returned, updated, in the
  /// result); the step count counts updates only.
  StepResult step_batch(Tensor x, Tensor target, OptimizerState state);
  /// One update on the batch `next` supplies for the current step count.
  StepResult step(const BatchSource& next, OptimizerState state);
  /// `n` updates, each on the batch `next` supplies for its step count; the state flows from one to the
  /// next and the last is returned.
  StepsResult steps(std::int64_t n, const BatchSource& next, OptimizerState state);
  /// The loss on a batch in evaluation mode (no update, no tape).
  double loss(Tensor x, Tensor target);
  /// Evaluation-mode logits.
  Tensor predict(Tensor x);
  /// Updates made so far (the step count; predictions and losses do not count).
  std::int64_t step_count() const noexcept { return steps_; }
  /// The kernel seed counter (runtime::Session::kernel_calls).
  std::uint64_t kernel_calls() const noexcept { return session_.kernel_calls(); }
  /// Continues where a stopped run left off: its update count (the learning-rate schedule's position) and
  /// its kernel seed counter. With its parameters and optimizer state (train::TrainingProgress), the run
  /// then proceeds bit for bit as the stopped one would have.
  void resume(std::int64_t steps, std::uint64_t kernel_calls);
  /// Data-parallel training (issue 25): from here on every update averages its gradients over `comm`'s
  /// ranks (Note [Gradient buckets], buckets of at most `bucket_bytes`) before the optimizer step, and
  /// reports the loss averaged over them. Every rank must hold the same parameters and options: their
  /// digests are compared here, and the plan's before the first update at each batch size (invalid_argument
  /// naming the first rank that differs). `comm` outlives the session. Plans made before are made again
  /// (with the allreduce kernels), so call it before audit(): an audit taken earlier no longer lives.
  /// With `sync_batch_norm` (the default, as PyTorch's SyncBatchNorm) every batch norm takes its training
  /// statistics over all the ranks' rows (pact/kernels/ranks.hpp), so N ranks of B rows follow one process
  /// of N x B; without it each rank normalises its own shard.
  void set_data_parallel(Communicator& comm, std::size_t bucket_bytes = std::size_t{25} << 20,
                         bool sync_batch_norm = true);
  /// The communicator of a data-parallel session (null otherwise).
  const Communicator* communicator() const noexcept { return comm_; }
  /// True when data-parallel steps synchronise batch-norm statistics over the ranks.
  bool syncs_batch_norm() const noexcept { return batch_norm_ranks_ != nullptr; }
  /// The gradient buckets' pack entries, in order (empty unless data-parallel).
  std::vector<std::vector<std::size_t>> gradient_buckets() const;
  /// The parameters between updates (what a checkpoint taken mid-training saves).
  const ParameterPack& parameters() const noexcept { return params_; }
  /// The plan audit of the training program for a batch size (planned once per batch size).
  const plan::PlanAudit& audit(std::int64_t batch);
  /// Ends the session and returns the trained parameters.
  ParameterPack finish() &&;

 private:
  struct Outputs {
    runtime::EagerTensor logits, loss;
    std::map<std::string, Tensor> running_stats;  ///< training mode: execute's new running statistics
  };
  Outputs run(Tensor x, Tensor target, bool training, std::vector<runtime::EagerTensor>& leaves);
  const plan::AcceptedGraphPlan& plan_for(std::int64_t batch);
  void take_back(std::vector<runtime::EagerTensor>& leaves);
  /// The parameters one run lends to the tape as leaves: take_back() returns them after the run, and the
  /// destructor does when an error ends the run early (a bad index or a non-finite loss raised as the loss is
  /// read), so a failed step never loses the session's parameters.
  struct Lent {
    TrainingSession& session;
    std::vector<runtime::EagerTensor> leaves;
    explicit Lent(TrainingSession& s) : session(s) {}
    Lent(const Lent&) = delete;
    Lent& operator=(const Lent&) = delete;
    ~Lent();
  };

  /// invalid_argument naming what is missing unless `graph` has the objective's input and target sources
  /// and its logits and loss outputs.
  void require_objective_nodes(const ir::Graph& graph) const;
  Objective objective_;
  ParameterPack params_;
  runtime::Session session_;
  std::map<std::int64_t, ir::Graph> graphs_;
  std::map<std::int64_t, plan::AcceptedGraphPlan> plans_;
  /// Per plan (batch size), its training kernels resolved once (Note [Training kernels]): the accumulation
  /// kernels, and each pack entry's update kernel (nullptr for a buffer).
  struct StepKernels {
    std::vector<const contract::BoundKernel*> accumulate, updates;
  };
  std::map<std::int64_t, StepKernels> step_kernels_;
  std::int64_t steps_ = 0;
  /// `t` where this session's kernels read it (moved to the device under a cuda profile).
  Tensor placed(Tensor t) const;
  Communicator* comm_ = nullptr;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<kernels::RankSum> batch_norm_ranks_;  ///< sync batch norm's sums over comm_'s ranks
  std::set<std::int64_t> agreed_batches_;               ///< batch sizes whose plan every rank was checked to share
};

/// Built-in models for the digits data: an MLP 64-hidden-10 and a small CNN (8x8 images: conv 3x3 with
/// 16 channels, batch norm, relu, 2x2 max pool, linear).
ir::Graph digits_mlp(std::int64_t batch, std::int64_t hidden = 128);
ir::Graph digits_cnn(std::int64_t batch);
/// The char transformer of `pact train --model char-transformer`: token and position embeddings, one
/// pre-norm block (causal multi-head attention with `heads` heads, then a 4d GELU MLP, each residual),
/// a final layer norm and the vocabulary head, with cross-entropy over batch * t next characters.
ir::Graph char_transformer(std::int64_t batch, std::int64_t t, std::int64_t vocab, std::int64_t d, std::int64_t heads);

}  // namespace pact::train
