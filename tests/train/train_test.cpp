// Training: data loading and splitting, optimizers with explicit state, schedules, the training session in
// eager and graph modes, determinism, the digits accuracy goal, and bad input.

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "../support/expect_error.hpp"
#include "pact/train/checkpoint.hpp"
#include "pact/train/data.hpp"
#include "pact/train/fit.hpp"
#include "pact/train/trainer.hpp"

namespace pact::train {
namespace {

using ::pact::test::code_of;

const Dataset& digits() {
  static const Dataset d = load_digits("data/digits.csv.gz");
  return d;
}

// The update kernels a cpu-checked training plan binds for `params` (admit_updates: the one admission),
// kept for the process; nullptr for a parameter the optimizers do not train (its dtype is refused first).
std::vector<const contract::BoundKernel*> kernels_for(ops::OpTag op, const std::vector<Tensor>& params) {
  static std::map<std::pair<int, int>, contract::BoundKernel> cache;
  std::vector<const contract::BoundKernel*> out;
  for (const auto& p : params) {
    if (!is_floating(p.dtype())) {
      out.push_back(nullptr);
      continue;
    }
    const auto key = std::make_pair(static_cast<int>(op), static_cast<int>(p.dtype()));
    if (!cache.count(key)) {
      cache.emplace(
          key, admit_updates(op, std::span<const Tensor>(&p, 1), true, contract::builtin_profile("cpu-checked"))[0]);
    }
    out.push_back(&cache.at(key));
  }
  return out;
}

std::string write_gz(const std::string& name, const std::string& text) {
  const auto path = (std::filesystem::temp_directory_path() / name).string();
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  return path;
}

TEST(Data, DigitsLoadAndSplitStratified) {
  const Dataset& d = digits();
  EXPECT_EQ(d.rows(), 1797);
  EXPECT_EQ(d.features, 64);
  EXPECT_EQ(d.x.size(), 1797u * 64u);
  for (float v : d.x) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
  const Split s = stratified_split(d, 0.8, 7);
  EXPECT_EQ(s.train.rows() + s.test.rows(), 1797);
  for (std::int64_t c = 0; c < 10; ++c) {
    const auto total = std::count(d.y.begin(), d.y.end(), c);
    const auto train = std::count(s.train.y.begin(), s.train.y.end(), c);
    EXPECT_NEAR(static_cast<double>(train), 0.8 * static_cast<double>(total), 1.0) << "class " << c;
  }
  const Split again = stratified_split(d, 0.8, 7);
  EXPECT_EQ(again.test.x, s.test.x);  // seeded
  EXPECT_NE(stratified_split(d, 0.8, 8).test.x, s.test.x);
  EXPECT_EQ(code_of([&] { stratified_split(d, 1.5, 0); }), ErrorCode::invalid_argument);
}

// A gzip bomb (a small file that inflates without end) is refused as it inflates, at the limit
// (docs/limits.md; 1 GiB by default, 1 MiB here), not after the memory is spent.
TEST(Data, AGzipBombIsRefusedAtTheInflateLimit) {
  const std::string zeros(std::size_t{3} << 20, '0');  // 3 MiB of one byte: a few KB compressed
  const auto path = write_gz("pact_bomb.csv.gz", zeros);
  EXPECT_LT(std::filesystem::file_size(path), 64u * 1024u);
  auto load = [&] { load_digits(path, std::size_t{1} << 20); };
  EXPECT_EQ(code_of(load), ErrorCode::invalid_argument);
  EXPECT_TRUE(test::mentions(test::message_of(load), "inflates past 1048576 bytes"));
  EXPECT_EQ(kMaxDecompressedBytes, std::size_t{1} << 30);
}

TEST(Data, BadFilesAreTypedErrors) {
  EXPECT_EQ(code_of([] { load_digits("/nonexistent/digits.csv.gz"); }), ErrorCode::io_error);
  EXPECT_EQ(code_of([] { load_digits(write_gz("pact_short.csv.gz", "1,2,3\n")); }), ErrorCode::parse_error);
  std::string row;
  for (int i = 0; i < 64; ++i) row += "17,";
  EXPECT_EQ(code_of([&] { load_digits(write_gz("pact_range.csv.gz", row + "3\n")); }), ErrorCode::parse_error);
  std::string ok;
  for (int i = 0; i < 64; ++i) ok += "1,";
  EXPECT_EQ(code_of([&] { load_digits(write_gz("pact_label.csv.gz", ok + "12\n")); }), ErrorCode::parse_error);
  EXPECT_EQ(load_digits(write_gz("pact_ok.csv.gz", ok + "3\n")).rows(), 1);
  // Not gzip at all / truncated gzip.
  const auto raw = (std::filesystem::temp_directory_path() / "pact_trunc.csv.gz").string();
  {
    std::ifstream in("data/digits.csv.gz", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(raw, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  EXPECT_EQ(code_of([&] { load_digits(raw); }), ErrorCode::parse_error);
}

TEST(Optimizers, SgdMomentumAndWeightDecayFollowPyTorch) {
  std::vector<Tensor> p;
  p.push_back(Tensor::from_values<float>(Dims{2}, std::vector<float>{1.0f, -2.0f}));
  Tensor g = Tensor::from_values<float>(Dims{2}, std::vector<float>{0.5f, 0.25f});
  std::vector<std::optional<TensorView>> grads{g.as_view()};
  SgdState s = sgd_step(kernels_for(ops::OpTag::sgd, p), p, grads, SgdOptions{0.1, 0.9, 0.01}, SgdState{});
  // d = g + wd*w = [0.51, 0.23]; v = d; w -= 0.1*v
  EXPECT_FLOAT_EQ(static_cast<float>(p[0].get(Dims{0}).real), 1.0f - 0.1f * 0.51f);
  s = sgd_step(kernels_for(ops::OpTag::sgd, p), p, grads, SgdOptions{0.1, 0.9, 0.0}, std::move(s));
  // v = 0.9*0.51 + 0.5
  EXPECT_FLOAT_EQ(static_cast<float>(p[0].get(Dims{0}).real), 1.0f - 0.1f * 0.51f - 0.1f * (0.9f * 0.51f + 0.5f));
  ASSERT_TRUE(s.velocity[0].has_value());
  std::vector<std::optional<TensorView>> wrong{std::nullopt, std::nullopt};
  EXPECT_EQ(code_of([&] { sgd_step(kernels_for(ops::OpTag::sgd, p), p, wrong, SgdOptions{}, SgdState{}); }),
            ErrorCode::invalid_argument);
}

TEST(Optimizers, AdamFirstStepIsLrTimesSignAndAdamWDecaysWeights) {
  std::vector<Tensor> p;
  p.push_back(Tensor::from_values<float>(Dims{2}, std::vector<float>{1.0f, 1.0f}));
  Tensor g = Tensor::from_values<float>(Dims{2}, std::vector<float>{3.0f, -0.001f});
  std::vector<std::optional<TensorView>> grads{g.as_view()};
  AdamState s = adam_step(kernels_for(ops::OpTag::adam, p), p, grads, AdamOptions{0.01}, AdamState{});
  EXPECT_EQ(s.step, 1);
  EXPECT_NEAR(p[0].get(Dims{0}).real, 1.0 - 0.01, 1e-6);
  EXPECT_NEAR(p[0].get(Dims{1}).real, 1.0 + 0.01, 1e-5);
  std::vector<Tensor> q;
  q.push_back(Tensor::from_values<float>(Dims{1}, std::vector<float>{2.0f}));
  Tensor zero = Tensor::zeros(Dims{1}, DType::f32);
  std::vector<std::optional<TensorView>> zg{zero.as_view()};
  adam_step(kernels_for(ops::OpTag::adam, q), q, zg, AdamOptions{0.1, 0.9, 0.999, 1e-8, 0.5, true}, AdamState{});
  EXPECT_NEAR(q[0].get(Dims{0}).real, 2.0 * (1 - 0.1 * 0.5), 1e-6);  // decoupled decay only
}

TEST(Optimizers, UpdateF64ParametersInF64AndRefuseAMixedGradient) {
  // SGD in double: w = 1 - 0.1 * (g + wd * w) exactly as double arithmetic gives it.
  std::vector<Tensor> p;
  p.push_back(Tensor::from_values<double>(Dims{2}, std::vector<double>{1.0, -2.0}));
  Tensor g = Tensor::from_values<double>(Dims{2}, std::vector<double>{0.1, 1e-12});
  std::vector<std::optional<TensorView>> grads{g.as_view()};
  SgdState s = sgd_step(kernels_for(ops::OpTag::sgd, p), p, grads, SgdOptions{0.1, 0.9, 0.01}, SgdState{});
  EXPECT_EQ(p[0].dtype(), DType::f64);
  EXPECT_EQ(p[0].get(Dims{0}).real, 1.0 - 0.1 * (0.1 + 0.01 * 1.0));
  EXPECT_EQ(p[0].get(Dims{1}).real, -2.0 - 0.1 * (1e-12 + 0.01 * -2.0));  // 1e-12 is lost in f32
  ASSERT_TRUE(s.velocity[0].has_value());
  EXPECT_EQ(s.velocity[0]->dtype(), DType::f64);
  // Adam's first step moves each weight by lr * sign(g) (bias-corrected), in double.
  AdamState a = adam_step(kernels_for(ops::OpTag::adam, p), p, grads, AdamOptions{0.01}, AdamState{});
  ASSERT_TRUE(a.m[0].has_value());
  EXPECT_EQ(a.m[0]->dtype(), DType::f64);
  // A gradient of another dtype than its parameter is refused, typed, before anything is written.
  Tensor g32 = Tensor::from_values<float>(Dims{2}, std::vector<float>{1, 1});
  const double before = p[0].get(Dims{0}).real;
  std::vector<std::optional<TensorView>> mixed{g32.as_view()};
  EXPECT_EQ(code_of([&] { sgd_step(kernels_for(ops::OpTag::sgd, p), p, mixed, SgdOptions{}, SgdState{}); }),
            ErrorCode::dtype_mismatch);
  EXPECT_EQ(code_of([&] { adam_step(kernels_for(ops::OpTag::adam, p), p, mixed, AdamOptions{}, AdamState{}); }),
            ErrorCode::dtype_mismatch);
  EXPECT_EQ(p[0].get(Dims{0}).real, before);
  // Integer parameters are not trained.
  std::vector<Tensor> ints;
  ints.push_back(Tensor::zeros(Dims{2}, DType::i64));
  Tensor gi = Tensor::zeros(Dims{2}, DType::i64);
  std::vector<std::optional<TensorView>> gis{gi.as_view()};
  EXPECT_EQ(code_of([&] { sgd_step(kernels_for(ops::OpTag::sgd, ints), ints, gis, SgdOptions{}, SgdState{}); }),
            ErrorCode::dtype_mismatch);
}

TEST(Schedules, ConstantStepCosineWarmup) {
  Schedule c;
  EXPECT_EQ(learning_rate(c, 0.1, 100), 0.1);
  Schedule st{Schedule::step, 10, 0.5};
  EXPECT_DOUBLE_EQ(learning_rate(st, 0.1, 9), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(st, 0.1, 10), 0.05);
  Schedule cos{Schedule::cosine, 1, 0.1, 100, 0.0};
  EXPECT_DOUBLE_EQ(learning_rate(cos, 1.0, 0), 1.0);
  EXPECT_NEAR(learning_rate(cos, 1.0, 50), 0.5, 1e-12);
  EXPECT_NEAR(learning_rate(cos, 1.0, 100), 0.0, 1e-12);
  Schedule warm = cos;
  warm.warmup = 10;
  EXPECT_DOUBLE_EQ(learning_rate(warm, 1.0, 0), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(warm, 1.0, 10), 1.0);
}

Objective mlp_objective(std::string profile = "cpu-checked") {
  Objective o;
  o.graph = [](std::int64_t b) { return digits_mlp(b, 32); };
  o.options.profile = std::move(profile);
  o.options.lr = 0.01;
  return o;
}

std::vector<double> losses(Objective o, int steps, std::vector<std::vector<float>>* grads = nullptr) {
  const Split s = stratified_split(digits(), 0.8, 0);
  TrainingSession session(o, init_parameters(o.graph(16), 3));
  std::vector<double> out;
  OptimizerState state;
  for (int i = 0; i < steps; ++i) {
    std::vector<std::int64_t> rows;
    for (int r = 0; r < 16; ++r) rows.push_back((i * 16 + r) % s.train.rows());
    auto [x, y] = gather(s.train, rows);
    StepResult r = session.step_batch(std::move(x), std::move(y), std::move(state));
    state = std::move(r.state);
    out.push_back(r.loss);
    if (grads) {
      for (auto& g : r.gradients) {
        EXPECT_TRUE(g.has_value());
        if (!g) continue;
        auto p = g->prepare_host<float>();
        auto sp = std::get<PreparedContiguousRead<float>>(p.value()).as_span();
        grads->emplace_back(sp.begin(), sp.end());
      }
    }
  }
  EXPECT_EQ(session.step_count(), steps);
  return out;
}

// Under a cuda profile the session holds its parameters on the device from the start. Without a GPU that is
// the host-parity stub: the values are placed (and a checkpoint still reads them back through a transfer),
// and the first step refuses typed, saying no device could be opened.
TEST(TrainingSession, ACudaProfilePlacesTheParametersOnTheDevice) {
  if (cuda_provider()->name() != "cuda-stub")
    GTEST_SKIP() << "this machine has a CUDA device (the gpu tests train there)";
  const Objective o = mlp_objective("cuda-checked");
  const ParameterPack host = init_parameters(o.graph(16), 3);
  TrainingSession session(o, init_parameters(o.graph(16), 3));  // the same seed: the same values
  ASSERT_EQ(session.parameters().values.size(), host.values.size());
  for (const auto& v : session.parameters().values) EXPECT_EQ(v.device(), DeviceKind::cuda);
  const std::string path = (std::filesystem::temp_directory_path() / "pact-cuda-placed.safetensors").string();
  save_checkpoint(path, session.parameters(), Json::object());
  const Checkpoint back = load_checkpoint(path, &host);
  std::filesystem::remove(path);
  for (std::size_t i = 0; i < host.values.size(); ++i)
    EXPECT_EQ(back.pack.values[i].as_view().to_doubles(), host.values[i].as_view().to_doubles()) << host.names[i];
  const Split s = stratified_split(digits(), 0.8, 0);
  std::vector<std::int64_t> rows(16);
  std::iota(rows.begin(), rows.end(), 0);
  auto batch = gather(s.train, rows);  // a pair, not a structured binding: the lambda below captures it
  const Error e = [&] {
    try {
      session.step_batch(std::move(batch.first), std::move(batch.second), {});
    } catch (const Error& err) {
      return err;
    }
    return Error(ErrorCode::internal, "test", "the step ran without a device");
  }();
  EXPECT_EQ(e.code(), ErrorCode::no_device) << e.what();
  EXPECT_TRUE(std::string(e.what()).find("stub") != std::string::npos) << e.what();
}

// The device's kernels cover the built-in training programs: planned under cuda-checked against the stub (no
// GPU here), every kernel of the char transformer's and the digits MLP's training plans, their VJPs and Adam
// updates included, is a cuda capsule. Only the device evidence is missing, which a GPU machine supplies.
TEST(TrainingSession, TheCudaKernelsCoverTheBuiltInTrainingPrograms) {
  contract::BackendProfile stub = contract::builtin_profile("cuda-checked");
  stub.allow_cuda_stub = true;
  const contract::DefaultEvidenceResolver resolver;
  for (const ir::Graph& g : {char_transformer(2, 8, 11, 16, 2), digits_mlp(4, 8), digits_cnn(4)}) {
    auto r = plan::plan_graph(g, stub, resolver, contract::VjpMode::with_vjp, plan::TrainingUpdates{});
    const plan::PlanAudit& audit = r.has_value() ? r->audit() : r.error().audit;
    ASSERT_FALSE(audit.kernels.empty());
    for (const auto& k : audit.kernels) {
      ASSERT_NE(k.capsule, nullptr) << k.node << ": no cuda capsule";
      EXPECT_EQ(k.capsule->provider, "cuda") << k.node;
    }
    for (const auto& f : audit.check.failures()) EXPECT_EQ(f.evidence.id, "cuda.device_present") << f.node;
  }
}

TEST(TrainingSession, AStepMatchesTheSameProgramAppliedThroughTheEagerApi) {
  // The trainer runs its accepted plan through the one interpreter; applying the same loss program node by
  // node through the eager API (admission per signature) gives bitwise the same loss and gradients.
  std::vector<std::vector<float>> trained;
  const auto l = losses(mlp_objective(), 5, &trained);
  EXPECT_LT(l.back(), l.front());  // it learns

  const Objective o = mlp_objective();
  const ir::Graph g = o.graph(16);
  ParameterPack init = init_parameters(g, 3);
  runtime::Session s(contract::builtin_profile("cpu-checked"));
  s.set_training(true);
  std::map<std::string, runtime::EagerTensor> v;
  std::vector<runtime::EagerTensor> leaves;
  for (std::size_t i = 0; i < init.values.size(); ++i) {
    leaves.push_back(s.leaf(std::move(init.values[i]), init.differentiable[i]));
    v.emplace(init.names[i], leaves.back());
  }
  const Split split = stratified_split(digits(), 0.8, 0);
  std::vector<std::int64_t> rows(16);
  std::iota(rows.begin(), rows.end(), 0);
  auto [x, y] = gather(split.train, rows);
  v.emplace("x", s.constant(std::move(x)));
  v.emplace("target", s.constant(std::move(y)));
  for (const auto& n : g.nodes) {
    const auto role = ops::op_info(n.op).role;
    if (role != ops::OpRole::kernel && role != ops::OpRole::view) continue;
    std::vector<runtime::EagerTensor> in;
    for (const auto& id : n.inputs) in.push_back(v.at(id));
    v.emplace(n.id, s.apply(n.op, in, n.attrs, n.id));
  }
  EXPECT_EQ(v.at("loss").view().get(Dims{}).real, l.front());
  runtime::Gradients grads = s.backward(v.at("loss"));
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    auto gv = grads.grad(leaves[i].node);
    ASSERT_TRUE(gv.has_value());
    Tensor dense = gv->duplicate();
    auto p = dense.prepare_host<float>();
    auto sp = std::get<PreparedContiguousRead<float>>(p.value()).as_span();
    EXPECT_EQ(std::vector<float>(sp.begin(), sp.end()), trained[i]) << init.names[i];
  }
}

TEST(TrainingSession, AnAllF64MlpTrainsUnderCpuChecked) {
  // digits_mlp with every floating value f64: planned on kernels that compute f64 (the reference
  // provider), trained with f64 gradients and optimizer state, deterministically.
  const auto f64_mlp = [](std::int64_t b) {
    ir::Graph g = digits_mlp(b, 32);
    std::vector<ir::Node> nodes = g.nodes;
    for (auto& n : nodes) {
      if (n.type.dtype == DType::f32 && ops::op_info(n.op).role == ops::OpRole::source) {
        n.attrs.set("dtype", std::string("f64"));
      }
    }
    return ir::validate(std::move(nodes), g.outputs);
  };
  std::vector<std::vector<double>> runs;
  for (int run = 0; run < 2; ++run) {
    Objective o;
    o.graph = f64_mlp;
    o.options.lr = 0.01;
    const Split s = stratified_split(digits(), 0.8, 0);
    ParameterPack init = init_parameters(o.graph(16), 3);
    for (const auto& v : init.values) EXPECT_EQ(v.dtype(), DType::f64);
    TrainingSession session(o, std::move(init));
    for (const auto& k : session.audit(16).kernels) {
      ASSERT_NE(k.capsule, nullptr);
      EXPECT_EQ(k.capsule->provider, "reference") << k.node;
    }
    std::vector<double> losses;
    OptimizerState state;
    for (int i = 0; i < 6; ++i) {
      std::vector<std::int64_t> rows;
      for (int r = 0; r < 16; ++r) rows.push_back((i * 16 + r) % s.train.rows());
      auto [x, y] = gather(s.train, rows);
      StepResult r = session.step_batch(std::move(x), std::move(y), std::move(state));
      state = std::move(r.state);
      for (const auto& g : r.gradients) {
        ASSERT_TRUE(g.has_value());
        EXPECT_EQ(g->dtype(), DType::f64);
      }
      losses.push_back(r.loss);
    }
    EXPECT_LT(losses.back(), losses.front());
    ParameterPack trained = std::move(session).finish();
    for (const auto& v : trained.values) EXPECT_EQ(v.dtype(), DType::f64);
    runs.push_back(losses);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(TrainingSession, StepCountsUpdatesOnlyAndEvalDoesNotUpdate) {
  Objective o = mlp_objective();
  const Split s = stratified_split(digits(), 0.8, 0);
  TrainingSession session(o, init_parameters(o.graph(16), 3));
  std::vector<std::int64_t> rows(16);
  std::iota(rows.begin(), rows.end(), 0);
  auto [x, y] = gather(s.test, rows);
  auto [x2, y2] = gather(s.test, rows);
  const double before = session.loss(std::move(x), std::move(y));
  const double again = session.loss(std::move(x2), std::move(y2));
  EXPECT_EQ(before, again);
  EXPECT_EQ(session.step_count(), 0);
  auto [x3, y3] = gather(s.test, rows);
  Tensor logits = session.predict(std::move(x3));
  EXPECT_EQ(logits.shape(), (Dims{16, 10}));
  EXPECT_EQ(session.step_count(), 0);
  ParameterPack p = std::move(session).finish();
  EXPECT_EQ(p.names, (std::vector<std::string>{"w1", "b1", "w2", "b2"}));
  EXPECT_EQ(p.count(), 32 * 64 + 32 + 10 * 32 + 10);
}

TEST(Fit, DigitsMlpReachesTheAccuracyGoal) {
  // The defaults of `pact train`: hidden 128, batch 32, Adam lr 0.005 with cosine decay, 30 epochs, seed 0,
  // through train::fit, the library's epoch loop.
  const Split s = stratified_split(digits(), 0.8, 0);
  Objective o;
  o.graph = [](std::int64_t b) { return digits_mlp(b); };
  o.options.lr = 0.005;
  const std::int64_t batch = 32, epochs = 30, steps = s.train.rows() / batch;
  o.options.schedule.kind = Schedule::cosine;
  o.options.schedule.total = steps * epochs;
  TrainingSession session(o, init_parameters(o.graph(batch), 0));
  int observed_steps = 0, observed_epochs = 0;
  const FitReport r = fit(
      session, s.train, s.test, FitOptions{static_cast<int>(epochs), batch, 0, false, 0}, {},
      [&](const StepProgress& p) {
        EXPECT_EQ(p.step, observed_steps % steps);
        ++observed_steps;
      },
      [&](int epoch, const EpochReport&, const OptimizerState&) { EXPECT_EQ(epoch, observed_epochs++); });
  EXPECT_EQ(observed_steps, steps * epochs);
  EXPECT_EQ(r.step_loss.size(), static_cast<std::size_t>(steps * epochs));
  ASSERT_EQ(r.epochs.size(), static_cast<std::size_t>(epochs));
  EXPECT_LT(r.epochs.back().loss, r.epochs.front().loss);
  EXPECT_GT(r.retained_bytes_peak, 0u);
  EXPECT_GE(r.epochs.back().accuracy, 0.97);
  // fit's accuracy is the argmax over every class, computed here by hand on the whole test set.
  std::vector<std::int64_t> rows(static_cast<std::size_t>(s.test.rows()));
  std::iota(rows.begin(), rows.end(), 0);
  auto [x, y] = gather(s.test, rows);
  Tensor logits = session.predict(std::move(x));
  int correct = 0;
  for (std::int64_t i = 0; i < s.test.rows(); ++i) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < 10; ++c) {
      if (logits.get(Dims{i, c}).real > logits.get(Dims{i, best}).real) best = c;
    }
    correct += best == s.test.y[static_cast<std::size_t>(i)];
  }
  EXPECT_EQ(r.epochs.back().accuracy, static_cast<double>(correct) / static_cast<double>(s.test.rows()));
}

TEST(Fit, ClassesComeFromTheModelAndBadOptionsAreTyped) {
  // A three-class problem (digits 0, 1, 2 only) with a 3-way head: fit scores over three classes.
  Dataset three;
  three.features = digits().features;
  three.classes = 3;
  for (std::int64_t r = 0; r < digits().rows(); ++r) {
    const std::int64_t label = digits().y[static_cast<std::size_t>(r)];
    if (label > 2) continue;
    three.y.push_back(label);
    three.x.insert(three.x.end(), digits().x.begin() + r * three.features,
                   digits().x.begin() + (r + 1) * three.features);
  }
  const Split s = stratified_split(three, 0.8, 0);
  Objective o;
  o.graph = [](std::int64_t b) {
    ir::GraphBuilder g;
    g.input("x", {b, 64});
    g.input("target", {b}, DType::i64);
    g.parameter("w", {3, 64});
    g.parameter("b", {3});
    g.op("logits", ops::OpTag::linear, {"x", "w", "b"});
    g.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
    g.output("logits");
    g.output("loss");
    return g.build();
  };
  o.options.lr = 0.05;
  TrainingSession session(o, init_parameters(o.graph(16), 0));
  const FitReport r = fit(session, s.train, s.test, FitOptions{3, 16, 0, false, 0});
  EXPECT_GE(r.epochs.back().accuracy, 0.9);
  EXPECT_EQ(code_of([&] {
              fit(session, s.train, s.test, FitOptions{0, 16, 0, false, 0});
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              fit(session, s.train, s.test, FitOptions{1, s.train.rows() + 1, 0, false, 0});
            }),
            ErrorCode::invalid_argument);
}

TEST(TrainingSession, BadInputIsTyped) {
  Objective o = mlp_objective();
  o.options.optimizer = "lbfgs";
  EXPECT_EQ(code_of([&] { TrainingSession(o, init_parameters(o.graph(4), 0)); }), ErrorCode::invalid_argument);
  o = mlp_objective();
  o.options.lr = -1;
  EXPECT_EQ(code_of([&] { TrainingSession(o, init_parameters(o.graph(4), 0)); }), ErrorCode::invalid_argument);
  // A NaN loss stops training with a typed error.
  o = mlp_objective();
  TrainingSession session(o, init_parameters(o.graph(4), 0));
  std::vector<float> nan(4 * 64, std::nanf(""));
  Tensor x = Tensor::from_values<float>(Dims{4, 64}, nan);
  Tensor y = Tensor::zeros(Dims{4}, DType::i64);
  EXPECT_EQ(code_of([&] { session.step_batch(std::move(x), std::move(y), {}); }), ErrorCode::non_finite);
  // A rejected plan: the blas module preferred under the checked policy is not a built-in profile, so
  // use an unknown profile name instead.
  o.options.profile = "tpu-checked";
  EXPECT_EQ(code_of([&] { TrainingSession(o, init_parameters(o.graph(4), 0)); }), ErrorCode::invalid_argument);
}

// A step that fails (a non-finite loss, a target outside the classes) returns the parameters it lent to the
// tape: the session keeps them unchanged and trains on.
TEST(TrainingSession, AFailedStepKeepsTheParameters) {
  Objective o = mlp_objective();
  TrainingSession session(o, init_parameters(o.graph(4), 0));
  auto values = [&] {
    std::vector<std::vector<double>> v;
    for (const auto& p : session.parameters().values) v.push_back(p.to_doubles());
    return v;
  };
  const auto before = values();
  std::vector<float> nan(4 * 64, std::nanf(""));
  EXPECT_EQ(code_of([&] {
              session.step_batch(Tensor::from_values<float>(Dims{4, 64}, nan), Tensor::zeros(Dims{4}, DType::i64), {});
            }),
            ErrorCode::non_finite);
  const std::vector<std::int64_t> bad{0, 1, 99, 2};
  EXPECT_EQ(
      code_of([&] {
        session.step_batch(Tensor::zeros(Dims{4, 64}, DType::f32), Tensor::from_values<std::int64_t>(Dims{4}, bad), {});
      }),
      ErrorCode::index_out_of_range);
  ASSERT_EQ(values(), before);
  const StepResult r =
      session.step_batch(Tensor::full(Dims{4, 64}, DType::f32, 0.5), Tensor::zeros(Dims{4}, DType::i64), {});
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_NE(values(), before);
}

TEST(TrainingSession, BatchNormUpdatesRunningStatisticsAsPyTorch) {
  // x [8, 64] viewed as [8, 4, 16]: batch norm over 4 channels with 16 positions each.
  Objective o;
  o.graph = [](std::int64_t b) {
    ir::GraphBuilder g;
    g.input("x", Dims{b, 64});
    g.input("target", Dims{b}, DType::i64);
    g.parameter("bn_w", Dims{4});
    g.parameter("bn_b", Dims{4});
    g.buffer("bn_mean", Dims{4});
    g.buffer("bn_var", Dims{4});
    g.parameter("fc_w", Dims{10, 64});
    g.op("x3", ops::OpTag::reshape, {"x"}, ops::Attributes{{"shape", std::vector<std::int64_t>{b, 4, 16}}});
    g.op("bn", ops::OpTag::batch_norm, {"x3", "bn_w", "bn_b", "bn_mean", "bn_var"});
    g.op("flat", ops::OpTag::flatten, {"bn"}, ops::Attributes{{"start_dim", std::int64_t{1}}});
    g.op("logits", ops::OpTag::linear, {"flat", "fc_w"});
    g.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
    g.output("logits");
    g.output("loss");
    return g.build();
  };
  {
    ParameterPack init = init_parameters(o.graph(8), 1);
    EXPECT_EQ(init.buffer, (std::vector<bool>{false, false, true, true, false}));
    EXPECT_EQ(init.values[2].get(Dims{0}).real, 0.0);  // running mean starts at 0
    EXPECT_EQ(init.values[3].get(Dims{0}).real, 1.0);  // running variance at 1
    TrainingSession session(o, std::move(init));
    const Split s = stratified_split(digits(), 0.8, 0);
    std::vector<std::int64_t> rows(8);
    std::iota(rows.begin(), rows.end(), 0);
    auto [x, y] = gather(s.train, rows);
    std::vector<float> xv(s.train.x.begin(), s.train.x.begin() + 8 * 64);
    StepResult r = session.step_batch(std::move(x), std::move(y), {});
    EXPECT_FALSE(r.gradients[2].has_value()) << "buffers get no gradient";
    ParameterPack after = std::move(session).finish();
    for (int c = 0; c < 4; ++c) {
      double m = 0, v = 0;
      for (int i = 0; i < 8; ++i)
        for (int p = 0; p < 16; ++p) m += xv[static_cast<std::size_t>(i * 64 + c * 16 + p)];
      m /= 128;
      for (int i = 0; i < 8; ++i)
        for (int p = 0; p < 16; ++p) v += std::pow(xv[static_cast<std::size_t>(i * 64 + c * 16 + p)] - m, 2);
      v /= 127;  // unbiased, as PyTorch's running variance
      EXPECT_NEAR(after.values[2].get(Dims{c}).real, 0.1 * m, 1e-6) << "channel " << c;
      EXPECT_NEAR(after.values[3].get(Dims{c}).real, 0.9 + 0.1 * v, 1e-6) << "channel " << c;
    }
  }
}

}  // namespace
}  // namespace pact::train

namespace pact::train {
namespace {

// Seed 000's step, step_batch and steps: the optimizer state is passed in and returned, never kept in the
// session. Resuming from a returned state continues the same trajectory; a fresh state restarts Adam's
// moments and step (bias correction), which changes the result, so nothing of it hides in the session.
TEST(TrainingSession, OptimizerStateIsPassedInAndReturned) {
  const Objective o = mlp_objective();
  const Split s = stratified_split(digits(), 0.8, 0);
  const BatchSource source = [&](std::int64_t step) {
    std::vector<std::int64_t> rows;
    for (int r = 0; r < 16; ++r) rows.push_back((step * 16 + r) % s.train.rows());
    return gather(s.train, rows);
  };
  auto final_params = [](TrainingSession&& session) {
    std::vector<double> v;
    const ParameterPack pack = std::move(session).finish();
    for (const auto& t : pack.values) {
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        v.push_back(t.as_view().reshape(Dims{t.numel()}).get(Dims{i}).real);
      }
    }
    return v;
  };
  TrainingSession straight(o, init_parameters(o.graph(16), 3));
  const StepsResult four = straight.steps(4, source, {});
  EXPECT_EQ(straight.step_count(), 4);
  EXPECT_EQ(four.losses.size(), 4u);
  EXPECT_EQ(four.state.adam.step, 4);
  ASSERT_EQ(four.state.adam.m.size(), 4u);  // one moment per parameter, returned to the caller
  EXPECT_TRUE(four.state.adam.m[0].has_value());

  TrainingSession resumed(o, init_parameters(o.graph(16), 3));
  StepResult first = resumed.step(source, {});
  StepResult second = resumed.step(source, std::move(first.state));
  const StepsResult rest = resumed.steps(2, source, std::move(second.state));
  EXPECT_EQ(resumed.step_count(), 4);
  EXPECT_EQ(rest.losses, (std::vector<double>{four.losses[2], four.losses[3]}));
  EXPECT_EQ(rest.state.adam.step, 4);

  TrainingSession restarted(o, init_parameters(o.graph(16), 3));
  (void)restarted.steps(2, source, {});
  const StepsResult fresh = restarted.steps(2, source, {});  // a fresh state: Adam starts again
  EXPECT_EQ(fresh.state.adam.step, 2);
  EXPECT_NE(fresh.losses[1], four.losses[3]);

  const auto a = final_params(std::move(straight)), b = final_params(std::move(resumed)),
             c = final_params(std::move(restarted));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(code_of([&] {
              TrainingSession t(o, init_parameters(o.graph(16), 3));
              t.steps(-1, source, {});
            }),
            ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace pact::train
