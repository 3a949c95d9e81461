// Pictures of graphs and plans (pact/picture): what the DOT text holds, and that Graphviz renders it.

#include "pact/picture/picture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "pact/capture/llama.hpp"
#include "pact/picture/report.hpp"
#include "pact/train/trainer.hpp"
#include "tools/pact/commands.hpp"

namespace pact::picture {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

plan::PlanAudit audit_of(const ir::Graph& g, const std::string& profile) {
  const contract::DefaultEvidenceResolver resolver;
  auto planned = plan::plan_graph(g, contract::builtin_profile(profile), resolver, contract::VjpMode::forward_only);
  return planned ? planned->audit() : planned.error().audit;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(Picture, APlanShowsEachNodesCapsuleProviderAndShapes) {
  const ir::Graph g = train::digits_mlp(4);
  const plan::PlanAudit audit = audit_of(g, "cpu-checked");
  const Picture p = from_graph(g, "digits mlp", &audit);
  // Inputs and ops are drawn, parameters are not: x, target, fc1, act, logits, loss.
  ASSERT_EQ(p.nodes.size(), 6u);
  EXPECT_EQ(p.nodes[2].weights, 2);  // fc1 reads w1 and b1
  const std::string dot = to_dot(p, {});
  EXPECT_THAT(dot, HasSubstr("native.linear"));
  EXPECT_THAT(dot, HasSubstr("#cfe2ff"));                // the native provider's colour
  EXPECT_THAT(dot, HasSubstr("label=\"f32[4, 128]\""));  // the shape fc1 hands to act
  EXPECT_THAT(dot, Not(HasSubstr("REJECTED")));
  EXPECT_EQ(count(dot, " -> "), 7u);  // x->fc1, fc1->act, act->logits, logits->loss, target->loss, two outputs
  const std::string svg = render_svg(dot);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("native.linear"));
  EXPECT_THAT(svg, HasSubstr("f32[4, 128]"));
}

TEST(Picture, ARejectedNodeIsMarkedWithItsFailingObligation) {
  ir::GraphBuilder b;
  b.input("x", Dims{2, 8}, DType::bf16);
  b.op("act", ops::OpTag::gelu, {"x"});
  b.output("act");
  const ir::Graph g = b.build();
  const plan::PlanAudit audit = audit_of(g, "cpu-deterministic");  // the reference provider computes f32/f64
  ASSERT_FALSE(audit.check.accepted);
  const Picture p = from_graph(g, "bf16 gelu", &audit);
  ASSERT_EQ(p.nodes.back().verdict, "rejected");
  const std::string dot = to_dot(p, {});
  EXPECT_THAT(dot, HasSubstr("REJECTED: shape"));
  EXPECT_THAT(dot, HasSubstr("#c00000"));
  EXPECT_THAT(render_svg(dot), HasSubstr("REJECTED"));
  // The same graph under cpu-checked is accepted, and drawn so.
  const plan::PlanAudit ok = audit_of(g, "cpu-checked");
  EXPECT_THAT(to_dot(from_graph(g, "bf16 gelu", &ok), {}), Not(HasSubstr("REJECTED")));
}

TEST(Picture, AStructureOnlyCaptureCarriesItsBannerAndHypotheses) {
  capture::LlamaConfig c = capture::llama_config("tiny");
  capture::CaptureOptions options;
  options.structure_only = true;
  const auto cap = capture::capture(capture::llama_model(c), options);
  const Picture p = cli::capture_picture(cap, "llama tiny");
  ASSERT_TRUE(p.structure_only);
  const std::string dot = to_dot(p, {});
  EXPECT_THAT(dot, HasSubstr("STRUCTURE-ONLY CAPTURE"));
  EXPECT_THAT(dot, HasSubstr("hypotheses"));
  EXPECT_EQ(count(dot, " -> "), count(dot, "?\"]"));  // every edge's shape is marked a hypothesis
  EXPECT_THAT(dot, HasSubstr("subgraph cluster_"));
  EXPECT_THAT(render_svg(dot), HasSubstr("ONLY CAPTURE: no values"));  // SVG writes the hyphen as &#45;
  // A real capture's picture has neither.
  capture::CaptureOptions real;
  real.structure_only = false;
  const std::string real_dot =
      to_dot(cli::capture_picture(capture::capture(capture::llama_model(c), real), "llama tiny"), {});
  EXPECT_THAT(real_dot, Not(HasSubstr("STRUCTURE-ONLY")));
  EXPECT_THAT(real_dot, Not(HasSubstr("?\"]")));
}

TEST(Picture, DepthAndCollapseDrawModulesAsSingleNodes) {
  capture::CaptureOptions options;
  options.structure_only = true;
  const auto cap = capture::capture(capture::llama_model(capture::llama_config("tiny")), options);
  const Picture p = cli::capture_picture(cap, "llama tiny");
  const std::string full = to_dot(p, {});
  const std::string depth0 = to_dot(p, {0, {}});
  const std::string layers = to_dot(p, {-1, {"layers.*"}});
  EXPECT_THAT(full, Not(HasSubstr("shape=box3d")));
  EXPECT_THAT(depth0, HasSubstr("shape=box3d"));
  EXPECT_THAT(depth0, Not(HasSubstr("subgraph cluster_")));  // depth 0: no module is drawn open
  EXPECT_LT(count(depth0, "\n"), count(full, "\n"));
  // layers.* : each decoder layer is one node, with the count of ops it stands for.
  EXPECT_THAT(layers, HasSubstr("layers.0\\n("));
  EXPECT_THAT(layers, HasSubstr("layers.1\\n("));
  EXPECT_LT(count(layers, "\n"), count(full, "\n"));
  EXPECT_THAT(render_svg(layers), HasSubstr("<svg"));
  EXPECT_THROW(to_dot(p, {-2, {}}), Error);
}

TEST(Picture, CollapseNamesAModuleClassQualifiedOrByItsLastName) {
  Picture p;
  p.add(Node{"x", "input", "", {}, 0, "f32[1, 4]", "", "", "", "", ""}, {});
  p.add(Node{"b0.fc", "linear", "blocks.0", {}, 0, "f32[1, 4]", "", "", "", "", ""}, {"x", "w0"});
  p.add(Node{"b0.act", "relu", "blocks.0", {}, 0, "f32[1, 4]", "", "", "", "", ""}, {"b0.fc"});
  p.add(Node{"b1.fc", "linear", "blocks.1", {}, 0, "f32[1, 4]", "", "", "", "", ""}, {"b0.act", "w1"});
  p.add(Node{"b1.act", "relu", "blocks.1", {}, 0, "f32[1, 4]", "", "", "", "", ""}, {"b1.fc"});
  p.add(Node{"head", "linear", "head", {}, 0, "f32[1, 2]", "", "", "", "", ""}, {"b1.act", "w2"});
  p.outputs = {"head"};
  ASSERT_EQ(p.nodes[1].inputs, std::vector<std::string>{"x"});  // add: drawn values are edges, the rest weights
  EXPECT_EQ(p.nodes[1].weights, 1);
  p.module_types = {{"blocks", "torch.nn.modules.container.Sequential"},
                    {"blocks.0", "my.models.Block"},
                    {"blocks.1", "my.models.Block"},
                    {"head", "torch.nn.modules.linear.Linear"}};
  for (const std::string name : {"Block", "my.models.Block"}) {
    const std::string dot = to_dot(p, {-1, {name}});
    EXPECT_THAT(dot, HasSubstr("blocks.0 : Block\\n(2 ops)")) << name;
    EXPECT_THAT(dot, HasSubstr("blocks.1 : Block\\n(2 ops)")) << name;
    EXPECT_THAT(dot, HasSubstr("head : Linear")) << name;  // not collapsed: a one-op module named with its class
    EXPECT_EQ(count(dot, "shape=box3d"), 2u) << name;
  }
  // A class that is not there, or a partial name, collapses nothing.
  EXPECT_EQ(count(to_dot(p, {-1, {"Bloc"}}), "shape=box3d"), 0u);
  EXPECT_EQ(count(to_dot(p, {-1, {"models.Block"}}), "shape=box3d"), 0u);
}

TEST(Picture, NamesFromFilesCannotBreakTheDotText) {
  Picture p;
  p.title = "a \"quoted\" title with \\ and \x1b escapes";
  p.nodes.push_back(Node{"in\"put", "input", "", {}, 0, "f32[1]", "", "", "", "", ""});
  p.nodes.push_back(Node{"op}\"{", "relu", "mod\".x", {"in\"put"}, 0, "f32[1]", "", "", "", "", ""});
  p.outputs = {"op}\"{"};
  const std::string svg = render_svg(to_dot(p, {}));
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, Not(HasSubstr("\x1b")));
}

}  // namespace
}  // namespace pact::picture

namespace pact::picture {
namespace {

Json minimal_report() {
  return parse_json(R"({"schema": "pact.train-report.v1", "config": {"model": "mlp", "profile": "cpu-checked"},
    "epochs": [{"epoch": 1, "loss": 1.5, "accuracy": 0.5, "seconds": 0.1}], "final_accuracy": 0.5,
    "step_loss": [2.0, 1.5, 1.0],
    "plan_audit": {"profile": "cpu-checked", "verdict": "rejected",
      "kernels": [{"node": "fc1", "op": "linear", "purpose": "node", "capsule": "native.linear", "provider": "native"},
                  {"node": "<b>x</b></script>", "op": "relu", "purpose": "node", "capsule": null}],
      "obligations": [{"node": "fc1", "obligation": "shape", "evidence": {"kind": "runtimeGuard", "id": "g"},
                       "accepted": true}]}})",
                    "test");
}

TEST(RunReport, IsOneSelfContainedPageWithTheAuditAsData) {
  const std::string page = render_run_report(minimal_report(), "<?xml version=\"1.0\"?>\n<svg><g/></svg>");
  EXPECT_THAT(page, HasSubstr("default-src 'none'"));  // nothing may be fetched
  EXPECT_THAT(page, Not(HasSubstr("src=")));           // no script, image or frame from anywhere
  EXPECT_THAT(page, Not(HasSubstr("href=\"http")));    // (the SVG namespace URIs are names, not fetches)
  EXPECT_THAT(page, Not(HasSubstr("<link")));
  EXPECT_THAT(page, HasSubstr("<div class=\"graph\"><svg><g/></svg></div>"));  // the prolog is dropped
  EXPECT_THAT(page, Not(HasSubstr("<?xml")));
  // Names are data: the hostile node name is in the JSON block, escaped, and nowhere as markup.
  EXPECT_THAT(page, Not(HasSubstr("<b>x</b>")));
  EXPECT_THAT(page, HasSubstr("\\u003cb>x\\u003c/b>\\u003c/script>"));
  EXPECT_EQ(count(page, "<script"), 2u);
  // A node without a capsule is rejected in the table's data.
  EXPECT_THAT(page, HasSubstr("\"capsule\":\"(none)\""));
  EXPECT_THAT(page, HasSubstr("\"verdict\":\"rejected\""));
  EXPECT_THAT(page, HasSubstr("held-out accuracy 50.00%"));
}

TEST(RunReport, RefusesWhatIsNotARunReport) {
  EXPECT_THROW(render_run_report(parse_json(R"({"schema": "other"})", "t"), ""), Error);
  Json wrong = minimal_report();
  wrong["epochs"] = Json::object();
  EXPECT_THROW(render_run_report(wrong, ""), Error);
  Json mistyped = minimal_report();
  mistyped["plan_audit"]["kernels"][0]["op"] = 5;  // a number where the report reads a string
  try {
    render_run_report(mistyped, "");
    FAIL() << "a mistyped field was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::parse_error);
  }
}

}  // namespace
}  // namespace pact::picture
