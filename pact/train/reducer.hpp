#pragma once
/// The gradient reducer of data-parallel training (issue 25): a step's gradients averaged over a
/// communicator's ranks in buckets, each bucket's reduction started as soon as backward has finished
/// every gradient in it (Note [Gradient buckets] in reducer.cpp).

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "pact/core/tensor.hpp"
#include "pact/ops/op_table.hpp"
#include "pact/train/communicator.hpp"

namespace pact::train {

/// How one step's reduction went, from the start of backward.
struct ReductionTiming {
  int buckets = 0;
  double backward_seconds = 0;          ///< the backward pass itself
  double first_start_seconds = 0;       ///< when the first bucket's reduction started
  double wait_seconds = 0;              ///< waiting after backward for the reductions: the exposed communication
  int started_in_backward = 0;          ///< buckets whose reduction started before backward ended
  int gradients_after_first_start = 0;  ///< gradients backward finished after the first reduction started
  double blocking_seconds = 0;  ///< the same buckets reduced one after another with nothing to overlap (calibrate)
  /// The least wait_seconds over the ranks (the training session fills it in). A rank's wait also holds
  /// the time it waits for slower ranks to finish backward (their skew); the rank that finished last waits
  /// for no other, so the least wait is the communication backward did not hide, free of the skew.
  double least_wait_seconds = -1;
};

class GradientReducer {
 public:
  /// `entries`: per parameter-pack entry, its gradient's type, or nullopt for an entry that gets none (a
  /// buffer). Buckets take entries in reverse pack order (backward finishes the last layers first), by
  /// dtype, up to `bucket_bytes` each (an entry larger than that is a bucket of its own). f32 and f64 only
  /// (unsupported otherwise); `comm` outlives the reducer.
  GradientReducer(Communicator& comm, const std::vector<std::optional<ops::TensorType>>& entries,
                  std::size_t bucket_bytes);

  /// A step's backward begins.
  void begin();
  /// Entry `entry`'s gradient is final (Tape::OnFinal): copied into its bucket; every bucket now complete
  /// whose predecessors have started starts its reduction (buckets start in order on every rank).
  void gradient_final(std::size_t entry, const TensorView& gradient);
  /// Backward has ended: entries that got no gradient count as zeros, the remaining buckets start, every
  /// reduction is waited for, and each entry's gradient in `gradients` (by pack index) becomes the mean
  /// over the ranks.
  ReductionTiming finish(std::vector<std::optional<Tensor>>& gradients);

  /// Reduces every bucket (zeros) one after another, blocking, `repeats` times on every rank, and keeps
  /// the median: the communication a step would expose with no overlap, against which finish()'s
  /// wait_seconds shows how much backward hid. A collective: every rank calls it at the same point.
  double calibrate(int repeats = 5);
  /// The buckets' pack entries, in bucket order (tests and the audit).
  std::vector<std::vector<std::size_t>> buckets() const;

 private:
  struct Bucket {
    DType dtype;
    std::vector<std::size_t> entries;
    std::vector<std::int64_t> offsets;  ///< element offset of each entry
    std::int64_t elements = 0;
    Tensor values;            ///< the flat buffer the reduction works on
    std::size_t pending = 0;  ///< entries not yet copied in this step
    std::unique_ptr<PendingReduction> inflight;
    /// While a reduction is in flight, the bucket's host write stays prepared (borrowed) for it.
    std::variant<std::monostate, PreparedContiguousWrite<float>, PreparedContiguousWrite<double>> lent;
  };
  void start_ready();
  void start(Bucket& b);

  Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<std::size_t, std::size_t>> where_;  ///< per entry: (bucket, index in it); npos: none
  std::vector<bool> copied_;
  std::size_t next_ = 0;  ///< the first bucket not yet started this step
  std::chrono::steady_clock::time_point began_;
  ReductionTiming timing_;
  double blocking_seconds_ = 0;
};

}  // namespace pact::train
