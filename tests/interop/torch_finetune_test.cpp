// Fine-tuning an imported capture (issue 22 item 4): the first training step's loss and gradients of the
// fixture models match PyTorch's own (float64, tests/interop/torch_first_step.py, run at test time) within
// 1e-4 of each gradient's scale; the same check fails on a perturbed weight. Without torch the tests say
// so and skip; the refusals are tested in full.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "pact/ir/numpy.hpp"
#include "pact/runtime/torch_run.hpp"
#include "pact/train/fine_tune.hpp"
#include "tests/interop/torch_util.hpp"
#include "tests/support/expect_error.hpp"

namespace pact {
namespace {

bool has_torch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

// PyTorch's first step on fixture `name` (see torch_first_step.py); empty on failure (the log attached).
ir::SafetensorsFile torch_first_step(const std::string& name, const std::string& loss, int repeat) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("pact-first-step-" + std::to_string(::getpid()) + "-" + name + ".safetensors"))
                              .string();
  const std::string cmd = "/usr/bin/python3 tests/interop/torch_first_step.py tests.fixtures.torch.models:" + name +
                          " tests/fixtures/torch/" + name + " " + loss + " " + std::to_string(repeat) + " " + out +
                          " >" + out + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << cmd << "\n" << test::read_text(out + ".log");
    return {};
  }
  ir::SafetensorsFile f = ir::read_safetensors(out);
  std::filesystem::remove(out);
  std::filesystem::remove(out + ".log");
  return f;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// The worst relative disagreement of Pact's first step with PyTorch's: loss and every parameter's gradient,
// each relative to max(1, its largest PyTorch magnitude). `perturb` scales the first weight first.
double first_step_error(const std::string& name, const std::string& loss, int repeat, const ir::SafetensorsFile& want,
                        double perturb = 1.0) {
  const std::string dir = "tests/fixtures/torch/" + name;
  train::TrainerOptions options;
  options.optimizer = "sgd";
  options.momentum = 0;
  const ir::TorchBundle bundle = ir::load_torch_export(dir);
  const std::int64_t captured = bundle.model.sources.front().type.shape[0];
  train::FineTune ft = train::fine_tune(ir::load_torch_export(dir), train::parse_loss_spec(loss + ":output_0"),
                                        captured * repeat, options, dir);
  EXPECT_EQ(ft.batch, captured * repeat);
  if (perturb != 1.0) {
    std::vector<double> v = ft.pack.values[0].to_doubles();
    for (double& x : v) x *= perturb;
    ft.pack.values[0] = Tensor::from_values<double>(ft.pack.values[0].shape(), v).convert(DType::f32);
  }
  const std::vector<std::string> names = ft.pack.names;
  const std::vector<bool> differentiable = ft.pack.differentiable;
  train::TrainingSession session(ft.objective, std::move(ft.pack));
  const Tensor* x = want.find("x");
  const Tensor* target = want.find("target");
  if (x == nullptr || target == nullptr) return 1e30;
  const train::StepResult r = session.step_batch(x->as_view().duplicate(), target->as_view().duplicate(), {});
  double worst = std::abs(r.loss - want.find("loss")->to_doubles()[0]) /
                 std::max(1.0, std::abs(want.find("loss")->to_doubles()[0]));
  int compared = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const Tensor* g = want.find("grad." + names[i]);
    if (!differentiable[i]) {
      EXPECT_EQ(g, nullptr) << names[i] << " has a PyTorch gradient but is not differentiable here";
      continue;
    }
    EXPECT_NE(g, nullptr) << "PyTorch has no gradient for " << names[i];
    EXPECT_TRUE(r.gradients[i].has_value()) << "no gradient for " << names[i];
    if (g == nullptr || !r.gradients[i]) continue;
    const std::vector<double> got = r.gradients[i]->to_doubles(), ref = g->to_doubles();
    EXPECT_EQ(got.size(), ref.size()) << names[i];
    if (got.size() != ref.size()) return 1e30;
    double err = 0;
    for (std::size_t k = 0; k < got.size(); ++k) err = std::max(err, std::abs(got[k] - ref[k]));
    worst = std::max(worst, err / std::max(1.0, max_abs(ref)));
    ++compared;
  }
  EXPECT_GT(compared, 0);
  return worst;
}

struct Case {
  std::string name, loss;
  int repeat;
};

TEST(FineTune, FirstStepGradientsMatchPyTorch) {
  if (!has_torch()) GTEST_SKIP() << "no torch in /usr/bin/python3 (Debian python3-torch): PyTorch's gradients unknown";
  // The MLP also at twice its captured batch (the graph refitted); the CNN's batch norm in training mode
  // (batch statistics); the transformer under mse on a [batch, seq, classes] output.
  for (const Case& c : std::vector<Case>{{"mlp", "cross_entropy", 1},
                                         {"mlp", "cross_entropy", 2},
                                         {"small_cnn", "cross_entropy", 1},
                                         {"tiny_transformer", "mse", 1}}) {
    SCOPED_TRACE(c.name + " " + c.loss + " x" + std::to_string(c.repeat));
    const ir::SafetensorsFile want = torch_first_step(c.name, c.loss, c.repeat);
    if (want.tensors.empty()) continue;
    EXPECT_LT(first_step_error(c.name, c.loss, c.repeat, want), 1e-4);
    // The check can fail: a first weight 1% off moves the first step outside it.
    EXPECT_GT(first_step_error(c.name, c.loss, c.repeat, want, 1.01), 1e-4);
  }
}

TEST(FineTune, RefusalsNameWhatIsWrong) {
  const std::string dir = "tests/fixtures/torch/mlp";
  const train::TrainerOptions options;
  auto message = [&](const std::string& loss, std::optional<std::int64_t> batch = std::nullopt) {
    return test::message_of(
        [&] { (void)train::fine_tune(ir::load_torch_export(dir), train::parse_loss_spec(loss), batch, options, dir); });
  };
  EXPECT_NE(message("cross_entropy:logits").find("its outputs: output_0"), std::string::npos)
      << message("cross_entropy:logits");
  EXPECT_NE(message("hinge:output_0").find("cross_entropy:OUTPUT or mse:OUTPUT"), std::string::npos);
  EXPECT_NE(message("cross_entropy").find("cross_entropy:OUTPUT"), std::string::npos);
  EXPECT_NE(message("cross_entropy:output_0", 0).find("must be positive"), std::string::npos);
  // mse reads any float output: the target takes its shape.
  const train::FineTune ft =
      train::fine_tune(ir::load_torch_export(dir), train::parse_loss_spec("mse:output_0"), std::nullopt, options, dir);
  const ir::Graph g = ft.objective.graph(ft.batch);
  EXPECT_EQ(g.find(ft.objective.target)->type, (ops::TensorType{DType::f32, Dims{4, 10}}));
  EXPECT_EQ(test::code_of([&] { (void)ft.objective.graph(ft.batch + 1); }), ErrorCode::invalid_argument);
  EXPECT_EQ(ft.pack.names.size(), 6u);
}

// Data files for fine-tuning: arrays by name, the features flattened to the model's rows, class ids checked.
TEST(FineTune, TensorDataSetsReadFeaturesAndTargets) {
  const auto dir = std::filesystem::temp_directory_path() / ("pact-finetune-data-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Tensor x = Tensor::from_values<float>(Dims{3, 2, 2}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  const Tensor y = Tensor::from_values<std::int64_t>(Dims{3}, std::vector<std::int64_t>{0, 2, 1});
  const std::string npz = (dir / "d.npz").string();
  ir::write_tensor_file(npz, {{"images", x.as_view()}, {"label", y.as_view()}});
  const train::LossSpec ce{train::LossSpec::Kind::cross_entropy, "output_0"};
  const train::Dataset d = train::tensor_dataset(npz, "x", "label", Dims{4}, ce, 3);
  EXPECT_EQ(d.rows(), 3);
  EXPECT_EQ(d.features, 4);
  EXPECT_EQ(d.y, (std::vector<std::int64_t>{0, 2, 1}));
  EXPECT_EQ(d.x[4], 5.0f);
  // Two files of a directory concatenate along the rows.
  std::filesystem::create_directories(dir / "parts");
  ir::write_tensor_file((dir / "parts" / "a.safetensors").string(), {{"x", x.as_view()}, {"label", y.as_view()}});
  ir::write_tensor_file((dir / "parts" / "b.safetensors").string(), {{"x", x.as_view()}, {"label", y.as_view()}});
  EXPECT_EQ(train::tensor_dataset((dir / "parts").string(), "x", "label", Dims{2, 2}, ce, 3).rows(), 6);
  auto message = [&](auto&& f) { return test::message_of(f); };
  EXPECT_NE(message([&] { (void)train::tensor_dataset(npz, "x", "target", Dims{4}, ce, 3); }).find("label"),
            std::string::npos);
  EXPECT_NE(message([&] { (void)train::tensor_dataset(npz, "x", "label", Dims{5}, ce, 3); }).find("row shape"),
            std::string::npos);
  EXPECT_NE(message([&] { (void)train::tensor_dataset(npz, "x", "label", Dims{4}, ce, 2); }).find("row 1 is 2"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pact
