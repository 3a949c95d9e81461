// Graph planning (issue 4, items 4 and 7; SPEC §6): selection by provider preference without filtering
// by evidence, the contract check under the profile's policy, duplicate capsule names, cuda-* profiles
// without a device, missing capsules, grouping, the audit table and JSON, and bound kernels. Runs with
// the repository root as working directory (pact_add_test sets it).

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "../support/expect_error.hpp"
#include "../support/models.hpp"
#include "pact/core/cuda_probe.hpp"
#include "pact/plan/planner.hpp"

namespace pact::plan {
namespace {

using contract::AssurancePolicy;
using contract::BackendProfile;
using contract::DefaultEvidenceResolver;
using contract::DescriptorKind;
using contract::EvidenceKind;
using contract::VjpMode;

using ::pact::test::code_of;
using ::pact::test::message_of;

using ::pact::test::mentions;

using ::pact::test::example_models;

std::vector<std::string> kernel_nodes(const ir::Graph& g) {
  std::vector<std::string> ids;
  for (const auto& n : g.nodes) {
    if (ops::op_info(n.op).runtime_relevant()) ids.push_back(n.id);
  }
  return ids;
}

bool is_gemm(ops::OpTag op) { return op == ops::OpTag::linear || op == ops::OpTag::matmul || op == ops::OpTag::conv2d; }

auto plan(const ir::Graph& g, const BackendProfile& p, VjpMode mode = VjpMode::forward_only) {
  return plan_graph(g, p, DefaultEvidenceResolver{}, mode);
}

// cpu-checked plus the blas module, with blas available and most preferred, still under the checked policy.
BackendProfile checked_with_blas() {
  BackendProfile p = contract::builtin_profile("cpu-checked");
  p.name = "cpu-checked+blas";
  p.modules.push_back(&contract::blas_module());
  p.providers.push_back("blas");
  p.policy.provider_preference.insert(p.policy.provider_preference.begin(), "blas");
  return p;
}

// ---- acceptance --------------------------------------------------------------------------------------

TEST(Planner, CpuCheckedAcceptsEveryExampleModel) {
  const auto paths = example_models();
  ASSERT_GE(paths.size(), 3u);
  for (const auto& path : paths) {
    ir::Graph g = ir::load_graph(path);
    for (VjpMode mode : {VjpMode::forward_only, VjpMode::with_vjp}) {
      SCOPED_TRACE(path + (mode == VjpMode::with_vjp ? " with VJP" : " forward only"));
      auto r = plan(g, contract::builtin_profile("cpu-checked"), mode);
      ASSERT_TRUE(r.has_value()) << render_audit_table(r.error().audit);
      const PlanAudit& a = r->audit();
      EXPECT_TRUE(a.check.accepted);
      EXPECT_TRUE(a.check.failures().empty());
      EXPECT_EQ(a.profile, "cpu-checked");
      EXPECT_EQ(a.assurance, AssurancePolicy::checked);
      EXPECT_EQ(a.vjp_mode, mode);
      std::vector<std::string> planned;
      for (const auto& k : a.kernels) {
        planned.push_back(k.node);
        ASSERT_NE(k.capsule, nullptr) << k.node;
        EXPECT_EQ(k.capsule->op, k.op) << k.node;
        if (mode == VjpMode::with_vjp) {
          EXPECT_TRUE(k.capsule->vjp) << k.node;
        }
      }
      EXPECT_EQ(planned, kernel_nodes(g)) << "exactly the runtime-relevant nodes, in graph order";
      EXPECT_EQ(a.check.reports.size(), 4 * a.kernels.size()) << "four obligations per kernel";
      EXPECT_EQ(r->graph().nodes.size(), g.nodes.size());
    }
  }
}

TEST(Planner, SourcesAndOutputsAreNotPlannedViewsAre) {
  ir::Graph g = ir::load_graph("examples/models/small_cnn.json");
  auto r = plan(g, contract::builtin_profile("cpu-checked"));
  ASSERT_TRUE(r.has_value());
  std::set<std::string> planned;
  for (const auto& k : r->audit().kernels) planned.insert(k.node);
  EXPECT_FALSE(planned.count("x"));
  EXPECT_FALSE(planned.count("conv_w"));
  EXPECT_TRUE(planned.count("flat"));  // a planned view materialises through an admitted kernel
  EXPECT_TRUE(planned.count("conv"));
  EXPECT_TRUE(planned.count("pool"));
}

TEST(Planner, AcceptedPlanBindsHandlersWithTheCapsulesIdentity) {
  for (const auto& path : example_models()) {
    SCOPED_TRACE(path);
    for (const char* profile : {"cpu-checked", "cpu-external"}) {
      auto r = plan(ir::load_graph(path), contract::builtin_profile(profile));
      ASSERT_TRUE(r.has_value()) << profile;
      ASSERT_EQ(r->bound().size(), r->audit().kernels.size());
      for (std::size_t i = 0; i < r->bound().size(); ++i) {
        const auto& b = r->bound()[i];
        EXPECT_EQ(b.capsule(), r->audit().kernels[i].capsule);
        ASSERT_NE(b.handler(), nullptr);
        EXPECT_EQ(b.handler()->op, b.capsule()->op);
        EXPECT_EQ(b.handler()->provider, b.capsule()->provider);
        EXPECT_EQ(b.handler()->device, b.capsule()->device);
      }
    }
  }
}

// ---- selection ---------------------------------------------------------------------------------------

TEST(Selection, FollowsProviderPreference) {
  ir::Graph g = ir::load_graph("examples/models/tiny_transformer.json");
  auto native = plan(g, contract::builtin_profile("cpu-checked"));
  ASSERT_TRUE(native.has_value());
  for (const auto& k : native->audit().kernels) {
    EXPECT_EQ(k.capsule->provider, "native") << k.node << " (native is preferred over reference)";
    if (k.op == ops::OpTag::scaled_dot_product_attention) {
      EXPECT_EQ(k.capsule->name, "attention.scaled_dot_product_attention");
    }
  }
  BackendProfile ref_first = contract::builtin_profile("cpu-checked");
  ref_first.name = "cpu-reference-first";
  ref_first.policy.provider_preference = {"reference", "native"};
  auto reference = plan(g, ref_first);
  ASSERT_TRUE(reference.has_value());
  for (const auto& k : reference->audit().kernels) {
    EXPECT_EQ(k.capsule->provider, "reference") << k.node;
    EXPECT_EQ(k.capsule->numerical_policy, contract::NumericalPolicy::fixedLeft) << k.node;
  }
  // A provider the profile does not declare available is never chosen, whatever the preference.
  BackendProfile native_unavailable = ref_first;
  native_unavailable.policy.provider_preference = {"native", "reference"};
  native_unavailable.providers = {"reference"};
  auto only_ref = plan(g, native_unavailable);
  ASSERT_TRUE(only_ref.has_value());
  for (const auto& k : only_ref->audit().kernels) EXPECT_EQ(k.capsule->provider, "reference") << k.node;
}

TEST(Selection, DoesNotFilterByEvidenceBlasUnderCheckedIsRejected) {
  for (const auto& path : example_models()) {
    SCOPED_TRACE(path);
    ir::Graph g = ir::load_graph(path);
    auto r = plan(g, checked_with_blas());
    ASSERT_FALSE(r.has_value()) << "trusted-external capsules must not pass the checked policy";
    const PlanAudit& a = r.error().audit;
    EXPECT_FALSE(a.check.accepted);
    const auto failures = a.check.failures();
    int gemm_nodes = 0;
    for (const auto& k : a.kernels) {
      ASSERT_NE(k.capsule, nullptr) << k.node;
      if (!is_gemm(k.op)) {
        EXPECT_NE(k.capsule->provider, "blas") << k.node;
        for (const auto& f : failures) EXPECT_NE(f.node, k.node) << "non-GEMM node " << k.node << " must pass";
        continue;
      }
      ++gemm_nodes;
      SCOPED_TRACE(k.node);
      // Selected although its evidence cannot pass: selection does not filter by evidence.
      const std::string capsule = "blas." + std::string(ops::op_kind(k.op));
      EXPECT_EQ(k.capsule->name, capsule);
      bool forward = false, vjp = false;
      for (const auto& f : failures) {
        if (f.node != k.node) continue;
        EXPECT_EQ(f.capsule, capsule);
        if (f.obligation == DescriptorKind::forward_value && f.evidence.kind == EvidenceKind::trustedBoundary) {
          forward = true;
          EXPECT_TRUE(mentions(f.reason, "trustedBoundary")) << f.reason;
          EXPECT_TRUE(mentions(f.reason, "checked")) << f.reason;
        }
        if (f.obligation == DescriptorKind::vjp && f.evidence.kind == EvidenceKind::trustedBoundary) vjp = true;
      }
      EXPECT_TRUE(forward) << "forward_value trustedBoundary obligation named";
      EXPECT_TRUE(vjp) << "vjp trustedBoundary obligation named";
      const std::string table = render_audit_table(a);
      EXPECT_TRUE(mentions(table, "node " + k.node + " capsule " + capsule + " obligation forward_value")) << table;
      EXPECT_TRUE(mentions(table, "node " + k.node + " capsule " + capsule + " obligation vjp")) << table;
    }
    EXPECT_GT(gemm_nodes, 0);
    // The same graph under cpu-external is accepted, with the same blas choices.
    auto ext = plan(g, contract::builtin_profile("cpu-external"));
    ASSERT_TRUE(ext.has_value()) << render_audit_table(ext.error().audit);
    for (const auto& k : ext->audit().kernels) {
      if (is_gemm(k.op)) {
        EXPECT_EQ(k.capsule->provider, "blas") << k.node;
      }
    }
    EXPECT_TRUE(plan(g, contract::builtin_profile("cpu-external"), VjpMode::with_vjp).has_value());
  }
}

TEST(Selection, DuplicateCapsuleNamesAcrossModulesAreRejected) {
  ir::Graph g = ir::load_graph("examples/models/digits_mlp.json");
  BackendProfile p = contract::builtin_profile("cpu-checked");
  EXPECT_TRUE(plan(g, p).has_value());
  p.modules.push_back(&contract::native_module());
  EXPECT_EQ(code_of([&] { plan(g, p); }), ErrorCode::invalid_argument);
  const std::string m = message_of([&] { plan(g, p); });
  EXPECT_TRUE(mentions(m, "duplicate")) << m;
  EXPECT_TRUE(mentions(m, "native.")) << m;
  // A renamed copy of a module is no duplicate.
  contract::CapsuleModule renamed = contract::native_module();
  renamed.name = "native2";
  for (auto& c : renamed.capsules) c.name = "native2." + std::string(ops::op_kind(c.op));
  BackendProfile q = contract::builtin_profile("cpu-checked");
  q.modules.push_back(&renamed);
  EXPECT_TRUE(plan(g, q).has_value());
}

// ---- cuda profiles without a device ------------------------------------------------------------------

TEST(Cuda, CudaProfilesRefuseWithoutADevice) {
  ASSERT_EQ(cuda_provider()->name(), "cuda-stub") << "this machine's build has no CUDA device path";
  ir::Graph g = ir::load_graph("examples/models/digits_mlp.json");
  for (const char* name : {"cuda-checked", "cuda-external"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(code_of([&] { plan(g, contract::builtin_profile(name)); }), ErrorCode::no_device);
    // The message says what is missing, probed: no device could be opened, and what the driver reports.
    const std::string why = message_of([&] { plan(g, contract::builtin_profile(name)); });
    EXPECT_TRUE(mentions(why, "this process has only the host-parity stub")) << why;
    EXPECT_TRUE(mentions(why, probe_cuda().summary)) << why;
    // Asked for explicitly, the stub plans, and the check rejects: cuda evidence is never satisfied.
    BackendProfile stub = contract::builtin_profile(name);
    stub.allow_cuda_stub = true;
    auto r = plan(g, stub);
    ASSERT_FALSE(r.has_value());
    const PlanAudit& a = r.error().audit;
    ASSERT_EQ(a.kernels.size(), kernel_nodes(g).size());
    // cuda-external prefers the cudnn provider for conv2d, the cublaslt provider for linear and the cublas
    // provider (trusted external, cuBLAS SGEMM) for matmul.
    const bool external = std::string_view(name) == "cuda-external";
    for (const auto& k : a.kernels) {
      ASSERT_NE(k.capsule, nullptr) << k.node;
      EXPECT_EQ(k.capsule->provider, !external                    ? "cuda"
                                     : k.op == ops::OpTag::conv2d ? "cudnn"
                                     : k.op == ops::OpTag::linear ? "cublaslt"
                                     : k.op == ops::OpTag::matmul ? "cublas"
                                                                  : "cuda")
          << k.node;
    }
    const auto failures = a.check.failures();
    ASSERT_FALSE(failures.empty());
    for (const auto& f : failures) {
      // The libraries are never looked for without a device: their guards fail on the stub, as the device's does.
      EXPECT_TRUE(f.evidence.id == "cuda.device_present" ||
                  (external && (f.evidence.id == "cuda.cublas_loaded" || f.evidence.id == "cuda.cublaslt_loaded" ||
                                f.evidence.id == "cuda.cudnn_loaded")))
          << f.node << ": " << f.evidence.id;
      EXPECT_TRUE(mentions(f.reason, "cuda-stub")) << f.reason;
    }
    std::set<std::string> failing_nodes;
    for (const auto& f : failures) failing_nodes.insert(f.node);
    EXPECT_EQ(failing_nodes.size(), a.kernels.size()) << "every cuda kernel fails its evidence";
  }
}

// ---- missing capsules --------------------------------------------------------------------------------

TEST(Selection, ANodeWithoutACapsuleFailsNamingTheNode) {
  ir::Graph g = ir::load_graph("examples/models/digits_mlp.json");
  BackendProfile p = contract::builtin_profile("cpu-checked");
  p.modules = {&contract::attention_module()};  // no linear, relu or cross_entropy
  auto r = plan(g, p);
  ASSERT_FALSE(r.has_value());
  const auto failures = r.error().audit.check.failures();
  std::set<std::string> nodes;
  for (const auto& f : failures) {
    nodes.insert(f.node);
    EXPECT_TRUE(f.capsule.empty());
    EXPECT_TRUE(mentions(f.reason, "no capsule")) << f.reason;
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"fc1", "act", "logits", "loss"}));
  for (const auto& k : r.error().audit.kernels) EXPECT_EQ(k.capsule, nullptr) << k.node;
  const std::string table = render_audit_table(r.error().audit);
  EXPECT_TRUE(mentions(table, "(none)")) << table;
  EXPECT_EQ(render_audit_json(r.error().audit).at("kernels").at(0).at("capsule"), nullptr);
}

TEST(Selection, ForwardOnlyCapsulesAreNotChosenForAVjpRun) {
  ir::GraphBuilder b;
  b.input("x", {2, 3});
  b.op("y", ops::OpTag::relu, {"x"});
  b.output("y");
  ir::Graph g = b.build();
  contract::CapsuleModule forward_only{"fwd", {}};
  contract::Capsule c = [] {
    for (const auto& cap : contract::native_module().capsules) {
      if (cap.op == ops::OpTag::relu) return cap;
    }
    ADD_FAILURE() << "no native relu capsule";
    return contract::Capsule{};
  }();
  c.name = "fwd.relu";
  c.vjp = false;
  c.descriptors[3] = contract::ContractDescriptor{DescriptorKind::vjp, "no VJP", {EvidenceKind::notApplicable, ""}};
  forward_only.capsules.push_back(c);
  BackendProfile p = contract::builtin_profile("cpu-checked");
  p.modules = {&forward_only};
  EXPECT_TRUE(plan(g, p, VjpMode::forward_only).has_value());
  auto r = plan(g, p, VjpMode::with_vjp);
  ASSERT_FALSE(r.has_value());
  const auto failures = r.error().audit.check.failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].node, "y");
  EXPECT_TRUE(mentions(failures[0].reason, "VJP")) << failures[0].reason;
}

TEST(Selection, TheCheckUsesTheGivenResolver) {
  struct Refuse final : contract::EvidenceResolver {
    contract::EvidenceStatus resolve(const contract::Capsule&, const contract::ContractDescriptor& d) const override {
      if (d.evidence.kind == EvidenceKind::testSuite) return {false, "no passing receipt"};
      return {true, ""};
    }
  };
  ir::Graph g = ir::load_graph("examples/models/digits_mlp.json");
  auto r = plan_graph(g, contract::builtin_profile("cpu-checked"), Refuse{});
  ASSERT_FALSE(r.has_value());
  for (const auto& f : r.error().audit.check.failures()) {
    EXPECT_EQ(f.evidence.kind, EvidenceKind::testSuite);
    EXPECT_EQ(f.reason, "no passing receipt");
  }
  EXPECT_FALSE(r.error().audit.check.failures().empty());
}

// Regression (fixed): pact/plan/planner.cpp:27 (plan_graph) never checks that the graph is well formed
// (SPEC §6: "require a well-formed graph"). ir::Graph is a plain struct, so a graph assembled without
// ir::validate() — here a node reading an input that does not exist — is planned and accepted instead of
// being refused with a typed error naming the node.
TEST(Planner, RefusesAGraphThatIsNotWellFormed) {
  ir::Graph g = ir::load_graph("examples/models/digits_mlp.json");
  EXPECT_TRUE(plan(g, contract::builtin_profile("cpu-checked")).has_value());
  for (auto& n : g.nodes) {
    if (n.id == "act") n.inputs = {"ghost"};
  }
  EXPECT_EQ(code_of([&] { plan(g, contract::builtin_profile("cpu-checked")); }), ErrorCode::invalid_argument);
}

// ---- audit -------------------------------------------------------------------------------------------

TEST(Audit, GroupsByProviderAndDevice) {
  ir::Graph g = ir::load_graph("examples/models/digits_mlp.json");
  auto ext = plan(g, contract::builtin_profile("cpu-external"));
  ASSERT_TRUE(ext.has_value());
  using Key = std::pair<std::string, std::string>;
  std::map<Key, std::vector<std::string>> expected{{{"blas", "cpu"}, {"fc1", "logits"}},
                                                   {{"native", "cpu"}, {"act", "loss"}}};
  EXPECT_EQ(ext->audit().groups, expected);
  auto checked = plan(g, contract::builtin_profile("cpu-checked"));
  ASSERT_TRUE(checked.has_value());
  std::map<Key, std::vector<std::string>> one{{{"native", "cpu"}, {"fc1", "act", "logits", "loss"}}};
  EXPECT_EQ(checked->audit().groups, one);
}

TEST(Audit, TableMentionsEveryNodeAndTheVerdict) {
  for (const auto& path : example_models()) {
    SCOPED_TRACE(path);
    ir::Graph g = ir::load_graph(path);
    auto ok = plan(g, contract::builtin_profile("cpu-checked"));
    ASSERT_TRUE(ok.has_value());
    const std::string table = render_audit_table(ok->audit());
    for (const auto& id : kernel_nodes(g)) EXPECT_TRUE(mentions(table, id)) << id;
    for (const auto& k : ok->audit().kernels) EXPECT_TRUE(mentions(table, k.capsule->name)) << k.capsule->name;
    EXPECT_TRUE(mentions(table, "verdict: accepted")) << table;
    EXPECT_FALSE(mentions(table, "REJECTED")) << table;
    EXPECT_TRUE(mentions(table, "cpu-checked"));
    EXPECT_TRUE(mentions(table, "implementationDefined"));
    auto bad = plan(g, checked_with_blas());
    ASSERT_FALSE(bad.has_value());
    const std::string rejected = render_audit_table(bad.error().audit);
    for (const auto& id : kernel_nodes(g)) EXPECT_TRUE(mentions(rejected, id)) << id;
    EXPECT_TRUE(mentions(rejected, "verdict: rejected")) << rejected;
    EXPECT_TRUE(mentions(rejected, "REJECTED")) << rejected;
    EXPECT_TRUE(mentions(rejected, "trustedBoundary:openblas.cblas_sgemm")) << rejected;
  }
}

// The audit says how each testSuite was accepted: by name only (the built-in resolver), or verified by a
// passing run at HEAD (a receipt resolver, here a stand-in that verifies one suite), in the table, the JSON
// and the counts pact plan and pact train print.
class VerifiesOneSuite final : public contract::EvidenceResolver {
 public:
  contract::EvidenceStatus resolve(const contract::Capsule& c, const contract::ContractDescriptor& d) const override {
    contract::EvidenceStatus s = DefaultEvidenceResolver{}.resolve(c, d);
    s.verified = s.resolved && d.evidence.id == "OpOracle.NativeMatchesPyTorchFloat64";
    return s;
  }
};

TEST(Audit, SaysWhetherEachTestSuiteWasVerifiedByAReceiptOrAcceptedByName) {
  ir::Graph g = ir::load_graph("examples/models/digits_mlp.json");
  auto by_name = plan(g, contract::builtin_profile("cpu-checked"), VjpMode::with_vjp);
  ASSERT_TRUE(by_name.has_value());
  const auto names = by_name->audit().check.test_suite_evidence();
  EXPECT_EQ(names.verified, 0);
  EXPECT_GT(names.by_name, 0);
  EXPECT_TRUE(mentions(render_audit_table(by_name->audit()),
                       fmt::format("0 verified by a receipt at HEAD, {} accepted by name only", names.by_name)));
  EXPECT_TRUE(mentions(render_audit_table(by_name->audit()), "(name only)"));

  auto mixed = plan_graph(g, contract::builtin_profile("cpu-checked"), VerifiesOneSuite{}, VjpMode::with_vjp);
  ASSERT_TRUE(mixed.has_value());
  int native_suite = 0, other_suites = 0;
  for (const auto& r : mixed->audit().check.reports) {
    if (r.evidence.kind != contract::EvidenceKind::testSuite) {
      EXPECT_FALSE(r.verified) << r.capsule;  // only testSuite evidence is ever verified
      continue;
    }
    (r.evidence.id == "OpOracle.NativeMatchesPyTorchFloat64" ? native_suite : other_suites) += 1;
    EXPECT_EQ(r.verified, r.evidence.id == "OpOracle.NativeMatchesPyTorchFloat64") << r.capsule;
  }
  const auto counts = mixed->audit().check.test_suite_evidence();
  EXPECT_GT(native_suite, 0);
  EXPECT_EQ(counts.verified, native_suite);
  EXPECT_EQ(counts.by_name, other_suites);
  const Json j = render_audit_json(mixed->audit());
  EXPECT_EQ(j.at("test_suite_evidence").at("verified"), native_suite);
  EXPECT_EQ(j.at("test_suite_evidence").at("by_name"), other_suites);
  EXPECT_TRUE(mentions(render_audit_table(mixed->audit()), "(receipt)"));
}

TEST(Audit, JsonHasSchemaVerdictAndOneObligationPerReport) {
  ir::Graph g = ir::load_graph("examples/models/tiny_transformer.json");
  auto ok = plan(g, contract::builtin_profile("cpu-checked"), VjpMode::with_vjp);
  ASSERT_TRUE(ok.has_value());
  Json j = render_audit_json(ok->audit());
  EXPECT_EQ(j.at("schema"), "pact.plan-audit.v1");
  EXPECT_EQ(j.at("verdict"), "accepted");
  EXPECT_EQ(j.at("profile"), "cpu-checked");
  EXPECT_EQ(j.at("assurance"), "checked");
  EXPECT_EQ(j.at("vjp"), true);
  ASSERT_EQ(j.at("obligations").size(), ok->audit().check.reports.size());
  ASSERT_EQ(j.at("kernels").size(), ok->audit().kernels.size());
  for (std::size_t i = 0; i < ok->audit().kernels.size(); ++i) {
    EXPECT_EQ(j["kernels"][i]["node"], ok->audit().kernels[i].node);
    EXPECT_EQ(j["kernels"][i]["capsule"], ok->audit().kernels[i].capsule->name);
    EXPECT_TRUE(j["kernels"][i].contains("provenance"));
  }
  for (std::size_t i = 0; i < ok->audit().check.reports.size(); ++i) {
    const auto& r = ok->audit().check.reports[i];
    EXPECT_EQ(j["obligations"][i]["node"], r.node);
    EXPECT_EQ(j["obligations"][i]["obligation"], std::string(contract::obligation_name(r.obligation)));
    EXPECT_EQ(j["obligations"][i]["accepted"], r.accepted);
    EXPECT_EQ(j["obligations"][i]["evidence"]["id"], r.evidence.id);
  }
  EXPECT_EQ(j.at("groups").size(), ok->audit().groups.size());
  auto bad = plan(g, checked_with_blas());
  ASSERT_FALSE(bad.has_value());
  Json jb = render_audit_json(bad.error().audit);
  EXPECT_EQ(jb.at("schema"), "pact.plan-audit.v1");
  EXPECT_EQ(jb.at("verdict"), "rejected");
  EXPECT_EQ(jb.at("obligations").size(), bad.error().audit.check.reports.size());
  int rejected = 0;
  for (const auto& o : jb.at("obligations")) rejected += o.at("accepted").get<bool>() ? 0 : 1;
  EXPECT_EQ(rejected, static_cast<int>(bad.error().audit.check.failures().size()));
}

// ---- typed selection: an all-f64 model ---------------------------------------------------------------

ir::Graph f64_mlp(DType d = DType::f64) {
  ir::GraphBuilder b;
  b.input("x", {8, 64}, d);
  b.input("target", {8}, DType::i64);
  b.parameter("w1", {32, 64}, d);
  b.parameter("b1", {32}, d);
  b.parameter("w2", {10, 32}, d);
  b.op("h", ops::OpTag::linear, {"x", "w1", "b1"});
  b.op("a", ops::OpTag::relu, {"h"});
  b.op("logits", ops::OpTag::linear, {"a", "w2"});
  b.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
  b.output("logits");
  b.output("loss");
  return b.build();
}

TEST(Planner, AnAllF64ModelPlansOnKernelsThatComputeF64) {
  for (const char* profile : {"cpu-checked", "cpu-external"}) {
    SCOPED_TRACE(profile);
    auto r = plan(f64_mlp(), contract::builtin_profile(profile), VjpMode::with_vjp);
    ASSERT_TRUE(r.has_value()) << render_audit_table(r.error().audit);
    for (const auto& k : r->audit().kernels) {
      ASSERT_NE(k.capsule, nullptr);
      EXPECT_TRUE(k.capsule->dtypes.contains(DType::f64)) << k.node << " " << k.capsule->name;
      EXPECT_NE(k.capsule->provider, "blas") << k.node;
      ASSERT_FALSE(k.inputs.empty());
      EXPECT_EQ(k.inputs[0].dtype, DType::f64) << k.node;
    }
    const Json j = render_audit_json(r->audit());
    EXPECT_EQ(j["kernels"][0]["inputs"][0], "f64[8, 64]");
    EXPECT_EQ(j["kernels"][0]["dtypes"], "f32/f64");
  }
  // The same graph in f32 plans blas under cpu-external: selection follows the types, not the op alone.
  auto f32 = plan(f64_mlp(DType::f32), contract::builtin_profile("cpu-external"), VjpMode::with_vjp);
  ASSERT_TRUE(f32.has_value());
  EXPECT_EQ(f32->audit().kernels[0].capsule->name, "blas.linear");
}

TEST(Planner, AProfileThatCannotServeF64RejectsAtPlanTimeNamingNodeOpAndTypes) {
  BackendProfile native_only = contract::builtin_profile("cpu-checked");
  native_only.name = "native-only";
  native_only.modules = {&contract::native_module()};
  native_only.providers = {"native"};
  native_only.policy.provider_preference = {"native"};
  auto r = plan(f64_mlp(), native_only, VjpMode::with_vjp);
  ASSERT_FALSE(r.has_value());
  const auto failures = r.error().audit.check.failures();
  ASSERT_EQ(failures.size(), 4u);  // h, a, logits, loss: every kernel node, each with its own reason
  EXPECT_EQ(failures[0].node, "h");
  EXPECT_TRUE(mentions(failures[0].reason, "node 'h'")) << failures[0].reason;
  EXPECT_TRUE(mentions(failures[0].reason, "'linear'")) << failures[0].reason;
  EXPECT_TRUE(mentions(failures[0].reason, "f64[8, 64]")) << failures[0].reason;
  EXPECT_TRUE(mentions(failures[0].reason, "native.linear computes f32 only")) << failures[0].reason;
  EXPECT_EQ(failures[3].node, "loss");
  EXPECT_TRUE(mentions(failures[3].reason, "'cross_entropy'")) << failures[3].reason;
  EXPECT_TRUE(mentions(render_audit_table(r.error().audit), "native.linear computes f32 only"));
}

// Weight-only int8 linear: its i8 weight (an operand of any dtype, role c) does not narrow selection; the
// node plans on native for f32 activations and on half for bf16 ones, and a plan with VJPs refuses it (the
// op has none).
TEST(Planner, Int8WeightLinearPlansForInferenceOnly) {
  for (DType d : {DType::f32, DType::bf16}) {
    ir::GraphBuilder b;
    b.input("x", {2, 16}, d);
    b.parameter("w", {8, 16}, DType::i8, false);
    b.parameter("scale", {8}, d, false);
    b.op("y", ops::OpTag::linear_int8, {"x", "w", "scale"});
    b.output("y");
    const ir::Graph g = b.build();
    auto r = plan(g, contract::builtin_profile("cpu-checked"));
    ASSERT_TRUE(r.has_value()) << render_audit_table(r.error().audit);
    EXPECT_EQ(r->audit().kernels[0].capsule->name, d == DType::f32 ? "native.linear_int8" : "half.linear_int8");
    auto training = plan(g, contract::builtin_profile("cpu-checked"), VjpMode::with_vjp);
    ASSERT_FALSE(training.has_value());
    EXPECT_TRUE(mentions(training.error().audit.check.failures()[0].reason, "linear_int8"))
        << training.error().audit.check.failures()[0].reason;
  }
}

TEST(Planner, IndexOperandsAndIndexViewsPlanByTheirRoles) {
  // Token ids reshaped (a view that moves i64) and then used as embedding indices (role index): planned
  // under cpu-checked, as the same reshape of a bf16 tensor is (the half provider moves it), while that of
  // a u8 tensor is refused.
  ir::GraphBuilder b;
  b.input("ids", {2, 3}, DType::i64);
  b.parameter("table", {10, 4});
  b.op("flat_ids", ops::OpTag::reshape, {"ids"}, ops::Attributes{{"shape", std::vector<std::int64_t>{6}}});
  b.op("emb", ops::OpTag::embedding, {"table", "flat_ids"});
  b.output("emb");
  auto r = plan(b.build(), contract::builtin_profile("cpu-checked"), VjpMode::with_vjp);
  ASSERT_TRUE(r.has_value()) << render_audit_table(r.error().audit);
  EXPECT_TRUE(r->audit().kernels[0].capsule->dtypes.contains(DType::i64));
  for (DType d : {DType::bf16, DType::u8}) {
    ir::GraphBuilder h;
    h.input("x", {2, 3}, d);
    h.op("y", ops::OpTag::reshape, {"x"}, ops::Attributes{{"shape", std::vector<std::int64_t>{6}}});
    h.output("y");
    auto planned = plan(h.build(), contract::builtin_profile("cpu-checked"));
    if (d == DType::bf16) {
      ASSERT_TRUE(planned.has_value()) << render_audit_table(planned.error().audit);
      EXPECT_EQ(planned->audit().kernels[0].capsule->name, "half.reshape");
    } else {
      ASSERT_FALSE(planned.has_value());
      EXPECT_TRUE(mentions(planned.error().audit.check.failures()[0].reason, "u8[2, 3]"));
    }
  }
}

}  // namespace
}  // namespace pact::plan

namespace pact::plan {
namespace {

// A training plan (with VJP) admits a gradient-free op (argmax, comparisons, arange: the op table's
// nograd) forward only, since no gradient flows through it, while a kernel op without a VJP that a
// gradient would need (conv2d_activation, an inference fusion) is still refused.
TEST(Selection, GradientFreeOpsAreAdmittedForwardOnlyInATrainingPlan) {
  using ops::OpTag;
  auto node = [](std::string id, OpTag op, std::vector<std::string> in, ops::Attributes a = {}) {
    return ir::Node{std::move(id), op, std::move(in), std::move(a), {}, false, false, false};
  };
  std::vector<ir::Node> nodes{
      node("x", OpTag::input, {}, {{"shape", std::vector<std::int64_t>{4, 6}}}),
      node("w", OpTag::parameter, {}, {{"shape", std::vector<std::int64_t>{5, 6}}}),
      node("logits", OpTag::linear, {"x", "w"}),
      node("best", OpTag::argmax, {"logits"}, {{"dim", std::int64_t{-1}}}),
      node("positive", OpTag::gt, {"logits", "x0"}),
      node("x0", OpTag::constant, {}, {{"shape", std::vector<std::int64_t>{}}}),
      node("steps", OpTag::arange, {}, {{"end", std::int64_t{5}}, {"dtype", std::string("f32")}}),
      node("shifted", OpTag::add, {"logits", "steps"}),
      node("kept", OpTag::where, {"positive", "shifted", "x0"}),
      node("out", OpTag::output, {"kept"}),
      node("out_best", OpTag::output, {"best"}),
  };
  nodes[1].differentiable = true;
  std::swap(nodes[4], nodes[5]);  // the constant before its reader
  const ir::Graph g = ir::validate(nodes, {"out", "out_best"});
  auto r = plan(g, contract::builtin_profile("cpu-checked"), VjpMode::with_vjp);
  ASSERT_TRUE(r.has_value()) << render_audit_table(r.error().audit);
  int gradient_free = 0;
  for (const auto& k : r->audit().kernels) {
    ASSERT_NE(k.capsule, nullptr) << k.node;
    if (ops::op_info(k.op).gradient_free) {
      ++gradient_free;
      EXPECT_FALSE(k.capsule->vjp) << k.node;
    } else {
      EXPECT_TRUE(k.capsule->vjp) << k.node << " needs its VJP in training";
    }
  }
  EXPECT_EQ(gradient_free, 3);  // argmax, gt, arange

  // conv2d_activation has no VJP and is not gradient-free: a training plan refuses it, naming the node.
  std::vector<ir::Node> conv{
      node("img", OpTag::input, {}, {{"shape", std::vector<std::int64_t>{1, 2, 5, 5}}}),
      node("k", OpTag::parameter, {}, {{"shape", std::vector<std::int64_t>{3, 2, 3, 3}}}),
      node("act", OpTag::conv2d_activation, {"img", "k"}, {{"activation", std::string("relu")}}),
      node("y", OpTag::output, {"act"}),
  };
  conv[1].differentiable = true;
  const ir::Graph cg = ir::validate(conv, {"y"});
  EXPECT_TRUE(plan(cg, contract::builtin_profile("cpu-checked")).has_value());
  auto refused = plan(cg, contract::builtin_profile("cpu-checked"), VjpMode::with_vjp);
  ASSERT_FALSE(refused.has_value());
  EXPECT_TRUE(mentions(render_audit_table(refused.error().audit), "act")) << render_audit_table(refused.error().audit);
}

}  // namespace
}  // namespace pact::plan
