// `pact plan MODEL`: plans a model under a backend profile and prints the contract audit (table or JSON);
// with --require-receipts, testSuite evidence counts only with a passing ledger receipt at HEAD.

#include <cstdio>
#include <memory>
#include <optional>

#include "pact/ir/graph.hpp"
#include "pact/ledger/ledger.hpp"
#include "pact/plan/planner.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace {

struct PlanArgs {
  std::string model, profile = "cpu-checked", root = ".", receipt = "build/ledger-receipt.json", train;
  bool json = false, vjp = false, require_receipts = false, momentum = false;
  PictureArgs picture;
};

int run_plan(const PlanArgs& a) {
  require_picture_destination(a.picture, "pact plan");
  const auto graph = ir::load_graph(a.model);
  const auto profile = contract::builtin_profile(a.profile);
  const contract::DefaultEvidenceResolver default_resolver;
  std::optional<ledger::ReceiptEvidenceResolver> receipt_resolver;
  if (a.require_receipts) {
    ledger::CheckOptions options;
    options.root = a.root;
    options.receipt = a.receipt;
    const auto outcome = ledger::check(options);
    if (!outcome.ok()) {
      std::fprintf(stderr, "pact plan: the ledger refuses the receipt:\n%s", outcome.diagnostics.render().c_str());
    }
    receipt_resolver.emplace(outcome);
  }
  const contract::EvidenceResolver& resolver =
      receipt_resolver ? static_cast<const contract::EvidenceResolver&>(*receipt_resolver) : default_resolver;
  // A training plan (Note [Training kernels]): VJPs, accumulation, running statistics and the optimizer.
  std::optional<plan::TrainingUpdates> training;
  if (!a.train.empty()) {
    training = plan::TrainingUpdates{a.train == "sgd" ? ops::OpTag::sgd : ops::OpTag::adam, a.momentum};
  }
  auto result =
      plan::plan_graph(graph, profile, resolver,
                       a.vjp || training ? contract::VjpMode::with_vjp : contract::VjpMode::forward_only, training);
  const auto& audit = result ? result->audit() : result.error().audit;
  write_picture(a.picture, picture::from_graph(graph, a.model + " under " + a.profile, &audit), a.json);
  if (a.json) {
    std::printf("%s\n", plan::render_audit_json(audit).dump(2).c_str());
  } else {
    std::fputs(plan::render_audit_table(audit).c_str(), stdout);
  }
  return result ? 0 : 2;
}

const bool registered = register_command("plan", [](CLI::App& app) {
  auto a = std::make_shared<PlanArgs>();
  auto* plan = app.add_subcommand("plan", "plan a model under a backend profile and print the contract audit");
  plan->add_option("model", a->model, "model in the pact.ir.v1 wire format (JSON)")->required();
  plan->add_option("--profile", a->profile,
                   "cpu-checked | cpu-deterministic | cpu-external | cuda-checked | cuda-external");
  plan->add_flag("--json", a->json, "print the audit as JSON");
  plan->add_flag("--vjp", a->vjp, "plan for forward and VJP");
  plan->add_option("--train", a->train,
                   "plan a training step with this optimizer: VJPs, gradient accumulation, batch-norm running "
                   "statistics and one optimizer update per parameter")
      ->check(CLI::IsMember({"sgd", "adam", "adamw"}));
  plan->add_flag("--momentum", a->momentum, "with --train sgd: SGD with a velocity");
  plan->add_flag("--require-receipts", a->require_receipts,
                 "accept testSuite evidence only with a passing ledger receipt at HEAD for the obligation running it");
  plan->add_option("--receipt", a->receipt, "with --require-receipts: the receipt `pact ledger run` wrote");
  plan->add_option("--root", a->root, "with --require-receipts: the repository holding ledger/obligations.toml");
  add_picture_options(plan, a->picture);
  return std::vector<Runner>{{plan, [a] { return run_plan(*a); }}};
});

}  // namespace

}  // namespace pact::cli
