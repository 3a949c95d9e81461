#pragma once
/// Durable file output: the one atomic write every writer of a file others rely on uses (checkpoints,
/// safetensors, ledger receipts).

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace pact {

/// Writes `bytes` to `path` atomically: a temporary file beside it, fsync, rename over `path`, fsync of
/// the directory. On failure the temporary file is removed and pact::Error(io_error) names `operation`
/// and the path; `path` is then untouched. `before_rename` (tests) runs once the temporary file is durable.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes, std::string_view operation,
                       const std::function<void()>& before_rename = {});
/// The same for text.
void write_file_atomic(const std::string& path, std::string_view text, std::string_view operation);

}  // namespace pact
