#pragma once
/// Data-parallel training's collectives (issue 25): N ranks each hold the whole model, train on their own
/// shard of every global batch and average their gradients before each optimizer step. Training sees only
/// this interface; pact/dist implements it over MPI (NCCL can serve the CUDA provider behind the same one).

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/dtype.hpp"

namespace pact::train {

/// A reduction in flight. wait() returns once the buffer holds the result (or throws a pact::Error naming
/// what failed: a rank that died or a timeout); the buffer must stay untouched until then.
class PendingReduction {
 public:
  virtual ~PendingReduction() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  /// Starts replacing `data` (elements of `dtype`, f32 or f64) by its elementwise sum over the ranks.
  /// Every rank makes the same calls in the same order with buffers of the same size and dtype.
  virtual std::unique_ptr<PendingReduction> start_sum(std::span<std::byte> data, DType dtype) = 0;
  /// Every rank's `text`, indexed by rank (the agreement check before the first step).
  virtual std::vector<std::string> gather_all(const std::string& text) = 0;
  /// The trusted boundary a reduction crosses ("mpi.allreduce"): the plan audit names it.
  virtual std::string_view boundary() const noexcept = 0;
  /// How the sums are ordered, for the audit: "fixed" (rank order, bitwise repeatable) or the engine's.
  virtual std::string_view reduction_order() const noexcept = 0;
  /// True when the sums fold the ranks left to right in rank order (numerical policy fixedLeft).
  virtual bool rank_ordered() const noexcept = 0;
  /// Lets reductions in flight advance: an engine without a progress thread of its own (Open MPI's
  /// non-blocking collectives) moves them on only inside its calls. Backward calls it as it goes.
  virtual void progress() {}
  /// Replaces `values` by their elementwise sum over the ranks, blocking until done.
  void sum(std::span<double> values) { start_sum(std::as_writable_bytes(values), DType::f64)->wait(); }
  /// `value` averaged over the ranks (a blocking sum): a step's loss, an evaluation's.
  double mean(double value) {
    sum(std::span<double>(&value, 1));
    return value / size();
  }
};

}  // namespace pact::train
