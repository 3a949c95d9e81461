// `pact contracts`: validate, audit, score, scaffold and falsify the kernel contracts (SPEC §10).

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/verify/gate.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace {

verify::BindingFile bindings_of(const ContractsArgs& a) {
  const std::string path = a.dir + "/binding.yaml";
  return spec::parse_bindings(spec::read_text_file(path), path);
}

void print_failures(const verify::FalsifyReport& r) {
  for (const auto& o : r.obligations) {
    if (!o.outcome.not_applicable.empty()) {
      std::printf("  n/a    %s %s on %s: %s\n", o.contract.c_str(), o.obligation.c_str(), o.capsule.c_str(),
                  o.outcome.not_applicable.c_str());
      continue;
    }
    if (o.outcome.failed > 0) {
      std::printf("  FAILED %s %s on %s: %d of %d cases (%s)\n", o.contract.c_str(), o.obligation.c_str(),
                  o.capsule.c_str(), o.outcome.failed, o.outcome.trials, o.outcome.first_failure.c_str());
    }
  }
}

}  // namespace

int run_contracts_validate(const ContractsArgs& a) {
  const auto contracts = spec::load_contracts(a.dir);
  const auto bindings = bindings_of(a);
  // Evaluating is part of validating: an obligation that names no runnable check is not validated.
  const auto report = verify::falsify(contracts, bindings, "", a.seed, 3, false, a.oracle_dir());
  std::printf("%zu contracts, %zu bindings\n", contracts.size(), bindings.bindings.size());
  print_failures(report);
  std::printf("%zu declared, %zu evaluated, %zu not applicable, %zu failed\n", report.declared, report.evaluated(),
              report.not_applicable(), report.failed());
  if (report.evaluated() == 0) {
    std::printf("nothing was evaluated: validation fails\n");
    return 1;
  }
  return report.failed() == 0 ? 0 : 1;
}

int run_contracts_audit(const ContractsArgs& a) {
  const auto contracts = spec::load_contracts(a.dir);
  const auto r = verify::audit(contracts, bindings_of(a));
  for (const auto& c : r.coverage) {
    std::printf("%-28s %zu/%zu equations bound%s\n", c.contract.c_str(), c.bound, c.equations,
                c.unbound.empty() ? "" : fmt::format(" (unbound: {})", fmt::join(c.unbound, ", ")).c_str());
  }
  // A capsule whose value evidence is a test suite must be held by some contract's obligations too.
  std::printf("%zu unlinked capsules (citing test-suite evidence that no contract obligation binds)%s\n",
              r.unlinked_capsules.size(),
              r.unlinked_capsules.empty() ? "" : fmt::format(": {}", fmt::join(r.unlinked_capsules, ", ")).c_str());
  for (const auto& p : r.problems) std::printf("PROBLEM %s\n", p.c_str());
  std::printf("%zu contracts audited, %zu problems\n", r.coverage.size(), r.problems.size());
  return r.problems.empty() && r.unlinked_capsules.empty() ? 0 : 1;
}

int run_contracts_score(const ContractsArgs& a) {
  const auto contracts = spec::load_contracts(a.dir);
  const auto report = verify::falsify(contracts, bindings_of(a), a.contract, a.seed, a.trials, true, a.oracle_dir());
  std::printf("%-28s %10s %10s %8s\n", "contract", "passed", "mutants", "score");
  for (const auto& c : contracts) {
    if (!a.contract.empty() && c.id != a.contract) continue;
    std::size_t evaluated = 0, passed = 0, mutants = 0, caught = 0;
    for (const auto& o : report.obligations) {
      if (o.contract != c.id || !o.outcome.not_applicable.empty()) continue;
      ++evaluated;
      passed += o.outcome.failed == 0;
    }
    for (const auto& m : report.mutants) {
      if (m.contract != c.id) continue;
      ++mutants;
      caught += m.caught;
    }
    // Score: the share of evaluations that passed times the share of mutants caught (0 when nothing ran).
    const double score = evaluated == 0 || mutants == 0
                             ? 0.0
                             : static_cast<double>(passed) / static_cast<double>(evaluated) *
                                   static_cast<double>(caught) / static_cast<double>(mutants);
    std::printf("%-28s %4zu/%-5zu %4zu/%-5zu %7.0f%%\n", c.id.c_str(), passed, evaluated, caught, mutants,
                100.0 * score);
  }
  return report.ok() ? 0 : 1;
}

int run_contracts_scaffold(const ContractsArgs& a) {
  const auto contract = spec::parse_contract(spec::read_text_file(a.contract), a.contract);
  const std::string text = verify::scaffold(contract, bindings_of(a), a.oracle_dir());
  if (a.out.empty()) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  write_file_atomic(a.out, text, "pact contracts scaffold");
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

int run_contracts_falsify(const ContractsArgs& a) {
  const auto contracts = spec::load_contracts(a.dir);
  const auto r = verify::falsify(contracts, bindings_of(a), a.contract, a.seed, a.trials, true, a.oracle_dir());
  print_failures(r);
  for (const auto& m : r.mutants) {
    std::printf("  gate %-24s %-40s %s (%s)\n", m.contract.c_str(), m.mutant.c_str(),
                m.caught ? "caught" : "NOT CAUGHT", m.detail.c_str());
  }
  std::printf(
      "%zu declared, %zu evaluated (%d cases each, generic checks: every oracle case), %zu not applicable, %zu "
      "failed; %zu of %zu mutants caught (seed %llu)\n",
      r.declared, r.evaluated(), a.trials, r.not_applicable(), r.failed(), r.caught(), r.mutants.size(),
      static_cast<unsigned long long>(a.seed));
  if (r.mutants.empty()) std::printf("no falsification test ran: a gate that catches nothing is a failure\n");
  return r.ok() && !r.mutants.empty() ? 0 : 1;
}

int run_contracts_gate(const ContractsArgs& a) {
  const auto contracts = spec::load_contracts(a.dir);
  const auto report = verify::falsify(contracts, bindings_of(a), a.contract, a.seed, a.trials, true, a.oracle_dir());
  std::optional<std::vector<Json>> gcov;
  if (!a.coverage.empty()) gcov = verify::parse_gcov_json(spec::read_text_file(a.coverage), a.coverage);
  std::optional<std::map<std::string, verify::SourceMutants>> source;
  if (!a.mutation_report.empty()) {
    source = verify::parse_mutation_report(parse_json(spec::read_text_file(a.mutation_report), a.mutation_report),
                                           a.mutation_report);
  }
  const auto gates = verify::evaluate_gates(contracts, report, source ? &*source : nullptr, gcov ? &*gcov : nullptr);
  std::printf("%-26s %-22s %14s %18s %18s  %s\n", "contract", "gate", "obligations", "mutation score", "line coverage",
              "verdict");
  bool fail = false, incomplete = false;
  for (const auto& g : gates) {
    const std::string cov = g.coverage
                                ? fmt::format("{:.1f}% (>= {:.0f}%)", g.coverage->percent(), verify::kCoverageThreshold)
                                : fmt::format("unmeasured (>= {:.0f}%)", verify::kCoverageThreshold);
    std::printf("%-26s %-22s %8zu/%-5zu %18s %18s  %s\n", g.contract.c_str(), g.gate.c_str(), g.passed, g.evaluated,
                fmt::format("{:.0f}% (>= {:.0f}%)", g.mutation_score(), verify::kMutationThreshold).c_str(),
                cov.c_str(), g.verdict.c_str());
    if (g.source) {
      std::printf(
          "    %zu/%zu source mutants killed (%zu reached, %zu equivalent); falsification tests %zu/%zu caught\n",
          g.source->killed, g.source->counted(), g.source->generated, g.source->equivalent, g.caught, g.mutants);
      for (const auto& s : g.source->survivors) std::printf("    survivor %s\n", s.c_str());
    } else {
      std::printf("    source mutants unmeasured; falsification tests %zu/%zu caught\n", g.caught, g.mutants);
    }
    for (const auto& m : report.mutants) {
      if (m.contract == g.contract && !m.caught)
        std::printf("    falsification test %s: mutant %s not caught\n", m.test.c_str(), m.mutant.c_str());
    }
    for (const auto& r : g.reasons) std::printf("    %s\n", r.c_str());
    fail = fail || g.verdict == "fail";
    incomplete = incomplete || g.verdict == "incomplete";
  }
  if (!gcov)
    std::printf(
        "no --coverage data: line coverage is unmeasured and no gate can pass (see docs/guides/contracts.md)\n");
  if (!source)
    std::printf(
        "no --mutation-report: source mutants are unmeasured (build/release/bin/pact_mutation_gate writes one)\n");
  return fail ? 1 : incomplete ? 2 : 0;
}

namespace {

const bool registered = register_command("contracts", [](CLI::App& app) {
  auto a = std::make_shared<ContractsArgs>();
  auto* contracts_cmd = app.add_subcommand("contracts", "kernel contracts: validate, audit, score, scaffold, falsify");
  contracts_cmd->require_subcommand(1);
  auto* c_validate =
      contracts_cmd->add_subcommand("validate", "check every contract and binding; evaluate every obligation briefly");
  auto* c_audit = contracts_cmd->add_subcommand(
      "audit", "binding coverage, unbound equations, bindings naming missing capsules or symbols");
  auto* c_score =
      contracts_cmd->add_subcommand("score", "per-contract score from obligations passed and mutants caught");
  c_score->add_option("contract", a->contract, "one contract id");
  auto* c_scaffold = contracts_cmd->add_subcommand("scaffold", "a GoogleTest skeleton from a contract file");
  c_scaffold->add_option("file", a->contract, "contract YAML")->required();
  c_scaffold->add_option("-o,--out", a->out, "write here");
  auto* c_falsify =
      contracts_cmd->add_subcommand("falsify", "run every obligation as a property test and prove each gate can fail");
  c_falsify->add_option("contract", a->contract, "one contract id");
  auto* c_gate = contracts_cmd->add_subcommand(
      "gate", "each QA gate: obligations, mutation score (>= 80%), line coverage (>= 95%)");
  c_gate->add_option("contract", a->contract, "one contract id");
  c_gate->add_option("--coverage", a->coverage, "gcov --json-format --stdout output of the coverage build");
  c_gate->add_option("--mutation-report", a->mutation_report,
                     "pact_mutation_gate's report: the source mutants each contract's obligations kill");
  for (auto* sub : {c_score, c_falsify, c_gate}) {
    sub->add_option("--seed", a->seed, "seed of the random cases");
    sub->add_option("--trials", a->trials, "cases per obligation")->check(CLI::Range(1, 100000));
  }
  for (auto* sub : {c_validate, c_audit, c_score, c_scaffold, c_falsify, c_gate}) {
    sub->add_option("--dir", a->dir, "the contracts folder (with binding.yaml)");
  }
  for (auto* sub : {c_validate, c_score, c_scaffold, c_falsify, c_gate}) {
    sub->add_option("--oracle", a->oracle, "the op oracle's fixture folder (default: <dir>/oracle)");
  }

  return std::vector<Runner>{{c_validate, [a] { return run_contracts_validate(*a); }},
                             {c_audit, [a] { return run_contracts_audit(*a); }},
                             {c_score, [a] { return run_contracts_score(*a); }},
                             {c_scaffold, [a] { return run_contracts_scaffold(*a); }},
                             {c_falsify, [a] { return run_contracts_falsify(*a); }},
                             {c_gate, [a] { return run_contracts_gate(*a); }}};
});

}  // namespace

}  // namespace pact::cli
