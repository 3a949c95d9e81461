#pragma once
/// Files: the one whole-file read every loader uses, the one atomic write every writer of a file others
/// rely on uses (checkpoints, safetensors, ledger receipts), and the one repository-path confinement
/// check (ledger artifacts and commands, sealed source closures).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace pact {

/// Largest file read_file reads unless told otherwise: every model, capture, manifest, contract and
/// receipt is text well below it (docs/limits.md). Weights (safetensors) pass their own limit.
inline constexpr std::uint64_t kMaxTextFileBytes = 64ull << 20;

/// Opens a file for a sized binary read and returns its size. pact::Error(io_error) naming `operation` and
/// the path when it is missing, a directory, unreadable or cannot be sized. read_file uses it, and so do
/// readers that take a large file in pieces (read_safetensors).
std::ifstream open_for_read(const std::string& path, std::string_view operation, std::uint64_t& size);

/// Reads a whole regular file in one sized read. pact::Error(io_error) naming `operation` and the path
/// when it is missing, a directory or unreadable; invalid_argument when it is larger than `max_bytes`
/// (checked before reading); out_of_memory when the host cannot hold it.
std::string read_file(const std::string& path, std::string_view operation, std::uint64_t max_bytes = kMaxTextFileBytes);

/// True when `rel` is a non-empty relative path that, with `..` and symlinks resolved, names something
/// inside `root` (which must be canonical). The path need not exist.
bool path_within(const std::filesystem::path& root, const std::string& rel);

/// Writes `bytes` to `path` atomically: a temporary file beside it with a fresh unpredictable name
/// (`<name>.tmp.<pid>.XXXXXX`), created exclusively (never following a planted file or symlink), fsync,
/// rename over `path`, fsync of the directory. Every file Pact writes goes through here. On failure the
/// temporary file is removed and pact::Error(io_error) names `operation` and the path; `path` is then
/// untouched. Temporaries of `path` left by writers that died (a kill between flush and rename), whose pid
/// is no longer running, are removed first. `before_rename` (tests) runs once the temporary file is durable.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes, std::string_view operation,
                       const std::function<void()>& before_rename = {});
/// The same for text.
void write_file_atomic(const std::string& path, std::string_view text, std::string_view operation);

/// Checks, before any work, that write_file_atomic can create `path`: its directory exists and this process
/// may create files in it, and `path` is not a directory. pact::Error(io_error) naming `operation`, the path
/// and why. Commands call it for every output option first, so an unwritable destination is found before
/// training or capture, not after.
void require_writable_destination(const std::string& path, std::string_view operation);

}  // namespace pact
