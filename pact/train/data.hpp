#pragma once
/// Data sets for training: the 8x8 handwritten digits (data/digits.csv.gz, 1,797 samples), a seeded
/// stratified split, and seeded shuffled batches.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pact/core/tensor.hpp"

namespace pact::train {

/// Features as rows of floats and labels as class indices, or, for regression, target values.
struct Dataset {
  std::int64_t features = 0;
  std::int64_t classes = 0;     ///< 1 for regression
  std::vector<float> x;         ///< row-major [rows, features]
  std::vector<std::int64_t> y;  ///< [rows]: class ids (regression: all 0, one stratum)
  bool regression = false;
  std::vector<float> values;  ///< regression: [rows] target values
  std::int64_t rows() const noexcept { return static_cast<std::int64_t>(y.size()); }
};

/// Most bytes a data file may inflate to (docs/limits.md): a gzip bomb is refused as it inflates.
inline constexpr std::size_t kMaxDecompressedBytes = std::size_t{1} << 30;

/// Reads the digits CSV (gzip): 64 pixel values 0..16 then the label 0..9 per line; pixels scaled to
/// [0, 1]. A line with another field count or an out-of-range value is parse_error naming the line; a
/// file that inflates past kMaxDecompressedBytes is invalid_argument.
Dataset load_digits(const std::string& path, std::size_t max_inflated_bytes = kMaxDecompressedBytes);

/// A stratified split: per class, a seeded shuffle, the first `train_fraction` to train, the rest to test.
struct Split {
  Dataset train;
  Dataset test;
};
Split stratified_split(const Dataset& data, double train_fraction, std::uint64_t seed);

/// Rows [index...] of a data set as an f32 feature tensor and an i64 label tensor (regression: an f32
/// [rows, 1] target tensor).
std::pair<Tensor, Tensor> gather(const Dataset& data, std::span<const std::int64_t> rows);

/// A seeded permutation of [0, n) for one epoch.
std::vector<std::int64_t> shuffled(std::int64_t n, std::uint64_t seed);

}  // namespace pact::train
