// Inference fusions (pact/plan/fusion.hpp): a folded batch norm and a fused activation give the unfused
// graph's values; the check that says so fails on a wrong fold; what cannot be fused is left alone.

#include "pact/plan/fusion.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>

#include "pact/plan/planner.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/runtime/retention.hpp"
#include "pact/runtime/torch_run.hpp"

namespace pact {
namespace {

Tensor random_tensor(const Dims& shape, std::mt19937& rng, bool positive = false) {
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<std::size_t>(ops::numel(shape)));
  for (auto& x : v) x = positive ? 0.5f + std::abs(nd(rng)) : nd(rng);
  return Tensor::from_values<float>(shape, v);
}

// Plans `g` forward only under cpu-checked and runs it on `values` (every source node's value).
Tensor run_graph(const ir::Graph& g, const plan::SourceValues& values) {
  const contract::DefaultEvidenceResolver resolver;
  auto planned =
      plan::plan_graph(g, contract::builtin_profile("cpu-checked"), resolver, contract::VjpMode::forward_only);
  EXPECT_TRUE(planned.has_value());
  std::map<std::string, runtime::EagerTensor> bindings;
  for (const auto& [id, t] : values) bindings.emplace(id, runtime::EagerTensor{runtime::retain(t.duplicate()), -1});
  auto result = runtime::execute(*planned, bindings);
  return result.outputs.at(g.outputs.front()).view().duplicate();
}

plan::SourceValues copy_of(const plan::SourceValues& values) {
  plan::SourceValues out;
  for (const auto& [id, t] : values) out.emplace(id, t.duplicate());
  return out;
}

double relative_error(const Tensor& got, const Tensor& want) {
  return runtime::compare_outputs("y", got.as_view(), want.as_view()).relative_error;
}

// x -> conv2d (bias) -> batch_norm -> activation -> output, with random parameters and statistics.
struct ConvBnModel {
  ir::Graph graph;
  plan::SourceValues values;
};
ConvBnModel conv_bn_model(ops::OpTag act, ops::Attributes act_attrs = {}) {
  std::mt19937 rng(11);
  ir::GraphBuilder b;
  b.input("x", Dims{2, 3, 9, 8});
  b.parameter("w", Dims{4, 3, 3, 3});
  b.parameter("b", Dims{4});
  b.parameter("gamma", Dims{4});
  b.parameter("beta", Dims{4});
  b.buffer("mean", Dims{4});
  b.buffer("var", Dims{4});
  b.op("conv", ops::OpTag::conv2d, {"x", "w", "b"}, ops::Attributes{{"padding", std::vector<std::int64_t>{1}}});
  b.op("bn", ops::OpTag::batch_norm, {"conv", "gamma", "beta", "mean", "var"}, ops::Attributes{{"eps", 1e-3}});
  b.op("act", act, {"bn"}, std::move(act_attrs));
  b.output("act");
  ConvBnModel m{b.build(), {}};
  for (const auto& [id, shape] : std::vector<std::pair<std::string, Dims>>{
           {"x", {2, 3, 9, 8}}, {"w", {4, 3, 3, 3}}, {"b", {4}}, {"gamma", {4}}, {"beta", {4}}, {"mean", {4}}})
    m.values.emplace(id, random_tensor(shape, rng));
  m.values.emplace("var", random_tensor(Dims{4}, rng, true));
  return m;
}

TEST(Fusion, FoldedBatchNormKeepsTheModelsValues) {
  for (const auto& [act, attrs, kind] : std::vector<std::tuple<ops::OpTag, ops::Attributes, std::string>>{
           {ops::OpTag::relu, {}, "relu"},
           {ops::OpTag::clamp, ops::Attributes{{"min", 0.0}, {"max", 6.0}}, "relu6"},
           {ops::OpTag::silu, {}, "silu"}}) {
    SCOPED_TRACE(kind);
    ConvBnModel m = conv_bn_model(act, attrs);
    const Tensor unfused = run_graph(m.graph, m.values);

    ir::Graph g = m.graph;
    plan::SourceValues values = copy_of(m.values);
    const auto folds = plan::fold_batch_norms(g, values);
    const auto fused = plan::fuse_conv_activations(g);
    ASSERT_EQ(folds.size(), 1u);
    EXPECT_EQ(folds[0].nodes, (std::vector<std::string>{"conv", "bn"}));
    EXPECT_EQ(folds[0].into, "bn");
    ASSERT_EQ(fused.size(), 1u);
    EXPECT_EQ(fused[0].into, "act");
    const ir::Node* node = g.find("act");
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->op, ops::OpTag::conv2d_activation);
    EXPECT_EQ(node->attrs.get_string("conv2d_activation", "activation"), kind);
    EXPECT_EQ(g.find("conv"), nullptr);
    EXPECT_EQ(g.find("bn"), nullptr);
    for (const char* gone : {"w", "b", "gamma", "beta", "mean", "var"}) {  // read by nothing any more
      EXPECT_EQ(g.find(gone), nullptr) << gone;
      EXPECT_FALSE(values.contains(gone)) << gone;
    }
    const Tensor folded = run_graph(g, values);
    EXPECT_LT(relative_error(folded, unfused), 1e-5);

    // The evidence can fail: a fold 1% off is far outside the tolerance.
    plan::SourceValues wrong = copy_of(values);
    const Tensor& fw = wrong.at("bn.folded_weight");
    std::vector<double> scaled;
    {
      const Tensor d = fw.convert(DType::f64);
      auto p = d.prepare_host<double>();
      for (double v : std::get<PreparedContiguousRead<double>>(p.value()).as_span()) scaled.push_back(v * 1.01);
    }
    wrong.insert_or_assign(
        "bn.folded_weight",
        Tensor::from_values<double>(fw.shape(), std::span<const double>(scaled)).convert(DType::f32));
    EXPECT_GT(relative_error(run_graph(g, wrong), unfused), 1e-4);
  }
}

// A convolution with a second reader keeps its batch norm and its activation unfused; so does one whose
// parameters are not all bound (a plan without weights).
TEST(Fusion, LeavesAloneWhatItCannotFuse) {
  ConvBnModel m = conv_bn_model(ops::OpTag::relu);
  std::vector<ir::Node> nodes = m.graph.nodes;
  nodes.push_back(ir::Node{"also", ops::OpTag::relu, {"conv"}, {}, {}, false, false, false});
  ir::Graph g = ir::validate(nodes, {"act", "also"});
  plan::SourceValues values = copy_of(m.values);
  EXPECT_TRUE(plan::fold_batch_norms(g, values).empty());
  EXPECT_NE(g.find("bn"), nullptr);
  EXPECT_NE(g.find("conv"), nullptr);
  // The batch norm's relu reads the batch norm, not a convolution: nothing to fuse.
  EXPECT_TRUE(plan::fuse_conv_activations(g).empty());

  ir::Graph h = m.graph;
  plan::SourceValues partial = copy_of(m.values);
  partial.erase("var");
  EXPECT_TRUE(plan::fold_batch_norms(h, partial).empty());
  EXPECT_NE(h.find("bn"), nullptr);
}

// x -> conv2d (bias) -> batch_norm -> add(., x) -> [activation] -> output: a ResNet basic block's tail.
ConvBnModel residual_block(std::optional<ops::OpTag> act, bool conv_first = true) {
  std::mt19937 rng(12);
  ir::GraphBuilder b;
  const Dims x{2, 4, 6, 6};
  b.input("x", x);
  b.parameter("w", Dims{4, 4, 3, 3});
  b.parameter("b", Dims{4});
  b.parameter("gamma", Dims{4});
  b.parameter("beta", Dims{4});
  b.buffer("mean", Dims{4});
  b.buffer("var", Dims{4});
  b.op("conv", ops::OpTag::conv2d, {"x", "w", "b"}, ops::Attributes{{"padding", std::vector<std::int64_t>{1}}});
  b.op("bn", ops::OpTag::batch_norm, {"conv", "gamma", "beta", "mean", "var"}, ops::Attributes{{"eps", 1e-3}});
  b.op("sum", ops::OpTag::add, conv_first ? std::vector<std::string>{"bn", "x"} : std::vector<std::string>{"x", "bn"});
  if (act) b.op("act", *act, {"sum"});
  b.output(act ? "act" : "sum");
  ConvBnModel m{b.build(), {}};
  for (const auto& [id, shape] : std::vector<std::pair<std::string, Dims>>{
           {"x", x}, {"w", {4, 4, 3, 3}}, {"b", {4}}, {"gamma", {4}}, {"beta", {4}}, {"mean", {4}}})
    m.values.emplace(id, random_tensor(shape, rng));
  m.values.emplace("var", random_tensor(Dims{4}, rng, true));
  return m;
}

// The block's add and relu join the folded convolution as one conv2d_activation with the block's input as
// its residual, whichever operand of the add the convolution is; without an activation the add joins
// alone (activation "none"). The fused graph gives the unfused one's values, and a wrong residual does not.
TEST(Fusion, ResidualAddAndActivationJoinTheConvolution) {
  for (const auto& [act, conv_first, kind] : std::vector<std::tuple<std::optional<ops::OpTag>, bool, std::string>>{
           {ops::OpTag::relu, true, "relu"}, {ops::OpTag::relu, false, "relu"}, {std::nullopt, true, "none"}}) {
    SCOPED_TRACE(kind + (conv_first ? ", conv first" : ", conv second"));
    ConvBnModel m = residual_block(act, conv_first);
    const Tensor unfused = run_graph(m.graph, m.values);

    ir::Graph g = m.graph;
    plan::SourceValues values = copy_of(m.values);
    ASSERT_EQ(plan::fold_batch_norms(g, values).size(), 1u);
    const auto fused = plan::fuse_conv_residuals(g);
    ASSERT_EQ(fused.size(), 1u);
    EXPECT_EQ(fused[0].kind, "conv2d_residual");
    const std::string into = act ? "act" : "sum";
    EXPECT_EQ(fused[0].into, into);
    EXPECT_EQ(fused[0].nodes,
              act ? (std::vector<std::string>{"bn", "sum", "act"}) : (std::vector<std::string>{"bn", "sum"}));
    EXPECT_TRUE(plan::fuse_conv_activations(g).empty());  // nothing left to fuse
    const ir::Node* node = g.find(into);
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->op, ops::OpTag::conv2d_activation);
    EXPECT_EQ(node->attrs.get_string("conv2d_activation", "activation"), kind);
    EXPECT_EQ(node->inputs, (std::vector<std::string>{"x", "bn.folded_weight", "bn.folded_bias", "x"}));
    for (const std::string gone : {"bn", "sum"}) {
      if (gone != into) {
        EXPECT_EQ(g.find(gone), nullptr) << gone;
      }
    }
    EXPECT_LT(relative_error(run_graph(g, values), unfused), 1e-5);

    // The evidence can fail: the same fused node given a zero residual is far from the unfused values.
    std::vector<ir::Node> nodes = g.nodes;
    nodes.insert(nodes.begin(), ir::parameter_node("zeros", Dims{2, 4, 6, 6}, DType::f32, false));
    for (auto& n : nodes)
      if (n.id == into) n.inputs[3] = "zeros";
    const ir::Graph wrong = ir::validate(nodes, g.outputs);
    plan::SourceValues with_zeros = copy_of(values);
    with_zeros.emplace("zeros", Tensor::from_values<float>(Dims{2, 4, 6, 6}, std::vector<float>(2 * 4 * 6 * 6, 0.0f)));
    EXPECT_GT(relative_error(run_graph(wrong, with_zeros), unfused), 1e-2);
  }
}

// An add that broadcasts, or whose convolution has another reader, is left alone.
TEST(Fusion, ResidualFusionLeavesAloneWhatItCannotFuse) {
  {
    ConvBnModel m = residual_block(ops::OpTag::relu);
    std::vector<ir::Node> nodes = m.graph.nodes;
    nodes.push_back(ir::Node{"also", ops::OpTag::neg, {"bn"}, {}, {}, false, false, false});
    ir::Graph g = ir::validate(nodes, {"act", "also"});
    EXPECT_TRUE(plan::fuse_conv_residuals(g).empty());
    EXPECT_NE(g.find("sum"), nullptr);
  }
  {
    ir::GraphBuilder b;
    b.input("x", Dims{1, 2, 4, 4});
    b.parameter("w", Dims{2, 2, 1, 1});
    b.parameter("b", Dims{2});
    b.parameter("shift", Dims{1, 2, 1, 1});
    b.op("conv", ops::OpTag::conv2d, {"x", "w", "b"});
    b.op("sum", ops::OpTag::add, {"conv", "shift"});  // broadcast: not the output's type
    b.op("act", ops::OpTag::relu, {"sum"});
    b.output("act");
    ir::Graph g = b.build();
    EXPECT_TRUE(plan::fuse_conv_residuals(g).empty());
    EXPECT_NE(g.find("sum"), nullptr);
  }
}

// Inverted-residual blocks as mobilenet_v2 has them: a 1 x 1 expansion with relu6, a 3 x 3 depthwise with
// relu6, a 1 x 1 projection (the second block's adds the first block's output), and after them a 5 x 5
// depthwise at stride 2 with silu: `blocks` of them on x [2, 32, 9, 10].
ConvBnModel inverted_residuals(int blocks) {
  std::mt19937 rng(5);
  ir::GraphBuilder b;
  ConvBnModel m;
  auto param = [&](const std::string& id, const Dims& shape) {
    b.parameter(id, shape);
    m.values.emplace(id, random_tensor(shape, rng));
  };
  const ops::Attributes relu6{{"min", 0.0}, {"max", 6.0}};
  b.input("x", Dims{2, 32, 9, 10});
  m.values.emplace("x", random_tensor(Dims{2, 32, 9, 10}, rng));
  std::string at = "x";
  for (int k = 0; k < blocks; ++k) {
    const std::string s = std::to_string(k);
    param("we" + s, Dims{48, 32, 1, 1});
    param("be" + s, Dims{48});
    param("wd" + s, Dims{48, 1, 3, 3});
    param("bd" + s, Dims{48});
    param("wp" + s, Dims{32, 48, 1, 1});
    param("bp" + s, Dims{32});
    b.op("e" + s, ops::OpTag::conv2d, {at, "we" + s, "be" + s});
    b.op("e6" + s, ops::OpTag::clamp, {"e" + s}, relu6);
    b.op("d" + s, ops::OpTag::conv2d, {"e6" + s, "wd" + s, "bd" + s},
         ops::Attributes{{"groups", std::int64_t{48}}, {"padding", std::vector<std::int64_t>{1}}});
    b.op("d6" + s, ops::OpTag::clamp, {"d" + s}, relu6);
    b.op("p" + s, ops::OpTag::conv2d, {"d6" + s, "wp" + s, "bp" + s});
    b.op("sum" + s, ops::OpTag::add, {"p" + s, at});
    at = "sum" + s;
  }
  param("ws", Dims{32, 1, 5, 5});
  b.op("s", ops::OpTag::conv2d, {at, "ws"},
       ops::Attributes{{"groups", std::int64_t{32}},
                       {"stride", std::vector<std::int64_t>{2}},
                       {"padding", std::vector<std::int64_t>{2}}});
  b.op("y", ops::OpTag::silu, {"s"});
  b.output("y");
  m.graph = b.build();
  return m;
}

// The graph after every inference fusion, the layout chosen by `layout`.
std::vector<plan::Rewrite> fuse_all(ir::Graph& g, plan::SourceValues& values, plan::Layout layout) {
  auto rewrites = plan::fold_batch_norms(g, values);
  for (auto& r : plan::fuse_conv_residuals(g)) rewrites.push_back(std::move(r));
  for (auto& r : plan::fuse_conv_activations(g)) rewrites.push_back(std::move(r));
  for (auto& r : plan::choose_channels_last(g, values, layout)) rewrites.push_back(std::move(r));
  return rewrites;
}

// Moving convolutions to channels-last keeps the model's values: the re-packed weights, the permutes at the
// run's ends and the conv2d_nhwc kernels together give the NCHW graph's output; and the check fails on a
// weight re-packed wrong (its kernel rows and columns exchanged).
TEST(Fusion, ChannelsLastKeepsTheModelsValues) {
  ConvBnModel m = inverted_residuals(2);
  const Tensor unfused = run_graph(m.graph, m.values);
  ir::Graph g = m.graph;
  plan::SourceValues values = copy_of(m.values);
  std::size_t moved = 0;
  for (const auto& r : fuse_all(g, values, plan::Layout::nhwc)) {
    if (r.kind != "conv2d_nhwc") continue;
    ++moved;
    EXPECT_EQ(r.into, r.nodes.front() + ".nhwc");
    EXPECT_EQ(r.evidence, "Fusion.ChannelsLastKeepsTheModelsValues");
    const ir::Node* n = g.find(r.into);
    ASSERT_NE(n, nullptr) << r.into;
    EXPECT_EQ(n->op, ops::OpTag::conv2d_nhwc);
  }
  EXPECT_EQ(moved, 7u);  // three per block and the stride-2 depthwise
  // The weights are re-packed once ([O, C / groups, KH, KW] -> [KH, KW, C / groups, O]); the old ones are gone.
  ASSERT_TRUE(values.contains("wd0.nhwc"));
  EXPECT_EQ(values.at("wd0.nhwc").shape(), (Dims{3, 3, 1, 48}));
  EXPECT_EQ(values.at("we1.nhwc").shape(), (Dims{1, 1, 32, 48}));
  EXPECT_FALSE(values.contains("wd0"));
  EXPECT_EQ(g.find("wd0"), nullptr);
  // The layout changes only at the run's ends: x in, the last convolution's output (its silu fused, so
  // the node "y") out;
  // between two moved convolutions nothing is permuted.
  std::vector<std::string> permutes;
  for (const auto& n : g.nodes)
    if (n.op == ops::OpTag::permute) permutes.push_back(n.id);
  EXPECT_EQ(permutes, (std::vector<std::string>{"x.to_nhwc", "y"})) << fmt::format("{}", fmt::join(permutes, ", "));
  EXPECT_LT(relative_error(run_graph(g, values), unfused), 1e-5);

  // The evidence can fail: the depthwise weight's kernel rows and columns exchanged.
  plan::SourceValues wrong = copy_of(values);
  const std::vector<double> w = wrong.at("wd0.nhwc").to_doubles();
  std::vector<float> swapped(w.size());
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t c = 0; c < 48; ++c) swapped[(j * 3 + i) * 48 + c] = static_cast<float>(w[(i * 3 + j) * 48 + c]);
  wrong.insert_or_assign("wd0.nhwc", Tensor::from_values<float>(Dims{3, 3, 1, 48}, swapped));
  EXPECT_GT(relative_error(run_graph(g, wrong), unfused), 1e-4);
}

// A graph that already has the ids the layout choice would make gets others: its own node keeps its id and
// its value, the moved convolution takes "<id>.nhwc.2".
TEST(Fusion, ChannelsLastIdsDoNotCollide) {
  ConvBnModel m = conv_bn_model(ops::OpTag::relu);
  ir::GraphBuilder b;
  for (const auto& n : m.graph.nodes) {
    if (n.op == ops::OpTag::input)
      b.input(n.id, n.type.shape);
    else if (n.op == ops::OpTag::parameter)
      b.parameter(n.id, n.type.shape);
    else
      b.op(n.id, n.op, n.inputs, n.attrs);
  }
  b.input("act.nhwc", Dims{2, 4, 9, 8});
  b.op("sum", ops::OpTag::add, {"act", "act.nhwc"});
  b.output("sum");
  m.graph = b.build();
  std::mt19937 rng(3);
  m.values.emplace("act.nhwc", random_tensor(Dims{2, 4, 9, 8}, rng));
  const Tensor unfused = run_graph(m.graph, m.values);
  ir::Graph g = m.graph;
  plan::SourceValues values = copy_of(m.values);
  const auto rewrites = fuse_all(g, values, plan::Layout::nhwc);
  std::vector<std::string> convolutions;
  for (const auto& r : rewrites)
    if (r.kind == "conv2d_nhwc") convolutions.push_back(r.into);
  EXPECT_EQ(convolutions, std::vector<std::string>{"act.nhwc.2"});
  ASSERT_NE(g.find("act.nhwc"), nullptr);
  EXPECT_EQ(g.find("act.nhwc")->op, ops::OpTag::input);
  EXPECT_LT(relative_error(run_graph(g, values), unfused), 1e-5);
}

// The automatic choice (Note [Where channels-last pays]) moves a run of depthwise and 1 x 1 convolutions
// that passes at least twice as many tensors inside as across its ends, and nothing else; nchw moves none.
TEST(Fusion, ChannelsLastMovesOnlyRunsThatPay) {
  auto moved = [](ConvBnModel m, plan::Layout layout) {
    std::set<std::string> ids;
    for (const auto& r : fuse_all(m.graph, m.values, layout))
      if (r.kind == "conv2d_nhwc") ids.insert(r.nodes.front());
    return ids;
  };
  // Two blocks: seven reads inside the run (e -> d -> p twice, p0 -> e1, p0 as p1's residual, p1 -> s),
  // two tensors across its ends (x in, s's output out).
  EXPECT_EQ(moved(inverted_residuals(2), plan::Layout::automatic).size(), 7u);
  // One block: three inside (e -> d -> p -> s), two across: stays NCHW.
  EXPECT_TRUE(moved(inverted_residuals(1), plan::Layout::automatic).empty());
  EXPECT_TRUE(moved(inverted_residuals(2), plan::Layout::nchw).empty());
  // A dense 3 x 3 convolution is no candidate, whatever the run: the conv_bn model moves under nhwc only.
  EXPECT_TRUE(moved(conv_bn_model(ops::OpTag::relu), plan::Layout::automatic).empty());
  EXPECT_EQ(moved(conv_bn_model(ops::OpTag::relu), plan::Layout::nhwc).size(), 1u);
  // The names `pact run --layout` takes.
  for (plan::Layout l : {plan::Layout::automatic, plan::Layout::nchw, plan::Layout::nhwc})
    EXPECT_EQ(plan::parse_layout(plan::layout_name(l)), l);
  EXPECT_EQ(plan::parse_layout("NHWC"), std::nullopt);
}

// Blocks as efficientnet_b0 has them, on x [batch, 32, 9, 10]: a 1 x 1 expansion with silu, a 3 x 3 depthwise
// with silu, squeeze-and-excitation (the mean over H and W keeping them, a 1 x 1 squeeze to 12 with silu, an
// excitation to 48, sigmoid: a gate [batch, 48, 1, 1] that multiplies the depthwise output), a 1 x 1 projection,
// a layer scale of [32, 1, 1] and a residual add; then hardswish, times a single value, and the mean over H
// and W (not keeping them): y [batch, 32].
ConvBnModel squeeze_excitation(int blocks, std::int64_t batch) {
  std::mt19937 rng(11);
  ir::GraphBuilder b;
  ConvBnModel m;
  auto param = [&](const std::string& id, const Dims& shape) {
    b.parameter(id, shape);
    m.values.emplace(id, random_tensor(shape, rng));
  };
  const ops::Attributes pool_keep{{"dims", std::vector<std::int64_t>{-1, -2}}, {"keepdim", true}};
  b.input("x", Dims{batch, 32, 9, 10});
  m.values.emplace("x", random_tensor(Dims{batch, 32, 9, 10}, rng));
  std::string at = "x";
  for (int k = 0; k < blocks; ++k) {
    const std::string s = std::to_string(k);
    param("we" + s, Dims{48, 32, 1, 1});
    param("wd" + s, Dims{48, 1, 3, 3});
    param("bd" + s, Dims{48});
    param("w1" + s, Dims{12, 48, 1, 1});
    param("b1" + s, Dims{12});
    param("w2" + s, Dims{48, 12, 1, 1});
    param("b2" + s, Dims{48});
    param("wp" + s, Dims{32, 48, 1, 1});
    param("scale" + s, Dims{32, 1, 1});
    b.op("e" + s, ops::OpTag::conv2d, {at, "we" + s});
    b.op("es" + s, ops::OpTag::silu, {"e" + s});
    b.op("d" + s, ops::OpTag::conv2d, {"es" + s, "wd" + s, "bd" + s},
         ops::Attributes{{"groups", std::int64_t{48}}, {"padding", std::vector<std::int64_t>{1}}});
    b.op("ds" + s, ops::OpTag::silu, {"d" + s});
    b.op("squeeze" + s, ops::OpTag::mean, {"ds" + s}, pool_keep);
    b.op("f1" + s, ops::OpTag::conv2d, {"squeeze" + s, "w1" + s, "b1" + s});
    b.op("f1s" + s, ops::OpTag::silu, {"f1" + s});
    b.op("f2" + s, ops::OpTag::conv2d, {"f1s" + s, "w2" + s, "b2" + s});
    b.op("gate" + s, ops::OpTag::sigmoid, {"f2" + s});
    b.op("excited" + s, ops::OpTag::mul, {"gate" + s, "ds" + s});
    b.op("p" + s, ops::OpTag::conv2d, {"excited" + s, "wp" + s});
    b.op("scaled" + s, ops::OpTag::mul, {"p" + s, "scale" + s});
    b.op("sum" + s, ops::OpTag::add, {at, "scaled" + s});
    at = "sum" + s;
  }
  param("half", Dims{});
  b.op("h", ops::OpTag::hardswish, {at});
  b.op("hh", ops::OpTag::mul, {"h", "half"});
  b.op("y", ops::OpTag::mean, {"hh"}, ops::Attributes{{"dims", std::vector<std::int64_t>{2, 3}}});
  b.output("y");
  m.graph = b.build();
  return m;
}

// Channels-last passes through the squeeze-and-excitation blocks (Note [Carrying channels-last through
// elementwise ops and means]): the means, the gated and scaled products, the residual adds and the last
// elementwise ops move with the convolutions, one permute takes x in and nothing permutes back (the last
// mean's [1, 32] is the NCHW one); the values stay the NCHW graph's. And the check fails on a wrong
// permute in (H and W exchanged: the depthwise kernel then runs transposed).
TEST(Fusion, ChannelsLastPassesThroughSqueezeAndExcitation) {
  ConvBnModel m = squeeze_excitation(2, 1);
  const Tensor unfused = run_graph(m.graph, m.values);
  for (plan::Layout layout : {plan::Layout::automatic, plan::Layout::nhwc}) {
    SCOPED_TRACE(plan::layout_name(layout));
    ir::Graph g = m.graph;
    plan::SourceValues values = copy_of(m.values);
    std::set<std::string> convolutions, carried;
    for (const auto& r : fuse_all(g, values, layout)) {
      if (r.kind == "conv2d_nhwc") convolutions.insert(r.nodes.front());
      if (r.kind == "channels_last") carried.insert(r.nodes.front());
      if (r.kind == "conv2d_nhwc" || r.kind == "channels_last") {
        EXPECT_EQ(r.evidence, "Fusion.ChannelsLastKeepsTheModelsValues");
      }
    }
    // Each convolution by the id it has after its activation is fused (the projections have no bias, so
    // their layer scale and residual add are not).
    const std::set<std::string> carried_expected = {"squeeze0", "excited0", "scaled0", "sum0", "squeeze1", "excited1",
                                                    "scaled1",  "sum1",     "h",       "hh",   "y"};
    std::set<std::string> expected_convolutions = {"es0", "ds0", "p0", "es1", "ds1", "p1"};
    // The squeeze and excitation, on one pixel, are no candidates for the automatic choice.
    if (layout == plan::Layout::nhwc) expected_convolutions.insert({"f1s0", "f20", "f1s1", "f21"});
    EXPECT_EQ(convolutions, expected_convolutions);
    EXPECT_EQ(carried, carried_expected);
    std::vector<std::string> permutes;
    for (const auto& n : g.nodes)
      if (n.op == ops::OpTag::permute) permutes.push_back(n.id);
    EXPECT_EQ(permutes, std::vector<std::string>{"x.to_nhwc"}) << fmt::format("{}", fmt::join(permutes, ", "));
    ASSERT_NE(g.find("squeeze0.nhwc"), nullptr);
    EXPECT_EQ(g.find("squeeze0.nhwc")->type.shape, (Dims{1, 48}));
    ASSERT_NE(g.find("gate0.to_nhwc"), nullptr);
    EXPECT_EQ(g.find("gate0.to_nhwc")->type.shape, (Dims{1, 1, 1, 48}));
    EXPECT_LT(relative_error(run_graph(g, values), unfused), 1e-5);

    std::vector<ir::Node> nodes = g.nodes;
    for (auto& n : nodes)
      if (n.id == "x.to_nhwc") n.attrs.set("dims", std::vector<std::int64_t>{0, 3, 2, 1});
    for (auto& n : nodes) n.type_declared = n.op == ops::OpTag::input || n.op == ops::OpTag::parameter;
    const ir::Graph wrong = ir::validate(nodes, g.outputs);
    EXPECT_GT(relative_error(run_graph(wrong, values), unfused), 1e-3);
  }
}

// A batch of images: the gate is per image ([2, 48, 1, 1]), so the gated products stay NCHW (Note [Carrying
// channels-last through elementwise ops and means]) and cut the run; the values stay the NCHW graph's.
TEST(Fusion, ChannelsLastLeavesAPerImageGateNchw) {
  ConvBnModel m = squeeze_excitation(2, 2);
  const Tensor unfused = run_graph(m.graph, m.values);
  ir::Graph g = m.graph;
  plan::SourceValues values = copy_of(m.values);
  std::set<std::string> moved;
  for (const auto& r : fuse_all(g, values, plan::Layout::nhwc))
    if (r.kind == "conv2d_nhwc" || r.kind == "channels_last") moved.insert(r.nodes.front());
  EXPECT_FALSE(moved.contains("excited0"));
  EXPECT_FALSE(moved.contains("excited1"));
  EXPECT_TRUE(moved.contains("squeeze0"));
  EXPECT_TRUE(moved.contains("p0"));
  EXPECT_LT(relative_error(run_graph(g, values), unfused), 1e-5);
}

// Every committed PyTorch capture gives the same outputs fused and as captured, and both agree with
// PyTorch; the CNN's batch norms and activations are fused.
TEST(Fusion, CapturesAgreeFusedAndUnfused) {
  const contract::DefaultEvidenceResolver resolver;
  const auto profile = contract::builtin_profile("cpu-checked");
  for (const char* model : {"mlp", "small_cnn", "tiny_transformer", "tiny_gpt"}) {
    SCOPED_TRACE(model);
    const std::string dir = std::string("tests/fixtures/torch/") + model;
    auto run = [&](bool fuse) {
      return runtime::run_imported(ir::load_torch_export(dir), ir::read_safetensors(dir + "/example_input.safetensors"),
                                   profile, resolver, {0, false, fuse});
    };
    const auto fused = run(true), plain = run(false);
    ASSERT_TRUE(fused.accepted && plain.accepted);
    EXPECT_TRUE(plain.audit.rewrites.empty());
    if (std::string(model) == "small_cnn") {
      EXPECT_GE(fused.audit.rewrites.size(), 2u);
      EXPECT_LT(fused.audit.kernels.size(), plain.audit.kernels.size());
    }
    const auto expected = ir::read_safetensors(dir + "/expected_output.safetensors");
    for (const auto& [name, t] : fused.outputs) {
      EXPECT_LT(relative_error(t, plain.outputs.at(name)), 1e-5) << name;
      EXPECT_LT(runtime::compare_outputs(name, t.as_view(), expected.find(name)->as_view()).relative_error, 1e-4);
    }
  }
}

}  // namespace
}  // namespace pact
