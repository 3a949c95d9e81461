// Checkpoints: round trip, checks on load, and atomicity (a writer killed before the rename leaves the
// previous checkpoint intact).

#include "pact/train/checkpoint.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../support/expect_error.hpp"

namespace pact::train {
namespace {

using ::pact::test::code_of;

std::string temp(const std::string& name) { return (std::filesystem::temp_directory_path() / name).string(); }

ParameterPack pack(float scale) {
  ParameterPack p = init_parameters(digits_mlp(4, 8), 5);
  for (auto& v : p.values) {
    auto w = v.prepare_host_mut<float>();
    for (float& x : std::get<PreparedContiguousWrite<float>>(w.value()).as_span()) x *= scale;
  }
  return p;
}

TEST(Checkpoint, RoundTripWithChecks) {
  const std::string path = temp("pact_ckpt_roundtrip.safetensors");
  ParameterPack p = pack(1.0f);
  save_checkpoint(path, p, Json{{"step", 42}});
  Checkpoint c = load_checkpoint(path, &p);
  EXPECT_EQ(c.metadata["step"], 42);
  ASSERT_EQ(c.pack.names, p.names);
  for (std::size_t i = 0; i < p.values.size(); ++i) {
    EXPECT_EQ(c.pack.values[i].shape(), p.values[i].shape());
    EXPECT_EQ(c.pack.values[i].get(Dims{0, 0}.size() == p.values[i].rank() ? Dims{0, 0} : Dims{0}).real,
              p.values[i].get(p.values[i].rank() == 2 ? Dims{0, 0} : Dims{0}).real);
  }
  ParameterPack other = init_parameters(digits_mlp(4, 16), 5);  // hidden 16: shapes differ
  EXPECT_EQ(code_of([&] { load_checkpoint(path, &other); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { load_checkpoint(temp("pact_no_such_checkpoint.safetensors")); }), ErrorCode::io_error);
  std::ofstream(temp("pact_corrupt.safetensors"), std::ios::binary) << "garbage!garbage!";
  EXPECT_EQ(code_of([] { load_checkpoint(temp("pact_corrupt.safetensors")); }), ErrorCode::parse_error);
}

TEST(Checkpoint, AKilledWriterLeavesThePreviousCheckpointIntact) {
  const std::string path = temp("pact_ckpt_atomic.safetensors");
  ParameterPack old_pack = pack(1.0f);
  save_checkpoint(path, old_pack, Json{{"step", 1}});
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ParameterPack new_pack = pack(3.0f);
    save_checkpoint(path, new_pack, Json{{"step", 2}}, [] { _exit(7); });  // dies between write and rename
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  Checkpoint c = load_checkpoint(path, &old_pack);  // still the old, complete checkpoint
  EXPECT_EQ(c.metadata["step"], 1);
  EXPECT_EQ(c.pack.values[0].get(Dims{0, 0}).real, old_pack.values[0].get(Dims{0, 0}).real);
}

}  // namespace
}  // namespace pact::train
