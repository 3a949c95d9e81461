#pragma once
/// The epoch loop (SPEC §8): shuffled mini-batches through a TrainingSession, held-out classification
/// accuracy after every epoch, and progress for an observer. `pact train` parses its options, calls fit and
/// prints; anything that trains on a Dataset can do the same.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "pact/train/data.hpp"
#include "pact/train/trainer.hpp"

namespace pact::train {

/// How fit runs the epochs.
struct FitOptions {
  int epochs = 30;
  /// Rows per update; per rank for a data-parallel session (TrainingSession::set_data_parallel): each
  /// global batch is ranks * batch_size rows of the shuffled order and rank r reads rows
  /// [r * batch_size, (r + 1) * batch_size) of it. Every rank shuffles with the same seed, so the shards
  /// are disjoint and cover the global batch.
  std::int64_t batch_size = 32;
  /// The order of epoch e's batches is shuffled(rows, seed * 1000003 + e).
  std::uint64_t seed = 0;
  /// The loss program has one batch size (a graph read from a file): evaluation pads its last batch by
  /// repeating the final row, and only the real rows are scored.
  bool fixed_batch = false;
  /// The first epoch to run (a resumed run: the epochs its checkpoint finished); epochs counts them all.
  int start_epoch = 0;
};

/// One update, as an observer sees it.
struct StepProgress {
  int epoch = 0;  ///< 0-based
  std::int64_t step = 0, steps_per_epoch = 0;
  double loss = 0;
  double epoch_seconds = 0;  ///< since the epoch began
};

/// One epoch's summary.
struct EpochReport {
  double loss = 0;      ///< mean of the epoch's step losses
  double accuracy = 0;  ///< held-out classification accuracy after the epoch (classification)
  double rmse = 0;      ///< held-out root-mean-square error after the epoch, in the data's units (regression)
  double seconds = 0;   ///< training time of the epoch (evaluation excluded)
};

/// Everything fit measured.
struct FitReport {
  std::vector<double> step_loss;
  std::vector<EpochReport> epochs;
  std::uint64_t retained_bytes_peak = 0;    ///< largest StepResult::retained_bytes over the steps
  OptimizerState state;                     ///< the optimizer state after the last update (to resume from)
  std::vector<ReductionTiming> reductions;  ///< data-parallel: each update's gradient reduction
};

/// Runs `session` in evaluation mode over every row of `data` in batches of `batch` rows (a model of one
/// batch size, `fixed_batch`, gets its last batch padded by repeating the final row) and hands each batch's
/// real rows to `f`: the first row's index, the row count, and the [rows, width] outputs as doubles, row-major.
/// The one evaluation loop of accuracy, rmse and `pact predict`/`pact eval`.
void predict_batches(TrainingSession& session, const Dataset& data, std::int64_t batch, bool fixed_batch,
                     const std::function<void(std::int64_t first, std::int64_t rows, std::span<const double> outputs,
                                              std::int64_t width)>& f);

/// Classification accuracy of `session` on `data`: the argmax of each row of the logits over however many
/// classes the model has, compared with the label; evaluation mode, batches of `batch` rows.
double accuracy(TrainingSession& session, const Dataset& data, std::int64_t batch, bool fixed_batch);

/// Root-mean-square error of `session`'s [rows, 1] predictions against a regression data set's values,
/// in the data set's units; evaluation mode, batches of `batch` rows.
double rmse(TrainingSession& session, const Dataset& data, std::int64_t batch, bool fixed_batch);

/// Trains epochs options.start_epoch .. options.epochs - 1 over `train` (every full batch of a shuffled order;
/// a final partial batch is dropped) and evaluates `test` after each, starting the optimizer from `state`
/// (the report returns the final one; on_epoch sees it after each epoch, for a checkpoint). invalid_argument for a
/// non-positive epoch count or batch size, or a batch larger than the training rows. The observers may be empty.
FitReport fit(TrainingSession& session, const Dataset& train, const Dataset& test, const FitOptions& options,
              OptimizerState state = {}, const std::function<void(const StepProgress&)>& on_step = {},
              const std::function<void(int epoch, const EpochReport&, const OptimizerState&)>& on_epoch = {});

}  // namespace pact::train
