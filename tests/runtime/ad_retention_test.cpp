// AD value retention with checkpointing (issue 10, items 5 and 6; seed 001 G7). The acceptance scenario:
// forward plus backward with and without checkpointing, where every allocation and every copy carries a
// reason from its own ledger and each ledger matches the expected multiset: retention allocates and
// copies nothing, a checkpointed region's interior is never retained and its recomputation is recorded
// CheckpointRecomputeOutput.

#include <gtest/gtest.h>

#include <set>

#include "../support/expect_error.hpp"
#include "pact/core/accounting.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/runtime/session.hpp"

namespace pact::runtime {
namespace {

using ::pact::test::code_of;

// s = sum(linear(gelu(linear(relu(linear(x, w1)), w2)), w3)); regions {h1, a1} and {h2, a2}.
ir::Graph mlp() {
  ir::GraphBuilder b;
  b.input("x", Dims{4, 8});
  b.parameter("w1", Dims{16, 8});
  b.parameter("w2", Dims{16, 16});
  b.parameter("w3", Dims{2, 16});
  b.op("h1", ops::OpTag::linear, {"x", "w1"});
  b.op("a1", ops::OpTag::relu, {"h1"});
  b.op("h2", ops::OpTag::linear, {"a1", "w2"});
  b.op("a2", ops::OpTag::gelu, {"h2"});
  b.op("y", ops::OpTag::linear, {"a2", "w3"});
  b.op("s", ops::OpTag::sum, {"y"});
  b.output("s");
  return b.build();
}

const std::vector<std::vector<std::string>> kRegions{{"h1", "a1"}, {"h2", "a2"}};

// Plans `g` under the session's profile and runs it through the one interpreter with `regions`.
std::map<std::string, EagerTensor> run_graph(Session& s, const ir::Graph& g,
                                             const std::map<std::string, EagerTensor>& bind,
                                             const std::vector<std::vector<std::string>>& regions) {
  auto plan = plan::plan_graph(g, s.profile(), contract::DefaultEvidenceResolver{}, contract::VjpMode::with_vjp);
  if (!plan) throw_error(ErrorCode::unsupported, "test", plan::render_audit_table(plan.error().audit));
  ExecutionOptions options;
  options.session = &s;
  options.checkpoint_regions = regions;
  return execute(*plan, bind, options).outputs;
}

Tensor pattern(Dims shape, float scale, int mod) {
  std::vector<float> v(static_cast<std::size_t>(ops::numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = scale * static_cast<float>(static_cast<int>(i % static_cast<std::size_t>(mod)) - mod / 2);
  return Tensor::from_values<float>(shape, v);
}

// The MLP's input (a constant) and weights (tracked leaves) in `s`.
std::map<std::string, EagerTensor> bind_mlp(Session& s) {
  return {{"x", s.constant(pattern({4, 8}, 0.25f, 7))},
          {"w1", s.leaf(pattern({16, 8}, 0.05f, 11))},
          {"w2", s.leaf(pattern({16, 16}, 0.04f, 9))},
          {"w3", s.leaf(pattern({2, 16}, 0.03f, 5))}};
}

struct Scenario {
  double loss = 0;
  std::vector<Tensor> grads;  // w1, w2, w3
  std::map<AllocationReason, int> allocations;
  std::map<CopyReason, int> copies;
  std::size_t tape_nodes = 0;
  std::size_t retained = 0;
};

Scenario run(bool checkpointed) {
  const ir::Graph g = mlp();
  Session s(contract::builtin_profile("cpu-checked"), 7);
  const std::map<std::string, EagerTensor> bind = bind_mlp(s);
  Scenario r;
  AccountingRecorder ledger;
  {
    const auto out = run_graph(s, g, bind, checkpointed ? kRegions : std::vector<std::vector<std::string>>{});
    const EagerTensor& loss = out.at("s");
    r.loss = loss.view().get(Dims{}).real;
    r.tape_nodes = s.tape().size();
    r.retained = s.tape().retained_values();
    Gradients grads = s.backward(loss);
    for (const char* w : {"w1", "w2", "w3"}) {
      auto t = grads.take_grad(bind.at(w).node);
      EXPECT_TRUE(t.has_value() && t.value().has_value()) << w;
      r.grads.push_back(std::move(*t.value()));
    }
  }
  r.allocations = ledger.allocation_multiset();
  r.copies = ledger.copy_multiset();
  return r;
}

TEST(AdRetention, CheckpointedScenarioMatchesTheLedgers) {
  const Scenario plain = run(false);
  const Scenario ckpt = run(true);
  // The same loss and bitwise the same gradients: recomputation repeats the forward exactly.
  EXPECT_EQ(plain.loss, ckpt.loss);
  for (std::size_t k = 0; k < 3; ++k) {
    const auto shape = plain.grads[k].shape();
    ASSERT_EQ(shape, ckpt.grads[k].shape());
    for (std::int64_t i = 0; i < shape[0]; ++i)
      for (std::int64_t j = 0; j < shape[1]; ++j)
        EXPECT_EQ(plain.grads[k].get(Dims{i, j}).real, ckpt.grads[k].get(Dims{i, j}).real) << "w" << k + 1;
  }
  // Copies: none. Retention, recording and backward make no byte-preserving copy.
  EXPECT_TRUE(plain.copies.empty());
  EXPECT_TRUE(ckpt.copies.empty());
  // Allocations: forward results (6 ops) + the ones seed + the gradients backward computes; under
  // checkpointing exactly the four region ops are recomputed, and only those carry the recompute reason.
  EXPECT_EQ(plain.allocations.size(), 1u);
  EXPECT_EQ(plain.allocations.count(AllocationReason::CheckpointRecomputeOutput), 0u);
  ASSERT_EQ(ckpt.allocations.count(AllocationReason::CheckpointRecomputeOutput), 1u);
  EXPECT_EQ(ckpt.allocations.at(AllocationReason::CheckpointRecomputeOutput), 4);
  EXPECT_EQ(ckpt.allocations.at(AllocationReason::OperationOutput),
            plain.allocations.at(AllocationReason::OperationOutput));
  EXPECT_EQ(ckpt.allocations.size(), 2u);
  // Interior values are never recorded: the tape holds 3 leaves, 2 region nodes, y and s (plain: 3 + 6),
  // and retains only the regions' boundaries.
  EXPECT_EQ(plain.tape_nodes, 9u);
  EXPECT_EQ(ckpt.tape_nodes, 7u);
  EXPECT_LT(ckpt.retained, plain.retained);
}

TEST(AdRetention, InteriorValuesAreReleasedAfterForwardUse) {
  // After forward, the tape's records are the only retention; none of them is a region's interior.
  const ir::Graph g = mlp();
  Session s(contract::builtin_profile("cpu-checked"));
  const std::map<std::string, EagerTensor> bind = bind_mlp(s);
  const auto out = run_graph(s, g, bind, kRegions);
  std::set<const AdValueRecord*> alive;
  for (std::size_t i = 0; i < s.tape().size(); ++i) {
    const auto& n = s.tape().node(static_cast<int>(i));
    for (const auto& v : n.inputs) alive.insert(v.get());
    if (n.output) alive.insert(n.output.get());
  }
  // Retained: x, w1 (region 1 inputs), a1 (its output, region 2's input), w2, a2, w3, y (s's input); h1
  // and h2 are not: nothing but the body's locals ever held them.
  EXPECT_EQ(alive.size(), 7u);
  for (const char* leaf : {"x", "w1", "w2", "w3"}) EXPECT_TRUE(alive.count(bind.at(leaf).value.get())) << leaf;
}

TEST(AdRetention, InvalidRegionsAreTyped) {
  const ir::Graph g = mlp();
  Session s(contract::builtin_profile("cpu-checked"));
  const std::map<std::string, EagerTensor> bind = bind_mlp(s);
  for (const auto& regions : std::vector<std::vector<std::vector<std::string>>>{
           {{"h1", "h2"}},                // not consecutive
           {{"nope"}},                    // no such node
           {{"x", "h1"}},                 // a source
           {{"h1", "a1"}, {"a1", "h2"}},  // overlapping
           {{}},                          // empty
       }) {
    EXPECT_EQ(code_of([&] { run_graph(s, g, bind, regions); }), ErrorCode::invalid_argument);
  }
  // A region with two values used after it.
  ir::GraphBuilder b;
  b.input("x", Dims{2});
  b.op("a", ops::OpTag::relu, {"x"});
  b.op("c", ops::OpTag::neg, {"a"});
  b.op("d", ops::OpTag::add, {"a", "c"});
  b.output("d");
  const ir::Graph two = b.build();
  Session t(contract::builtin_profile("cpu-checked"));
  const std::map<std::string, EagerTensor> xb{
      {"x", t.leaf(Tensor::from_values<float>(Dims{2}, std::vector<float>{1, -2}))}};
  EXPECT_EQ(code_of([&] { run_graph(t, two, xb, {{"a", "c"}}); }), ErrorCode::invalid_argument);
  // The same region minus the shared value is fine and differentiates like the plain graph.
  const auto ok = run_graph(t, two, xb, {{"c", "d"}});
  Gradients gr = t.backward(ok.at("d"));
  EXPECT_EQ(gr.grad(xb.at("x").node)->get(Dims{0}).real, 0.0);  // d = relu(x) - relu(x) = 0
}

}  // namespace
}  // namespace pact::runtime
