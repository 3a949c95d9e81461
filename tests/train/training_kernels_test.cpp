// Note [Training kernels]: what a training step computes besides the graph's nodes (gradient accumulation,
// batch-norm running statistics, optimizer updates) is admitted, shows in the plan audit, and carries
// weight: swapped for a failing kernel, the step fails. The optimizer kernels replay torch.optim's
// fixtures (tests/fixtures/optim/make_fixture.py).

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "../support/expect_error.hpp"
#include "pact/contract/provider_table.hpp"
#include "pact/core/json.hpp"
#include "pact/train/data.hpp"
#include "pact/train/trainer.hpp"

namespace pact::train {
namespace {

using ::pact::test::message_of;
using plan::KernelPurpose;

// A residual MLP: `act` feeds both the second layer and the residual add, so backward sums two gradients
// at it (the accumulation kernel runs); a batch norm keeps running statistics.
ir::Graph residual_mlp(std::int64_t batch) {
  ir::GraphBuilder b;
  b.input("x", Dims{batch, 64});
  b.input("target", Dims{batch}, DType::i64);
  b.parameter("w1", Dims{32, 64});
  b.parameter("b1", Dims{32});
  b.parameter("bn_w", Dims{32});
  b.parameter("bn_b", Dims{32});
  b.parameter("bn_mean", Dims{32}, DType::f32, false);
  b.parameter("bn_var", Dims{32}, DType::f32, false);
  b.parameter("w2", Dims{32, 32});
  b.parameter("w3", Dims{10, 32});
  b.op("fc1", ops::OpTag::linear, {"x", "w1", "b1"});
  b.op("bn", ops::OpTag::batch_norm, {"fc1", "bn_w", "bn_b", "bn_mean", "bn_var"});
  b.op("act", ops::OpTag::relu, {"bn"});
  b.op("fc2", ops::OpTag::linear, {"act", "w2"});
  b.op("res", ops::OpTag::add, {"fc2", "act"});
  b.op("logits", ops::OpTag::linear, {"res", "w3"});
  b.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
  b.output("logits");
  b.output("loss");
  return b.build();
}

Objective objective(std::string optimizer) {
  Objective o;
  o.graph = residual_mlp;
  o.options.optimizer = std::move(optimizer);
  o.options.lr = 0.01;
  return o;
}

const Dataset& digits() {
  static const Dataset d = load_digits("data/digits.csv.gz");
  return d;
}

std::pair<Tensor, Tensor> batch_of(std::int64_t offset) {
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 0; r < 8; ++r) rows.push_back(offset + r);
  return gather(digits(), rows);
}

// The handler a capsule of the audit binds (what the step runs unless a substitution is live).
const kernels::Handler& bound_handler(const plan::PlanAudit& audit, KernelPurpose purpose) {
  for (const auto& k : audit.kernels) {
    if (k.purpose == purpose && k.capsule != nullptr) return *contract::find_capsule_handler(*k.capsule);
  }
  throw std::runtime_error("no kernel of that purpose in the audit");
}

void fails(std::span<Tensor* const>, std::span<const TensorView>, const ops::Attributes&) {
  throw_error(ErrorCode::internal, "mutant", "the swapped-in kernel ran");
}

TEST(TrainingKernels, TheAuditListsAccumulationRunningStatisticsAndUpdates) {
  for (const std::string optimizer : {"sgd", "adam", "adamw"}) {
    SCOPED_TRACE(optimizer);
    const Objective o = objective(optimizer);
    TrainingSession session(o, init_parameters(o.graph(8), 1));
    const plan::PlanAudit& audit = session.audit(8);
    ASSERT_TRUE(audit.check.accepted);
    std::map<KernelPurpose, std::vector<const plan::PlannedKernel*>> by;
    for (const auto& k : audit.kernels) by[k.purpose].push_back(&k);
    ASSERT_EQ(by[KernelPurpose::accumulate].size(), 1u);  // one floating dtype: f32
    EXPECT_EQ(by[KernelPurpose::accumulate][0]->node, "accumulate:f32");
    EXPECT_EQ(by[KernelPurpose::accumulate][0]->capsule->name, "native.accumulate_grad");
    ASSERT_EQ(by[KernelPurpose::running_stats].size(), 1u);
    EXPECT_EQ(by[KernelPurpose::running_stats][0]->node, "running_stats:bn");
    EXPECT_EQ(by[KernelPurpose::running_stats][0]->op, ops::OpTag::batch_norm_stats);
    // One update per differentiable parameter: not the running statistics.
    std::vector<std::string> updated;
    for (const auto* k : by[KernelPurpose::update]) {
      updated.push_back(k->node);
      EXPECT_EQ(k->op, optimizer == "sgd" ? ops::OpTag::sgd : ops::OpTag::adam);
      EXPECT_EQ(k->capsule->name, optimizer == "sgd" ? "native.sgd" : "native.adam");
    }
    EXPECT_EQ(updated, (std::vector<std::string>{"update:w1", "update:b1", "update:bn_w", "update:bn_b", "update:w2",
                                                 "update:w3"}));
    // The JSON audit (pact plan --json --train, report.json) names each kernel's purpose.
    const Json j = plan::render_audit_json(audit);
    std::map<std::string, int> purposes;
    for (const auto& k : j.at("kernels")) ++purposes[k.at("purpose").get<std::string>()];
    EXPECT_EQ(purposes["accumulate"], 1);
    EXPECT_EQ(purposes["running_stats"], 1);
    EXPECT_EQ(purposes["update"], 6);
  }
}

TEST(TrainingKernels, SwappedForAFailingKernelTheStepFails) {
  for (const auto purpose : {KernelPurpose::accumulate, KernelPurpose::running_stats, KernelPurpose::update}) {
    SCOPED_TRACE(std::string(plan::kernel_purpose_name(purpose)));
    const Objective o = objective("adam");
    const kernels::Handler* original = nullptr;
    {
      TrainingSession probe(o, init_parameters(o.graph(8), 1));
      original = &bound_handler(probe.audit(8), purpose);
    }
    kernels::Handler mutant = *original;
    mutant.update = &fails;
    const kernels::ScopedHandlerSubstitution swap(*original, mutant);
    TrainingSession session(o, init_parameters(o.graph(8), 1));
    auto [x, y] = batch_of(0);
    EXPECT_NE(message_of([&] { session.step_batch(std::move(x), std::move(y), {}); }).find("the swapped-in kernel ran"),
              std::string::npos);
  }
}

// A quiet mutant (accumulation that adds the gradient twice) changes the gradients backward returns, so the
// gradients are the admitted kernel's work, not a side path's.
void adds_twice(std::span<Tensor* const> state, std::span<const TensorView> read, const ops::Attributes& a) {
  const kernels::Handler& honest = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::accumulate_grad);
  kernels::run_update(honest, state, read, a);
  kernels::run_update(honest, state, read, a);
}

std::vector<std::vector<double>> step_gradients(const Objective& o) {
  TrainingSession session(o, init_parameters(o.graph(8), 1));
  auto [x, y] = batch_of(16);
  StepResult r = session.step_batch(std::move(x), std::move(y), {});
  std::vector<std::vector<double>> out;
  for (const auto& g : r.gradients) {
    std::vector<double> v;
    if (g) {
      Tensor d = g->convert(DType::f64);
      auto p = d.prepare_host<double>();
      const auto s = std::get<PreparedContiguousRead<double>>(p.value()).as_span();
      v.assign(s.begin(), s.end());
    }
    out.push_back(std::move(v));
  }
  return out;
}

TEST(TrainingKernels, TheGradientsAreTheAccumulationKernelsWork) {
  const Objective o = objective("sgd");
  const auto honest = step_gradients(o);
  const kernels::Handler* original = nullptr;
  {
    TrainingSession probe(o, init_parameters(o.graph(8), 1));
    original = &bound_handler(probe.audit(8), KernelPurpose::accumulate);
  }
  kernels::Handler mutant = *original;
  mutant.update = &adds_twice;
  std::vector<std::vector<double>> swapped;
  {
    const kernels::ScopedHandlerSubstitution swap(*original, mutant);
    swapped = step_gradients(o);
  }
  EXPECT_NE(swapped, honest);
  EXPECT_EQ(step_gradients(o), honest);  // the substitution ended with its guard
}

// Running statistics are the batch_norm_stats kernel's: a mutant that writes a marker puts it in the
// parameter pack after the step.
void writes_marker(std::span<Tensor* const> state, std::span<const TensorView>, const ops::Attributes&) {
  for (Tensor* t : state) t->fill(42.0);
}

TEST(TrainingKernels, RunningStatisticsAreTheKernelsWork) {
  const Objective o = objective("sgd");
  const kernels::Handler* original = nullptr;
  {
    TrainingSession probe(o, init_parameters(o.graph(8), 1));
    original = &bound_handler(probe.audit(8), KernelPurpose::running_stats);
  }
  kernels::Handler mutant = *original;
  mutant.update = &writes_marker;
  const kernels::ScopedHandlerSubstitution swap(*original, mutant);
  TrainingSession session(o, init_parameters(o.graph(8), 1));
  auto [x, y] = batch_of(0);
  session.step_batch(std::move(x), std::move(y), {});
  const ParameterPack pack = std::move(session).finish();
  for (std::size_t i = 0; i < pack.names.size(); ++i) {
    if (pack.names[i] != "bn_mean" && pack.names[i] != "bn_var") continue;
    for (std::int64_t c = 0; c < 32; ++c) EXPECT_EQ(pack.values[i].get(Dims{c}).real, 42.0) << pack.names[i];
  }
}

// A batch of one plans with its training kernels and evaluates: the batch-norm statistics of one value per
// channel divide by 1 (a shape-rule refusal there would also refuse evaluation, which runs the same plan).
TEST(TrainingKernels, ABatchOfOnePlansStepsAndEvaluates) {
  const Objective o = objective("sgd");
  TrainingSession session(o, init_parameters(o.graph(1), 1));
  const std::int64_t row = 5;
  auto [x, y] = gather(digits(), std::span<const std::int64_t>(&row, 1));
  EXPECT_TRUE(session.audit(1).check.accepted);
  const Tensor logits = session.predict(x.as_view().duplicate());
  EXPECT_EQ(logits.shape(), (Dims{1, 10}));
  const StepResult r = session.step_batch(std::move(x), std::move(y), {});
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_EQ(session.step_count(), 1);
}

// torch.optim's SGD, Adam and AdamW, three steps each in f32 and f64, replayed through the admitted kernels.
TEST(TrainingKernels, OptimizerKernelsMatchTorchOptim) {
  std::ifstream in("tests/fixtures/optim/optim.json");
  ASSERT_TRUE(in) << "run from the repository root";
  std::stringstream text;
  text << in.rdbuf();
  const Json doc = parse_json(text.str(), "optim.json");
  ASSERT_EQ(doc.at("cases").size(), 10u);
  for (const auto& c : doc.at("cases")) {
    const std::string kind = c.at("optimizer"), dtype = c.at("dtype");
    SCOPED_TRACE(kind + " " + dtype + " " + c.at("options").dump());
    const DType d = dtype == "f32" ? DType::f32 : DType::f64;
    const auto& opt = c.at("options");
    const auto param = c.at("param").get<std::vector<double>>();
    std::vector<Tensor> params;
    params.push_back(Tensor::from_values<double>(Dims{static_cast<std::int64_t>(param.size())}, param).convert(d));
    const ops::OpTag op = kind == "sgd" ? ops::OpTag::sgd : ops::OpTag::adam;
    const auto bound = admit_updates(op, params, true, contract::builtin_profile("cpu-checked"));
    const std::vector<const contract::BoundKernel*> kernels{&bound[0]};
    SgdState sgd;
    AdamState adam;
    for (std::size_t step = 0; step < c.at("grads").size(); ++step) {
      const auto gv = c.at("grads")[step].get<std::vector<double>>();
      Tensor g = Tensor::from_values<double>(params[0].shape(), gv).convert(d);
      const std::vector<std::optional<TensorView>> grads{g.as_view()};
      if (kind == "sgd") {
        sgd = sgd_step(kernels, params, grads,
                       SgdOptions{opt.at("lr"), opt.value("momentum", 0.0), opt.value("weight_decay", 0.0)},
                       std::move(sgd));
      } else {
        adam = adam_step(kernels, params, grads,
                         AdamOptions{opt.at("lr"), opt.value("beta1", 0.9), opt.value("beta2", 0.999),
                                     opt.value("eps", 1e-8), opt.value("weight_decay", 0.0), kind == "adamw"},
                         std::move(adam));
      }
      const auto want = c.at("after")[step].get<std::vector<double>>();
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double got = params[0].get(Dims{static_cast<std::int64_t>(i)}).real;
        EXPECT_NEAR(got, want[i], d == DType::f32 ? 2e-6 * (1 + std::abs(want[i])) : 1e-13) << "step " << step;
      }
    }
  }
}

// ---- cpu-deterministic: every kernel fixedLeft, every run the same bits ----------------------------------

// One training run under cpu-deterministic at `threads` OpenMP threads: the losses of six Adam steps and
// the trained parameters (running statistics included), as bytes.
std::vector<std::uint8_t> deterministic_run(int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  Objective o = objective("adam");
  o.options.profile = "cpu-deterministic";
  TrainingSession session(o, init_parameters(o.graph(8), 1));
  for (const auto& k : session.audit(8).kernels) {  // forward, backward and training kernels alike
    if (k.capsule == nullptr) {
      ADD_FAILURE() << k.node << " has no capsule";
      continue;
    }
    EXPECT_EQ(k.capsule->provider, "reference") << k.node;
  }
  std::vector<std::uint8_t> bits;
  auto append = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    bits.insert(bits.end(), b, b + n);
  };
  OptimizerState state;
  for (int i = 0; i < 6; ++i) {
    auto [x, y] = batch_of(8 * i);
    StepResult r = session.step_batch(std::move(x), std::move(y), std::move(state));
    state = std::move(r.state);
    append(&r.loss, sizeof r.loss);
  }
  const ParameterPack pack = std::move(session).finish();
  for (const auto& v : pack.values) {
    auto p = v.prepare_host<float>();
    const auto s = std::get<PreparedContiguousRead<float>>(p.value()).as_span();
    append(s.data(), s.size_bytes());
  }
  omp_set_num_threads(saved);
  return bits;
}

// An Adam update that skips every fifth call: a kernel whose result depends on what ran before it.
const kernels::Handler* honest_update = nullptr;
int update_calls = 0;
void skips_every_fifth(std::span<Tensor* const> state, std::span<const TensorView> read, const ops::Attributes& a) {
  if (++update_calls % 5 != 0) honest_update->update(state, read, a);
}

TEST(TrainingKernels, DeterministicProfileIsBitwiseReproducibleAcrossRunsAndThreads) {
  const auto profile = contract::builtin_profile("cpu-deterministic");
  EXPECT_EQ(profile.providers, (std::vector<std::string>{"reference"}));
  const auto one = deterministic_run(1);
  EXPECT_FALSE(one.empty());
  EXPECT_TRUE(deterministic_run(1) == one) << "a second run differs";
  EXPECT_TRUE(deterministic_run(2) == one) << "two threads differ from one";
  // The comparison carries weight: with an update kernel that behaves differently from run to run, two
  // runs differ in their bits.
  {
    Objective o = objective("adam");
    o.options.profile = "cpu-deterministic";
    TrainingSession probe(o, init_parameters(o.graph(8), 1));
    honest_update = &bound_handler(probe.audit(8), KernelPurpose::update);
  }
  EXPECT_EQ(honest_update->provider, "reference");
  kernels::Handler mutant = *honest_update;
  mutant.update = &skips_every_fifth;
  const kernels::ScopedHandlerSubstitution swap(*honest_update, mutant);
  update_calls = 0;  // 6 steps of 6 updates: the second run meets the skipping at another phase
  const auto a = deterministic_run(1);
  const auto b = deterministic_run(1);
  EXPECT_FALSE(a == b);
}

}  // namespace
}  // namespace pact::train
