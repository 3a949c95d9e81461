#pragma once
/// Checkpoints: a parameter pack as one safetensors file with JSON metadata (`pact.checkpoint`), written
/// atomically (temporary file, fsync, rename), loaded with name, shape and dtype checks. A checkpoint may
/// also hold where training stands (TrainingProgress: the optimizer's moments or velocities, the update
/// count, the kernel seed counter, the epochs done), so that a run resumed from it ends bit for bit where
/// an uninterrupted run would.

#include <functional>
#include <optional>
#include <string>

#include "pact/core/json.hpp"
#include "pact/train/trainer.hpp"

namespace pact::train {

// Note [Exact resume]
// A training run is a function of five things besides its data and settings: the parameters, the
// optimizer state (Adam's moments and step, SGD's velocities), the update count (the learning-rate
// schedule's position), the kernel seed counter (dropout masks) and the epoch (the next shuffle is
// seed * 1000003 + epoch). A checkpoint saved after an epoch holds all five; a run resumed from it
// restores them (TrainingSession::resume, fit's start_epoch) and its parameters after the last epoch are
// the same bits as an uninterrupted run's under a deterministic profile (checkpoint_test.cpp shows it, and
// that dropping the optimizer state or the schedule position breaks it; the seed counter matters only to
// dropout, which the digits models do not use). `pact train --save` writes one after every epoch, so a run
// that is killed resumes from its last finished epoch.

/// Where a training run stands after an epoch, besides its parameters and optimizer state.
struct TrainingPosition {
  std::int64_t steps = 0;          ///< updates made (the learning-rate schedule's position)
  std::uint64_t kernel_calls = 0;  ///< the session's kernel seed counter (dropout masks)
  int epochs = 0;                  ///< epochs finished (the next epoch's shuffle)
};

/// Everything besides the parameters that a run's next update reads. The optimizer's tensors are stored
/// as `__optimizer__/m/NAME`, `__optimizer__/v/NAME` (Adam, AdamW) or `__optimizer__/velocity/NAME` (SGD
/// with momentum) beside parameter NAME.
struct TrainingProgress {
  OptimizerState optimizer;
  TrainingPosition position;
};

/// Saves `pack` (differentiability and buffer flags go into the metadata beside `metadata`), and, when
/// `optimizer` is given, the training progress (the optimizer state and `position`). A failure at any
/// point leaves an existing file at `path` untouched. `before_rename` is a test hook.
void save_checkpoint(const std::string& path, const ParameterPack& pack, const Json& metadata,
                     const OptimizerState* optimizer = nullptr, const TrainingPosition& position = {},
                     const std::function<void()>& before_rename = {});

/// A loaded checkpoint.
struct Checkpoint {  // NOLINT(bugprone-exception-escape): nlohmann::json's noexcept move is reported through its
                     // assertions
  ParameterPack pack;
  Json metadata;
  std::optional<TrainingProgress> progress;  ///< present when the checkpoint was saved with one
};
/// Loads a checkpoint; when `expected` is given, every name, shape and dtype must match it (and the
/// optimizer state's its parameter's). Missing or corrupt files, missing tensors and mismatches are typed
/// errors naming the file and tensor.
Checkpoint load_checkpoint(const std::string& path, const ParameterPack* expected = nullptr);

}  // namespace pact::train
