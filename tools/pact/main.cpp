// The pact command line: parses arguments and calls the library. Every failure prints one line,
// "pact: error: <what>", and exits non-zero.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <optional>

#include "pact/core/error.hpp"
#include "pact/ops/catalogue.hpp"
#include "pact/ops/op_table.hpp"
#include "pact/plan/planner.hpp"
#include "pact/verify/ledger.hpp"
#include "tools/pact/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"pact: a tensor runtime in which every kernel carries a contract"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pact 0.1.0");

  auto* demo = app.add_subcommand("demo", "tour the storage model: owners, views, groups, ledgers");

  std::string digest_path, digest_domain = "pact.json.v1";
  auto* digest = app.add_subcommand("digest", "print the canonical-JSON SHA-256 digest of a JSON file");
  digest->add_option("file", digest_path, "JSON file")->required();
  digest->add_option("--domain", digest_domain, "digest domain (domain-separates digests)");

  bool ops_markdown = false;
  auto* ops = app.add_subcommand("ops", "list the op table");
  ops->add_flag("--markdown", ops_markdown, "print the catalogue as docs/ops.md holds it");

  auto* bench =
      app.add_subcommand("bench", "run a benchmark; figures are ratios against a baseline measured in the same run");
  bench->require_subcommand(0, 1);
  bool bench_check = false, bench_json = false;
  std::string bench_file = "contracts/performance.yaml", bench_only;
  bench->add_flag("--check", bench_check, "evaluate the performance contracts (regression gate; not part of CI)");
  bench->add_option("--file", bench_file, "performance contracts");
  bench->add_option("--only", bench_only, "one obligation id");
  bench->add_flag("--json", bench_json, "with --check: print the results as JSON");
  std::vector<std::int64_t> gemm_sizes{128, 256, 512, 1024, 2048};
  int gemm_threads = 1, gemm_reps = 5;
  bool gemm_json = false;
  auto* gemm = bench->add_subcommand(
      "gemm", "native SGEMM vs OpenBLAS cblas_sgemm (run with env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)");
  gemm->add_option("--sizes", gemm_sizes, "square sizes")->delimiter(',');
  gemm->add_option("--threads", gemm_threads, "threads for both contenders");
  gemm->add_option("--repetitions", gemm_reps, "interleaved repetitions (best of N)");
  gemm->add_flag("--json", gemm_json, "print the pact.bench.v1 report");

  std::string plan_model, plan_profile = "cpu-checked", plan_root = ".", plan_receipt = "build/ledger-receipt.json";
  bool plan_json = false, plan_vjp = false, plan_require_receipts = false;
  auto* plan = app.add_subcommand("plan", "plan a model under a backend profile and print the contract audit");
  plan->add_option("model", plan_model, "model in the pact.ir.v1 wire format (JSON)")->required();
  plan->add_option("--profile", plan_profile, "cpu-checked | cpu-external | cuda-checked | cuda-external");
  plan->add_flag("--json", plan_json, "print the audit as JSON");
  plan->add_flag("--vjp", plan_vjp, "plan for forward and VJP (training)");
  plan->add_flag("--require-receipts", plan_require_receipts,
                 "accept testSuite evidence only with a passing ledger receipt at HEAD for the obligation running it");
  plan->add_option("--receipt", plan_receipt, "with --require-receipts: the receipt `pact ledger run` wrote");
  plan->add_option("--root", plan_root, "with --require-receipts: the repository holding ledger/obligations.toml");

  std::string import_dir, import_out, import_weights;
  auto* import_cmd = app.add_subcommand("import", "lower a tools/torch_export.py capture directory to Pact's IR");
  import_cmd->add_option("dir", import_dir, "directory with graph.json and weights.safetensors")->required();
  import_cmd->add_option("-o,--out", import_out, "where to write the pact.ir.v1 model")->required();
  import_cmd->add_option("--weights", import_weights, "also write every source value (weights and lowering constants)");

  std::string run_dir, run_profile = "cpu-checked";
  bool run_json = false;
  double run_tolerance = 1e-4;
  auto* run_cmd =
      app.add_subcommand("run", "plan and run a torch_export.py capture on its example input; compare with PyTorch");
  run_cmd->add_option("dir", run_dir, "capture directory")->required();
  run_cmd->add_option("--profile", run_profile, "backend profile");
  run_cmd->add_flag("--json", run_json, "print a JSON report");
  run_cmd->add_option("--tolerance", run_tolerance, "largest accepted max|pact - torch| / max(1, max|torch|)");

  pact::cli::CaptureArgs capture_args;
  bool capabilities = false;
  auto* capture_cmd =
      app.add_subcommand("capture", "capture a model's structure: graph, modules, parameters, shapes, FLOPs, memory");
  capture_cmd->add_option("model", capture_args.model,
                          "llama | mlp | cnn | pact.ir.v1 JSON | torch_export.py directory");
  capture_cmd->add_flag("--structure-only", capture_args.structure_only,
                        "meta storage: no values, no weights, shapes as hypotheses");
  capture_cmd->add_flag("--capabilities", capabilities, "print the structure-only capability table and exit");
  capture_cmd->add_option("--config", capture_args.config, "llama configuration: 7b | 13b | tiny");
  capture_cmd->add_option("--batch", capture_args.batch, "batch size (llama, mlp, cnn)");
  capture_cmd->add_option("--seq", capture_args.seq, "sequence length (llama)");
  capture_cmd->add_option("--optimizer", capture_args.optimizer,
                          "memory estimate for sgd | sgd-momentum | adam | adamw");
  capture_cmd->add_option("--seed", capture_args.seed, "values of a real capture");
  capture_cmd->add_flag("--json", capture_args.json, "print the capture as JSON");
  capture_cmd->add_option("-o,--out", capture_args.out, "save the capture (pact.capture.v1) here");
  capture_cmd->add_option("--chrome-trace", capture_args.chrome_trace,
                          "write measured per-op times (real captures only)");
  capture_cmd->add_flag("--values", capture_args.values, "record activation values");
  capture_cmd->add_flag("--previews", capture_args.previews, "record value previews");
  capture_cmd->add_flag("--halt-on-nonfinite", capture_args.halt_on_nonfinite, "stop at the first NaN or infinity");
  capture_cmd->add_flag("--save-runnable", capture_args.save_runnable, "save a runnable artifact");
  capture_cmd->add_flag("--replay", capture_args.replay, "replay the capture");
  capture_cmd->add_flag("--validate", capture_args.validate, "validate recorded values");
  capture_cmd->add_flag("--backward", capture_args.backward, "capture the backward pass");
  capture_cmd->add_flag("--symbolic", capture_args.symbolic, "symbolic (dynamic) shapes");

  pact::cli::CaptureArgs discharge_args;
  auto* discharge_cmd =
      app.add_subcommand("discharge", "discharge a structure-only capture's hypotheses with a real capture");
  discharge_cmd->add_option("capture", discharge_args.capture_file, "capture saved by pact capture --structure-only -o")
      ->required();
  discharge_cmd->add_option("--against", discharge_args.against, "the model, with weights or seeded random values")
      ->required();
  discharge_cmd->add_option("--config", discharge_args.config, "llama configuration");
  discharge_cmd->add_option("--batch", discharge_args.batch, "batch size");
  discharge_cmd->add_option("--seq", discharge_args.seq, "sequence length (llama)");
  discharge_cmd->add_option("--seed", discharge_args.seed, "values of the real capture");
  discharge_cmd->add_flag("--json", discharge_args.json, "print the verdicts as JSON");
  discharge_cmd->add_option("-o,--out", discharge_args.out, "save the discharged capture here");

  pact::cli::ContractsArgs contracts_args;
  auto* contracts_cmd = app.add_subcommand("contracts", "kernel contracts: validate, audit, score, scaffold, falsify");
  contracts_cmd->require_subcommand(1);
  auto* c_validate =
      contracts_cmd->add_subcommand("validate", "check every contract and binding; evaluate every obligation briefly");
  auto* c_audit = contracts_cmd->add_subcommand(
      "audit", "binding coverage, unbound equations, bindings naming missing capsules or symbols");
  auto* c_score =
      contracts_cmd->add_subcommand("score", "per-contract score from obligations passed and mutants caught");
  c_score->add_option("contract", contracts_args.contract, "one contract id");
  auto* c_scaffold = contracts_cmd->add_subcommand("scaffold", "a GoogleTest skeleton from a contract file");
  c_scaffold->add_option("file", contracts_args.contract, "contract YAML")->required();
  c_scaffold->add_option("-o,--out", contracts_args.out, "write here");
  auto* c_falsify =
      contracts_cmd->add_subcommand("falsify", "run every obligation as a property test and prove each gate can fail");
  c_falsify->add_option("contract", contracts_args.contract, "one contract id");
  auto* c_gate = contracts_cmd->add_subcommand(
      "gate", "each QA gate: obligations, mutation score (>= 80%), line coverage (>= 95%)");
  c_gate->add_option("contract", contracts_args.contract, "one contract id");
  c_gate->add_option("--coverage", contracts_args.coverage, "gcov --json-format --stdout output of the coverage build");
  for (auto* sub : {c_score, c_falsify, c_gate}) {
    sub->add_option("--seed", contracts_args.seed, "seed of the random cases");
    sub->add_option("--trials", contracts_args.trials, "cases per obligation")->check(CLI::Range(1, 100000));
  }
  for (auto* sub : {c_validate, c_audit, c_score, c_scaffold, c_falsify, c_gate}) {
    sub->add_option("--dir", contracts_args.dir, "the contracts folder (with binding.yaml)");
  }

  pact::cli::LedgerArgs ledger_args;
  auto* ledger_cmd = app.add_subcommand("ledger", "the obligations ledger (ledger/obligations.toml): check and run");
  ledger_cmd->require_subcommand(1);
  auto* l_check =
      ledger_cmd->add_subcommand("check", "check the manifest's rules; with --receipt, that HEAD's evidence passed");
  auto* l_run =
      ledger_cmd->add_subcommand("run", "run every active obligation's command once and write a receipt bound to HEAD");
  for (auto* sub : {l_check, l_run}) {
    sub->add_option("--root", ledger_args.root, "repository root (its top level)");
    sub->add_option("--manifest", ledger_args.manifest, "repository-relative manifest");
    sub->add_option("--base-commit", ledger_args.base_commit,
                    "compare against this ancestor of HEAD (promotion and revision rules)");
    sub->add_flag("--diagnostics-json", ledger_args.diagnostics_json,
                  "print the diagnostics envelope as JSON on stdout");
    sub->add_flag("--contract-schema", ledger_args.contract_schema,
                  "print the CLI contract (one JSON object) and exit");
  }
  l_check->add_option("--receipt", ledger_args.receipt, "a receipt written by `pact ledger run`");
  l_check->add_flag("--summary-json", ledger_args.summary_json, "print the summary as JSON on stdout");
  l_run->add_option("--receipt-out", ledger_args.receipt_out, "where to write the receipt");

  pact::cli::SealArgs seal_args;
  auto* seal_cmd = app.add_subcommand(
      "seal", "sealed GPU kernel artifacts: build (hermetic prebuild), verify (GPU-free reopen), scan");
  seal_cmd->require_subcommand(1);
  auto* s_build = seal_cmd->add_subcommand(
      "build", "compile a bundle's CUDA sources in the sandbox and publish the CUBINs with their index");
  s_build->add_option("bundle", seal_args.bundle, "bundle directory (manifest.toml and sources)")->required();
  s_build->add_option("-o,--out", seal_args.out, "publication directory to create (absent or empty)")->required();
  s_build
      ->add_option("--profile", seal_args.profile, "the measured compile profile (pact.nvcc-compile-profile.v1 JSON)")
      ->required();
  auto* s_verify = seal_cmd->add_subcommand(
      "verify", "reopen a publication without a GPU: inventory, sizes, SHA-256, ELF, parameter widths");
  s_verify->add_option("dir", seal_args.dir, "publication directory")->required();
  s_verify->add_option("--bundle", seal_args.bundle,
                       "also require exact declaration equality with this bundle's manifest");
  s_verify->add_option("--profile", seal_args.profile, "also require this compile profile (the launch's)");
  auto* s_scan =
      seal_cmd->add_subcommand("scan", "the author's pre-flight: every check that needs no GPU, all problems at once");
  s_scan->add_option("bundle", seal_args.bundle, "bundle directory")->required();
  s_scan->add_option("--profile", seal_args.profile, "also check the bundle against this compile profile");
  for (auto* sub : {s_build, s_verify, s_scan}) sub->add_flag("--json", seal_args.json, "print JSON");

  pact::cli::TrainArgs train_args;
  auto* train = app.add_subcommand("train", "train a model on the embedded digits data (the main job)");
  train->add_option("--model", train_args.model, "mlp, cnn, char-transformer, or a pact.ir.v1 JSON path");
  train->add_option("--epochs", train_args.epochs, "epochs");
  train->add_option("--batch-size", train_args.batch_size, "batch size");
  train->add_option("--lr", train_args.lr, "base learning rate (cosine schedule)");
  train->add_option("--optimizer", train_args.optimizer, "sgd | adam | adamw");
  train->add_option("--seed", train_args.seed, "seed for the split, initialisation and shuffling");
  train->add_option("--profile", train_args.profile, "backend profile");
  train->add_option("--threads", train_args.threads, "OpenMP threads (default: all)");
  train->add_option("--out", train_args.out, "directory for run reports");
  train->add_option("--data", train_args.data, "digits CSV (gzip)");
  train->add_option("--steps", train_args.steps, "char-transformer: number of updates");
  train->add_option("--save", train_args.save, "save the trained parameters as a safetensors checkpoint");
  train->add_option("--load", train_args.load, "start from a checkpoint saved by --save");
  train->add_flag(
      "--checkpoint", train_args.checkpoint,
      "char-transformer: checkpoint the attention and MLP sublayers (interior values recomputed in backward)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*demo) return pact::cli::run_demo();
    if (*train) return pact::cli::run_train(train_args);
    if (*capture_cmd) {
      if (capabilities) return pact::cli::run_capabilities();
      if (capture_args.model.empty())
        throw pact::Error(pact::ErrorCode::invalid_argument, "pact capture", "MODEL is required");
      return pact::cli::run_capture(capture_args);
    }
    if (*c_validate) return pact::cli::run_contracts_validate(contracts_args);
    if (*c_audit) return pact::cli::run_contracts_audit(contracts_args);
    if (*c_score) return pact::cli::run_contracts_score(contracts_args);
    if (*c_scaffold) return pact::cli::run_contracts_scaffold(contracts_args);
    if (*c_falsify) return pact::cli::run_contracts_falsify(contracts_args);
    if (*c_gate) return pact::cli::run_contracts_gate(contracts_args);
    if (*l_check) return pact::cli::run_ledger_check(ledger_args);
    if (*l_run) return pact::cli::run_ledger_run(ledger_args);
    if (*s_build) return pact::cli::run_seal_build(seal_args);
    if (*s_verify) return pact::cli::run_seal_verify(seal_args);
    if (*s_scan) return pact::cli::run_seal_scan(seal_args);
    if (*discharge_cmd) return pact::cli::run_discharge(discharge_args);
    if (*import_cmd) return pact::cli::run_import(import_dir, import_out, import_weights);
    if (*run_cmd) return pact::cli::run_torch(run_dir, run_profile, run_json, run_tolerance);
    if (*digest) return pact::cli::run_digest(digest_path, digest_domain);
    if (*plan) {
      const auto graph = pact::ir::load_graph(plan_model);
      const auto profile = pact::contract::builtin_profile(plan_profile);
      const pact::contract::DefaultEvidenceResolver default_resolver;
      std::optional<pact::ledger::ReceiptEvidenceResolver> receipt_resolver;
      if (plan_require_receipts) {
        pact::ledger::CheckOptions options;
        options.root = plan_root;
        options.receipt = plan_receipt;
        const auto outcome = pact::ledger::check(options);
        if (!outcome.ok())
          std::fprintf(stderr, "pact plan: the ledger refuses the receipt:\n%s", outcome.diagnostics.render().c_str());
        receipt_resolver.emplace(outcome);
      }
      const pact::contract::EvidenceResolver& resolver =
          receipt_resolver ? static_cast<const pact::contract::EvidenceResolver&>(*receipt_resolver) : default_resolver;
      auto result =
          pact::plan::plan_graph(graph, profile, resolver,
                                 plan_vjp ? pact::contract::VjpMode::with_vjp : pact::contract::VjpMode::forward_only);
      const auto& audit = result ? result->audit() : result.error().audit;
      if (plan_json) {
        std::printf("%s\n", pact::plan::render_audit_json(audit).dump(2).c_str());
      } else {
        std::fputs(pact::plan::render_audit_table(audit).c_str(), stdout);
      }
      return result ? 0 : 2;
    }
    if (*bench && bench_check) return pact::cli::run_bench_check(bench_file, bench_only, bench_json);
    if (*bench && !*gemm)
      throw pact::Error(pact::ErrorCode::invalid_argument, "pact bench", "give a benchmark (gemm) or --check");
    if (*gemm) return pact::cli::run_bench_gemm(gemm_sizes, gemm_threads, gemm_reps, gemm_json);
    if (*ops) {
      if (ops_markdown) {
        std::fputs(pact::ops::render_catalogue_markdown().c_str(), stdout);
      } else {
        for (const auto& op : pact::ops::op_table()) std::printf("%s\n", std::string(op.kind).c_str());
      }
      return 0;
    }
  } catch (const pact::Error& e) {
    std::fprintf(stderr, "pact: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pact: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
