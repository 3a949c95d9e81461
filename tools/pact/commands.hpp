#pragma once
/// The CLI's subcommands. Each returns the process exit code; errors are pact::Error.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pact/capture/capture.hpp"
#include "pact/core/json.hpp"
#include "pact/ir/torch_import.hpp"
#include "pact/picture/picture.hpp"
#include "pact/train/communicator.hpp"
#include "pact/train/reducer.hpp"

namespace pact::train {
class TrainingSession;
}  // namespace pact::train

namespace pact::cli {

/// `pact demo`: a short tour of the storage model (owners, views, groups, ledgers).
int run_demo();
/// `pact digest FILE --domain D`: canonical JSON digest of a JSON file.
int run_digest(const std::string& path, const std::string& domain);

/// `pact bench --check`: the performance contracts; exit 1 on a regression, 2 when a verdict is invalid.
int run_bench_check(const std::string& file, const std::string& only, bool json);
/// `pact bench gemm`: native vs OpenBLAS SGEMM, interleaved, best of `repetitions`.
int run_bench_gemm(const std::vector<std::int64_t>& sizes, int threads, int repetitions, bool json);

/// `pact train` options.
struct TrainArgs {
  std::string model = "mlp";
  int epochs = 30;
  std::int64_t batch_size = 32;
  double lr = 0.005;
  std::string optimizer = "adam";
  std::uint64_t seed = 0;
  std::string profile = "cpu-checked";
  int threads = 0;
  std::string out = "runs";
  std::string run_dir;  ///< the run's directory (default: a new OUT/<UTC timestamp>)
  std::string data = "data/digits.csv.gz";
  bool checkpoint = false;        ///< char-transformer: checkpoint the attention and MLP sublayers
  bool data_parallel = false;     ///< under mpirun: every rank trains a shard and the gradients are averaged
  double bucket_mb = 25;          ///< --data-parallel: gradient bucket cap, MB (2^20 bytes)
  double comm_timeout = 120;      ///< --data-parallel: seconds a collective may take before the job ends
  bool local_batch_norm = false;  ///< --data-parallel: batch norms use each rank's shard (default: all ranks')
  std::string save;               ///< write a checkpoint with the training progress here after every epoch
  std::string load;               ///< continue from this checkpoint (Note [Exact resume]) or its parameters
  int stop_after = 0;             ///< stop after this epoch (the schedule still plans --epochs); 0: run them all
  std::string target;             ///< --data FILE.csv: the target column
  std::string task = "auto";      ///< --data FILE.csv: auto | classify | regress
  std::string hidden = "128";     ///< --data FILE.csv: hidden layer widths, comma-separated
  std::string loss;               ///< --model DIR (a PyTorch capture): cross_entropy:OUTPUT | mse:OUTPUT
  std::int64_t steps = 400;       ///< char-transformer: updates
  double weight_decay = -1;       ///< adamw: decoupled weight decay (-1: PyTorch's AdamW default, 0.01)
  std::set<std::string> given;    ///< the options the user gave (a model refuses those it does not use)
};
/// `pact train --model char-transformer`: a tiny causal transformer on a text file (--steps updates); with
/// `comm` (--data-parallel) each rank trains its shard of every global batch of windows.
int run_char_transformer(const TrainArgs& args, train::Communicator* comm);
/// Where a training run's files go: --run-dir (created; one that already holds a report.json is refused,
/// so a report never overwrites another) or a new OUT/<UTC timestamp>[-N]. io_error naming the path when
/// it cannot be created.
std::filesystem::path make_run_dir(const TrainArgs& args);
/// A data-parallel run's report section: ranks, buckets, the communicator, and how much of the gradient
/// reduction backward hid (hidden_fraction: 1 - the mean skew-free exposed wait, the least over the ranks
/// per step, over a blocking reduction's time), and whether batch norms took their statistics over all
/// the ranks.
Json data_parallel_summary(const train::Communicator& comm, const train::TrainingSession& session, std::int64_t batch,
                           std::size_t bucket_bytes, const std::vector<train::ReductionTiming>& steps);
/// Writes a run's report.json, loss.svg (the step losses), graph.svg (`graph_svg`) and report.html into
/// `dir`, each atomically, and prints "report: PATH" (scripts parse it) and "html report: PATH".
void write_run_files(const std::filesystem::path& dir, const Json& report, const std::string& graph_svg,
                     const std::string& final_metric);
/// `pact train`: trains on the digits data, or an MLP built from a CSV table (--data FILE.csv --target
/// COLUMN), and writes runs/<timestamp>/report.json and loss.svg.
int run_train(const TrainArgs& args);
/// `pact predict --model CKPT --data FILE.csv [-o OUT.csv]` and `pact eval --model CKPT --data FILE.csv`: a
/// model trained on a CSV table (its checkpoint holds the table schema) on new rows.
int run_predict(const std::string& model, const std::string& data, const std::string& out, const std::string& profile,
                bool json);
int run_eval(const std::string& model, const std::string& data, const std::string& profile, bool json);

}  // namespace pact::cli

namespace pact::cli {

/// `pact import DIR -o MODEL.json [--weights FILE]`: lowers a torch_export.py capture to Pact's IR.
int run_import(const std::string& dir, const std::string& out, const std::string& weights_out);
/// `pact run DIR [--profile P] [--json] [--tolerance T]`: plans and runs a capture on its example input
/// and prints the agreement with PyTorch's output; exit 3 above the tolerance, 2 when the plan is rejected.
/// How `pact run` runs: `repeat` warm runs after the cold one, each node timed with `time_nodes`, on
/// `threads` threads (0: OMP_NUM_THREADS or all), with or without the inference fusions.
/// --svg FILE [--depth N] [--collapse PATHS]: a picture of the graph (pact/picture).
struct PictureArgs {
  std::string svg;
  int depth = -1;
  std::vector<std::string> collapse;
};
/// The picture of a capture (pact/picture draws it; a capture is a module beside it, so the CLI builds the
/// one from the other). A PyTorch import's module map (`import`) fills in the module of ops the capture
/// recorded at the top level, and the modules' classes. Inputs and ops are drawn; each op counts the
/// parameters and constants it reads.
picture::Picture capture_picture(const capture::StructureCapture& capture, std::string title,
                                 const ir::TorchImport* import = nullptr);
/// Adds --svg, --depth and --collapse to a command.
void add_picture_options(CLI::App* command, PictureArgs& args);
/// Refuses --depth or --collapse without --svg, and an --svg path that cannot be written, before any work.
void require_picture_destination(const PictureArgs& args, std::string_view command);
/// Writes the picture when --svg was given, and says so unless `quiet` (a --json run).
void write_picture(const PictureArgs& args, const picture::Picture& picture, bool quiet);

struct RunTiming {
  int repeat = 0;
  int threads = 0;
  bool time_nodes = false;
  bool fuse = true;             ///< the inference fusions (pact/plan/fusion.hpp); --no-fuse turns them off
  std::string layout = "auto";  ///< --layout: which convolutions run channels-last (plan::choose_channels_last)
  bool audit = false;           ///< --audit: the plan beside the run (Note [Run audit] in torch.cpp)
  /// --sealed FILE: a binding file whose sealed publication is admitted on this machine's GPU and preferred
  /// for the ops it binds (pact/seal/sealed_kernels.hpp); needs a cuda profile.
  std::string sealed;
};
int run_torch(const std::string& dir, const std::string& profile, bool json, double tolerance,
              const RunTiming& timing = {}, const PictureArgs& picture = {});
/// `pact run DIR --input FILE [--output FILE]`: the capture on the user's inputs (runtime::fit_inputs);
/// prints each output's shape, leading values and, for a classifier, the argmax per row; writes the outputs
/// only after the whole run succeeded.
int run_torch_on(const std::string& dir, const std::string& input, const std::string& output,
                 const std::string& profile, bool json, const std::string& sealed = {});

}  // namespace pact::cli

namespace pact::cli {

/// `pact capture` / `pact discharge` options.
struct CaptureArgs {
  std::string model;  ///< llama | mlp | cnn | IR JSON path | torch_export.py directory
  std::string config = "tiny";
  std::int64_t batch = 0;  ///< 0: the model's default
  std::int64_t seq = 0;
  bool structure_only = false;
  bool force = false;  ///< a real capture above the host's memory budget
  bool json = false;
  std::string optimizer = "adamw";
  std::string out;
  std::uint64_t seed = 0;
  std::string chrome_trace;
  bool values = false, previews = false, halt_on_nonfinite = false, save_runnable = false, replay = false,
       validate = false, backward = false, symbolic = false;
  PictureArgs picture;
  // discharge
  std::string capture_file;
  std::string against;
  std::set<std::string> given;  ///< the options the user gave (discharge takes the others from the capture)
};
/// `pact capture MODEL [--structure-only]`: module tree, per-op shapes, estimated FLOPs and memory.
int run_capture(const CaptureArgs& args);
/// `pact discharge CAPTURE.json --against MODEL`: the verdict per hypothesis row.
int run_discharge(const CaptureArgs& args);
/// `pact capture --capabilities`: the capability table as docs/structure-only-capabilities.md holds it.
int run_capabilities();

}  // namespace pact::cli

namespace pact::cli {

/// `pact contracts validate|audit|score|scaffold|falsify` options.
struct ContractsArgs {
  std::string dir = "contracts";
  std::string contract;  ///< falsify/score: one contract id; scaffold: a contract file
  std::string out;       ///< scaffold: write here instead of stdout
  std::uint64_t seed = 0;
  int trials = 20;
  bool json = false;
  std::string coverage;         ///< gate: gcov JSON from the coverage build
  std::string mutation_report;  ///< gate: pact_mutation_gate's report (source mutants per contract)
  std::string oracle;           ///< the op oracle's fixture; empty: <dir>/oracle
  std::string oracle_dir() const { return oracle.empty() ? dir + "/oracle" : oracle; }
};
int run_contracts_gate(const ContractsArgs& args);
int run_contracts_validate(const ContractsArgs& args);
int run_contracts_audit(const ContractsArgs& args);
int run_contracts_score(const ContractsArgs& args);
int run_contracts_scaffold(const ContractsArgs& args);
int run_contracts_falsify(const ContractsArgs& args);

}  // namespace pact::cli

namespace pact::cli {

/// Arguments of `pact ledger check|run` (docs/guides/obligations-ledger.md).
struct LedgerArgs {
  std::string root = ".";
  std::string manifest = "ledger/obligations.toml";
  std::string base_commit;
  std::string receipt;      ///< check: a receipt written by run
  std::string receipt_out;  ///< run: where the receipt goes
  bool summary_json = false;
  bool diagnostics_json = false;
  bool contract_schema = false;
};
/// `pact ledger check`: exit 0 when the manifest (and the receipt, when given) passes every rule, 1 otherwise.
int run_ledger_check(const LedgerArgs& args);
/// `pact ledger run --receipt-out FILE`: runs every active command once; exit 1 on any refusal or failure.
int run_ledger_run(const LedgerArgs& args);

}  // namespace pact::cli

namespace pact::cli {

/// Arguments of `pact seal build|verify|scan` (docs/guides/sealed-artifacts.md).
struct SealArgs {
  std::string bundle;   ///< build, scan: the bundle directory; verify: optional, for exact declaration equality
  std::string dir;      ///< verify: the publication
  std::string out;      ///< build: the publication to write (absent or empty)
  std::string profile;  ///< build: required; scan, verify: optional
  bool json = false;
};
/// `pact seal build BUNDLE --profile FILE -o OUT`: the hermetic prebuild; exit 0 when published.
int run_seal_build(const SealArgs& args);
/// `pact seal verify OUT [--bundle B] [--profile P]`: the GPU-free reopen; exit 0 when it passes.
int run_seal_verify(const SealArgs& args);
/// `pact seal scan BUNDLE [--profile P]`: every GPU-free check at once; exit 1 when any problem is found.
int run_seal_scan(const SealArgs& args);

}  // namespace pact::cli
