// The IR and its v1 wire format (issue 4, item 6; SPEC §7): every example model parses and round-trips;
// each structural and shape rule has a case that passes and one that fails with a typed error naming
// the node or field; nodes given out of order are ordered topologically; the builder matches the wire.
// Runs with the repository root as working directory (pact_add_test sets it).

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../support/expect_error.hpp"
#include "../support/models.hpp"
#include "pact/ir/graph.hpp"

namespace pact::ir {
namespace {

using ::pact::test::code_of;
using ::pact::test::message_of;

using ::pact::test::mentions;

using ::pact::test::example_models;

Json source(const std::string& id, const char* kind, std::vector<std::int64_t> shape, const char* dtype = "f32") {
  return Json{{"id", id}, {"kind", kind}, {"attrs", Json{{"shape", shape}, {"dtype", dtype}}}};
}
Json node(const std::string& id, const char* kind, std::vector<std::string> inputs) {
  return Json{{"id", id}, {"kind", kind}, {"inputs", inputs}};
}

// A small MLP (the digits MLP shape) as a wire document; tests mutate one field at a time. Node indices:
// 0 x, 1 target, 2 w1, 3 b1, 4 w2, 5 b2, 6 fc1, 7 act, 8 logits, 9 loss.
Json mlp_doc() {
  Json nodes = Json::array();
  nodes.push_back(source("x", "input", {4, 8}));
  nodes.push_back(source("target", "input", {4}, "i64"));
  for (auto [id, shape] : std::vector<std::pair<const char*, std::vector<std::int64_t>>>{
           {"w1", {16, 8}}, {"b1", {16}}, {"w2", {3, 16}}, {"b2", {3}}}) {
    Json p = source(id, "parameter", shape);
    p["differentiable"] = true;
    nodes.push_back(p);
  }
  nodes.push_back(node("fc1", "linear", {"x", "w1", "b1"}));
  nodes.push_back(node("act", "relu", {"fc1"}));
  nodes.push_back(node("logits", "linear", {"act", "w2", "b2"}));
  nodes.push_back(node("loss", "cross_entropy", {"logits", "target"}));
  return Json{{"format", "pact.ir.v1"}, {"nodes", nodes}, {"outputs", {"logits", "loss"}}};
}

Graph parse(const Json& doc) { return parse_graph(doc.dump(), "test"); }

std::size_t position(const Graph& g, const std::string& id) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].id == id) return i;
  }
  ADD_FAILURE() << "no node " << id;
  return g.nodes.size();
}

// Every node's inputs come before it.
void expect_topological(const Graph& g) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) {
      EXPECT_LT(position(g, in), i) << in << " must precede " << g.nodes[i].id;
    }
  }
}

// Same nodes (by id, whatever the order) and outputs.
void expect_same_nodes(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (const auto& n : a.nodes) {
    SCOPED_TRACE(n.id);
    const Node* m = b.find(n.id);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(n.op, m->op);
    EXPECT_EQ(n.inputs, m->inputs);
    EXPECT_EQ(n.type, m->type);
    EXPECT_EQ(n.attrs.values(), m->attrs.values());
    EXPECT_EQ(n.differentiable, m->differentiable);
    EXPECT_EQ(n.buffer, m->buffer);
  }
  EXPECT_EQ(a.outputs, b.outputs);
}

void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    SCOPED_TRACE(a.nodes[i].id);
    EXPECT_EQ(a.nodes[i].id, b.nodes[i].id);
    EXPECT_EQ(a.nodes[i].op, b.nodes[i].op);
    EXPECT_EQ(a.nodes[i].inputs, b.nodes[i].inputs);
    EXPECT_EQ(a.nodes[i].type, b.nodes[i].type);
    EXPECT_EQ(a.nodes[i].attrs.values(), b.nodes[i].attrs.values());
    EXPECT_EQ(a.nodes[i].differentiable, b.nodes[i].differentiable);
    EXPECT_EQ(a.nodes[i].buffer, b.nodes[i].buffer);
  }
  EXPECT_EQ(a.outputs, b.outputs);
}

// ---- example models and round trip ------------------------------------------------------------------

// Names from a model file never reach a terminal raw (issue 21 item 8): an escape sequence in a node id
// is refused where it is read, and one that only appears in an error (a dangling input name) is written
// out as \\xNN in the message.
TEST(WireFormat, ControlCharactersInNamesNeverReachTheTerminal) {
  const std::string esc = R"(x\u001b]0;retitled\u0007\u001b[2J)";  // JSON escapes: ESC, BEL
  auto message = [](const std::string& text) { return message_of([&] { parse_graph(text, "hostile.json"); }); };
  const std::string id = R"({"format": "pact.ir.v1", "nodes": [{"id": ")" + esc +
                         R"(", "kind": "input", "attrs": {"shape": [2]}}], "outputs": []})";
  const std::string m1 = message(id);
  EXPECT_NE(m1.find("control character"), std::string::npos) << m1;
  const std::string dangling =
      R"({"format": "pact.ir.v1", "nodes": [{"id": "x", "kind": "input", "attrs": {"shape": [2]}},
    {"id": "y", "kind": "relu", "inputs": [")" +
      esc + R"("]}], "outputs": ["y"]})";
  const std::string m2 = message(dangling);
  EXPECT_FALSE(m2.empty());  // message_of also fails the test when nothing is thrown
  for (const auto& m : {m1, m2}) {
    EXPECT_EQ(m.find('\x1b'), std::string::npos) << "a raw ESC in: " << printable(m);
    EXPECT_EQ(m.find('\x07'), std::string::npos);
  }
  EXPECT_NE(m2.find("\\x1b]0;retitled\\x07"), std::string::npos) << m2;
  EXPECT_EQ(printable("tab\tnewline\nstay"), "tab\tnewline\nstay");
  EXPECT_EQ(printable("csi \xc2\x9b"), "csi \\xc2\\x9b");
  EXPECT_EQ(printable("caf\xc3\xa9"), "caf\xc3\xa9");  // other UTF-8 is left alone
}

TEST(WireFormat, AGraphPastTheNodeLimitIsRefusedBeforeItsNodesAreBuilt) {
  std::string text = R"({"format": "pact.ir.v1", "nodes": [)";
  for (std::size_t i = 0; i <= kMaxGraphNodes; ++i) text += i == 0 ? "{}" : ",{}";
  text += R"(], "outputs": []})";
  auto parse = [&] { parse_graph(text, "many.json"); };
  EXPECT_EQ(code_of(parse), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of(parse), "100001 nodes; the limit is 100000"));
}

TEST(WireFormat, ParsesEveryExampleModel) {
  const auto paths = example_models();
  ASSERT_GE(paths.size(), 3u) << "examples/models should hold the digits MLP, a small CNN and a tiny transformer";
  for (const auto& path : paths) {
    SCOPED_TRACE(path);
    Graph g = load_graph(path);
    EXPECT_FALSE(g.nodes.empty());
    EXPECT_FALSE(g.outputs.empty());
    for (const auto& o : g.outputs) EXPECT_NE(g.find(o), nullptr) << o;
    expect_topological(g);
    std::set<std::string> ids;
    for (const auto& n : g.nodes) EXPECT_TRUE(ids.insert(n.id).second) << n.id;
  }
}

TEST(WireFormat, DigitsMlpHasTheInferredTypes) {
  Graph g = load_graph("examples/models/digits_mlp.json");
  ASSERT_NE(g.find("fc1"), nullptr);
  EXPECT_EQ(g.find("fc1")->type, (ops::TensorType{DType::f32, Dims{32, 128}}));
  EXPECT_EQ(g.find("logits")->type, (ops::TensorType{DType::f32, Dims{32, 10}}));
  EXPECT_EQ(g.find("target")->type, (ops::TensorType{DType::i64, Dims{32}}));
  EXPECT_EQ(g.find("loss")->type, (ops::TensorType{DType::f32, Dims{}}));
  EXPECT_TRUE(g.find("w1")->differentiable);
  EXPECT_FALSE(g.find("x")->differentiable);
  EXPECT_EQ(g.find("nope"), nullptr);
  EXPECT_EQ(g.outputs, (std::vector<std::string>{"logits", "loss"}));
}

TEST(WireFormat, SmallCnnKeepsBufferFlags) {
  Graph g = load_graph("examples/models/small_cnn.json");
  ASSERT_NE(g.find("bn_mean"), nullptr);
  EXPECT_TRUE(g.find("bn_mean")->buffer);
  EXPECT_FALSE(g.find("bn_mean")->differentiable);
  EXPECT_TRUE(g.find("conv_w")->differentiable);
  EXPECT_FALSE(g.find("conv_w")->buffer);
}

TEST(WireFormat, LoadGraphOfAMissingFileIsIoError) {
  EXPECT_EQ(code_of([] { load_graph("examples/models/does_not_exist.json"); }), ErrorCode::io_error);
  EXPECT_TRUE(mentions(message_of([] { load_graph("examples/models/does_not_exist.json"); }), "does_not_exist.json"));
}

TEST(WireFormat, EveryExampleRoundTrips) {
  for (const auto& path : example_models()) {
    SCOPED_TRACE(path);
    Graph g = load_graph(path);
    const Json j = to_json(g);
    EXPECT_EQ(j.at("format"), "pact.ir.v1");
    Graph back = parse_graph(j.dump(), "round trip");
    expect_same_graph(g, back);
    EXPECT_EQ(to_json(back).dump(), j.dump()) << "to_json is a fixed point after one round trip";
  }
}

TEST(WireFormat, RoundTripKeepsAttributesOfEveryType) {
  Json doc = mlp_doc();
  doc["nodes"].push_back(
      Json{{"id", "clamped"}, {"kind", "clamp"}, {"inputs", {"fc1"}}, {"attrs", Json{{"min", 0.0}, {"max", 6.0}}}});
  doc["nodes"].push_back(
      Json{{"id", "sm"}, {"kind", "softmax"}, {"inputs", {"clamped"}}, {"attrs", Json{{"dim", -1}}}});
  doc["nodes"].push_back(
      Json{{"id", "g"}, {"kind", "gelu"}, {"inputs", {"sm"}}, {"attrs", Json{{"approximate", "tanh"}}}});
  doc["nodes"].push_back(Json{{"id", "d"}, {"kind", "dropout"}, {"inputs", {"g"}}, {"attrs", Json{{"p", 1.0}}}});
  doc["nodes"].push_back(
      Json{{"id", "r"}, {"kind", "reshape"}, {"inputs", {"d"}}, {"attrs", Json{{"shape", {16, 4}}}}});
  doc["outputs"].push_back("r");
  Graph g = parse(doc);
  Graph back = parse_graph(to_json(g).dump());
  expect_same_nodes(g, back);  // the order is checked by RoundTripPreservesNodeOrder
  EXPECT_EQ(std::get<double>(back.find("d")->attrs.values().at("p")), 1.0);
  EXPECT_EQ(std::get<double>(back.find("clamped")->attrs.values().at("min")), 0.0);
  EXPECT_EQ(back.find("r")->type.shape, (Dims{16, 4}));
}

// Regression (fixed): pact/ir/graph.cpp:44-54 orders nodes with Kahn's algorithm over a LIFO stack
// (ready.back()/pop_back()), which reorders a list that is already topological: x, a(x), b(x), c(a)
// becomes x, b, a, c, and parsing to_json of that gives x, a, c, b again. So parse_graph(to_json(g)) does
// not reproduce g (graph.hpp's promise) and the wire text of a graph flips on every round trip. A
// stable order (lowest index first, e.g. a min-heap) would keep valid input order unchanged.
TEST(WireFormat, RoundTripPreservesNodeOrder) {
  GraphBuilder b;
  b.input("x", {4});
  b.op("a", ops::OpTag::relu, {"x"});
  b.op("b", ops::OpTag::relu, {"x"});
  b.op("c", ops::OpTag::relu, {"a"});
  b.output("c");
  b.output("b");
  Graph g = b.build();
  std::vector<std::string> order;
  for (const auto& n : g.nodes) order.push_back(n.id);
  EXPECT_EQ(order, (std::vector<std::string>{"x", "a", "b", "c"})) << "an already topological order is kept";
  Graph back = parse_graph(to_json(g).dump());
  expect_same_graph(g, back);
  EXPECT_EQ(to_json(back).dump(), to_json(g).dump());
}

// ---- malformed documents -----------------------------------------------------------------------------

TEST(WireErrors, MalformedJsonIsParseError) {
  EXPECT_NO_THROW(parse(mlp_doc()));
  EXPECT_EQ(code_of([] { parse_graph("{\"format\": \"pact.ir.v1\", \"nodes\": [", "broken.json"); }),
            ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([] { parse_graph("{\"format\": ", "broken.json"); }), "broken.json"));
  EXPECT_EQ(code_of([] { parse_graph(""); }), ErrorCode::parse_error);
  EXPECT_EQ(code_of([] { parse_graph("[]"); }), ErrorCode::parse_error);  // not an object
  EXPECT_EQ(code_of([] { parse_graph("{\"format\": \"pact.ir.v1\", \"nodes\": {}, \"outputs\": []}"); }),
            ErrorCode::parse_error);  // nodes not an array
}

TEST(WireErrors, WrongFormatIsRejected) {
  Json doc = mlp_doc();
  EXPECT_NO_THROW(parse(doc));
  doc["format"] = "pact.ir.v2";
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "$.format"));
  doc.erase("format");
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "format"));
  doc["format"] = 1;
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
}

TEST(WireErrors, UnknownKindNamesTheKindAndTheNode) {
  Json doc = mlp_doc();
  doc["nodes"][7]["kind"] = "relu6";
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "relu6")) << m;
  EXPECT_TRUE(mentions(m, "'act'")) << m;
  doc["nodes"][7]["kind"] = "Relu";  // kinds are case-sensitive
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  doc["nodes"][7]["kind"] = 3;
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  doc["nodes"][7]["kind"] = "relu";
  EXPECT_NO_THROW(parse(doc));
}

TEST(WireErrors, MissingIdOrKindIsParseError) {
  Json doc = mlp_doc();
  doc["nodes"][7].erase("kind");
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "act"));
  doc = mlp_doc();
  doc["nodes"][7].erase("id");
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "$.nodes[7].id"));
  doc["nodes"][7]["id"] = 7;
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  doc["nodes"][7]["id"] = "";
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);  // an empty id
}

TEST(WireErrors, WrongArityNamesTheNode) {
  Json doc = mlp_doc();
  doc["nodes"][7]["inputs"] = {"fc1", "fc1"};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'act'")) << m;
  doc["nodes"][7]["inputs"] = Json::array();
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  doc["nodes"][7].erase("inputs");
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  // linear takes 2..3: dropping the bias is fine, a fourth operand is not.
  doc = mlp_doc();
  doc["nodes"][6]["inputs"] = {"x", "w1"};
  EXPECT_NO_THROW(parse(doc));
  doc["nodes"][6]["inputs"] = {"x", "w1", "b1", "b1"};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "'fc1'"));
  // Inputs must be an array of id strings.
  doc["nodes"][6]["inputs"] = "x";
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  doc["nodes"][6]["inputs"] = {"x", 1};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
}

TEST(WireErrors, UnknownAttributeNamesTheNodeAndAttribute) {
  Json doc = mlp_doc();
  doc["nodes"].push_back(Json{{"id", "sm"}, {"kind", "softmax"}, {"inputs", {"logits"}}, {"attrs", Json{{"dim", 1}}}});
  EXPECT_NO_THROW(parse(doc));
  doc["nodes"][10]["attrs"] = Json{{"axis", 1}};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'sm'")) << m;
  EXPECT_TRUE(mentions(m, "axis")) << m;
  doc["nodes"][10]["attrs"] = Json::array();  // attrs must be an object
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
}

TEST(WireErrors, WrongAttributeTypeNamesTheNodeAndAttribute) {
  Json doc = mlp_doc();
  doc["nodes"].push_back(
      Json{{"id", "sm"}, {"kind", "softmax"}, {"inputs", {"logits"}}, {"attrs", Json{{"dim", 0.5}}}});
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'sm'")) << m;
  EXPECT_TRUE(mentions(m, "dim")) << m;
  // A list attribute holds integers only: the parser names the field path.
  doc["nodes"][10]["attrs"] = Json{{"dim", {1.5}}};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "attrs.dim[0]"));
  doc["nodes"][10]["attrs"] = Json{{"dim", Json{{"a", 1}}}};  // objects are no attribute type
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  // A missing required attribute (reshape's shape).
  doc["nodes"][10] = Json{{"id", "r"}, {"kind", "reshape"}, {"inputs", {"logits"}}};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "'r'"));
}

TEST(WireErrors, DanglingInputNamesTheNodeAndTheMissingId) {
  Json doc = mlp_doc();
  doc["nodes"][8]["inputs"] = {"act", "w3", "b2"};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'logits'")) << m;
  EXPECT_TRUE(mentions(m, "'w3'")) << m;
}

TEST(WireErrors, CycleNamesANodeOnIt) {
  Json doc = mlp_doc();
  doc["nodes"].push_back(node("a", "relu", {"b"}));
  doc["nodes"].push_back(node("b", "relu", {"a"}));
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'a'") || mentions(m, "'b'")) << m;
  EXPECT_TRUE(mentions(m, "cycle")) << m;
  // A self loop is a cycle too.
  doc = mlp_doc();
  doc["nodes"].push_back(node("self", "relu", {"self"}));
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "'self'"));
  // A diamond (two paths to one node) is not.
  doc = mlp_doc();
  doc["nodes"].push_back(node("sum", "add", {"logits", "logits"}));
  EXPECT_NO_THROW(parse(doc));
}

TEST(WireErrors, DuplicateIdsNameTheId) {
  Json doc = mlp_doc();
  doc["nodes"].push_back(node("act", "relu", {"logits"}));
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'act'")) << m;
  EXPECT_TRUE(mentions(m, "duplicate")) << m;
  doc["nodes"][10]["id"] = "act2";
  EXPECT_NO_THROW(parse(doc));
}

TEST(WireErrors, OutputsMustExist) {
  Json doc = mlp_doc();
  doc["outputs"] = Json::array();
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "outputs"));
  doc.erase("outputs");
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "$.outputs"));
  doc["outputs"] = {"logits", "probs"};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "'probs'"));
  doc["outputs"] = {"logits", 3};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  doc["outputs"] = {"act"};  // any existing node may be an output
  EXPECT_NO_THROW(parse(doc));
}

TEST(WireErrors, DeclaredTypeMustMatchTheShapeRule) {
  Json doc = mlp_doc();
  doc["nodes"][6]["type"] = Json{{"dtype", "f32"}, {"shape", {4, 16}}};
  EXPECT_NO_THROW(parse(doc));
  doc["nodes"][6]["type"] = Json{{"dtype", "f32"}, {"shape", {4, 15}}};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'fc1'")) << m;
  EXPECT_TRUE(mentions(m, "declared type")) << m;
  doc["nodes"][6]["type"] = Json{{"dtype", "f64"}, {"shape", {4, 16}}};  // dtype differs
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  // Malformed type objects are parse errors naming the field.
  doc["nodes"][6]["type"] = Json{{"dtype", "f33"}, {"shape", {4, 16}}};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "type.dtype"));
  doc["nodes"][6]["type"] = Json{{"dtype", "f32"}, {"shape", {4, -16}}};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "type.shape"));
  doc["nodes"][6]["type"] = Json{{"dtype", "f32"}};
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
}

// Regression (fixed): pact/ir/graph.cpp:76 compares a declared type only when it differs from the default
// TensorType{} (f32, rank 0), because parse_graph (graph.cpp:180-197) does not record whether "type"
// was present. A node that declares {"dtype": "f32", "shape": []} (a scalar) for a non-scalar output
// is accepted silently instead of failing as a shape mismatch.
TEST(WireErrors, DeclaredScalarTypeMustMatchTheShapeRule) {
  Json doc = mlp_doc();
  doc["nodes"][9]["type"] = Json{{"dtype", "f32"}, {"shape", Json::array()}};  // loss is a scalar: fine
  EXPECT_NO_THROW(parse(doc));
  doc = mlp_doc();
  doc["nodes"][6]["type"] = Json{{"dtype", "f32"}, {"shape", Json::array()}};  // fc1 is [4, 16]
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
}

// Regression (fixed): pact/ir/graph.cpp:76 skips the declared-type check for source nodes
// (info.role != ops::OpRole::source), so an input or parameter whose declared "type" contradicts its
// "shape"/"dtype" attributes is accepted and the declared type is silently replaced by the inferred one.
TEST(WireErrors, DeclaredTypeOfASourceMustMatchItsAttributes) {
  Json doc = mlp_doc();
  doc["nodes"][2]["type"] = Json{{"dtype", "f32"}, {"shape", {16, 8}}};
  EXPECT_NO_THROW(parse(doc));
  doc["nodes"][2]["type"] = Json{{"dtype", "f32"}, {"shape", {8, 16}}};  // w1's attrs say [16, 8]
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
}

TEST(WireErrors, OperandShapeMismatchNamesTheNode) {
  Json doc = mlp_doc();
  doc["nodes"][2]["attrs"]["shape"] = {16, 7};  // w1 in-features 7, x has 8
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'fc1'")) << m;
  EXPECT_TRUE(mentions(m, "linear")) << m;
  doc = mlp_doc();
  doc["nodes"][3]["attrs"]["shape"] = {15};  // bias does not match out-features
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "'fc1'"));
  doc = mlp_doc();
  doc["nodes"][1]["attrs"]["shape"] = {5};  // target batch 5, logits batch 4
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "'loss'")) << m;
}

TEST(WireErrors, FlagsOnlyOnParameters) {
  Json doc = mlp_doc();
  doc["nodes"][4]["differentiable"] = false;  // a frozen parameter
  doc["nodes"][5].erase("differentiable");
  doc["nodes"][5]["buffer"] = true;  // persistent state
  Graph g = parse(doc);
  EXPECT_FALSE(g.find("w2")->differentiable);
  EXPECT_TRUE(g.find("b2")->buffer);
  for (const char* flag : {"differentiable", "buffer"}) {
    SCOPED_TRACE(flag);
    Json bad = mlp_doc();
    bad["nodes"][7][flag] = true;  // act is a relu
    EXPECT_EQ(code_of([&] { parse(bad); }), ErrorCode::invalid_argument);
    const std::string m = message_of([&] { parse(bad); });
    EXPECT_TRUE(mentions(m, "'act'")) << m;
    bad = mlp_doc();
    bad["nodes"][0][flag] = true;  // x is an input
    EXPECT_EQ(code_of([&] { parse(bad); }), ErrorCode::invalid_argument);
    EXPECT_TRUE(mentions(message_of([&] { parse(bad); }), "'x'"));
    bad = mlp_doc();
    bad["nodes"][2][flag] = 1;  // not a boolean
    EXPECT_EQ(code_of([&] { parse(bad); }), ErrorCode::parse_error);
    EXPECT_TRUE(mentions(message_of([&] { parse(bad); }), flag));
  }
  // A buffer is not differentiable.
  doc = mlp_doc();
  doc["nodes"][3]["buffer"] = true;  // b1 also says differentiable
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([&] { parse(doc); }), "'b1'"));
}

TEST(WireErrors, UnknownNodeFieldsAreRejected) {
  Json doc = mlp_doc();
  doc["nodes"][7]["name"] = "relu";
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
  const std::string m = message_of([&] { parse(doc); });
  EXPECT_TRUE(mentions(m, "$.nodes[7].name")) << m;
  EXPECT_TRUE(mentions(m, "unknown field")) << m;
  doc["nodes"][7].erase("name");
  EXPECT_NO_THROW(parse(doc));
  doc["nodes"][7] = "act";  // a node must be an object
  EXPECT_EQ(code_of([&] { parse(doc); }), ErrorCode::parse_error);
}

// ---- ordering and the builder ------------------------------------------------------------------------

TEST(Validate, NodesOutOfOrderAreOrderedTopologically) {
  Json doc = mlp_doc();
  Json reversed = Json::array();
  for (auto it = doc["nodes"].rbegin(); it != doc["nodes"].rend(); ++it) reversed.push_back(*it);
  doc["nodes"] = reversed;
  Graph g = parse(doc);
  ASSERT_EQ(g.nodes.size(), 10u);
  expect_topological(g);
  EXPECT_EQ(g.find("logits")->type, (ops::TensorType{DType::f32, Dims{4, 3}}));
  Graph in_order = parse(mlp_doc());
  std::set<std::string> a, b;
  for (const auto& n : g.nodes) a.insert(n.id);
  for (const auto& n : in_order.nodes) b.insert(n.id);
  EXPECT_EQ(a, b);
  for (const auto& n : in_order.nodes) EXPECT_EQ(g.find(n.id)->type, n.type) << n.id;
}

TEST(Validate, ValidateDirectlyChecksTheSameRules) {
  std::vector<Node> nodes;
  nodes.push_back(Node{"x",
                       ops::OpTag::input,
                       {},
                       ops::Attributes{{"shape", std::vector<std::int64_t>{2, 3}}, {"dtype", std::string("f32")}},
                       {},
                       false,
                       false,
                       false});
  nodes.push_back(Node{"y", ops::OpTag::relu, {"x"}, {}, {}, false, false, false});
  EXPECT_EQ(validate(nodes, {"y"}).find("y")->type.shape, (Dims{2, 3}));
  EXPECT_EQ(code_of([&] { validate(nodes, {}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { validate(nodes, {"z"}); }), ErrorCode::invalid_argument);
  auto dangling = nodes;
  dangling[1].inputs = {"w"};
  EXPECT_EQ(code_of([&] { validate(dangling, {"y"}); }), ErrorCode::invalid_argument);
}

TEST(Builder, BuildsTheSameGraphAsTheWireFormat) {
  GraphBuilder b;
  auto x = b.input("x", {32, 64});
  auto target = b.input("target", {32}, DType::i64);
  auto w1 = b.parameter("w1", {128, 64});
  auto b1 = b.parameter("b1", {128});
  auto w2 = b.parameter("w2", {10, 128});
  auto b2 = b.parameter("b2", {10});
  auto fc1 = b.op("fc1", ops::OpTag::linear, {x, w1, b1});
  auto act = b.op("act", ops::OpTag::relu, {fc1});
  auto logits = b.op("logits", ops::OpTag::linear, {act, w2, b2});
  auto loss = b.op("loss", ops::OpTag::cross_entropy, {logits, target});
  b.output(logits);
  b.output(loss);
  Graph built = b.build();
  Graph wire = load_graph("examples/models/digits_mlp.json");
  expect_same_graph(built, wire);
  EXPECT_EQ(to_json(built).dump(), to_json(wire).dump());
}

TEST(Builder, RejectsWhatTheWireRejects) {
  GraphBuilder ok;
  ok.input("x", {2, 4});
  ok.buffer("stat", {4});
  ok.parameter("frozen", {3, 4}, DType::f32, false);
  ok.op("y", ops::OpTag::linear, {"x", "frozen"});
  ok.output("y");
  Graph g = ok.build();
  EXPECT_TRUE(g.find("stat")->buffer);
  EXPECT_FALSE(g.find("stat")->differentiable);
  EXPECT_FALSE(g.find("frozen")->differentiable);
  EXPECT_EQ(g.find("y")->type.shape, (Dims{2, 3}));

  GraphBuilder bad;
  bad.input("x", {2, 4});
  bad.parameter("w", {3, 5});
  bad.op("y", ops::OpTag::linear, {"x", "w"});
  bad.output("y");
  EXPECT_EQ(code_of([&] { bad.build(); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(mentions(message_of([&] { bad.build(); }), "'y'"));

  GraphBuilder no_output;
  no_output.input("x", {2});
  EXPECT_EQ(code_of([&] { no_output.build(); }), ErrorCode::invalid_argument);

  GraphBuilder dup;
  dup.input("x", {2});
  dup.input("x", {3});
  dup.output("x");
  EXPECT_EQ(code_of([&] { dup.build(); }), ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace pact::ir
