// Checkpoints: round trip, checks on load, and atomicity (a writer killed before the rename leaves the
// previous checkpoint intact).

#include "pact/train/checkpoint.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../support/expect_error.hpp"
#include "pact/ir/safetensors.hpp"
#include "pact/train/fit.hpp"

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
    save_checkpoint(path, new_pack, Json{{"step", 2}}, nullptr, {}, [] { _exit(7); });  // dies before the rename
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

// Note [Exact resume]: the digits MLP trained 4 epochs in one go, and trained 2 epochs, checkpointed with
// its progress, reloaded into a fresh session and trained to 4, end with the same parameter bits, for Adam
// and for SGD with momentum, under the deterministic profile. Resuming without the optimizer state, or
// without the schedule position, does not: the test can fail.
TEST(Checkpoint, AResumedRunEndsBitwiseEqualToAnUninterruptedOne) {
  const Dataset data = load_digits("data/digits.csv.gz");
  const Split split = stratified_split(data, 0.8, 3);
  constexpr std::int64_t kBatch = 64;
  constexpr int kEpochs = 4, kStop = 2;
  const std::int64_t steps = split.train.rows() / kBatch;
  auto bytes = [](const ParameterPack& p) {
    std::vector<std::byte> out;
    for (const auto& v : p.values) ir::append_tensor_bytes(v.as_view(), out);
    return out;
  };
  for (const char* optimizer : {"adam", "sgd"}) {
    SCOPED_TRACE(optimizer);
    Objective o;
    o.graph = [](std::int64_t b) { return digits_mlp(b, 32); };
    o.options.optimizer = optimizer;
    o.options.lr = 0.01;
    o.options.profile = "cpu-deterministic";
    o.options.schedule.kind = Schedule::cosine;
    o.options.schedule.total = steps * kEpochs;
    const FitOptions all{kEpochs, kBatch, 7, false, 0};

    TrainingSession straight(o, init_parameters(o.graph(kBatch), 1));
    fit(straight, split.train, split.test, all);
    const auto want = bytes(straight.parameters());

    const std::string path = temp(std::string("pact_resume_") + optimizer + ".safetensors");
    {
      TrainingSession first(o, init_parameters(o.graph(kBatch), 1));
      const FitReport r = fit(first, split.train, split.test, FitOptions{kStop, kBatch, 7, false, 0});
      save_checkpoint(path, first.parameters(), Json{{"optimizer", optimizer}}, &r.state,
                      TrainingPosition{first.step_count(), first.kernel_calls(), kStop});
    }
    // Resumes from the checkpoint; `with_state` / `with_position` drop one part of the progress.
    auto resumed = [&](bool with_state, bool with_position) {
      Checkpoint c = load_checkpoint(path, &straight.parameters());
      EXPECT_TRUE(c.progress.has_value());
      TrainingSession again(o, std::move(c.pack));
      if (with_position) again.resume(c.progress->position.steps, c.progress->position.kernel_calls);
      FitOptions rest = all;
      rest.start_epoch = c.progress->position.epochs;
      fit(again, split.train, split.test, rest, with_state ? std::move(c.progress->optimizer) : OptimizerState{});
      if (with_state && with_position) {
        EXPECT_EQ(again.step_count(), straight.step_count());
        EXPECT_EQ(again.kernel_calls(), straight.kernel_calls());
      }
      return bytes(again.parameters());
    };
    EXPECT_TRUE(resumed(true, true) == want) << "the resumed run's parameters differ from the uninterrupted run's";
    EXPECT_FALSE(resumed(false, true) == want) << "resuming without the optimizer state cannot be exact";
    EXPECT_FALSE(resumed(true, false) == want) << "resuming without the schedule position cannot be exact";
    std::filesystem::remove(path);
  }
}

TEST(Checkpoint, ProgressThatDoesNotFitTheModelIsRefused) {
  const std::string path = temp("pact_ckpt_progress.safetensors");
  const ParameterPack p = pack(1.0F);
  OptimizerState state;
  state.adam.step = 3;
  state.adam.m.resize(p.values.size());
  state.adam.m[0] = Tensor::zeros(Dims{7}, DType::f32);  // not its parameter's shape
  save_checkpoint(path, p, Json::object(), &state, TrainingPosition{3, 0, 1});
  const std::string msg = test::message_of([&] { load_checkpoint(path, &p); });
  EXPECT_TRUE(test::mentions(msg, "optimizer state '__optimizer__/m/" + p.names[0] + "' is f32[7]")) << msg;
  state.adam.m[0] = p.values[0].duplicate();
  save_checkpoint(path, p, Json::object(), &state, TrainingPosition{3, 0, 1});
  const Checkpoint c = load_checkpoint(path, &p);
  ASSERT_TRUE(c.progress.has_value());
  EXPECT_EQ(c.progress->position.steps, 3);
  EXPECT_EQ(c.progress->position.epochs, 1);
  EXPECT_EQ(c.progress->optimizer.adam.step, 3);
  ASSERT_TRUE(c.progress->optimizer.adam.m[0].has_value());
  EXPECT_FALSE(c.progress->optimizer.adam.m[1].has_value());
  EXPECT_EQ(c.pack.names.size(), p.names.size());  // the optimizer's tensors are not parameters
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace pact::train
