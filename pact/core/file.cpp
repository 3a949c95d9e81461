#include "pact/core/file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "pact/core/error.hpp"

namespace pact {

std::ifstream open_for_read(const std::string& path, std::string_view operation, std::uint64_t& size) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw_error(ErrorCode::io_error, std::string(operation), fmt::format("cannot read '{}': it is a directory", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error(ErrorCode::io_error, std::string(operation), fmt::format("cannot read '{}'", path));
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  in.seekg(0, std::ios::beg);
  if (end < 0) throw_error(ErrorCode::io_error, std::string(operation), fmt::format("cannot size '{}'", path));
  size = static_cast<std::uint64_t>(end);
  return in;
}

std::string read_file(const std::string& path, std::string_view operation, std::uint64_t max_bytes) {
  // One sized read: a character iterator would cost ~10 ns per byte (100 MB/s).
  std::uint64_t size = 0;
  std::ifstream in = open_for_read(path, operation, size);
  if (size > max_bytes) {
    throw_error(
        ErrorCode::invalid_argument, std::string(operation),
        fmt::format("'{}' is {} bytes; the limit for this input is {} bytes (docs/limits.md)", path, size, max_bytes));
  }
  std::string text;
  try {
    text.assign(static_cast<std::size_t>(size), '\0');
  } catch (const std::bad_alloc&) {
    throw_error(ErrorCode::out_of_memory, std::string(operation),
                fmt::format("cannot hold the {} bytes of '{}' in memory", size, path));
  }
  if (size > 0 && !in.read(text.data(), static_cast<std::streamsize>(size))) {
    throw_error(ErrorCode::io_error, std::string(operation),
                fmt::format("cannot read all {} bytes of '{}'", size, path));
  }
  return text;
}

bool path_within(const std::filesystem::path& root, const std::string& rel) {
  const std::filesystem::path p(rel);
  if (rel.empty() || p.is_absolute() || p.has_root_name()) return false;
  const std::filesystem::path norm = p.lexically_normal();
  if (!norm.empty() && *norm.begin() == "..") return false;
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(root / p, ec);
  if (ec) return false;
  const std::filesystem::path inside = resolved.lexically_relative(root);
  return !inside.empty() && *inside.begin() != "..";
}

namespace {

// Removes `path`'s temporaries (`<name>.tmp.<pid>.XXXXXX`) whose writer is no longer running. A live
// writer's, and anything not of that exact form, is left alone.
void remove_dead_writers_temporaries(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  std::filesystem::directory_iterator it(p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path(), ec);
  if (ec) return;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() + 7 || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // "<pid>.XXXXXX"
    const std::size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || rest.size() - dot - 1 != 6) continue;
    const std::string pid_text = rest.substr(0, dot);
    if (pid_text.size() > 9 ||
        !std::all_of(pid_text.begin(), pid_text.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const auto pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::filesystem::remove(entry.path(), ec);  // a symlink is removed, never followed
  }
}

}  // namespace

void require_writable_destination(const std::string& path, std::string_view operation) {
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  std::error_code ec;
  auto refuse = [&](const std::string& why) {
    throw_error(ErrorCode::io_error, std::string(operation), fmt::format("cannot write '{}': {}", path, why));
  };
  if (path.empty()) refuse("the path is empty");
  if (!std::filesystem::is_directory(dir, ec)) refuse(fmt::format("'{}' is not an existing directory", dir.string()));
  if (std::filesystem::is_directory(p, ec)) refuse("it is a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    refuse(fmt::format("this process may not create files in '{}': {}", dir.string(), std::strerror(errno)));
}

void write_file_atomic(const std::string& path, std::span<const std::byte> bytes, std::string_view operation,
                       const std::function<void()>& before_rename) {
  remove_dead_writers_temporaries(path);
  // A fresh, unpredictable temporary name created exclusively (mkostemp: O_CREAT | O_EXCL), so nothing
  // planted beside `path` — a file or a symlink at a fixed name — is followed or overwritten. The pid in
  // it lets a later write remove what a killed writer left.
  std::string tmp = fmt::format("{}.tmp.{}.XXXXXX", path, ::getpid());
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0)
    throw_error(ErrorCode::io_error, std::string(operation),
                fmt::format("cannot create a temporary file beside '{}': {}", path, std::strerror(errno)));
  ::fchmod(fd, 0644);  // mkostemp makes 0600; the written file is an ordinary readable output
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t k = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (k < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw_error(ErrorCode::io_error, std::string(operation),
                  fmt::format("writing '{}': {}", tmp, std::strerror(err)));
    }
    written += static_cast<std::size_t>(k);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw_error(ErrorCode::io_error, std::string(operation), fmt::format("flushing '{}' failed", tmp));
  }
  if (before_rename) before_rename();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw_error(ErrorCode::io_error, std::string(operation),
                fmt::format("renaming to '{}': {}", path, std::strerror(err)));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, std::string_view text, std::string_view operation) {
  write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())), operation);
}

}  // namespace pact
