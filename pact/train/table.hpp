#pragma once
/// Training on your own table: a CSV file with a header row, numeric feature columns and one target column.
/// The schema (which columns are features, the task, the classes, the standardisation fitted on the
/// training rows) is saved with the model, so `pact predict` and `pact eval` read new files the same way.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/json.hpp"
#include "pact/ir/graph.hpp"
#include "pact/train/data.hpp"

namespace pact::train {

/// Largest CSV file read (docs/limits.md), and most columns.
inline constexpr std::uint64_t kMaxCsvBytes = 1ull << 30;
inline constexpr std::size_t kMaxCsvColumns = 65536;

/// A parsed CSV file (RFC 4180: comma-separated, a header row, fields optionally in double quotes with ""
/// for a quote, CRLF or LF line ends; a leading UTF-8 byte order mark is skipped): the header and every
/// row's fields, with its line number.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::int64_t> lines;  ///< the line each row starts on (1-based, the header is line 1)
};
/// Parses CSV text. A row with another field count than the header, an unterminated quote, an empty or
/// repeated column name, or more than kMaxCsvColumns columns is parse_error naming `where`, the line and
/// the column.
CsvTable parse_csv(std::string_view text, std::string_view where);
/// Reads and parses a CSV file (io_error when unreadable, invalid_argument above kMaxCsvBytes).
CsvTable read_csv(const std::string& path);

/// How a table's columns become a model's inputs and targets.
struct TableSchema {
  std::vector<std::string> features;  ///< feature column names, in file order
  std::string target;
  bool classify = true;
  std::vector<std::string> classes;  ///< classify: the target's values as written, sorted (class i is classes[i])
  std::vector<double> mean, scale;   ///< per feature: x' = (x - mean) / scale, fitted on the training rows
  double target_mean = 0, target_scale = 1;  ///< regress: the same for the target

  Json to_json() const;
  /// parse_error naming `where` and the field for a malformed schema.
  static TableSchema from_json(const Json& j, std::string_view where);
};

/// The schema for training on `table` with `target` as the target column and every other column a
/// numeric feature. `task` is classify, regress or auto (classify when a target value is not a number or
/// when every value is an integer and there are at most 32 distinct ones; else regress). A missing target
/// column names the columns there are; a regression target that is not a number names its line.
/// Standardisation is identity until fit_standardisation.
TableSchema infer_schema(const CsvTable& table, const std::string& target, const std::string& task,
                         std::string_view where);

/// The rows of `table` as a data set under `schema`, features as written (standardise() applies the
/// schema's standardisation). Columns are found by name: a missing feature column names itself, a field that
/// is not a finite number names its line and column, and a target value that is not one of the schema's
/// classes names it. Without `with_target` the target column may be absent (prediction).
Dataset table_dataset(const CsvTable& table, const TableSchema& schema, bool with_target, std::string_view where);

/// Fits the schema's standardisation to `train` (its mean and standard deviation per feature; a constant
/// feature keeps scale 1).
void fit_standardisation(TableSchema& schema, const Dataset& train);
/// Applies the schema's standardisation to a data set's features (and a regression data set's targets).
void standardise(const TableSchema& schema, Dataset& data);

/// The MLP `pact train --data FILE.csv` builds: x [batch, features], hidden linear+relu layers, a linear
/// head of `outputs` logits; the loss is cross_entropy against class ids (target [batch] i64) or mse_loss
/// against values (target [batch, 1] f32).
ir::Graph table_mlp(std::int64_t batch, std::int64_t features, const std::vector<std::int64_t>& hidden,
                    std::int64_t outputs, bool classify);

}  // namespace pact::train
