#pragma once
/// Checkpoints: a parameter pack as one safetensors file with JSON metadata (`pact.checkpoint`), written
/// atomically (temporary file, fsync, rename), loaded with name, shape and dtype checks.

#include <functional>
#include <string>

#include "pact/core/json.hpp"
#include "pact/train/trainer.hpp"

namespace pact::train {

/// Saves `pack` (differentiability and buffer flags go into the metadata beside `metadata`). A failure at
/// any point leaves an existing file at `path` untouched. `before_rename` is a test hook.
void save_checkpoint(const std::string& path, const ParameterPack& pack, const Json& metadata,
                     const std::function<void()>& before_rename = {});

/// A loaded checkpoint.
struct Checkpoint {  // NOLINT(bugprone-exception-escape): nlohmann::json's noexcept move is reported through its
                     // assertions
  ParameterPack pack;
  Json metadata;
};
/// Loads a checkpoint; when `expected` is given, every name, shape and dtype must match it. Missing or
/// corrupt files, missing tensors and mismatches are typed errors naming the file and tensor.
Checkpoint load_checkpoint(const std::string& path, const ParameterPack* expected = nullptr);

}  // namespace pact::train
