#pragma once
/// Synchronised batch norm (issue 25). In data-parallel training every rank holds a shard of the global
/// batch; a batch norm in training mode takes its statistics (the mean and variance of the forward, the
/// gradient sums of the VJP, the running statistics' batch mean and variance) over every rank's rows, as
/// PyTorch's SyncBatchNorm does, so N ranks of B rows compute what one process of N x B rows would.
///
/// The training session installs the ranks for the duration of a data-parallel step (a BatchNormRanks
/// scope on the thread that runs the step's kernels, the one thread that talks to the communicator); the
/// kernels read them through batch_norm_ranks(). Outside such a scope (inference, evaluation, a single
/// process) a batch norm's statistics are its own batch's.

#include <span>

namespace pact::kernels {

/// Sums over the ranks of a data-parallel job.
class RankSum {
 public:
  virtual ~RankSum() = default;
  /// Replaces `values` by their elementwise sum over the ranks, blocking until done. Every rank makes the
  /// same calls in the same order with buffers of the same length.
  virtual void sum(std::span<double> values) = 0;
};

/// The ranks the calling thread's training-mode batch norms take their statistics over; null when they
/// take them from their own batch alone.
RankSum* batch_norm_ranks() noexcept;

/// Installs `ranks` (null: none) for the calling thread for the life of the scope; restores the previous.
class BatchNormRanks {
 public:
  explicit BatchNormRanks(RankSum* ranks) noexcept;
  ~BatchNormRanks();
  BatchNormRanks(const BatchNormRanks&) = delete;
  BatchNormRanks& operator=(const BatchNormRanks&) = delete;

 private:
  RankSum* previous_;
};

}  // namespace pact::kernels
