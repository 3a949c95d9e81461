// Pictures of graphs and plans (pact/picture): what the DOT text holds, and that Graphviz renders it.

#include "pact/picture/picture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "pact/capture/llama.hpp"
#include "pact/train/trainer.hpp"

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
  const Picture p = from_capture(cap, "llama tiny");
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
  const std::string real_dot = to_dot(from_capture(capture::capture(capture::llama_model(c), real), "llama tiny"), {});
  EXPECT_THAT(real_dot, Not(HasSubstr("STRUCTURE-ONLY")));
  EXPECT_THAT(real_dot, Not(HasSubstr("?\"]")));
}

TEST(Picture, DepthAndCollapseDrawModulesAsSingleNodes) {
  capture::CaptureOptions options;
  options.structure_only = true;
  const auto cap = capture::capture(capture::llama_model(capture::llama_config("tiny")), options);
  const Picture p = from_capture(cap, "llama tiny");
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
