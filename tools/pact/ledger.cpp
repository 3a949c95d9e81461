// pact ledger check | run: the obligations ledger's checker and runner (pact/ledger/ledger.hpp).

#include "pact/ledger/ledger.hpp"

#include <cstdio>

#include "pact/core/error.hpp"
#include "pact/core/file.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace {

int report(const ledger::Diagnostics& diagnostics, bool json) {
  if (json) {
    std::printf("%s\n", diagnostics.to_json().dump().c_str());
  } else {
    std::fputs(diagnostics.render().c_str(), stderr);
  }
  return diagnostics.empty() ? 0 : 1;
}

int print_contract(ledger::Role role) {
  std::printf("%s\n", ledger::cli_contract(role).dump().c_str());
  return 0;
}

}  // namespace

int run_ledger_check(const LedgerArgs& args) {
  if (args.contract_schema) return print_contract(ledger::Role::checker);
  ledger::CheckOptions options;
  options.root = args.root;
  options.manifest = args.manifest;
  if (!args.base_commit.empty()) options.base_commit = args.base_commit;
  if (!args.receipt.empty()) options.receipt = args.receipt;
  const auto outcome = ledger::check(options);
  if (args.summary_json) {
    std::printf("%s\n", outcome.summary.dump().c_str());
  } else if (!outcome.summary.is_null()) {
    const auto& s = outcome.summary;
    std::printf("%s: revision %lld, %zu units, %zu obligations (%zu active, %zu deferred)\n", args.manifest.c_str(),
                static_cast<long long>(s["revision"].get<std::int64_t>()), s["units"].size(),
                s["obligations"]["total"].get<std::size_t>(), s["obligations"]["active"].get<std::size_t>(),
                s["obligations"]["deferred"].get<std::size_t>());
    for (const auto& u : s["units"]) {
      std::printf("  %-22s %zu of %zu active%s\n", u["id"].get<std::string>().c_str(), u["active"].get<std::size_t>(),
                  u["obligations"].get<std::size_t>(), u["complete"].get<bool>() ? ", complete (receipt at HEAD)" : "");
    }
    std::printf("units complete: %zu of %zu; terminal: %s%s\n", s["units_complete"].get<std::size_t>(),
                s["units"].size(), s["terminal"].get<bool>() ? "yes" : "no",
                options.receipt ? "" : " (no receipt: completeness needs `pact ledger run`)");
  }
  const int rc = report(outcome.diagnostics, args.diagnostics_json);
  if (rc == 0 && !args.diagnostics_json && !args.summary_json) std::printf("ledger check passed\n");
  return rc;
}

int run_ledger_run(const LedgerArgs& args) {
  if (args.contract_schema) return print_contract(ledger::Role::runner);
  if (args.receipt_out.empty())
    throw Error(ErrorCode::invalid_argument, "pact ledger run", "--receipt-out is required");
  require_writable_destination(args.receipt_out, "pact ledger run --receipt-out");
  ledger::RunOptions options;
  options.root = args.root;
  options.manifest = args.manifest;
  if (!args.base_commit.empty()) options.base_commit = args.base_commit;
  options.receipt_out = args.receipt_out;
  const auto outcome = ledger::run(options);
  if (outcome.receipt && !args.diagnostics_json) {
    std::printf("ran %d command%s for %zu active obligation%s; receipt for %s written to %s\n", outcome.commands_run,
                outcome.commands_run == 1 ? "" : "s", outcome.receipt->executions.size(),
                outcome.receipt->executions.size() == 1 ? "" : "s", outcome.receipt->candidate_commit.c_str(),
                args.receipt_out.c_str());
  }
  return report(outcome.diagnostics, args.diagnostics_json);
}

namespace {

const bool registered = register_command("ledger", [](CLI::App& app) {
  auto a = std::make_shared<LedgerArgs>();
  auto* ledger_cmd = app.add_subcommand("ledger", "the obligations ledger (ledger/obligations.toml): check and run");
  ledger_cmd->require_subcommand(1);
  auto* l_check =
      ledger_cmd->add_subcommand("check", "check the manifest's rules; with --receipt, that HEAD's evidence passed");
  auto* l_run =
      ledger_cmd->add_subcommand("run", "run every active obligation's command once and write a receipt bound to HEAD");
  for (auto* sub : {l_check, l_run}) {
    sub->add_option("--root", a->root, "repository root (its top level)");
    sub->add_option("--manifest", a->manifest, "repository-relative manifest");
    sub->add_option("--base-commit", a->base_commit,
                    "compare against this ancestor of HEAD (promotion and revision rules)");
    sub->add_flag("--diagnostics-json", a->diagnostics_json, "print the diagnostics envelope as JSON on stdout");
    sub->add_flag("--contract-schema", a->contract_schema, "print the CLI contract (one JSON object) and exit");
  }
  l_check->add_option("--receipt", a->receipt, "a receipt written by `pact ledger run`");
  l_check->add_flag("--summary-json", a->summary_json, "print the summary as JSON on stdout");
  l_run->add_option("--receipt-out", a->receipt_out, "where to write the receipt");

  return std::vector<Runner>{{l_check, [a] { return run_ledger_check(*a); }},
                             {l_run, [a] { return run_ledger_run(*a); }}};
});

}  // namespace

}  // namespace pact::cli
