// Atomic file writes (pact/core/file.hpp): the one way Pact writes a file.

#include "pact/core/file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "pact/core/error.hpp"

namespace pact {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path scratch(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   (std::string("pact_file_test_") + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(AtomicWrite, ReplacesTheFileAndLeavesNoTemporary) {
  const auto dir = scratch("replace");
  const auto path = dir / "report.json";
  write_file_atomic(path.string(), "first", "test");
  write_file_atomic(path.string(), "second", "test");
  EXPECT_EQ(slurp(path), "second");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
  std::filesystem::remove_all(dir);
}

TEST(AtomicWrite, APlantedSymlinkBesideThePathIsNeverFollowed) {
  // The former fixed temporary name `<path>.tmp`, planted as a symlink to a victim file: the write must
  // neither follow it nor overwrite the victim.
  const auto dir = scratch("symlink");
  const auto victim = dir / "victim";
  { std::ofstream(victim) << "precious"; }
  const auto path = dir / "model.safetensors";
  std::filesystem::create_symlink(victim, dir / "model.safetensors.tmp");
  write_file_atomic(path.string(), "weights", "test");
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_EQ(slurp(path), "weights");
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "model.safetensors.tmp"));
  std::filesystem::remove_all(dir);
}

TEST(AtomicWrite, AnUnwritableDirectoryIsATypedErrorAndChangesNothing) {
  const auto dir = scratch("missing");
  const auto path = dir / "no-such-dir" / "out.json";
  try {
    write_file_atomic(path.string(), "x", "pact test");
    FAIL() << "wrote into a directory that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io_error);
    EXPECT_NE(std::string(e.what()).find("out.json"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pact
