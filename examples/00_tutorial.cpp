// A first program with Pact: build a model's graph, plan it under a profile, read the audit, train it.
//
// Built two ways: in the source tree as example_00_tutorial (a unit test), and against an installed Pact
// by examples/consumer (find_package(Pact), target Pact::pact), which the test install.consumer builds.
// It exits non-zero when one of its own checks fails.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "pact/ir/graph.hpp"
#include "pact/plan/planner.hpp"
#include "pact/train/trainer.hpp"

int main() {
  using namespace pact;

  // 1. A graph: sources (inputs and parameters) and ops from the op table, by name. The builder runs each
  //    op's shape rule as it goes, so a wrong shape is an error here, before anything is planned.
  constexpr std::int64_t kBatch = 16, kFeatures = 4, kHidden = 8, kClasses = 3;
  auto model = [](std::int64_t batch) {
    ir::GraphBuilder b;
    b.input("x", Dims{batch, kFeatures});
    b.input("target", Dims{batch}, DType::i64);
    b.parameter("w1", Dims{kHidden, kFeatures});
    b.parameter("b1", Dims{kHidden});
    b.parameter("w2", Dims{kClasses, kHidden});
    b.parameter("b2", Dims{kClasses});
    b.op("hidden", ops::OpTag::linear, {"x", "w1", "b1"});
    b.op("act", ops::OpTag::gelu, {"hidden"});
    b.op("logits", ops::OpTag::linear, {"act", "w2", "b2"});
    b.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
    b.output("logits");
    b.output("loss");
    return b.build();
  };
  const ir::Graph graph = model(kBatch);
  std::printf("graph: %zu nodes, outputs %s and %s\n", graph.nodes.size(), graph.outputs[0].c_str(),
              graph.outputs[1].c_str());

  // 2. A plan: every node gets a capsule (a kernel with its contract) that the profile admits, and every
  //    obligation of every capsule is checked against the evidence the profile accepts.
  const auto profile = contract::builtin_profile("cpu-checked");
  const contract::DefaultEvidenceResolver resolver;
  auto planned = plan::plan_graph(graph, profile, resolver, contract::VjpMode::with_vjp);
  if (!planned) {
    std::fputs(plan::render_audit_table(planned.error().audit).c_str(), stderr);
    return 1;
  }

  // 3. The audit: which capsule runs each node, its provider and ISA level, and the evidence it rests on.
  const plan::PlanAudit& audit = planned->audit();
  for (const auto& k : audit.kernels) {
    if (!k.capsule) return 1;
    std::printf("  %-8s %-14s -> %-22s (%s, %s)\n", k.node.c_str(), std::string(ops::op_kind(k.op)).c_str(),
                k.capsule->name.c_str(), k.capsule->provider.c_str(),
                std::string(plan::capsule_isa(*k.capsule)).c_str());
  }
  std::size_t accepted = 0;
  for (const auto& r : audit.check.reports) accepted += r.accepted ? 1 : 0;
  std::printf("%zu of %zu obligations accepted\n", accepted, audit.check.reports.size());
  if (!audit.check.accepted || accepted != audit.check.reports.size()) return 1;

  // 4. Training: an objective (the loss program per batch size), parameters initialised as PyTorch does,
  //    and a session that plans the training step once and runs updates.
  train::Objective objective;
  objective.graph = model;
  objective.options.optimizer = "adam";
  objective.options.lr = 0.05;
  train::TrainingSession session(objective, train::init_parameters(graph, /*seed=*/1));
  // A separable toy task: the class is which of the first three features is largest.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> xs(kBatch * kFeatures);
  std::vector<std::int64_t> labels(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) {
    for (std::int64_t f = 0; f < kFeatures; ++f) xs[static_cast<std::size_t>(i * kFeatures + f)] = normal(rng);
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < kClasses; ++c) {
      if (xs[static_cast<std::size_t>(i * kFeatures + c)] > xs[static_cast<std::size_t>(i * kFeatures + best)])
        best = c;
    }
    labels[static_cast<std::size_t>(i)] = best;
  }
  auto batch = [&](std::int64_t) {
    return std::pair{Tensor::from_values<float>(Dims{kBatch, kFeatures}, xs),
                     Tensor::from_values<std::int64_t>(Dims{kBatch}, labels)};
  };
  train::OptimizerState state;
  const auto first = session.steps(3, batch, std::move(state));
  for (std::size_t i = 0; i < first.losses.size(); ++i) std::printf("step %zu: loss %.4f\n", i + 1, first.losses[i]);
  const bool finite = std::all_of(first.losses.begin(), first.losses.end(), [](double l) { return std::isfinite(l); });
  if (!finite || !(first.losses.back() < first.losses.front())) {
    std::fprintf(stderr, "three updates on one batch did not lower its loss\n");
    return 1;
  }
  std::printf("ok\n");
  return 0;
}
