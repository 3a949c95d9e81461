// The PyTorch adapter: the committed fixture corpus imports, plans and matches PyTorch; malformed captures
// fail typed, naming the node, tensor or field.

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <set>

#include "pact/core/cpu.hpp"
#include "pact/core/json.hpp"
#include "tests/interop/torch_util.hpp"
#include "tests/support/expect_error.hpp"

namespace pact {
namespace {

using test::code_of;
using test::mentions;
using test::message_of;
using test::read_text;

const std::string kFixtures = "tests/fixtures/torch";

class Fixture : public ::testing::TestWithParam<const char*> {};

TEST_P(Fixture, MatchesPyTorchWithinOneInTenThousand) {
  const std::string dir = kFixtures + "/" + GetParam();
  EXPECT_LE(test::worst_relative_error(dir, "cpu-checked"), 1e-4);
  EXPECT_LE(test::worst_relative_error(dir, "cpu-external"), 1e-4);
}

TEST_P(Fixture, ImportRoundTripsThroughTheWireFormat) {
  const auto bundle = ir::load_torch_export(kFixtures + "/" + GetParam());
  const auto& m = bundle.model;
  EXPECT_FALSE(m.capture_method.empty());
  EXPECT_GT(m.aten_nodes, 0u);
  ASSERT_FALSE(m.outputs.empty());
  for (const auto& o : m.outputs) EXPECT_NE(m.graph.find(o.node), nullptr) << o.name;
  const ir::Graph again = ir::parse_graph(ir::to_json(m.graph).dump());
  ASSERT_EQ(again.nodes.size(), m.graph.nodes.size());
  for (std::size_t i = 0; i < again.nodes.size(); ++i) {
    EXPECT_EQ(again.nodes[i].id, m.graph.nodes[i].id);
    EXPECT_EQ(again.nodes[i].type, m.graph.nodes[i].type) << again.nodes[i].id;
  }
  // Every source the graph keeps has a value: a weight or a lowering constant.
  const auto state = bundle.state();
  for (const auto& n : m.graph.nodes) {
    if (n.op == ops::OpTag::parameter || n.op == ops::OpTag::constant) {
      EXPECT_TRUE(state.count(n.id)) << n.id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, Fixture, ::testing::Values("mlp", "small_cnn", "tiny_transformer", "tiny_gpt"));

TEST(TorchImport, LowersTheCnnToTheExpectedOps) {
  const auto m = ir::load_torch_export(kFixtures + "/small_cnn").model;
  std::map<ops::OpTag, int> count;
  for (const auto& n : m.graph.nodes) ++count[n.op];
  EXPECT_EQ(count[ops::OpTag::conv2d], 7);
  EXPECT_EQ(count[ops::OpTag::batch_norm], 6);  // eval-mode batch norm keeps its running statistics
  EXPECT_EQ(count[ops::OpTag::max_pool2d], 1);
  EXPECT_EQ(count[ops::OpTag::linear], 1);  // addmm(bias, x, t(W)) is nn.Linear
  EXPECT_EQ(count[ops::OpTag::clamp], 1);   // relu6 -> hardtanh -> clamp
  EXPECT_EQ(count[ops::OpTag::concat], 1);
  // Buffers stay buffers, parameters stay differentiable.
  const auto* rv = m.graph.find("stem.1.running_var");
  ASSERT_NE(rv, nullptr);
  EXPECT_TRUE(rv->buffer);
  const auto* w = m.graph.find("stem.0.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->differentiable);
  // The nn.Module stack survives as the innermost module of each node.
  bool saw_block = false;
  for (const auto& [id, module] : m.module_of) saw_block = saw_block || module == "layer2.down.0";
  EXPECT_TRUE(saw_block);
}

TEST(TorchImport, TransformerAndGptUseAttentionBuildingBlocks) {
  const auto t = ir::load_torch_export(kFixtures + "/tiny_transformer").model;
  std::map<ops::OpTag, int> count;
  for (const auto& n : t.graph.nodes) ++count[n.op];
  EXPECT_EQ(count[ops::OpTag::softmax], 1);
  EXPECT_EQ(count[ops::OpTag::layer_norm], 3);
  EXPECT_EQ(count[ops::OpTag::gelu], 1);
  const auto g = ir::load_torch_export(kFixtures + "/tiny_gpt").model;
  EXPECT_EQ(g.capture_method, "make_fx");  // arange over a traced size is control flow to torch.fx
  std::map<ops::OpTag, int> gcount;
  for (const auto& n : g.graph.nodes) ++gcount[n.op];
  EXPECT_EQ(gcount[ops::OpTag::embedding], 2);
  EXPECT_EQ(gcount[ops::OpTag::log_softmax], 1);
  const auto* idx = g.find_source("idx");
  ASSERT_NE(idx, nullptr);
  EXPECT_EQ(idx->type.dtype, DType::i64);
}

// ---- malformed captures --------------------------------------------------------------------------

Json mlp_doc() { return parse_json(read_text(kFixtures + "/mlp/graph.json"), "mlp"); }

Json& node_named(Json& doc, const std::string& target_prefix) {
  for (auto& n : doc["graph"]["nodes"]) {
    if (n["target"].get<std::string>().rfind(target_prefix, 0) == 0) return n;
  }
  ADD_FAILURE() << "no node " << target_prefix;
  return doc;
}

TEST(TorchImport, UnsupportedTargetNamesTheNodeAndTarget) {
  Json doc = mlp_doc();
  Json& n = node_named(doc, "aten.relu");
  const std::string name = n["name"];
  n["target"] = "aten.frobnicate.default";
  const auto msg = message_of([&] { ir::import_torch_graph(doc.dump()); });
  EXPECT_TRUE(mentions(msg, name)) << msg;
  EXPECT_TRUE(mentions(msg, "aten.frobnicate.default")) << msg;
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), ErrorCode::unsupported);
  n["target"] = "prims.relu.default";
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), ErrorCode::unsupported);
}

// Issue 22: an import that meets several unsupported operators lists them all at once, each with its first
// node and how many nodes use it, in the order the graph meets them (it used to stop at the first).
TEST(TorchImport, EveryUnsupportedOperatorIsListedAtOnce) {
  Json doc = mlp_doc();
  std::vector<std::string> names;
  for (auto& n : doc["graph"]["nodes"]) {
    const std::string target = n["target"];
    if (target.rfind("aten.relu", 0) == 0) {
      n["target"] = "aten.frobnicate.default";
      names.push_back(n["name"]);
    } else if (target.rfind("aten.addmm", 0) == 0 || target.rfind("aten.linear", 0) == 0) {
      n["target"] = "aten.bucketize.Tensor";
      names.push_back(n["name"]);
    }
  }
  ASSERT_EQ(names.size(), 4U) << "the mlp fixture has three linear layers (addmm) and a relu";
  const auto msg = message_of([&] { ir::import_torch_graph(doc.dump()); });
  EXPECT_TRUE(mentions(msg, "does not support 2 operators")) << msg;
  EXPECT_TRUE(mentions(msg, "aten.frobnicate.default (node '")) << msg;
  EXPECT_TRUE(mentions(msg, "aten.bucketize.Tensor (node '")) << msg;
  EXPECT_TRUE(mentions(msg, "and 2 more")) << msg;  // the three linear layers share one target
  EXPECT_TRUE(mentions(msg, "(4 nodes)")) << msg;
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), ErrorCode::unsupported);
}

// The lowerings Swin and MaxViT brought (index.Tensor, constant_pad_nd, roll) and index_put refuse what they
// cannot express, typed and naming the node: several index tensors or a boolean mask, an accumulating write,
// pad amounts that do not pair up or crop below zero, shifts that do not match their dims.
TEST(TorchImport, IndexPadAndRollRefuseWhatTheyCannotExpress) {
  auto tensor = [](const std::string& name) { return Json{{"as_tensor", Json{{"name", name}}}}; };
  auto arg = [](const char* name, Json value) { return Json{{"name", name}, {"arg", std::move(value)}}; };
  auto ints = [](std::vector<std::int64_t> v) { return Json{{"as_ints", v}}; };
  const Json mask = Json{{"as_tensors", Json::array({Json{{"name", "mask"}}})}};
  struct Case {
    const char* target;
    std::function<Json(const std::string& x)> inputs;  // the node's inputs, x its tensor operand
    ErrorCode code;
    const char* why;
  };
  const Case cases[] = {
      {"aten.index.Tensor",
       [&](const std::string& x) {
         const Json three = Json::array({Json{{"as_none", nullptr}}, tensor(x), tensor(x)});
         return Json::array({arg("self", tensor(x)), arg("indices", Json{{"as_optional_tensors", three}})});
       },
       ErrorCode::unsupported, "more than one index tensor"},
      {"aten.index.Tensor",
       [&](const std::string& x) {
         return Json::array({arg("self", tensor(x)), arg("indices", mask)});
       },
       ErrorCode::unsupported, "boolean mask"},
      {"aten.constant_pad_nd.default",
       [&](const std::string& x) {
         return Json::array({arg("self", tensor(x)), arg("pad", ints({1, 2, 3}))});
       },
       ErrorCode::invalid_argument, "3 pad amounts"},
      {"aten.constant_pad_nd.default",
       [&](const std::string& x) {
         return Json::array({arg("self", tensor(x)), arg("pad", ints({-100, -100}))});
       },
       ErrorCode::invalid_argument, "below zero"},
      {"aten.roll.default",
       [&](const std::string& x) {
         return Json::array({arg("self", tensor(x)), arg("shifts", ints({1, 2})), arg("dims", ints({0}))});
       },
       ErrorCode::invalid_argument, "2 shifts for 1 dims"},
      {"aten.index_put.default",
       [&](const std::string& x) {
         return Json::array({arg("self", tensor(x)), arg("indices", mask), arg("values", tensor(x)),
                             arg("accumulate", Json{{"as_bool", true}})});
       },
       ErrorCode::unsupported, "index_put with accumulate"},
      {"aten.index_put.default",
       [&](const std::string& x) {
         return Json::array({arg("self", tensor(x)), arg("indices", mask), arg("values", tensor(x))});
       },
       ErrorCode::unsupported, "boolean mask"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.target) + ": " + c.why);
    Json doc = mlp_doc();
    Json& n = node_named(doc, "aten.relu");
    const std::string x = n["inputs"][0]["arg"]["as_tensor"]["name"];
    n["target"] = c.target;
    n["inputs"] = c.inputs(x);
    doc["graph"]["tensor_values"]["mask"] =
        Json{{"dtype", "bool"}, {"sizes", Json::array({2})}, {"strides", Json::array({1})}};
    const auto msg = message_of([&] { ir::import_torch_graph(doc.dump()); });
    EXPECT_TRUE(mentions(msg, c.why)) << msg;
    EXPECT_TRUE(mentions(msg, n["name"].get<std::string>())) << msg;
    EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), c.code) << msg;
  }
  // Metadata may claim any extent: a constant index for it (flip, unfold, reflection padding) is refused
  // before it is built.
  auto huge = [&](const char* target, Json inputs) {
    SCOPED_TRACE(target);
    Json doc = mlp_doc();
    doc["signature"]["input_specs"].push_back(Json{{"kind", "user_input"}, {"name", "huge"}});
    doc["graph"]["tensor_values"]["huge"] =
        Json{{"dtype", "f32"}, {"sizes", Json::array({std::int64_t{1} << 40})}, {"strides", Json::array({1})}};
    Json& n = node_named(doc, "aten.relu");
    n["target"] = target;
    n["inputs"] = std::move(inputs);
    const auto msg = message_of([&] { ir::import_torch_graph(doc.dump()); });
    EXPECT_TRUE(mentions(msg, "a constant index of")) << msg;
    EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), ErrorCode::unsupported) << msg;
  };
  const Json self = arg("self", tensor("huge"));
  huge("aten.flip.default", Json::array({self, arg("dims", ints({0}))}));
  huge("aten.unfold.default", Json::array({self, arg("dimension", Json{{"as_int", 0}}),
                                           arg("size", Json{{"as_int", 2}}), arg("step", Json{{"as_int", 1}})}));
  huge("aten.reflection_pad1d.default", Json::array({self, arg("padding", ints({1, 1}))}));
}

TEST(TorchImport, MetadataThatDisagreesWithTheLoweringIsRejected) {
  Json doc = mlp_doc();
  Json& n = node_named(doc, "aten.relu");
  const std::string out = n["outputs"][0]["as_tensor"]["name"];
  doc["graph"]["tensor_values"][out]["sizes"] = Json::array({4, 127});
  const auto msg = message_of([&] { ir::import_torch_graph(doc.dump()); });
  EXPECT_TRUE(mentions(msg, out)) << msg;
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), ErrorCode::invalid_argument);
}

TEST(TorchImport, DanglingReferencesAndMissingNamesAreTyped) {
  {
    Json doc = mlp_doc();
    node_named(doc, "aten.relu")["inputs"][0]["arg"]["as_tensor"]["name"] = "ghost";
    const auto msg = message_of([&] { ir::import_torch_graph(doc.dump()); });
    EXPECT_TRUE(mentions(msg, "ghost")) << msg;
  }
  {
    Json doc = mlp_doc();
    doc["signature"]["output_specs"][0]["arg"]["as_tensor"]["name"] = "nowhere";
    const auto msg = message_of([&] { ir::import_torch_graph(doc.dump()); });
    EXPECT_TRUE(mentions(msg, "nowhere")) << msg;
    EXPECT_TRUE(mentions(msg, "output_0")) << msg;
  }
  {
    Json doc = mlp_doc();
    doc["signature"]["output_specs"] = Json::array();
    EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), ErrorCode::invalid_argument);
  }
  {
    Json doc = mlp_doc();
    doc["graph"]["tensor_values"].erase("x");
    const auto msg = message_of([&] { ir::import_torch_graph(doc.dump()); });
    EXPECT_TRUE(mentions(msg, "'x'")) << msg;
  }
  {
    Json doc = mlp_doc();
    doc["signature"]["input_specs"].push_back(doc["signature"]["input_specs"][0]);
    EXPECT_TRUE(mentions(message_of([&] { ir::import_torch_graph(doc.dump()); }), "repeats"));
  }
  {
    Json doc = mlp_doc();
    doc["signature"]["input_specs"][0]["kind"] = "mystery";
    EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), ErrorCode::parse_error);
  }
}

TEST(TorchImport, StructuralDamageIsAParseError) {
  const std::string text = read_text(kFixtures + "/mlp/graph.json");
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(text.substr(0, text.size() / 2)); }), ErrorCode::parse_error);
  Json doc = mlp_doc();
  doc["schema"] = "pact.torch-export.v0";
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc.dump()); }), ErrorCode::parse_error);
  Json no_graph = mlp_doc();
  no_graph.erase("graph");
  EXPECT_TRUE(mentions(message_of([&] { ir::import_torch_graph(no_graph.dump()); }), "graph"));
  Json bad_arg = mlp_doc();
  node_named(bad_arg, "aten.addmm")["inputs"][3]["arg"] = Json{{"as_tensor", 5}};
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(bad_arg.dump()); }), ErrorCode::parse_error);
  Json bad_dtype = mlp_doc();
  bad_dtype["graph"]["tensor_values"]["x"]["dtype"] = "q4";
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(bad_dtype.dump()); }), ErrorCode::unsupported);
}

TEST(TorchImport, HugeLoweringConstantsAreRefused) {
  // expand lowers to a multiplication by ones of the output shape: metadata asking for 10^10 elements is
  // refused instead of allocated.
  const std::string doc = R"({"schema": "pact.torch-export.v1",
    "graph": {"nodes": [{"name": "e", "target": "aten.expand.default",
                         "inputs": [{"name": "self", "arg": {"as_tensor": {"name": "x"}}},
                                    {"name": "size", "arg": {"as_ints": [100000, 100000]}}],
                         "outputs": [{"as_tensor": {"name": "e"}}]}],
              "tensor_values": {"x": {"dtype": "f32", "sizes": [1, 100000]}, "e": {"dtype": "f32", "sizes": [100000, 100000]}}},
    "signature": {"input_specs": [{"kind": "user_input", "name": "x"}],
                  "output_specs": [{"kind": "user_output", "name": "output_0", "arg": {"as_tensor": {"name": "e"}}}]}})";
  EXPECT_EQ(code_of([&] { ir::import_torch_graph(doc); }), ErrorCode::unsupported);
  EXPECT_TRUE(mentions(message_of([&] { ir::import_torch_graph(doc); }), "exceeds"));
}

TEST(TorchImport, EveryTruncationFailsTypedAndNeverCrashes) {
  const std::string text = read_text(kFixtures + "/mlp/graph.json");
  for (std::size_t n = 0; n < text.size(); n += 97) {
    EXPECT_THROW(ir::import_torch_graph(text.substr(0, n)), Error) << "prefix of " << n << " bytes";
  }
}

TEST(TorchImport, WeightsMustMatchTheGraph) {
  const auto bundle = ir::load_torch_export(kFixtures + "/mlp");
  const auto& param = bundle.model.sources[1];
  ASSERT_EQ(param.kind, ir::TorchSource::Kind::parameter);
  // Missing.
  std::vector<std::pair<std::string, TensorView>> fewer;
  for (const auto& [name, t] : bundle.weights.tensors) {
    if (name != param.name) fewer.emplace_back(name, t.as_view());
  }
  const auto missing = ir::parse_safetensors(ir::serialize_safetensors(fewer, {}), "fewer");
  auto msg = message_of([&] { ir::check_torch_weights(bundle.model, missing, "fewer"); });
  EXPECT_TRUE(mentions(msg, param.name)) << msg;
  // Wrong shape.
  const Tensor other = Tensor::zeros(Dims{3}, DType::f32);  // outlives the views below
  std::vector<std::pair<std::string, TensorView>> wrong;
  for (const auto& [name, t] : bundle.weights.tensors)
    wrong.emplace_back(name, name == param.name ? other.as_view() : t.as_view());
  const auto reshaped = ir::parse_safetensors(ir::serialize_safetensors(wrong, {}), "wrong");
  msg = message_of([&] { ir::check_torch_weights(bundle.model, reshaped, "wrong"); });
  EXPECT_TRUE(mentions(msg, param.name) && mentions(msg, "[3]")) << msg;
}

TEST(TorchImport, RunChecksTheInputs) {
  const contract::DefaultEvidenceResolver resolver;
  const auto profile = contract::builtin_profile("cpu-checked");
  {
    auto bundle = ir::load_torch_export(kFixtures + "/mlp");
    ir::SafetensorsFile none;
    const auto msg = message_of([&] { runtime::run_imported(std::move(bundle), std::move(none), profile, resolver); });
    EXPECT_TRUE(mentions(msg, "'x'")) << msg;
  }
  {
    auto bundle = ir::load_torch_export(kFixtures + "/mlp");
    ir::SafetensorsFile wrong;
    wrong.tensors.emplace_back("x", Tensor::zeros(Dims{4, 63}, DType::f32));
    const auto msg = message_of([&] { runtime::run_imported(std::move(bundle), std::move(wrong), profile, resolver); });
    EXPECT_TRUE(mentions(msg, "[4, 63]")) << msg;
  }
}

// Two copies of a tensor stacked along the leading dimension.
Tensor doubled(const Tensor& t) {
  std::vector<std::byte> bytes;
  ir::append_tensor_bytes(t.as_view(), bytes);
  ir::append_tensor_bytes(t.as_view(), bytes);
  Dims shape = t.shape();
  shape[0] *= 2;
  return ir::tensor_from_bytes(t.dtype(), shape, bytes);
}

// Issue 22 item 3: a capture runs on inputs of another batch size when the graph re-validates with it.
// The example input stacked twice must give PyTorch's own outputs stacked twice (every fixture model
// treats batch rows independently in eval mode), so no Pact-computed value is the reference.
TEST(TorchImport, RunsOnInputsOfAnotherBatchSize) {
  const contract::DefaultEvidenceResolver resolver;
  const auto profile = contract::builtin_profile("cpu-checked");
  for (const char* model : {"mlp", "small_cnn", "tiny_transformer", "tiny_gpt"}) {
    SCOPED_TRACE(model);
    const std::string dir = kFixtures + "/" + model;
    auto bundle = ir::load_torch_export(dir);
    const ir::SafetensorsFile example = ir::read_safetensors(dir + "/example_input.safetensors");
    const ir::SafetensorsFile expected = ir::read_safetensors(dir + "/expected_output.safetensors");
    ir::SafetensorsFile inputs;
    for (const auto& [name, t] : example.tensors) inputs.tensors.emplace_back(name, doubled(t));
    runtime::fit_inputs(bundle, inputs, "doubled");
    std::vector<ir::TorchOutput> outs = bundle.model.outputs;
    auto result = runtime::run_imported(std::move(bundle), std::move(inputs), profile, resolver);
    ASSERT_TRUE(result.accepted);
    for (const auto& o : outs) {
      const Tensor want = doubled(*expected.find(o.name));
      EXPECT_LE(runtime::compare_outputs(o.name, result.outputs.at(o.name).as_view(), want.as_view()).relative_error,
                1e-4);
    }
  }
}

TEST(TorchImport, UserInputsThatDoNotFitAreRefusedNamingTheTensorAndBothTypes) {
  auto fit = [](ir::SafetensorsFile& inputs) {
    auto bundle = ir::load_torch_export(kFixtures + "/small_cnn");
    runtime::fit_inputs(bundle, inputs, "user.npz");
    return bundle.model.find_source("x")->type.shape;
  };
  {  // one tensor of another name: taken as the one input
    ir::SafetensorsFile in;
    in.tensors.emplace_back("images", Tensor::zeros(Dims{3, 3, 16, 16}, DType::f32));
    EXPECT_EQ(fit(in), (Dims{3, 3, 16, 16}));
  }
  {
    ir::SafetensorsFile in;
    in.tensors.emplace_back("x", Tensor::zeros(Dims{2, 3, 16, 16}, DType::f64));
    const auto msg = message_of([&] { fit(in); });
    EXPECT_EQ(code_of([&] { fit(in); }), ErrorCode::dtype_mismatch);
    EXPECT_TRUE(mentions(msg, "input 'x' is f64[2, 3, 16, 16]; the capture declares f32[2, 3, 16, 16]")) << msg;
  }
  {
    ir::SafetensorsFile in;
    in.tensors.emplace_back("x", Tensor::zeros(Dims{2, 3, 16, 15}, DType::f32));
    const auto msg = message_of([&] { fit(in); });
    EXPECT_TRUE(mentions(msg, "[2, 3, 16, 15]") && mentions(msg, "[2, 3, 16, 16]") && mentions(msg, "leading")) << msg;
  }
  {
    ir::SafetensorsFile in;
    in.tensors.emplace_back("a", Tensor::zeros(Dims{2, 3, 16, 16}, DType::f32));
    in.tensors.emplace_back("b", Tensor::zeros(Dims{2, 3, 16, 16}, DType::f32));
    const auto msg = message_of([&] { fit(in); });
    EXPECT_TRUE(mentions(msg, "no tensor for the model's input 'x' (the file holds: a, b)")) << msg;
  }
  {  // a graph that carries the batch in a constant does not re-validate: the node is named
    ir::Node x{"x", ops::OpTag::input, {}, {{"shape", std::vector<std::int64_t>{2, 4}}}, {}, false, false, false};
    ir::Node c{"bias", ops::OpTag::constant, {}, {{"shape", std::vector<std::int64_t>{2, 4}}}, {}, false, false, false};
    ir::Node add{"shifted", ops::OpTag::add, {"x", "bias"}, {}, {}, false, false, false};
    ir::Node out{"y", ops::OpTag::output, {"shifted"}, {}, {}, false, false, false};
    ir::TorchBundle m;
    m.model.graph = ir::validate({x, c, add, out}, {"y"});
    m.model.sources.push_back({"x", ir::TorchSource::Kind::user_input, true, {DType::f32, Dims{2, 4}}});
    m.model.synthesized.emplace("bias",
                                Tensor::from_values<float>(Dims{2, 4}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
    ir::SafetensorsFile in;
    in.tensors.emplace_back("x", Tensor::zeros(Dims{5, 4}, DType::f32));
    const auto msg = message_of([&] { runtime::fit_inputs(m, in, "user.npy"); });
    EXPECT_TRUE(mentions(msg, "captured with batch 2 and does not re-validate with 5") && mentions(msg, "shifted"))
        << msg;
  }
}

// Latency runs: the cold run's outputs are the ones compared; each warm run is timed, and with node timing
// every planned node has a warm median, named with its capsule and the ISA level it ran at.
TEST(TorchImport, RepeatedRunsTimeEveryWarmRunAndEveryNode) {
  const contract::DefaultEvidenceResolver resolver;
  const auto profile = contract::builtin_profile("cpu-checked");
  const std::string dir = kFixtures + "/small_cnn";
  auto bundle = ir::load_torch_export(dir);
  auto inputs = ir::read_safetensors(dir + "/example_input.safetensors");
  const auto expected = ir::read_safetensors(dir + "/expected_output.safetensors");
  const auto r = runtime::run_imported(std::move(bundle), std::move(inputs), profile, resolver, {3, true});
  ASSERT_TRUE(r.accepted);
  EXPECT_GT(r.cold_ms, 0.0);
  ASSERT_EQ(r.warm_ms.size(), 3u);
  for (double ms : r.warm_ms) EXPECT_GT(ms, 0.0);
  ASSERT_EQ(r.nodes.size(), r.audit.kernels.size());
  double node_total = 0;
  bool saw_conv = false;
  for (const auto& n : r.nodes) {
    EXPECT_GE(n.warm_median_ms, 0.0) << n.node;
    node_total += n.warm_median_ms;
    EXPECT_FALSE(n.capsule.empty()) << n.node;
    if (n.op == ops::OpTag::conv2d) {
      saw_conv = true;
      EXPECT_EQ(n.isa, isa_name(active_isa())) << "native conv2d runs the dispatched GEMM";
    }
  }
  EXPECT_TRUE(saw_conv);
  EXPECT_GT(node_total, 0.0);
  EXPECT_LE(node_total, *std::max_element(r.warm_ms.begin(), r.warm_ms.end()) * 3) << "node times within the runs";
  for (const auto& o : r.outputs) {
    const auto a = runtime::compare_outputs(o.first, o.second.as_view(), expected.find(o.first)->as_view());
    EXPECT_LE(a.relative_error, 1e-4) << o.first;
  }
  auto again = ir::load_torch_export(dir);
  auto more = ir::read_safetensors(dir + "/example_input.safetensors");
  EXPECT_EQ(code_of([&] {
              runtime::run_imported(std::move(again), std::move(more), profile, resolver, {-1, false});
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(runtime::median({}), 0.0);
  EXPECT_EQ(runtime::median({3, 1, 2}), 2.0);
  EXPECT_EQ(runtime::median({4, 1, 3, 2}), 2.5);
}

TEST(TorchImport, MissingFilesAreIoErrors) {
  EXPECT_EQ(code_of([] { ir::load_torch_export("tests/fixtures/torch/no-such-model"); }), ErrorCode::io_error);
}

TEST(TorchImport, AgreementMeasureIsRelativeToTheReferenceScale) {
  const float a[] = {1.0f, 2.0f, 103.0f}, b[] = {1.0f, 2.5f, 100.0f};
  const Tensor x = Tensor::from_values<float>(Dims{3}, a), y = Tensor::from_values<float>(Dims{3}, b);
  const auto r = runtime::compare_outputs("o", x.as_view(), y.as_view());
  EXPECT_DOUBLE_EQ(r.max_abs_error, 3.0);
  EXPECT_DOUBLE_EQ(r.max_abs_reference, 100.0);
  EXPECT_DOUBLE_EQ(r.relative_error, 0.03);
  const float small[] = {0.001f, 0.002f, 0.0f};
  const Tensor z = Tensor::from_values<float>(Dims{3}, small);
  EXPECT_NEAR(runtime::compare_outputs("o", z.as_view(), Tensor::zeros(Dims{3}, DType::f32).as_view()).relative_error,
              0.002, 1e-9);
  EXPECT_EQ(code_of([&] { runtime::compare_outputs("o", x.as_view(), Tensor::zeros(Dims{2}, DType::f32).as_view()); }),
            ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace pact

namespace pact {
namespace {

TEST(TorchImport, GuideListsExactlyTheSupportedTargets) {
  const std::string guide = test::read_text("docs/guides/pytorch-import.md");
  const auto begin = guide.find("<!-- supported-targets -->");
  const auto end = guide.find("<!-- /supported-targets -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  const std::string section = guide.substr(begin, end - begin);
  std::set<std::string> listed;
  for (std::size_t at = section.find('`'); at != std::string::npos; at = section.find('`', at + 1)) {
    const auto close = section.find('`', at + 1);
    if (close == std::string::npos) break;
    listed.insert(section.substr(at + 1, close - at - 1));
    at = close;
  }
  const auto targets = ir::supported_aten_targets();
  EXPECT_EQ(listed, std::set<std::string>(targets.begin(), targets.end()))
      << "update the supported-targets list in docs/guides/pytorch-import.md";
}

}  // namespace
}  // namespace pact
