// Structure-only capture (SPEC §9, seed 003): the capability table and its mirror, the entry gate, the
// recorded structure, substrate uniformity, value-escape refusals, honesty of estimates and digests,
// discharge and the parity gate on every fixture, the audit-only plan check, artifacts, and the
// Llama-7B-shaped capture.

#include "pact/capture/capture.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "pact/capture/llama.hpp"
#include "pact/core/accounting.hpp"
#include "pact/ir/torch_import.hpp"
#include "pact/train/trainer.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/models.hpp"

namespace pact::capture {
namespace {

using ops::Attributes;
using ops::OpTag;
using runtime::EagerTensor;
using runtime::Session;
using test::mentions;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The refusal code a call throws ("" and a failure when it throws none or another error).
template <class F>
std::string refusal_of(F&& f) {
  try {
    f();
  } catch (const Refusal& r) {
    return r.refusal_code();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a Refusal, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a Refusal";
  return "";
}

template <class F>
std::string refusal_message(F&& f) {
  try {
    f();
  } catch (const Refusal& r) {
    return r.what();
  }
  ADD_FAILURE() << "expected a Refusal";
  return "";
}

// A two-layer MLP in model code, with module scopes and a tied output head.
ModelFn tiny_mlp(bool tie = false) {
  return [tie](Session& s, Substrate& sub) {
    EagerTensor x = s.input("x", sub.input(Dims{4, 8}));
    EagerTensor h;
    EagerTensor w1;
    {
      auto m = s.module("encoder");
      w1 = s.parameter("weight", sub.parameter(Dims{8, 8}));
      EagerTensor b1 = s.parameter("bias", sub.parameter(Dims{8}));
      h = s.apply(OpTag::relu, std::vector<EagerTensor>{s.apply(OpTag::linear, std::vector<EagerTensor>{x, w1, b1})});
    }
    auto m = s.module("head");
    EagerTensor w2 = tie ? s.tie("weight", w1) : s.parameter("weight", sub.parameter(Dims{8, 8}));
    return std::vector<EagerTensor>{s.apply(OpTag::linear, std::vector<EagerTensor>{h, w2})};
  };
}

// ---- the table ---------------------------------------------------------------------------------------

TEST(CaptureCapabilities, DocMirrorsTheTable) {
  EXPECT_EQ(read_text("docs/structure-only-capabilities.md"), render_capabilities_markdown())
      << "regenerate with: ./build/release/bin/pact capture --capabilities > docs/structure-only-capabilities.md";
}

TEST(CaptureCapabilities, EveryStatusIsInTheClosedGrammarAndRefusalsCarryTheirCode) {
  std::set<std::string> keys;
  for (const auto& row : capability_table()) {
    EXPECT_TRUE(keys.insert(std::string(row.key)).second) << row.key;
    const Status s = Status::parse(row.status);
    EXPECT_EQ(s.to_string(), row.status);
    if (s.kind == Status::Kind::refuse) {
      EXPECT_EQ(s.argument, row.refusal_code) << row.key;
      EXPECT_EQ(refusal_of([&] { require_structure_only_capability(row.key); }), std::string(row.refusal_code));
    } else if (s.supported()) {
      EXPECT_EQ(&require_structure_only_capability(row.key), &row);
    } else {
      EXPECT_FALSE(refusal_of([&] { require_structure_only_capability(row.key); }).empty());
    }
  }
  EXPECT_EQ(keys.size(), 30u);  // 29, and pytorch_meta_export (issue 22 item 6)
  for (const char* bad : {"supported", "refuse:", "verify:X1", "out_of_scope", "refuse:a b", "Supported_structural"}) {
    EXPECT_EQ(test::code_of([&] { Status::parse(bad); }), ErrorCode::parse_error) << bad;
  }
  EXPECT_EQ(test::code_of([] { capability("no_such_row"); }), ErrorCode::invalid_argument);
}

// The chokepoints are the only ways to refuse: refuse_structure_only takes only the codes the table does
// not own (a row's code through it is an internal error), and no source of pact/ throws a Refusal itself.
TEST(CaptureCapabilities, EveryRefusalGoesThroughAChokepoint) {
  for (const std::string_view code :
       {runtime::kMetaOutsideStructureOnly, runtime::kBackstop, runtime::kForgedArtifact, runtime::kRefutedRow,
        runtime::kGraphMismatch, runtime::kSubstrateMismatch, runtime::kPlanCheckUnsupported})
    EXPECT_EQ(refusal_of([&] { runtime::refuse_structure_only(code, "test", "detail"); }), std::string(code));
  for (const auto& row : runtime::capability_table()) {
    if (row.refusal_code == "—") continue;
    EXPECT_EQ(test::code_of([&] { runtime::refuse_structure_only(row.refusal_code, "test", "detail"); }),
              ErrorCode::internal)
        << row.key;
  }
  const std::regex direct(R"(throw\s+(runtime::)?Refusal\s*[({])");
  int scanned = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator("pact")) {
    const auto ext = entry.path().extension();
    if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".inc" && ext != ".hpp")) continue;
    ++scanned;
    if (entry.path() == std::filesystem::path("pact/runtime/capabilities.cpp")) continue;  // the chokepoints
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_FALSE(std::regex_search(text, direct)) << entry.path() << " throws a Refusal outside the chokepoints";
  }
  EXPECT_GT(scanned, 50);
}

TEST(CaptureCapabilities, NoAmendmentWidensAClaim) {
  const auto& row = capability("save_runnable");
  Amendment a{"save_runnable",   "supported_structural", std::string(row.amend_owner), std::string(row.flip_event),
              "tests/late_bind", std::string(row.claim)};
  EXPECT_EQ(check_amendment(a).kind, Status::Kind::supported_structural);
  Amendment wider = a;
  wider.claim = "Runnable save is supported for every model.";
  EXPECT_TRUE(mentions(test::message_of([&] { check_amendment(wider); }), "new row"));
  Amendment stranger = a;
  stranger.owner = "someone";
  EXPECT_TRUE(mentions(test::message_of([&] { check_amendment(stranger); }), "amend_owner"));
  Amendment early = a;
  early.flip_event = "whenever";
  EXPECT_TRUE(mentions(test::message_of([&] { check_amendment(early); }), "flip event"));
  Amendment bare = a;
  bare.evidence.clear();
  EXPECT_TRUE(mentions(test::message_of([&] { check_amendment(bare); }), "evidence"));
  Amendment frozen{"graph_structure", "refuse:x", "L7a",
                   "never",           "t",        std::string(capability("graph_structure").claim)};
  EXPECT_TRUE(mentions(test::message_of([&] { check_amendment(frozen); }), "never"));
  Amendment outside = a;
  outside.new_status = "maybe";
  EXPECT_EQ(test::code_of([&] { check_amendment(outside); }), ErrorCode::parse_error);
}

// ---- entry gate --------------------------------------------------------------------------------------

TEST(CaptureEntry, RefusedOptionsRefuseAtEntryWithTheirCodes) {
  const std::vector<std::pair<bool CaptureOptions::*, std::string>> cases{
      {&CaptureOptions::values, "structure_only_values_unsupported"},
      {&CaptureOptions::previews, "structure_only_values_unsupported"},
      {&CaptureOptions::nonfinite_halt, "structure_only_option_conflict"},
      {&CaptureOptions::runnable_ready, "structure_only_option_conflict"},
      {&CaptureOptions::runnable_save, "structure_only_runnable_unsupported"},
      {&CaptureOptions::replay, "structure_only_replay_unsupported"},
      {&CaptureOptions::validate, "structure_only_validation_unsupported"},
      {&CaptureOptions::backward, "structure_only_backward_unsupported"},
      {&CaptureOptions::episode, "structure_only_episode_unsupported"},
      {&CaptureOptions::distributed, "out_of_scope:distributed-contract"},
      {&CaptureOptions::fake_tensor, "structure_only_unverified:V1"},
  };
  for (const auto& [flag, code] : cases) {
    CaptureOptions o;
    o.*flag = true;
    bool ran = false;
    ModelFn model = [&](Session& s, Substrate& sub) {
      ran = true;
      return tiny_mlp()(s, sub);
    };
    EXPECT_EQ(refusal_of([&] { capture(model, o); }), code);
    EXPECT_FALSE(ran) << code << ": refused options never reach the model";
  }
}

TEST(CaptureEntry, RealCapturesRefuseWhatTheyDoNotOffer) {
  CaptureOptions o;
  o.structure_only = false;
  o.values = true;
  EXPECT_EQ(test::code_of([&] { capture(tiny_mlp(), o); }), ErrorCode::unsupported);
}

TEST(CaptureEntry, SymbolicShapesAreRefused) {
  CaptureOptions o;
  o.symbolic_shapes = true;
  EXPECT_EQ(refusal_of([&] { capture(tiny_mlp(), o); }), "structure_only_unverified:V2");
}

TEST(CaptureEntry, MetaTensorsOutsideStructureOnlyAreRefusedAtEntry) {
  Session s(contract::builtin_profile("cpu-checked"));
  EagerTensor m = s.constant(Tensor::empty(Dims{2, 2}, DType::f32, meta_provider()));
  EXPECT_EQ(refusal_of([&] { s.apply(OpTag::relu, std::vector<EagerTensor>{m}); }),
            std::string(kMetaOutsideStructureOnly));
  EXPECT_EQ(refusal_of([&] { s.item(m); }), std::string(kMetaOutsideStructureOnly));
}

TEST(CaptureEntry, BackwardUnderStructureOnlyRefuses) {
  Session s(contract::builtin_profile("cpu-checked"));
  s.set_structure_only(true);
  EagerTensor x = s.input("x", Tensor::empty(Dims{2}, DType::f32, meta_provider()));
  EXPECT_EQ(refusal_of([&] { s.backward(x); }), "structure_only_backward_unsupported");
}

// ---- structure ---------------------------------------------------------------------------------------

TEST(CaptureStructure, RecordsOpsEdgesOrderAndModuleNesting) {
  const auto c = capture(tiny_mlp(), {});
  ASSERT_EQ(c.ops.size(), 3u);
  EXPECT_EQ(c.ops[0].op, OpTag::linear);
  EXPECT_EQ(c.ops[0].id, "encoder.linear");
  EXPECT_EQ(c.ops[0].module, "encoder");
  EXPECT_EQ(c.ops[0].inputs, (std::vector<std::string>{"x", "encoder.weight", "encoder.bias"}));
  EXPECT_EQ(c.ops[1].op, OpTag::relu);
  EXPECT_EQ(c.ops[1].inputs, (std::vector<std::string>{"encoder.linear"}));
  EXPECT_EQ(c.ops[2].module, "head");
  EXPECT_EQ(c.ops[2].inputs, (std::vector<std::string>{"encoder.relu", "head.weight"}));
  EXPECT_EQ(c.outputs, (std::vector<std::string>{"head.linear"}));
  for (const auto& o : c.ops) EXPECT_EQ(o.state(), RowState::hypothesis);
  EXPECT_EQ(c.ops[2].type, (ops::TensorType{DType::f32, Dims{4, 8}}));
}

TEST(CaptureStructure, ParameterGeometryTiedOnceAndBuffersPartitioned) {
  const auto untied = capture(tiny_mlp(false), {});
  const auto tied = capture(tiny_mlp(true), {});
  EXPECT_EQ(untied.parameter_count(), 64 + 8 + 64);
  EXPECT_EQ(tied.parameter_count(), 64 + 8);  // the head reuses the encoder weight
  const auto* w = tied.find_source("encoder.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->tied, (std::vector<std::string>{"head.weight"}));
  EXPECT_EQ(tied.ops[2].inputs[1], "encoder.weight");
  // Buffers (running statistics) are recorded as buffers with their persistence.
  const ir::Graph cnn = train::digits_cnn(4);
  const auto c = capture(graph_model(cnn), {});
  int buffers = 0;
  for (const auto& s : c.sources) buffers += s.kind == runtime::SourceKind::buffer;
  EXPECT_GT(buffers, 0);
  EXPECT_EQ(c.memory("sgd").buffers, [&] {
    std::int64_t b = 0;
    for (const auto& s : c.sources) b += s.kind == runtime::SourceKind::buffer ? ops::numel(s.type.shape) * 4 : 0;
    return b;
  }());
}

TEST(CaptureStructure, NothingAllocatesTensorBytes) {
  AccountingRecorder ledger;
  const auto c = capture(llama_model(llama_config("tiny")), {});
  EXPECT_GT(c.ops.size(), 20u);
  // Meta storage records geometry only; no provider that holds bytes allocates anything.
  std::int64_t bytes = 0;
  for (const auto& e : ledger.allocations()) {
    if (e.provider != "meta") bytes += static_cast<std::int64_t>(e.bytes);
  }
  EXPECT_EQ(bytes, 0) << ledger.allocations().size() << " allocation events";
  // The same model captured for real does allocate: the ledger sees it.
  AccountingRecorder real_ledger;
  CaptureOptions real;
  real.structure_only = false;
  capture(llama_model(llama_config("tiny")), real);
  std::int64_t real_bytes = 0;
  for (const auto& e : real_ledger.allocations()) real_bytes += static_cast<std::int64_t>(e.bytes);
  EXPECT_GT(real_bytes, 0);
}

// ---- substrate ---------------------------------------------------------------------------------------

TEST(CaptureSubstrate, MixedCellsRefuseInBothDirectionsNamingTheSides) {
  // A real parameter in a structure-only capture.
  ModelFn real_param = [](Session& s, Substrate& sub) {
    EagerTensor x = s.input("x", sub.input(Dims{2, 3}));
    EagerTensor w = s.parameter("w", Tensor::zeros(Dims{3, 3}, DType::f32));
    return std::vector<EagerTensor>{s.apply(OpTag::linear, std::vector<EagerTensor>{x, w})};
  };
  auto msg = refusal_message([&] { capture(real_param, {}); });
  EXPECT_TRUE(mentions(msg, "structure_only_substrate_mismatch")) << msg;
  EXPECT_TRUE(mentions(msg, "parameter 'w' is real") && mentions(msg, "'x'")) << msg;
  // A meta input in a real capture.
  ModelFn meta_input = [](Session& s, Substrate& sub) {
    EagerTensor w = s.parameter("w", sub.parameter(Dims{3, 3}));
    EagerTensor x = s.input("x", Tensor::empty(Dims{2, 3}, DType::f32, meta_provider()));
    return std::vector<EagerTensor>{s.apply(OpTag::linear, std::vector<EagerTensor>{x, w})};
  };
  CaptureOptions real;
  real.structure_only = false;
  msg = refusal_message([&] { capture(meta_input, real); });
  EXPECT_TRUE(mentions(msg, "input 'x' is meta") && mentions(msg, "'w'")) << msg;
  // A real tensor met mid-forward (an unnamed constant) refuses at the user's line.
  ModelFn stray = [](Session& s, Substrate& sub) {
    EagerTensor x = s.input("x", sub.input(Dims{2, 3}));
    EagerTensor scale = s.constant(Tensor::zeros(Dims{3}, DType::f32));
    return std::vector<EagerTensor>{s.apply(OpTag::mul, std::vector<EagerTensor>{x, scale})};
  };
  msg = refusal_message([&] { capture(stray, {}); });
  EXPECT_TRUE(mentions(msg, "structure_only_substrate_mismatch")) << msg;
  EXPECT_TRUE(mentions(msg, "capture_test.cpp:")) << msg;
}

// ---- teaching refusals -------------------------------------------------------------------------------

TEST(CaptureTeaching, ValueEscapesRefuseAtTheUsersLineWhateverTheDevice) {
  int line = 0;
  ModelFn branchy = [&](Session& s, Substrate& sub) {
    EagerTensor x = s.input("x", sub.input(Dims{1}));
    EagerTensor y = s.apply(OpTag::relu, std::vector<EagerTensor>{x});
    line = __LINE__ + 1;
    if (s.branch(y)) return std::vector<EagerTensor>{y};
    return std::vector<EagerTensor>{x};
  };
  const auto msg = refusal_message([&] { capture(branchy, {}); });
  EXPECT_TRUE(mentions(msg, "structure_only_values_unsupported")) << msg;
  EXPECT_TRUE(mentions(msg, "capture_test.cpp:" + std::to_string(line))) << msg;
  // A real tensor under structure-only mode refuses too (device-neutral).
  Session s(contract::builtin_profile("cpu-checked"));
  s.set_structure_only(true);
  EagerTensor real = s.constant(Tensor::zeros(Dims{1}, DType::f32));
  EXPECT_EQ(refusal_of([&] { s.item(real); }), "structure_only_values_unsupported");
  EXPECT_EQ(refusal_of([&] { s.read(real, Dims{0}); }), "structure_only_values_unsupported");
  // Outside structure-only mode the same calls read values.
  Session r(contract::builtin_profile("cpu-checked"));
  const float one[] = {1.5f};
  EagerTensor v = r.constant(Tensor::from_values<float>(Dims{1}, one));
  EXPECT_DOUBLE_EQ(r.item(v), 1.5);
  EXPECT_TRUE(r.branch(v));
}

TEST(CaptureTeaching, MetaFailuresGoThroughTheBackstopAndUserExceptionsPropagate) {
  ModelFn bad_shapes = [](Session& s, Substrate& sub) {
    EagerTensor a = s.input("a", sub.input(Dims{2, 3}));
    EagerTensor b = s.input("b", sub.input(Dims{4, 5}));
    return std::vector<EagerTensor>{s.apply(OpTag::matmul, std::vector<EagerTensor>{a, b})};
  };
  const auto msg = refusal_message([&] { capture(bad_shapes, {}); });
  EXPECT_TRUE(mentions(msg, std::string(kBackstop)) && mentions(msg, "inner dimensions")) << msg;
  struct UserError : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  ModelFn throws = [](Session&, Substrate&) -> std::vector<EagerTensor> { throw UserError("mine"); };
  EXPECT_THROW(capture(throws, {}), UserError);
  // In a real capture a pact::Error stays itself (no backstop).
  CaptureOptions real;
  real.structure_only = false;
  EXPECT_EQ(test::code_of([&] { capture(bad_shapes, real); }), ErrorCode::invalid_argument);
}

// ---- honesty -----------------------------------------------------------------------------------------

TEST(CaptureHonesty, EstimatesAreLabelledAndMeasuredColumnsUnknown) {
  const auto c = capture(tiny_mlp(), {});
  const Json j = to_json(c);
  EXPECT_EQ(j["estimates"]["label"], "estimated");
  EXPECT_EQ(j["measured"]["peak_bytes"], "unknown");
  EXPECT_EQ(j["measured"]["total_us"], "unknown");
  for (const auto& o : j["ops"]) {
    EXPECT_EQ(o["measured_us"], "unknown");
    EXPECT_TRUE(o["flops"].contains("estimated"));
  }
  EXPECT_EQ(j["banner"], std::string(kBanner));
  const std::string text = render(c, "adamw");
  EXPECT_TRUE(mentions(text, std::string(kBanner)));
  EXPECT_TRUE(mentions(text, "measured: time unknown, peak memory unknown"));
  EXPECT_EQ(c.flops(), (2 * 4 * 8 * 8 + 4 * 8) + 4 * 8 + 2 * 4 * 8 * 8);  // linear+bias, relu, linear
  EXPECT_EQ(c.macs(), (2 * 4 * 8 * 8 + 4 * 8) / 2 + 4 * 8 * 8);
  EXPECT_EQ(j["estimates"]["forward_macs"], c.macs());
  const auto m = c.memory("adamw");
  EXPECT_EQ(m.parameters, (64 + 8 + 64) * 4);
  EXPECT_EQ(m.gradients, m.parameters);
  EXPECT_EQ(m.optimizer_state, 2 * m.parameters);
  EXPECT_EQ(c.memory("sgd").optimizer_state, 0);
  EXPECT_EQ(c.memory("sgd-momentum").optimizer_state, m.parameters);
  // The tape retains the relu's output (relu's VJP reads it, and the head's linear reads it as x); the
  // first linear's x and every weight are sources, counted elsewhere.
  EXPECT_EQ(m.activations_saved, 4 * 8 * 4);
  EXPECT_EQ(refusal_of([&] { chrome_trace(c); }), "structure_only_measurements_unsupported");
  // A real capture has measurements and can export them.
  CaptureOptions real;
  real.structure_only = false;
  const auto r = capture(tiny_mlp(), real);
  EXPECT_GE(r.ops[0].measured_us, 0.0);
  EXPECT_EQ(chrome_trace(r)["traceEvents"].size(), 3u);
}

TEST(CaptureHonesty, DigestsAreDomainSeparated) {
  CaptureOptions real;
  real.structure_only = false;
  const auto meta = capture(tiny_mlp(), {});
  const auto value = capture(tiny_mlp(), real);
  EXPECT_EQ(meta.graph_shape_digest, value.graph_shape_digest);
  EXPECT_NE(meta.content_digest, value.content_digest);
  EXPECT_EQ(meta.content_domain, kMetaContentDomain);
  EXPECT_EQ(value.content_domain, kValueContentDomain);
  // The same document digested under each domain never gives the same digest.
  const Json doc{{"graph_shape", meta.graph_shape_digest}};
  EXPECT_NE(digest_json(kMetaContentDomain, doc), digest_json(kValueContentDomain, doc));
  EXPECT_NE(digest_json(kGraphShapeDomain, doc), digest_json(kMetaContentDomain, doc));
  // Values change the value digest and never the meta one.
  CaptureOptions other = real;
  other.seed = 7;
  EXPECT_NE(capture(tiny_mlp(), other).content_digest, value.content_digest);
  EXPECT_EQ(capture(tiny_mlp(), {}).content_digest, meta.content_digest);
}

// ---- discharge and the parity gate -------------------------------------------------------------------

void expect_parity(const ModelFn& model, const std::string& what) {
  SCOPED_TRACE(what);
  auto meta = capture(model, {});
  CaptureOptions real;
  real.structure_only = false;
  const auto value = capture(model, real);
  EXPECT_EQ(meta.graph_shape_digest, value.graph_shape_digest);
  const auto report = discharge(meta, value);
  EXPECT_EQ(report.refuted, 0u);
  for (const auto& row : report.refuted_rows) ADD_FAILURE() << row;
  // Op rows, one check per source, the parameter bytes, the bytes saved for backward, and each op's
  // counted multiply-accumulates.
  EXPECT_EQ(report.corroborated, meta.ops.size() + meta.sources.size() + 2 + meta.ops.size());
  for (const auto& o : meta.ops) EXPECT_EQ(o.state(), RowState::corroborated) << o.id;
  EXPECT_NO_THROW(meta.memory("adamw"));
  // The measurements are the kernels' and the loaded tensors', not the estimate's: a model with
  // contractions counts some multiply-accumulates, and the parameter bytes are what was loaded.
  std::int64_t counted = 0;
  for (const auto& o : value.ops) counted += o.measured_macs;
  EXPECT_EQ(counted > 0, meta.macs() > 0);
  EXPECT_EQ(value.measured_parameter_bytes > 0, meta.parameter_count() > 0);
  EXPECT_EQ(value.measured_saved_bytes, meta.saved_for_backward_bytes());
}

TEST(CaptureParity, HoldsOnEveryFixtureModel) {
  const ir::Graph mlp = train::digits_mlp(8), cnn = train::digits_cnn(4);
  expect_parity(graph_model(mlp), "digits mlp");
  expect_parity(graph_model(cnn), "digits cnn");
  for (const auto& path : test::example_models()) {
    const ir::Graph g = ir::load_graph(path);
    expect_parity(graph_model(g), path);
  }
  for (const char* dir : {"mlp", "small_cnn", "tiny_transformer", "tiny_gpt"}) {
    const auto bundle = ir::load_torch_export(std::string("tests/fixtures/torch/") + dir);
    const auto weights = bundle.state();
    expect_parity(graph_model(bundle.model.graph, &weights), dir);
  }
  expect_parity(llama_model(llama_config("tiny")), "llama tiny");
}

// A model whose parameters can come in another width or dtype: the same graph (ops, edges, attributes,
// names), as a checkpoint of another geometry or dtype for it would give.
ModelFn two_layer(std::int64_t hidden, DType dtype = DType::f32) {
  return [hidden, dtype](Session& s, Substrate& sub) {
    EagerTensor x = s.input("x", sub.input(Dims{4, 8}, dtype));
    EagerTensor w1 = s.parameter("fc1.weight", sub.parameter(Dims{hidden, 8}, 0.1, dtype));
    EagerTensor b1 = s.parameter("fc1.bias", sub.parameter(Dims{hidden}, 0.1, dtype));
    EagerTensor w2 = s.parameter("fc2.weight", sub.parameter(Dims{3, hidden}, 0.1, dtype));
    EagerTensor h = s.apply(OpTag::relu, std::vector<EagerTensor>{s.apply(OpTag::linear, std::vector{x, w1, b1})});
    return std::vector<EagerTensor>{s.apply(OpTag::linear, std::vector<EagerTensor>{h, w2})};
  };
}

bool refutes(const DischargeReport& r, const std::string& row) {
  for (const auto& c : r.checks) {
    if (c.row == row) return !c.ok;
  }
  return false;
}

TEST(CaptureDischarge, RefutesACheckpointOfAnotherGeometryOrDtype) {
  CaptureOptions real;
  real.structure_only = false;
  {
    SCOPED_TRACE("the same model: corroborated");
    auto meta = capture(two_layer(16), {});
    const auto r = discharge(meta, capture(two_layer(16), real));
    EXPECT_EQ(r.refuted, 0u);
  }
  {
    SCOPED_TRACE("a checkpoint with a wider hidden layer");
    auto meta = capture(two_layer(16), {});
    const auto r = discharge(meta, capture(two_layer(24), real));
    EXPECT_TRUE(refutes(r, "parameter fc1.weight"));
    EXPECT_TRUE(refutes(r, "parameter fc1.bias"));
    EXPECT_TRUE(refutes(r, "parameter fc2.weight"));
    EXPECT_FALSE(refutes(r, "input x"));
    EXPECT_TRUE(refutes(r, "parameter bytes"));
    EXPECT_TRUE(refutes(r, "bytes saved for backward"));                     // the tape retains a 24-wide relu output
    EXPECT_TRUE(refutes(r, "multiply-accumulates of linear"));               // 4 x 24 x 8 counted, 4 x 16 x 8 estimated
    EXPECT_TRUE(refutes(r, "multiply-accumulates of linear_1"));             // 4 x 3 x 24 against 4 x 3 x 16
    EXPECT_EQ(r.refuted_ops, (std::vector<std::string>{"linear", "relu"}));  // the head's output is still [4, 3]
    // A refuted row names the estimate and the measurement.
    bool named = false;
    for (const auto& row : r.refuted_rows)
      named = named || row == "parameter bytes: estimate 768, measured 1152 (exact)";
    EXPECT_TRUE(named) << ::testing::PrintToString(r.refuted_rows);
  }
  {
    SCOPED_TRACE("a float64 checkpoint of the float32 graph");
    auto meta = capture(two_layer(16), {});
    const auto r = discharge(meta, capture(two_layer(16, DType::f64), real));
    EXPECT_TRUE(refutes(r, "input x"));
    EXPECT_TRUE(refutes(r, "parameter fc1.weight"));
    EXPECT_TRUE(refutes(r, "parameter bytes"));                  // twice the bytes
    EXPECT_TRUE(refutes(r, "bytes saved for backward"));         // f64 activations
    EXPECT_FALSE(refutes(r, "multiply-accumulates of linear"));  // the same work, in the reference's f64 loops
    EXPECT_EQ(r.refuted_ops.size(), meta.ops.size());            // every op's dtype
  }
}

// An estimate the real run contradicts, from either side: a kernel that does twice the work its op's
// FLOP rule counts (the native linear substituted by one that runs its product twice), and an estimate
// rule wrong for one op (the estimate cut to a third, as a rule that forgot a dimension would give).
Tensor linear_twice(std::span<const TensorView> in, const Attributes& a, const kernels::KernelContext& ctx) {
  const kernels::Handler& native = *kernels::find_handler(kernels::native_handlers(), OpTag::linear);
  native.forward(in, a, ctx);
  return native.forward(in, a, ctx);
}

TEST(CaptureDischarge, RefutesAnEstimateTheKernelsContradict) {
  CaptureOptions real;
  real.structure_only = false;
  {
    auto meta = capture(two_layer(16), {});
    const kernels::Handler& native = *kernels::find_handler(kernels::native_handlers(), OpTag::linear);
    kernels::Handler twice = native;
    twice.forward = &linear_twice;
    kernels::ScopedHandlerSubstitution swap(native, twice);
    const auto r = discharge(meta, capture(two_layer(16), real));
    EXPECT_TRUE(refutes(r, "multiply-accumulates of linear"));
    EXPECT_TRUE(refutes(r, "multiply-accumulates of linear_1"));
    EXPECT_TRUE(r.refuted_ops.empty());  // the shapes are right: only the work is not what was estimated
  }
  {
    auto meta = capture(two_layer(16), {});
    meta.ops[0].flops /= 3;
    const auto r = discharge(meta, capture(two_layer(16), real));
    EXPECT_TRUE(refutes(r, "multiply-accumulates of linear"));
    EXPECT_FALSE(refutes(r, "multiply-accumulates of linear_1"));
    EXPECT_EQ(r.refuted, 1u);
  }
}

TEST(CaptureDischarge, RefutesAWrongHypothesisAndConsumersRefuseIt) {
  // Hypotheses from one shape, reality from another with the same graph shape: the second linear's
  // input width is recorded as a parameter shape, so only the op output (batch) differs.
  auto model = [](std::int64_t batch) -> ModelFn {
    return [batch](Session& s, Substrate& sub) {
      EagerTensor x = s.input("x", sub.input(Dims{batch, 8}));
      EagerTensor w = s.parameter("w", sub.parameter(Dims{8, 8}));
      return std::vector<EagerTensor>{s.apply(OpTag::linear, std::vector<EagerTensor>{x, w})};
    };
  };
  auto meta = capture(model(4), {});
  CaptureOptions real;
  real.structure_only = false;
  // A different input geometry is the same graph with another source: its row and the op's are refuted.
  {
    auto other = meta;
    const auto r = discharge(other, capture(model(5), real));
    EXPECT_EQ(r.refuted_ops, std::vector<std::string>{"linear"});
    EXPECT_TRUE(refutes(r, "input x"));
  }
  // Another op (a relu after the linear) is another graph: discharge refuses it.
  const ModelFn other_graph = [](Session& s, Substrate& sub) {
    EagerTensor x = s.input("x", sub.input(Dims{4, 8}));
    EagerTensor w = s.parameter("w", sub.parameter(Dims{8, 8}));
    return std::vector<EagerTensor>{
        s.apply(OpTag::relu, std::vector<EagerTensor>{s.apply(OpTag::linear, std::vector<EagerTensor>{x, w})})};
  };
  EXPECT_EQ(refusal_of([&] { discharge(meta, capture(other_graph, real)); }), std::string(kGraphMismatch));
  // Same graph, but a hypothesis that disagrees with reality: discharge refutes the row.
  const auto c = capture(model(4), real);
  StructureCapture wrong = meta;
  wrong.ops[0].type = {DType::f32, Dims{4, 9}};
  const auto report = discharge(wrong, c);
  EXPECT_EQ(report.refuted, 1u);
  EXPECT_EQ(report.refuted_rows, std::vector<std::string>{"op linear: hypothesis f32[4, 9], observed f32[4, 8]"});
  EXPECT_EQ(wrong.ops[0].state(), RowState::refuted);
  ASSERT_TRUE(wrong.ops[0].observed().has_value());
  EXPECT_EQ(wrong.ops[0].observed()->shape, (Dims{4, 8}));
  EXPECT_EQ(refusal_of([&] { wrong.memory("adamw"); }), std::string(kRefutedRow));
  EXPECT_EQ(refusal_of([&] { render(wrong, "adamw"); }), std::string(kRefutedRow));
  EXPECT_EQ(refusal_of([&] {
              check_plan(wrong, {{"node:linear", 1, {DType::f32, Dims{4, 8}}}});
            }),
            std::string(kRefutedRow));
  // Discharge needs a hypothesis capture and a real one.
  EXPECT_EQ(test::code_of([&] { discharge(meta, meta); }), ErrorCode::invalid_argument);
}

// ---- plan check --------------------------------------------------------------------------------------

TEST(CapturePlanCheck, ResolvesSelectorsChecksMultiplicityAndGeometryAndNeverExecutes) {
  const auto c = capture(llama_model(llama_config("tiny")), {});
  const auto report = check_plan(c, {
                                        {"op:scaled_dot_product_attention", 2, {DType::f32, Dims{1, 4, 32, 16}}},
                                        {"module:layers.0.feed_forward", std::nullopt, {DType::f32, Dims{1, 32, 172}}},
                                        {"node:output", 1, {DType::f32, Dims{1, 32, 256}}},
                                    });
  EXPECT_FALSE(report.executable);
  ASSERT_EQ(report.rows.size(), 3u);
  EXPECT_EQ(report.rows[0].matched.size(), 2u);
  EXPECT_TRUE(report.rows[0].multiplicity_ok);
  EXPECT_TRUE(report.rows[0].disagreements.empty());
  EXPECT_GT(report.rows[1].matched.size(), 2u);
  EXPECT_FALSE(report.rows[1].disagreements.empty());  // not every feed-forward op is [1, 32, 172]
  EXPECT_TRUE(report.rows[2].matched.empty());         // no node named "output"
  EXPECT_FALSE(report.consistent());
  const auto wrong = check_plan(c, {{"op:scaled_dot_product_attention", 3, {DType::f32, Dims{1, 4, 32, 16}}}});
  EXPECT_FALSE(wrong.rows[0].multiplicity_ok);
  EXPECT_EQ(refusal_of([&] { check_plan(c, {{"fn:is_attention", 1, {}}}); }), "plan_check_unsupported");
  EXPECT_EQ(refusal_of([&] { check_plan(c, {{"value:argmax", 1, {}}}); }), "plan_check_unsupported");
  EXPECT_EQ(test::code_of([&] { check_plan(c, {{"attention", 1, {}}}); }), ErrorCode::invalid_argument);
}

// ---- artifacts ---------------------------------------------------------------------------------------

// A hostile artifact's shapes cannot overflow the estimates that multiply them: a negative extent, one
// beyond int64 and a shape whose byte count overflows are parse errors, before any digest or estimate.
TEST(CaptureArtifacts, ShapesThatOverflowAreParseErrors) {
  const Json good = to_json(capture(tiny_mlp(), {}));
  for (const std::string& shape :
       {std::string("[-1]"), std::string("[18446744073709551615]"), std::string("[4611686018427387904, 4]")}) {
    SCOPED_TRACE(shape);
    Json doc = good;
    doc["sources"][0]["type"]["shape"] = parse_json(shape, "shape");
    EXPECT_EQ(test::code_of([&] { load_capture(doc.dump()); }), ErrorCode::parse_error);
  }
}

TEST(CaptureArtifacts, RoundTripKeepsTheMarkerAndLoadsRowsAsHypotheses) {
  auto meta = capture(tiny_mlp(), {});
  CaptureOptions real;
  real.structure_only = false;
  discharge(meta, capture(tiny_mlp(), real));
  const std::string text = to_json(meta).dump();
  const auto back = load_capture(text);
  EXPECT_TRUE(back.structure_only);
  EXPECT_EQ(back.graph_shape_digest, meta.graph_shape_digest);
  EXPECT_EQ(back.ops.size(), meta.ops.size());
  for (const auto& o : back.ops) EXPECT_EQ(o.state(), RowState::hypothesis) << "a file is not discharge authority";
  EXPECT_EQ(back.parameter_count(), meta.parameter_count());
}

TEST(CaptureArtifacts, ForgedFilesAreRefused) {
  const auto meta = capture(tiny_mlp(), {});
  const Json good = to_json(meta);
  auto forged = [&](const std::function<void(Json&)>& edit) {
    Json j = good;
    edit(j);
    return refusal_of([&] { load_capture(j.dump()); });
  };
  const std::string code(kForgedArtifact);
  EXPECT_EQ(forged([](Json& j) { j["structure_only"] = false; }), code);  // claims values are real
  EXPECT_EQ(forged([](Json& j) { j["values"] = Json::array({1, 2}); }), code);
  EXPECT_EQ(forged([](Json& j) { j["measured"]["peak_bytes"] = 0; }), code);
  EXPECT_EQ(forged([](Json& j) { j["ops"][0]["measured_us"] = 3.0; }), code);
  EXPECT_EQ(forged([](Json& j) { j["digests"]["content_domain"] = std::string(kValueContentDomain); }), code);
  EXPECT_EQ(forged([](Json& j) {
              j["ops"][0]["type"]["shape"] = Json::array({4, 9});
            }),
            code);  // digest no longer matches
  EXPECT_EQ(forged([](Json& j) { j.erase("banner"); }), code);
  EXPECT_EQ(test::code_of([&] { load_capture("{\"schema\": \"pact.capture.v1\"}"); }), ErrorCode::parse_error);
  EXPECT_EQ(test::code_of([&] { load_capture(good.dump().substr(0, 200)); }), ErrorCode::parse_error);
  Json no_ops = good;
  no_ops.erase("ops");
  EXPECT_EQ(test::code_of([&] { load_capture(no_ops.dump()); }), ErrorCode::parse_error);
}

// ---- Llama -------------------------------------------------------------------------------------------

TEST(CaptureLlama, SevenBShapedCaptureCountsAndFlops) {
  const LlamaConfig cfg = llama_config("7b");
  const auto c = capture(llama_model(cfg), {});
  const std::int64_t params = c.parameter_count();
  EXPECT_GE(params, 6'700'000'000);
  EXPECT_LE(params, 6'800'000'000);
  const std::int64_t embedding = cfg.vocab * cfg.d_model;
  const double t = static_cast<double>(cfg.seq);
  const double expected = 2.0 * static_cast<double>(params - embedding) * t + 4.0 * cfg.layers * t * t * cfg.d_model;
  EXPECT_NEAR(static_cast<double>(c.flops()) / expected, 1.0, 0.01);
  EXPECT_EQ(c.outputs.size(), 1u);
  EXPECT_EQ(c.find_op(c.outputs[0])->type.shape, (Dims{1, 2048, 32000}));
  EXPECT_EQ(test::code_of([] { llama_config("70x"); }), ErrorCode::invalid_argument);
}

// Issue 21 item 9: `--config 70b` was refused though the builder has grouped-query attention. Llama 2 70B
// has 68,976,648,192 parameters: per layer q and o (d x d), k and v (d x 1024: 8 of 64 heads), the
// SwiGLU MLP (3 x d x 28672) and two norms; untied embedding and head; a final norm.
TEST(CaptureLlama, SeventyBUsesGroupedQueryAttention) {
  const LlamaConfig cfg = llama_config("70b");
  EXPECT_EQ(cfg.kv_heads, 8);
  const auto c = capture(llama_model(cfg), {});
  const std::int64_t d = cfg.d_model, kv = d / cfg.heads * cfg.kv_heads;
  const std::int64_t layer = 2 * d * d + 2 * d * kv + 3 * d * cfg.ffn + 2 * d;
  EXPECT_EQ(c.parameter_count(), cfg.layers * layer + 2 * cfg.vocab * d + d);
  EXPECT_EQ(c.parameter_count(), 68'976'648'192);
  EXPECT_EQ(c.find_op(c.outputs[0])->type.shape, (Dims{1, 4096, 32000}));
}

}  // namespace
}  // namespace pact::capture
