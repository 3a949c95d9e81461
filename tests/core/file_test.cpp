// Atomic file writes (pact/core/file.hpp): the one way Pact writes a file.

#include "pact/core/file.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/expect_error.hpp"
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

TEST(AtomicWrite, ADeadWritersTemporaryIsRemovedAtTheNextWriteAndALiveOnesIsKept) {
  // A writer killed between flush and rename leaves `<name>.tmp.<pid>.XXXXXX`: the next write removes it
  // when that pid no longer runs, and keeps one whose writer is alive (this process's parent) and any
  // other file.
  const auto dir = scratch("dead");
  const auto path = dir / "model.safetensors";
  pid_t dead = 0;
  {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status = 0;
    ::waitpid(child, &status, 0);
    dead = child;  // reaped: no such process now
  }
  const auto stale = dir / ("model.safetensors.tmp." + std::to_string(dead) + ".AbC123");
  const auto live = dir / ("model.safetensors.tmp." + std::to_string(::getppid()) + ".XyZ789");
  const auto other = dir / "model.safetensors.tmp.notapid.AbC123";
  for (const auto& p : {stale, live, other}) std::ofstream(p) << "partial";
  write_file_atomic(path.string(), "weights", "test");
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_EQ(slurp(path), "weights");
  std::filesystem::remove_all(dir);
}

TEST(ReadFile, AFileLargerThanItsLimitIsRefusedBeforeItIsRead) {
  const auto dir = scratch("limit");
  const auto path = dir / "big.json";
  { std::ofstream(path) << std::string(4096, ' '); }
  EXPECT_EQ(read_file(path.string(), "test", 4096).size(), 4096u);
  auto read = [&] { read_file(path.string(), "test", 4095); };
  EXPECT_EQ(test::code_of(read), ErrorCode::invalid_argument);
  EXPECT_TRUE(test::mentions(test::message_of(read), "the limit for this input is 4095 bytes"));
  std::filesystem::remove_all(dir);
}

TEST(AtomicWrite, AnUnwritableDestinationIsRefusedBeforeAnyWork) {
  const auto dir = scratch("destination");
  EXPECT_NO_THROW(require_writable_destination((dir / "out.json").string(), "test"));
  for (const auto& bad : {dir / "missing" / "out.json", dir}) {
    auto check = [&] { require_writable_destination(bad.string(), "pact test"); };
    EXPECT_EQ(test::code_of(check), ErrorCode::io_error) << bad;
    EXPECT_TRUE(test::mentions(test::message_of(check), bad.string()));
  }
  if (::geteuid() != 0) {  // root may write anywhere: the permission case needs an ordinary user
    std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    EXPECT_THROW(require_writable_destination((dir / "out.json").string(), "test"), Error);
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pact
