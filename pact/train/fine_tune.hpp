#pragma once
/// Fine-tuning an imported PyTorch capture (issue 22 item 4): the capture's graph with a loss the user names
/// on one of its outputs becomes the training Objective, and its weights the ParameterPack, so the capture
/// trains through the same TrainingSession, plan audit (backward included) and checkpoints as a built-in
/// model.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pact/ir/torch_import.hpp"
#include "pact/train/data.hpp"
#include "pact/train/table.hpp"
#include "pact/train/trainer.hpp"

namespace pact::train {

/// `--loss KIND:OUTPUT`: cross_entropy against class ids, or mse against values of the output's shape.
struct LossSpec {
  enum class Kind { cross_entropy, mse } kind = Kind::cross_entropy;
  std::string output;  ///< the capture's output name (its output spec), or the IR node that produces it
};
/// Parses "cross_entropy:OUTPUT" or "mse:OUTPUT"; anything else is invalid_argument naming the text.
LossSpec parse_loss_spec(std::string_view text);

/// A capture ready to train.
struct FineTune {
  Objective objective;     ///< its graph: the capture, a `target` input and a `loss` node; one batch size
  ParameterPack pack;      ///< the capture's weights (parameters differentiable; buffers and constants not)
  std::int64_t batch = 0;  ///< the batch size the graph is planned for
  Dims row_shape;          ///< the model input's shape without its batch axis
  Dims output_shape;       ///< the loss output's shape at that batch
};

/// The fine-tuning program of `bundle` (one user input, real weights): the graph is refitted to `batch`
/// rows when one is given (runtime::fit_inputs: refused naming the first node that does not re-validate),
/// a target source is added (i64 [batch] class ids for cross_entropy on a [batch, classes] output; the
/// output's dtype and shape for mse) and a loss node reads the output and the target. A missing output
/// names the outputs there are; a structure-only capture, a capture of several inputs or a non-float
/// input or output is refused typed. Everything else (optimizer, schedule, profile) comes from `options`.
FineTune fine_tune(ir::TorchBundle bundle, const LossSpec& loss, std::optional<std::int64_t> batch,
                   const TrainerOptions& options, std::string_view dir);

/// A data set for fine-tuning from a .npz or .safetensors file, or a directory of .safetensors files
/// (concatenated along their first axis, in file-name order): the array named `input` (or, when the file
/// holds exactly two, the one that is not `target`) holds the rows' features ([rows, ...] flattened per row
/// to the model's row shape), and the array named `target` the class ids (integers, cross_entropy, each
/// below `classes`) or values ([rows] or [rows, 1], mse). Missing arrays, rows that disagree, features that
/// do not flatten to the row shape and class ids out of range are invalid_argument naming the array.
Dataset tensor_dataset(const std::string& path, const std::string& input, const std::string& target,
                       const Dims& row_shape, const LossSpec& loss, std::int64_t classes);

/// A data set for fine-tuning from a CSV table: every column but `target` is a feature, in file order, as
/// written (no standardisation: the capture was trained on its own scale), and their count must be the
/// model's row size; the target holds class ids (integers below `classes`, cross_entropy) or values (mse).
/// Bad fields name their line and column (train::table_dataset); a count or class id that does not fit
/// names both.
Dataset table_fine_tune_dataset(const CsvTable& table, const std::string& target, const Dims& row_shape,
                                const LossSpec& loss, std::int64_t classes, std::string_view where);

}  // namespace pact::train
