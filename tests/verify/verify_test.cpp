// Contract tooling (SPEC §10): the shipped contracts validate and every gate catches its mutant; malformed
// contracts and bindings fail with file, line and field; the audit finds broken bindings; a gate that
// catches nothing fails; falsification is reproducible; scaffolds name every obligation.

#include <gtest/gtest.h>

#include <set>

#include "pact/core/json.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/ops/op_table.hpp"
#include "pact/verify/falsify.hpp"
#include "pact/verify/gate.hpp"
#include "tests/support/expect_error.hpp"

namespace pact::verify {
namespace {

using test::code_of;
using test::mentions;
using test::message_of;
using namespace ::pact::spec;  // the contract parser (pact/spec) under test beside verify

BindingFile shipped_bindings() {
  return parse_bindings(read_text_file("contracts/binding.yaml"), "contracts/binding.yaml");
}

const std::string kOracle = "contracts/oracle";

TEST(Contracts, ShippedContractsValidateAndEveryGateCatchesItsMutant) {
  const auto contracts = load_contracts("contracts");
  ASSERT_GE(contracts.size(), 22u);
  // Every op with a kernel has an equation, and every equation of an op with a VJP a finite-difference check.
  std::set<std::string> ops, differenced;
  std::size_t falsification_tests = 0;
  for (const auto& c : contracts) {
    for (const auto& e : c.equations) ops.insert(e.op);
    for (const auto& o : c.obligations) {
      if (o.check != "fd_vjp") continue;
      for (const auto& e : c.equations) {
        if (e.name == o.equation) differenced.insert(e.op);
      }
    }
    falsification_tests += c.falsification.size();
  }
  for (const auto& h : kernels::reference_handlers()) {
    const std::string op(ops::op_kind(h.op));
    EXPECT_TRUE(ops.count(op)) << "no contract has an equation for " << op;
    if (ops::op_info(h.op).has_vjp) {
      EXPECT_TRUE(differenced.count(op)) << "no fd_vjp obligation for " << op;
    }
  }
  const auto report = falsify(contracts, shipped_bindings(), "", 0, 20, true, kOracle);
  EXPECT_EQ(report.failed(), 0u);
  EXPECT_GT(report.evaluated(), report.declared);  // several capsules per obligation
  EXPECT_EQ(report.mutants.size(), falsification_tests);
  EXPECT_EQ(report.caught(), falsification_tests);
  // Only 16-bit capsules are outside an obligation (float32 property cases and finite differences), and the
  // reference capsules outside matches_reference_on_samples, which compares the others with them.
  for (const auto& o : report.obligations) {
    if (!o.outcome.not_applicable.empty()) {
      const bool reference_baseline = o.capsule.rfind("reference.", 0) == 0 && o.obligation.ends_with("-W");
      EXPECT_TRUE(o.capsule.rfind("half.", 0) == 0 || reference_baseline) << o.capsule << " " << o.obligation;
    }
  }
  EXPECT_TRUE(report.ok());
  const auto audited = audit(contracts, shipped_bindings());
  EXPECT_TRUE(audited.problems.empty()) << audited.problems.front();
  EXPECT_TRUE(audited.unlinked_capsules.empty()) << audited.unlinked_capsules.front();
}

// A contract for an op needs no C++: this one, written here as YAML, holds silu's capsules to the oracle,
// to the shape rule, to finite differences and (all but the reference) to the reference on the op sweep's
// samples, and each of its falsification tests catches its mutant.
TEST(Contracts, GenericChecksRunFromYamlAlone) {
  const std::string text = R"yaml(metadata: {id: silu-test-v1, version: 1, description: silu}
equations:
  silu: {op: silu, formula: "y = x sigmoid(x)"}
proof_obligations:
  - {id: S-O, kind: equivalence, equation: silu, property: PyTorch's values, check: matches_oracle}
  - {id: S-S, kind: invariant, equation: silu, property: shape, check: shape_rule}
  - {id: S-D, kind: equivalence, equation: silu, property: differences, check: fd_vjp}
  - {id: S-W, kind: equivalence, equation: silu, property: the sweep, check: matches_reference_on_samples}
falsification_tests:
  - {id: S-OF, obligation: S-O, mutant: last_value_shifted, description: off}
  - {id: S-SF, obligation: S-S, mutant: result_unsqueezed, description: rank}
  - {id: S-DF, obligation: S-D, mutant: first_gradient_scaled, description: gradient}
  - {id: S-WF, obligation: S-W, mutant: last_value_shifted, description: off}
qa_gate: {id: S-GATE, checks: [S-O, S-S, S-D, S-W], pass_criteria: all, must_catch: [last_value_shifted]}
)yaml";
  const auto c = parse_contract(text, "silu.yaml");
  const std::string rows = R"(policy: AllImplemented
bindings:
  - {contract: silu-test-v1, equation: silu, capsule: reference.silu, symbol: "pact::kernels::cpu::reference::silu_forward", status: implemented}
  - {contract: silu-test-v1, equation: silu, capsule: native.silu, symbol: "pact::kernels::cpu::native::silu_forward", status: implemented}
  - {contract: silu-test-v1, equation: silu, capsule: half.silu, symbol: "pact::kernels::cpu::half::silu_forward", status: implemented}
)";
  const auto report = falsify({c}, parse_bindings(rows, "b.yaml"), "", 0, 20, true, kOracle);
  EXPECT_EQ(report.failed(), 0u);
  EXPECT_EQ(report.evaluated(), 10u);      // three checks on reference, four on native, three on half
  EXPECT_EQ(report.not_applicable(), 2u);  // half.silu is not differenced in 16 bits; the reference is the
                                           // samples' baseline
  ASSERT_EQ(report.mutants.size(), 4u);
  EXPECT_EQ(report.caught(), 4u);
  EXPECT_TRUE(report.ok());
  EXPECT_TRUE(audit({c}, parse_bindings(rows, "b.yaml")).problems.empty());

  // The evaluations falsify runs (and the mutation gate one at a time): obligation by obligation, each
  // implemented capsule in binding order; a row not implemented is not evaluated.
  const auto evals = evaluations_of(
      c, parse_bindings(rows + "  - {contract: silu-test-v1, equation: silu, capsule: native.gelu, symbol: "
                               "\"pact::kernels::cpu::native::gelu_forward\", status: not_implemented}\n",
                        "b.yaml"));
  ASSERT_EQ(evals.size(), 12u);
  EXPECT_EQ(evals[0].obligation->id, "S-O");
  EXPECT_EQ(evals[0].capsule, "reference.silu");
  EXPECT_EQ(evals[2].capsule, "half.silu");
  EXPECT_EQ(evals[3].obligation->id, "S-S");
  EXPECT_EQ(evals[11].obligation->id, "S-W");
  EXPECT_EQ(evals[11].op, "silu");
  ASSERT_EQ(report.obligations.size(), evals.size());
  for (std::size_t i = 0; i < evals.size(); ++i) {
    EXPECT_EQ(report.obligations[i].obligation, evals[i].obligation->id);
    EXPECT_EQ(report.obligations[i].capsule, evals[i].capsule);
  }

  // Bound to the wrong kernel (sigmoid's, which the audit also names), the generic checks refute it.
  auto silu_bound_to = [](const std::string& provider) {
    return parse_bindings(
        "policy: AllImplemented\nbindings:\n  - {contract: silu-test-v1, equation: silu, capsule: " + provider +
            ".sigmoid, symbol: \"pact::kernels::cpu::" + provider + "::sigmoid_forward\", status: implemented}\n",
        "b.yaml");
  };
  const auto wrong = silu_bound_to("native");
  const auto refuted = falsify({c}, wrong, "", 0, 20, false, kOracle);
  ASSERT_EQ(refuted.obligations.size(), 4u);
  EXPECT_GT(refuted.obligations[0].outcome.failed, 0);                             // values
  EXPECT_TRUE(mentions(refuted.obligations[0].outcome.first_failure, "forward"));  // names what disagreed
  EXPECT_GT(refuted.obligations[3].outcome.failed, 0);  // the samples: sigmoid is not the reference silu
  EXPECT_TRUE(mentions(refuted.obligations[3].outcome.first_failure, "silu: forward: element"))
      << refuted.obligations[3].outcome.first_failure;
  EXPECT_FALSE(refuted.ok());
  // A 16-bit capsule meets the samples in its own dtypes: half's sigmoid bound as silu is refuted there too.
  const auto refuted_half = falsify({c}, silu_bound_to("half"), "", 0, 20, false, kOracle);
  ASSERT_EQ(refuted_half.obligations.size(), 4u);
  EXPECT_GT(refuted_half.obligations[3].outcome.failed, 0);
  EXPECT_TRUE(mentions(refuted_half.obligations[3].outcome.first_failure, "silu in bf16: forward: element"))
      << refuted_half.obligations[3].outcome.first_failure;

  // The mutation gate stops each evaluation at its first failing case: the same first failure, counted
  // once, after fewer cases.
  set_stop_at_first_failure(true);
  const auto first = falsify({c}, wrong, "", 0, 20, false, kOracle);
  set_stop_at_first_failure(false);
  ASSERT_EQ(first.obligations.size(), 4u);
  for (std::size_t i : {std::size_t{0}, std::size_t{3}}) {
    ASSERT_GT(refuted.obligations[i].outcome.failed, 1);
    EXPECT_EQ(first.obligations[i].outcome.failed, 1);
    EXPECT_EQ(first.obligations[i].outcome.first_failure, refuted.obligations[i].outcome.first_failure);
    EXPECT_LT(first.obligations[i].outcome.trials, refuted.obligations[i].outcome.trials);
  }

  // A generic check cannot be paired with a mutant written as a forward function.
  auto paired = c;
  paired.falsification[0].mutant = "gelu_as_relu";
  const auto a = audit({paired}, parse_bindings(rows, "b.yaml"));
  ASSERT_EQ(a.problems.size(), 1u);
  EXPECT_TRUE(mentions(a.problems[0], "pairs the generic check 'matches_oracle' with 'gelu_as_relu'"));
}

// The mutation gate keeps the reference's results on the samples (keep_sample_baselines) and its children
// compare with them: the outcomes are those of running the reference each time, refutations included.
TEST(Contracts, KeptSampleBaselinesGiveTheSameOutcomes) {
  const auto c = parse_contract(R"yaml(metadata: {id: silu-kept-v1, version: 1, description: silu}
equations:
  silu: {op: silu, formula: "y = x sigmoid(x)"}
proof_obligations:
  - {id: K-W, kind: equivalence, equation: silu, property: the sweep, check: matches_reference_on_samples}
falsification_tests:
  - {id: K-WF, obligation: K-W, mutant: last_value_shifted, description: off}
qa_gate: {id: K-GATE, checks: [K-W], pass_criteria: all, must_catch: [last_value_shifted]}
)yaml",
                                "silu.yaml");
  const auto bindings = parse_bindings(R"(policy: AllImplemented
bindings:
  - {contract: silu-kept-v1, equation: silu, capsule: native.silu, symbol: "pact::kernels::cpu::native::silu_forward", status: implemented}
  - {contract: silu-kept-v1, equation: silu, capsule: native.sigmoid, symbol: "pact::kernels::cpu::native::sigmoid_forward", status: implemented}
  - {contract: silu-kept-v1, equation: silu, capsule: half.silu, symbol: "pact::kernels::cpu::half::silu_forward", status: implemented}
  - {contract: silu-kept-v1, equation: silu, capsule: half.sigmoid, symbol: "pact::kernels::cpu::half::sigmoid_forward", status: implemented}
)",
                                       "b.yaml");
  const auto fresh = falsify({c}, bindings, "", 3, 1, false, kOracle);
  keep_sample_baselines(3);  // float32, and bf16 and f16 for the half provider's capsules
  const auto kept = falsify({c}, bindings, "", 3, 1, false, kOracle);
  const auto again = falsify({c}, bindings, "", 3, 1, false, kOracle);  // every baseline now from the memo
  drop_sample_baselines();
  ASSERT_EQ(fresh.obligations.size(), 4u);
  EXPECT_EQ(fresh.obligations[0].outcome.failed, 0);  // native.silu holds
  EXPECT_GT(fresh.obligations[1].outcome.failed, 0);  // sigmoid is not silu
  EXPECT_EQ(fresh.obligations[2].outcome.failed, 0);  // nor in bf16 and f16
  EXPECT_GT(fresh.obligations[3].outcome.failed, 0);
  for (const auto* r : {&kept, &again}) {
    ASSERT_EQ(r->obligations.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(r->obligations[i].outcome.trials, fresh.obligations[i].outcome.trials);
      EXPECT_EQ(r->obligations[i].outcome.failed, fresh.obligations[i].outcome.failed);
      EXPECT_EQ(r->obligations[i].outcome.first_failure, fresh.obligations[i].outcome.first_failure);
    }
  }
}

// Without its binding a capsule whose evidence is a test suite is unlinked, and the audit says so.
TEST(Contracts, AnUnboundCapsuleIsUnlinked) {
  const auto contracts = load_contracts("contracts");
  BindingFile b = shipped_bindings();
  std::erase_if(b.bindings, [](const Binding& x) { return x.capsule == "half.rotary_embedding"; });
  const auto a = audit(contracts, b);
  EXPECT_EQ(a.unlinked_capsules, std::vector<std::string>{"half.rotary_embedding"});
}

// The gate holds each contract to its source mutants (pact_mutation_gate's report): a score below 80% or
// fewer than 20 mutants fails it, a contract the report lacks leaves it incomplete, and a report whose
// counts do not add up is a typed error.
TEST(Contracts, TheGateHoldsEachContractToItsSourceMutants) {
  const auto contracts = load_contracts("contracts");
  const auto report = falsify(contracts, shipped_bindings(), "softmax-kernel-v1", 0, 4, true, kOracle);
  auto row = [](std::size_t generated, std::size_t killed) {
    Json survivors = Json::array();
    for (std::size_t i = killed; i < generated; ++i)
      survivors.push_back(Json{{"file", "f.inc"}, {"line", 1}, {"column", 1}, {"original", "<"}, {"mutated", "<="}});
    return Json{{"contract", "softmax-kernel-v1"},
                {"generated", generated},
                {"killed", killed},
                {"equivalent", Json::array()},
                {"survivors", survivors}};
  };
  auto gate_of = [&](const Json& r) {
    const auto source = parse_mutation_report(Json{{"schema", "pact.mutation-report.v1"}, {"contracts", {r}}}, "r");
    for (const auto& g : evaluate_gates(contracts, report, &source, nullptr)) {
      if (g.contract == "softmax-kernel-v1") return g;
    }
    return GateResult{};
  };
  const GateResult strong = gate_of(row(40, 38));
  EXPECT_EQ(strong.verdict, "incomplete");  // line coverage unmeasured, nothing failed
  EXPECT_DOUBLE_EQ(strong.mutation_score(), 95.0);
  const GateResult weak = gate_of(row(40, 20));
  EXPECT_EQ(weak.verdict, "fail");
  EXPECT_TRUE(std::any_of(weak.reasons.begin(), weak.reasons.end(),
                          [](const std::string& r) { return mentions(r, "mutation score 50% < 80%"); }));
  const GateResult few = gate_of(row(10, 10));
  EXPECT_EQ(few.verdict, "fail");
  EXPECT_TRUE(std::any_of(few.reasons.begin(), few.reasons.end(),
                          [](const std::string& r) { return mentions(r, "fewer than 20"); }));
  // Without a report the gate is incomplete, however many of its falsification tests caught their mutants.
  for (const auto& g : evaluate_gates(contracts, report, nullptr, nullptr)) {
    if (g.contract == "softmax-kernel-v1") {
      EXPECT_EQ(g.verdict, "incomplete");
    }
  }
  Json bad = row(40, 38);
  bad["killed"] = 39;
  EXPECT_EQ(code_of([&] {
              parse_mutation_report(Json{{"schema", "pact.mutation-report.v1"}, {"contracts", {bad}}}, "r");
            }),
            ErrorCode::parse_error);
  EXPECT_EQ(code_of([] { parse_mutation_report(Json{{"schema", "other"}}, "r"); }), ErrorCode::parse_error);
}

TEST(Contracts, FalsificationIsReproducible) {
  const auto contracts = load_contracts("contracts");
  const auto a = falsify(contracts, shipped_bindings(), "softmax-kernel-v1", 7, 8, true, kOracle);
  const auto b = falsify(contracts, shipped_bindings(), "softmax-kernel-v1", 7, 8, true, kOracle);
  ASSERT_EQ(a.mutants.size(), 5u);
  for (std::size_t i = 0; i < a.mutants.size(); ++i) EXPECT_EQ(a.mutants[i].detail, b.mutants[i].detail);
  EXPECT_EQ(code_of([&] { falsify(contracts, shipped_bindings(), "no-such-v1", 0, 1, true, kOracle); }),
            ErrorCode::invalid_argument);
}

TEST(Contracts, AGateThatCatchesNothingFails) {
  // relu satisfies the GELU envelope, so this gate can never fail: the report must not pass.
  const std::string text = R"yaml(metadata: {id: weak-gelu-v1, version: 1, description: weak}
equations:
  gelu: {op: gelu, formula: "y = gelu(x)"}
proof_obligations:
  - {id: W-1, kind: bound, equation: gelu, property: envelope, check: gelu_envelope, tolerance: 1.0e-6}
falsification_tests:
  - {id: W-F1, obligation: W-1, mutant: gelu_as_relu, description: relu}
qa_gate: {id: W-GATE, checks: [W-1], pass_criteria: all, must_catch: [gelu_as_relu]}
)yaml";
  const auto c = parse_contract(text, "weak.yaml");
  BindingFile b = parse_bindings(R"(policy: AllImplemented
bindings:
  - {contract: weak-gelu-v1, equation: gelu, capsule: native.gelu, symbol: "pact::kernels::cpu::native::gelu_forward", status: implemented}
)",
                                 "b.yaml");
  const auto report = falsify({c}, b, "", 0, 10, true, kOracle);
  EXPECT_EQ(report.failed(), 0u);
  ASSERT_EQ(report.mutants.size(), 1u);
  EXPECT_FALSE(report.mutants[0].caught);
  EXPECT_FALSE(report.ok());
}

TEST(Contracts, ABrokenKernelFailsItsObligations) {
  // Binding the softmax contract to the log_softmax capsule: the audit and the obligations both object.
  const auto contracts = load_contracts("contracts");
  BindingFile b = parse_bindings(R"(policy: AllImplemented
bindings:
  - {contract: softmax-kernel-v1, equation: softmax, capsule: native.log_softmax, symbol: "pact::kernels::cpu::native::log_softmax_forward", status: implemented}
)",
                                 "b.yaml");
  const auto report = falsify(contracts, b, "softmax-kernel-v1", 0, 10, false, kOracle);
  EXPECT_GT(report.failed(), 0u);
  EXPECT_FALSE(report.ok());
  const auto a = audit(contracts, b);
  bool op_mismatch = false;
  for (const auto& p : a.problems) op_mismatch = op_mismatch || mentions(p, "computes log_softmax");
  EXPECT_TRUE(op_mismatch);
}

std::string valid_contract() { return read_text_file("contracts/softmax.yaml"); }

void expect_parse_error(const std::string& text, const std::string& needle) {
  const auto msg = message_of([&] { parse_contract(text, "c.yaml"); });
  EXPECT_TRUE(mentions(msg, "c.yaml:")) << msg;
  EXPECT_TRUE(mentions(msg, needle)) << "wanted '" << needle << "' in: " << msg;
  EXPECT_EQ(code_of([&] { parse_contract(text, "c.yaml"); }), ErrorCode::parse_error);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(Contracts, MalformedContractsNameFileLineAndField) {
  const std::string ok = valid_contract();
  EXPECT_NO_THROW(parse_contract(ok, "c.yaml"));
  expect_parse_error(replace(ok, "  version: 1\n", "  version: 1\n  colour: red\n"), "metadata.colour: unknown field");
  expect_parse_error(replace(ok, "  version: 1\n", ""), "missing field 'version'");
  expect_parse_error(replace(ok, "  version: 1\n", "  version: one\n"), "metadata.version: 'one' is not an integer");
  expect_parse_error(replace(ok, "id: SM-2", "id: SM-1"), "duplicate id 'SM-1'");
  expect_parse_error(replace(ok, "    equation: softmax\n    property: every output",
                             "    equation: softmin\n    property: every output"),
                     "'softmin' is not an equation");
  expect_parse_error(replace(ok, "must_catch: [softmax_without_max_subtraction,", "must_catch: [other,"),
                     "mutant 'other' has no falsification test");
  expect_parse_error(replace(ok, "checks: [SM-1, SM-2,", "checks: [SM-1, SM-9,"), "'SM-9' is not an obligation");
  expect_parse_error(replace(ok, "kind: bound", "kind: vibe"), "is not invariant, bound");
  expect_parse_error(replace(ok, "tolerance: 0\n", "tolerance: -1\n"), "is negative");
  expect_parse_error(replace(ok, "equations:", "equations: [unclosed"), "malformed YAML");
  expect_parse_error("- just\n- a list\n", "not a mapping");
  expect_parse_error(std::string(100, '[') + std::string(100, ']'), "flow nesting deeper");
  expect_parse_error("? [a, b]\n: c\n", "c.yaml:");
  // The line is the field's own.
  const auto msg = message_of([&] { parse_contract(replace(ok, "kind: bound", "kind: vibe"), "c.yaml"); });
  const auto at = ok.find("kind: bound");
  const auto line = 1 + std::count(ok.begin(), ok.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  EXPECT_TRUE(mentions(msg, "c.yaml:" + std::to_string(line) + ":")) << msg;
}

TEST(Contracts, MalformedBindingsAreTyped) {
  auto bad = [](const std::string& text, const std::string& needle) {
    const auto msg = message_of([&] { parse_bindings(text, "b.yaml"); });
    EXPECT_TRUE(mentions(msg, needle)) << "wanted '" << needle << "' in: " << msg;
  };
  const std::string row = "  - {contract: a-v1, equation: e, capsule: native.relu, symbol: s, status: implemented}\n";
  bad("policy: SomeImplemented\nbindings: []\n", "is not AllImplemented");
  bad("policy: AllImplemented\nbindings:\n  - {contract: a-v1, equation: e, capsule: c, symbol: s, status: done}\n",
      "'done' is not implemented");
  bad("policy: AllImplemented\nbindings:\n" + row + row, "duplicate binding");
  bad("policy: AllImplemented\nbindings:\n  - {contract: 'a\"v1', equation: e, capsule: c, symbol: s, status: "
      "implemented}\n",
      "may hold only");
  bad("policy: AllImplemented\nbindings:\n  - {contract: a-v1, equation: e, capsule: c, status: implemented}\n",
      "missing field 'symbol'");
  bad("policy: AllImplemented\nextra: 1\nbindings: []\n", "extra: unknown field");
  const auto b =
      parse_bindings("policy: AllImplemented\nallowed_gaps:\n  - {contract: g-v1, equation: e}\nbindings:\n" + row +
                         "  - {contract: p-v1, equation: e, capsule: c, symbol: s, status: partial}\n",
                     "b.yaml");
  EXPECT_TRUE(b.admits("a-v1", "e"));
  EXPECT_TRUE(b.admits("g-v1", "e"));
  EXPECT_FALSE(b.admits("p-v1", "e"));  // partial is not implemented
  EXPECT_FALSE(b.admits("x-v1", "e"));
}

TEST(Contracts, AuditFindsMissingCapsulesSymbolsAndUnboundEquations) {
  const auto contracts = load_contracts("contracts");
  const auto b = parse_bindings(R"(policy: AllImplemented
bindings:
  - {contract: softmax-kernel-v1, equation: softmax, capsule: native.softmax, symbol: "pact::kernels::cpu::native::softmax_forward", status: implemented}
  - {contract: softmax-kernel-v1, equation: softmax, capsule: turbo.softmax, symbol: x, status: implemented}
  - {contract: matmul-kernel-v1, equation: matmul, capsule: native.matmul, symbol: "wrong::symbol", status: implemented}
  - {contract: nope-v1, equation: e, capsule: native.relu, symbol: x, status: implemented}
)",
                                "b.yaml");
  const auto a = audit(contracts, b);
  auto has = [&](const std::string& needle) {
    return std::any_of(a.problems.begin(), a.problems.end(), [&](const std::string& p) { return mentions(p, needle); });
  };
  EXPECT_TRUE(has("capsule 'turbo.softmax' is not in the registry"));
  EXPECT_TRUE(has("symbol 'wrong::symbol'"));
  EXPECT_TRUE(has("unknown contract 'nope-v1'"));
  EXPECT_TRUE(has("gelu-kernel-v1: equation 'gelu' has no implemented binding"));
  EXPECT_TRUE(has("b.yaml:4:"));
}

TEST(Contracts, ScaffoldNamesEveryObligationAndFalsificationTest) {
  const auto c = parse_contract(read_text_file("contracts/layer_norm.yaml"), "contracts/layer_norm.yaml");
  const std::string text = scaffold(c, shipped_bindings(), kOracle);
  for (const auto& o : c.obligations) {
    EXPECT_TRUE(mentions(text, "obligation(\"" + o.id + "\")")) << o.id;
  }
  EXPECT_TRUE(mentions(text, "evaluate_capsule(o, op_of(o), \"native.layer_norm\", 0, 20, \"contracts/oracle\")"));
  EXPECT_TRUE(mentions(text, "mutant(\"layer_norm_unbiased_variance\")"));
  EXPECT_TRUE(mentions(text, "\"reference.layer_norm\", 0, 20, \"contracts/oracle\", \"first_gradient_scaled\")"));
  EXPECT_EQ(code_of([] { mutant("nothing"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { capsule_kernel("nothing.softmax"); }), ErrorCode::unsupported);
}

}  // namespace
}  // namespace pact::verify

#include "pact/core/bench_report.hpp"
#include "pact/core/cpu.hpp"
#include "pact/verify/perf.hpp"

namespace pact::verify {
namespace {

TEST(PerformanceContracts, ShippedFileParsesAndBadOnesAreTyped) {
  const auto c = parse_performance(read_text_file("contracts/performance.yaml"), "contracts/performance.yaml");
  EXPECT_GE(c.obligations.size(), 3u);
  auto bad = [](const std::string& text, const std::string& needle) {
    const auto msg = message_of([&] { parse_performance(text, "p.yaml"); });
    EXPECT_TRUE(mentions(msg, needle)) << "wanted '" << needle << "' in: " << msg;
  };
  const std::string head = "metadata: {id: p-v1, description: d}\nobligations:\n";
  bad(head + "  - {id: A, benchmark: gemm, shape: [64, 64], contender: native, baseline: openblas, min_ratio: 1}\n",
      "gemm takes one extent");
  bad(head + "  - {id: A, benchmark: gemm, shape: [64], contender: turbo, baseline: openblas, min_ratio: 1}\n",
      "'turbo' is not native");
  bad(head + "  - {id: A, benchmark: gemm, shape: [64], contender: native, baseline: openblas, min_ratio: 0}\n",
      "must be positive");
  bad(head + "  - {id: A, benchmark: gemm, shape: [0], contender: native, baseline: openblas, min_ratio: 1}\n",
      "outside 1..16384");
  bad(head +
          "  - {id: A, benchmark: gemm, shape: [64], contender: native, baseline: openblas, min_ratio: 1, speed: 9}\n",
      "unknown field");
  bad("metadata: {id: p-v1, description: d}\nobligations: []\n", "needs at least one obligation");
}

TEST(PerformanceContracts, VerdictsFailOnRegressionAndAreInvalidOnAForcedBaseline) {
  // Not a timed test: a 10^6x requirement cannot be met, and a forced kernel is invalid whatever the timing.
  const auto c = parse_performance(R"(metadata: {id: p-v1, description: d}
obligations:
  - {id: IMPOSSIBLE, benchmark: softmax, shape: [4, 16], contender: native, baseline: reference, min_ratio: 1000000, repetitions: 1}
  - {id: FORCED, benchmark: gemm, shape: [16], contender: native, baseline: openblas, min_ratio: 0.000001, repetitions: 1}
)",
                                   "p.yaml");
  const char* saved = std::getenv("OPENBLAS_CORETYPE");
  const std::string restore = saved ? saved : "";
  ::setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  const auto results = check_performance(c);
  if (saved) {
    ::setenv("OPENBLAS_CORETYPE", restore.c_str(), 1);
  } else {
    ::unsetenv("OPENBLAS_CORETYPE");
  }
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].verdict, "fail");
  EXPECT_GT(results[0].ratio, 0.0);
  EXPECT_EQ(results[1].verdict, "invalid");  // never "pass", even with a threshold any kernel meets
  EXPECT_EQ(code_of([&] { check_performance(c, "NOPE"); }), ErrorCode::invalid_argument);
}

// A forced OpenBLAS kernel matched by the same forced Pact level is a proxy (never pass); forced to a
// kernel of another level it stays invalid. The bench report's validator holds reports to the same rules.
TEST(PerformanceContracts, AMatchedForcedLevelIsAProxyAndAnUnmatchedOneInvalid) {
  if (!cpu_runs(Isa::avx2)) GTEST_SKIP() << "this CPU cannot run the avx2 level, so no avx2 proxy can be measured";
  const auto c = parse_performance(R"(metadata: {id: p-v1, description: d}
obligations:
  - {id: FORCED, benchmark: gemm, shape: [16], contender: native, baseline: openblas, min_ratio: 0.000001, repetitions: 1}
)",
                                   "p.yaml");
  auto verdict_with = [&](const char* coretype) {
    const char* saved_core = std::getenv("OPENBLAS_CORETYPE");
    const char* saved_isa = std::getenv("PACT_ISA");
    const std::string restore_core = saved_core ? saved_core : "", restore_isa = saved_isa ? saved_isa : "";
    ::setenv("OPENBLAS_CORETYPE", coretype, 1);
    ::setenv("PACT_ISA", "avx2", 1);
    std::string verdict;
    {
      const ScopedIsa forced(Isa::avx2);
      verdict = check_performance(c)[0].verdict;
    }
    saved_core ? ::setenv("OPENBLAS_CORETYPE", restore_core.c_str(), 1) : ::unsetenv("OPENBLAS_CORETYPE");
    saved_isa ? ::setenv("PACT_ISA", restore_isa.c_str(), 1) : ::unsetenv("PACT_ISA");
    return verdict;
  };
  EXPECT_EQ(verdict_with("Haswell"), "proxy");
  EXPECT_EQ(verdict_with("SkylakeX"), "invalid");

  BenchReport report("gemm", "test");
  report.add_case({"native", "native", "seconds_per_call", "s", 1.0, 1});
  report.add_case({"openblas", "openblas", "seconds_per_call", "s", 1.0, 1});
  report.add_ratio({"matched", "native", "openblas", 2.0, true, true});
  report.add_ratio({"unmatched", "native", "openblas", 2.0, true, false});
  report.add_ratio({"matched_slow", "native", "openblas", 0.5, true, true});
  Json j = report.to_json();
  EXPECT_EQ(j["ratios"][0]["verdict"], "proxy");
  EXPECT_EQ(j["ratios"][1]["verdict"], "invalid");
  EXPECT_EQ(j["ratios"][2]["verdict"], "fail");
  EXPECT_NO_THROW(validate_bench_report(j));
  j["ratios"][0]["verdict"] = "pass";  // a forced baseline claiming pass
  EXPECT_EQ(code_of([&] { validate_bench_report(j); }), ErrorCode::parse_error);
}

// Peer obligations (infer against PyTorch or ONNX Runtime, train_step against PyTorch) parse with their
// model, refuse what the scripts cannot run, and are judged from the script's report: the ratio is the
// peer's time over Pact's against min_ratio, a forced baseline is never "pass", and a report without the
// peer's figure is invalid, not a pass.
TEST(PerformanceContracts, PeerObligationsAreJudgedFromTheScriptsReport) {
  const std::string head = "metadata: {id: p-v1, description: d}\nobligations:\n";
  const auto c = parse_performance(
      head + R"(  - {id: R18, benchmark: infer, model: resnet18, contender: pact, baseline: torch, min_ratio: 1.0}
  - {id: R18-ORT, benchmark: infer, model: resnet18, contender: pact, baseline: ort, min_ratio: 0.6667, threads: 2}
  - {id: MLP, benchmark: train_step, model: 784-256-256-10/256, contender: pact, baseline: torch, min_ratio: 1.0}
)",
      "p.yaml");
  ASSERT_EQ(c.obligations.size(), 3u);
  EXPECT_EQ(c.obligations[0].model, "resnet18");
  EXPECT_TRUE(c.obligations[0].shape.empty());
  EXPECT_EQ(c.obligations[1].threads, 2);

  auto bad = [&](const std::string& row, const std::string& needle) {
    const auto msg = message_of([&] { parse_performance(head + row, "p.yaml"); });
    EXPECT_TRUE(mentions(msg, needle)) << "wanted '" << needle << "' in: " << msg;
  };
  bad("  - {id: A, benchmark: infer, model: 'resnet18; rm -rf /', contender: pact, baseline: torch, min_ratio: 1}\n",
      "is not a model name for infer");
  bad("  - {id: A, benchmark: infer, contender: pact, baseline: torch, min_ratio: 1}\n", "model");
  bad("  - {id: A, benchmark: infer, model: resnet18, contender: native, baseline: torch, min_ratio: 1}\n",
      "contender is pact");
  bad("  - {id: A, benchmark: train_step, model: mlp, contender: pact, baseline: ort, min_ratio: 1}\n",
      "is not a train_step peer");
  bad("  - {id: A, benchmark: train_step, model: mlp, contender: pact, baseline: torch, min_ratio: 1, threads: 2}\n",
      "one thread");
  bad("  - {id: A, benchmark: infer, model: resnet18, shape: [224, 224], contender: pact, baseline: torch, "
      "min_ratio: 1}\n",
      "four extents");
  bad("  - {id: A, benchmark: gemm, shape: [64], model: resnet18, contender: native, baseline: openblas, "
      "min_ratio: 1}\n",
      "takes no model");

  // Reports as bench/infer_vs_peers.py and bench/train_step_vs_torch.py write them.
  auto infer_report = [](double pact_ms, double torch_ms, bool forced, bool proxy, bool with_ort) {
    Json cases = Json::array({Json{{"name", "pact_resnet18_t1"}, {"value", pact_ms}, {"unit", "ms"}},
                              Json{{"name", "torch_resnet18_t1"}, {"value", torch_ms}, {"unit", "ms"}}});
    Json ratios = Json::array({Json{{"name", "resnet18_t1_pact_over_torch"},
                                    {"value", pact_ms / torch_ms},
                                    {"baseline_forced", forced},
                                    {"proxy", proxy}}});
    // Two threads: Pact's figure always, ONNX Runtime's only when it is installed.
    cases.push_back(Json{{"name", "pact_resnet18_t2"}, {"value", 20.0}, {"unit", "ms"}});
    if (with_ort) {
      cases.push_back(Json{{"name", "ort_resnet18_t2"}, {"value", 12.0}, {"unit", "ms"}});
      ratios.push_back(Json{{"name", "resnet18_t2_pact_over_ort"}, {"baseline_forced", forced}, {"proxy", false}});
    }
    return Json{{"schema", "pact.bench.v1"}, {"cases", cases}, {"ratios", ratios}};
  };
  const auto& r18 = c.obligations[0];
  const auto faster = peer_result(r18, infer_report(40.0, 50.0, false, false, false));
  EXPECT_EQ(faster.verdict, "pass");
  EXPECT_NEAR(faster.ratio, 1.25, 1e-12);
  EXPECT_NEAR(faster.contender_seconds, 0.040, 1e-12);
  EXPECT_EQ(peer_result(r18, infer_report(55.0, 50.0, false, false, false)).verdict, "fail");
  EXPECT_EQ(peer_result(r18, infer_report(40.0, 50.0, true, true, false)).verdict, "proxy");
  EXPECT_EQ(peer_result(r18, infer_report(40.0, 50.0, true, false, false)).verdict, "invalid");
  // A PyTorch whose OpenBLAS runs a kernel below the CPU's level is no baseline, however much faster Pact is.
  Json degraded = infer_report(10.0, 50.0, false, false, false);
  degraded["ratios"][0]["baseline_degraded"] = true;
  const auto against_degraded = peer_result(r18, degraded);
  EXPECT_EQ(against_degraded.verdict, "invalid");
  EXPECT_TRUE(mentions(against_degraded.note, "below this CPU's level")) << against_degraded.note;
  degraded["ratios"][0]["baseline_degraded"] = 1;
  EXPECT_TRUE(mentions(message_of([&] { peer_result(r18, degraded); }), "non-boolean flags"));
  // ONNX Runtime: 20 ms against 12 ms is 0.6 < 0.6667; and no ORT figure at all is invalid, never a pass.
  EXPECT_EQ(peer_result(c.obligations[1], infer_report(40.0, 50.0, false, false, true)).verdict, "fail");
  const auto no_ort = peer_result(c.obligations[1], infer_report(40.0, 50.0, false, false, false));
  EXPECT_EQ(no_ort.verdict, "invalid");
  EXPECT_TRUE(mentions(no_ort.note, "ort_resnet18_t2")) << no_ort.note;

  const Json step{
      {"schema", "pact.bench.v1"},
      {"cases", Json::array({Json{{"name", "pact_784-256-256-10/256"}, {"value", 0.0030}, {"unit", "s"}},
                             Json{{"name", "torch_784-256-256-10/256"}, {"value", 0.0033}, {"unit", "s"}}})},
      {"ratios", Json::array({Json{{"name", "pact_over_torch_784-256-256-10/256"}, {"baseline_forced", false}}})}};
  EXPECT_EQ(peer_result(c.obligations[2], step).verdict, "pass");
  Json slow = step;
  slow["cases"][0]["value"] = 0.0036;
  EXPECT_EQ(peer_result(c.obligations[2], slow).verdict, "fail");

  // Malformed reports are typed errors naming what is missing, never a verdict.
  auto refused = [&](const Json& report, const std::string& needle) {
    const auto msg = message_of([&] { peer_result(r18, report); });
    EXPECT_TRUE(mentions(msg, needle)) << "wanted '" << needle << "' in: " << msg;
  };
  refused(Json{{"schema", "other"}}, "not a pact.bench.v1 report");
  Json no_pact = infer_report(40.0, 50.0, false, false, false);
  no_pact["cases"].erase(0);
  refused(no_pact, "no case pact_resnet18_t1");
  Json bad_value = infer_report(40.0, 50.0, false, false, false);
  bad_value["cases"][1]["value"] = "fast";
  refused(bad_value, "no positive value");
  Json no_ratio = infer_report(40.0, 50.0, false, false, false);
  no_ratio["ratios"] = Json::array();
  refused(no_ratio, "no ratio resnet18_t1_pact_over_torch");
}

}  // namespace
}  // namespace pact::verify

namespace pact::verify {
namespace {

// The gate measures exactly the named functions (their instances and nested lambdas), never a function
// whose name merely starts with the same letters; a line shared by template instances counts once.
TEST(Gate, CoverageCountsExactlyTheNamedFunctions) {
  std::string doc = R"gcov({"files": [{"file": "k.inc", "functions": [
      {"name": "a", "demangled_name": "pact::Tensor pact::kernels::cpu::generic::conv2d<float>(int)"},
      {"name": "b", "demangled_name": "pact::Tensor pact::kernels::cpu::generic::conv2d<double>(int)"},
      {"name": "c", "demangled_name": "pact::kernels::cpu::generic::conv2d<float>(int)::{lambda(long)#1}::operator()(long) const"},
      {"name": "d", "demangled_name": "pact::GradList pact::kernels::cpu::generic::conv2d_vjp(int)"},
      {"name": "e", "demangled_name": "void std::vector<pact::kernels::cpu::conv2d>::push_back()"}],
    "lines": [
      {"line_number": 10, "count": 0, "function_name": "a"}, {"line_number": 10, "count": 4, "function_name": "b"},
      {"line_number": 11, "count": 0, "function_name": "a"}, {"line_number": 12, "count": 2, "function_name": "c"},
      {"line_number": 30, "count": 0, "function_name": "d"}, {"line_number": 40, "count": 0, "function_name": "e"}]}]})gcov";
  std::erase(doc, '\n');  // gcov writes one document per line
  const auto gcov = parse_gcov_json(doc, "test.json");
  const auto c = kernel_coverage(gcov, {"conv2d"});
  EXPECT_EQ(c.lines, 3u);     // 10 (two instances, once), 11, 12 (the lambda); not conv2d_vjp's 30 nor 40
  EXPECT_EQ(c.executed, 2u);  // 10 ran in the double instance, 12 ran
  EXPECT_EQ(kernel_coverage(gcov, {"conv2d_vjp"}).lines, 1u);
  EXPECT_EQ(kernel_coverage(gcov, {"conv"}).lines, 0u);
}

}  // namespace
}  // namespace pact::verify
