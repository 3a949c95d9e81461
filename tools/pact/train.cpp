// `pact train`: trains a model on the embedded digits data under a backend profile and reports the plan
// audit summary, progress, held-out accuracy, and a run report (report.json, report.html, loss.svg, graph.svg).

#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "pact/core/cpu.hpp"
#include "pact/core/file.hpp"
#include "pact/dist/mpi.hpp"
#include "pact/picture/picture.hpp"
#include "pact/picture/report.hpp"
#include "pact/train/checkpoint.hpp"
#include "pact/train/data.hpp"
#include "pact/train/fine_tune.hpp"
#include "pact/train/fit.hpp"
#include "pact/train/table.hpp"
#include "pact/train/trainer.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace {

std::string find_data(const std::string& requested) {
  if (std::filesystem::exists(requested)) return requested;
#ifdef PACT_SOURCE_DIR
  const auto fallback = std::filesystem::path(PACT_SOURCE_DIR) / requested;
  if (std::filesystem::exists(fallback)) return fallback.string();
#endif
  throw_error(ErrorCode::io_error, "train", fmt::format("data file '{}' not found", requested));
}

// The held-out metric of an epoch as text: accuracy (classification) or RMSE in the target's units.
std::string metric_text(const train::EpochReport& e, const train::TableSchema* regression) {
  return regression ? fmt::format("held-out RMSE {:.4g}", e.rmse * regression->target_scale)
                    : fmt::format("held-out accuracy {:.2f}%", 100 * e.accuracy);
}

// Hidden layer widths from "128,64": each a positive integer.
std::vector<std::int64_t> parse_widths(const std::string& text) {
  std::vector<std::int64_t> widths;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || end != part.c_str() + part.size() || errno != 0 || v <= 0 || v > (1 << 20))
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("--hidden '{}': widths are positive integers up to {}, comma-separated", printable(text),
                              1 << 20));
    widths.push_back(v);
    at = comma + 1;
  }
  if (widths.size() > 16) throw_error(ErrorCode::invalid_argument, "train", "--hidden: at most 16 layers");
  return widths;
}

}  // namespace

namespace {

/// Refuses, typed and before anything is allocated, a model whose parameters (held with their gradients
/// and the optimizer's state) exceed what this process can allocate; names the largest parameter.
void require_parameters_fit(const ir::Graph& g, const std::string& path, const std::string& optimizer) {
  std::uint64_t bytes = 0, largest = 0;
  const ir::Node* biggest = nullptr;
  for (const auto& n : g.nodes) {
    if (n.op != ops::OpTag::parameter) continue;
    const std::uint64_t b = tensor_bytes(n.type);
    bytes = saturating_add(bytes, b);
    if (b >= largest) {
      largest = b;
      biggest = &n;
    }
  }
  // Weights and gradients, plus Adam's two moments or SGD's momentum buffer.
  const std::uint64_t copies = optimizer == "sgd" ? 3 : 4;
  const std::uint64_t held = bytes > ~std::uint64_t{0} / copies ? ~std::uint64_t{0} : bytes * copies;
  const std::uint64_t budget = host_memory_budget();
  if (biggest == nullptr || held <= budget) return;
  throw_error(ErrorCode::out_of_memory, "pact train",
              fmt::format("model '{}': its parameters take {:.2f} GiB (the largest, '{}', is {}); training holds "
                          "them {} times over (weights, gradients and {} state), about {:.2f} GiB, more than this "
                          "process can allocate ({:.2f} GiB)",
                          printable(path), static_cast<double>(bytes) / (1 << 30), printable(biggest->id),
                          fmt::format("{}{}", dtype_name(biggest->type.dtype), biggest->type.shape.to_string()), copies,
                          optimizer, static_cast<double>(held) / (1 << 30), static_cast<double>(budget) / (1 << 30)));
}

}  // namespace

namespace {
// Data-parallel: one MPI rank per process; rank 0 alone prints and writes (the others' stdout is
// discarded, their errors still reach stderr). Threads by default: a rank the launcher bound to some of
// its host's cores (mpirun binds 2 ranks to a core each) takes those; an unbound one its share of the
// host, the cores over the job's ranks on it.
std::unique_ptr<dist::MpiCommunicator> start_data_parallel(const TrainArgs& args) {
  if (!args.data_parallel) return nullptr;
  auto comm = std::make_unique<dist::MpiCommunicator>(
      dist::MpiOptions{args.comm_timeout, args.profile == "cpu-deterministic-mpi"});
  if (comm->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
    throw_error(ErrorCode::io_error, "train", fmt::format("rank {}: cannot silence stdout", comm->rank()));
  if (args.threads <= 0) {
    const int available = omp_get_num_procs();  // this process's affinity mask
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    omp_set_num_threads(std::max(1, online > available ? available : available / comm->ranks_on_this_host()));
  }
  return comm;
}

void refuse_existing_report(const std::filesystem::path& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir / "report.json", ec))
    throw_error(ErrorCode::invalid_argument, "train --run-dir",
                fmt::format("'{}' already holds a run's report.json; a report never overwrites another", dir.string()));
}
}  // namespace

Json data_parallel_summary(const train::Communicator& comm, const train::TrainingSession& session, std::int64_t batch,
                           std::size_t bucket_bytes, const std::vector<train::ReductionTiming>& steps) {
  double backward = 0, exposed = 0, least = 0, started = 0, blocking = 0;
  for (const auto& r : steps) {
    backward += r.backward_seconds;
    exposed += r.wait_seconds;
    least += std::max(r.least_wait_seconds, 0.0);
    started += r.started_in_backward;
    blocking = r.blocking_seconds;
  }
  const double n = std::max<double>(1, static_cast<double>(steps.size()));
  return Json{{"ranks", comm.size()},
              {"rows_per_update", batch * comm.size()},
              {"bucket_bytes", bucket_bytes},
              {"buckets", session.gradient_buckets().size()},
              {"batch_norm_statistics", session.syncs_batch_norm() ? "all ranks" : "each rank's own"},
              {"boundary", comm.boundary()},
              {"reduction_order", comm.reduction_order()},
              {"backward_seconds_mean", backward / n},
              {"buckets_started_in_backward_mean", started / n},
              {"exposed_reduction_seconds_mean", exposed / n},
              {"least_exposed_reduction_seconds_mean", least / n},
              {"blocking_reduction_seconds", blocking},
              {"hidden_fraction", blocking > 0 ? std::clamp(1 - least / n / blocking, 0.0, 1.0) : 0.0}};
}

std::filesystem::path make_run_dir(const TrainArgs& args) {
  std::filesystem::path dir;
  if (!args.run_dir.empty()) {
    dir = args.run_dir;
  } else {
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
    // Runs in the same second get their own directories (-2, -3, ...): a report never overwrites another.
    dir = std::filesystem::path(args.out) / stamp;
    for (int n = 2; std::filesystem::exists(dir); ++n)
      dir = std::filesystem::path(args.out) / fmt::format("{}-{}", stamp, n);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw_error(ErrorCode::io_error, "train", fmt::format("cannot create '{}': {}", dir.string(), ec.message()));
  refuse_existing_report(dir);
  return dir;
}

void write_run_files(const std::filesystem::path& dir, const Json& report, const std::string& graph_svg,
                     const std::string& final_metric) {
  std::vector<double> step_loss;
  for (const auto& v : report.at("step_loss")) step_loss.push_back(v.get<double>());
  write_file_atomic((dir / "report.json").string(), report.dump(2) + "\n", "pact train");
  write_file_atomic((dir / "loss.svg").string(), picture::loss_curve_svg(step_loss, final_metric), "pact train");
  // The training plan as a picture, and the HTML report that shows it with everything above.
  write_file_atomic((dir / "graph.svg").string(), graph_svg, "pact train");
  write_file_atomic((dir / "report.html").string(), picture::render_run_report(report, graph_svg), "pact train");
  fmt::print("report: {}\n", (dir / "report.json").string());
  fmt::print("html report: {}\n", (dir / "report.html").string());
}

int run_train(const TrainArgs& args) {
  if (args.data_parallel && !args.given.count("--profile") && args.profile != "cpu-checked-mpi") {
    TrainArgs data_parallel = args;  // data-parallel training's default profile admits mpi.allreduce
    data_parallel.profile = "cpu-checked-mpi";
    return run_train(data_parallel);
  }
  // Every option works for the model it is given with or is refused with the reason, before any work.
  auto refuse_given = [&](std::initializer_list<const char*> options, std::string_view why) {
    for (const char* o : options) {
      if (args.given.count(o)) throw_error(ErrorCode::invalid_argument, "train", fmt::format("{} {}", o, why));
    }
  };
  if (args.given.count("--weight-decay") && !(args.weight_decay >= 0))
    throw_error(ErrorCode::invalid_argument, "train",
                fmt::format("--weight-decay {} must be non-negative", args.weight_decay));
  if (args.weight_decay >= 0 && args.optimizer != "adamw" && args.optimizer != "sgd")
    refuse_given({"--weight-decay"}, fmt::format("applies to --optimizer adamw or sgd, not '{}'", args.optimizer));
  if (args.given.count("--run-dir") && args.given.count("--out"))
    throw_error(ErrorCode::invalid_argument, "train", "--run-dir names the run's directory itself: drop --out");
  if (!args.run_dir.empty()) refuse_existing_report(args.run_dir);  // before any work
  if (!args.data_parallel)
    refuse_given({"--bucket-mb", "--comm-timeout", "--local-batch-norm"}, "applies to --data-parallel");
  if (args.model == "char-transformer") {
    refuse_given({"--save", "--load", "--epochs", "--stop-after", "--loss"},
                 "does not apply to --model char-transformer (it trains --steps updates on a text file and "
                 "writes no checkpoint)");
    if (args.steps <= 0)
      throw_error(ErrorCode::invalid_argument, "train", fmt::format("--steps {} must be positive", args.steps));
    std::unique_ptr<dist::MpiCommunicator> comm = start_data_parallel(args);
    if (args.threads > 0) omp_set_num_threads(args.threads);
    return run_char_transformer(args, comm.get());
  }
  refuse_given({"--steps"}, "applies to --model char-transformer; the digits models train --epochs");
  if (args.checkpoint) {
    throw_error(ErrorCode::invalid_argument, "train",
                fmt::format("--checkpoint applies to --model char-transformer, not '{}'", args.model));
  }
  if (args.epochs <= 0)
    throw_error(ErrorCode::invalid_argument, "train", fmt::format("--epochs {} must be positive", args.epochs));
  if (args.given.count("--stop-after") && (args.stop_after <= 0 || args.stop_after > args.epochs))
    throw_error(ErrorCode::invalid_argument, "train",
                fmt::format("--stop-after {} must be an epoch in [1, {}] (--epochs)", args.stop_after, args.epochs));
  if (args.batch_size <= 0)
    throw_error(ErrorCode::invalid_argument, "train", fmt::format("--batch-size {} must be positive", args.batch_size));
  if (!args.save.empty()) require_writable_destination(args.save, "pact train --save");  // before any work
  std::unique_ptr<dist::MpiCommunicator> comm = start_data_parallel(args);
  if (args.threads > 0) omp_set_num_threads(args.threads);
  const auto t0 = std::chrono::steady_clock::now();
  // A PyTorch capture (--model DIR --loss KIND:OUTPUT) fine-tunes on --data; a CSV table (--data FILE.csv
  // --target COLUMN) trains an MLP built from the file; anything else is digits.
  const bool capture = std::filesystem::is_directory(args.model);
  const bool table = !capture && std::filesystem::path(args.data).extension() == ".csv";
  if (capture) {
    refuse_given({"--task", "--hidden"}, "applies to --data FILE.csv with --model mlp (an MLP built from the table)");
    if (!args.given.count("--data"))
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("--model {} fine-tunes on your data: --data FILE.csv, FILE.npz, FILE.safetensors or a "
                              "directory of .safetensors files",
                              args.model));
    if (args.loss.empty())
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("--model {} is a captured model: name its loss, --loss cross_entropy:OUTPUT or "
                              "--loss mse:OUTPUT",
                              args.model));
  } else {
    refuse_given({"--loss"}, "applies to --model DIR (a PyTorch capture to fine-tune)");
  }
  if (!table && !capture)
    refuse_given({"--target", "--task", "--hidden"}, "applies to --data FILE.csv (a table of your own)");
  if (table && args.model != "mlp")
    throw_error(ErrorCode::invalid_argument, "train",
                fmt::format("--data {} trains an MLP built from the table; --model {} trains on the digits data",
                            args.data, args.model));
  train::TableSchema schema;
  std::vector<std::int64_t> hidden;
  train::Dataset data;
  std::optional<train::FineTune> tuned;
  if (capture) {
    const train::LossSpec loss = train::parse_loss_spec(args.loss);
    tuned = train::fine_tune(ir::load_torch_export(args.model), loss,
                             args.given.count("--batch-size") ? std::optional(args.batch_size) : std::nullopt, {},
                             args.model);
    const Dims& out = tuned->output_shape;
    if (loss.kind == train::LossSpec::Kind::mse && !(out.size() == 2 && out[1] == 1))
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("--loss mse:{} reads one value per row from --data; output '{}' is {} (the library's "
                              "train::fine_tune takes targets of any shape)",
                              loss.output, loss.output, out.to_string()));
    schema.classify = loss.kind == train::LossSpec::Kind::cross_entropy;
    const std::int64_t classes = out.size() == 2 ? out[1] : 1;
    if (std::filesystem::path(args.data).extension() == ".csv") {
      if (args.target.empty())
        throw_error(ErrorCode::invalid_argument, "train", fmt::format("--data {} needs --target COLUMN", args.data));
      data = train::table_fine_tune_dataset(train::read_csv(args.data), args.target, tuned->row_shape, loss, classes,
                                            args.data);
    } else {
      data = train::tensor_dataset(args.data, tuned->objective.input, args.target.empty() ? "target" : args.target,
                                   tuned->row_shape, loss, classes);
    }
  } else if (table) {
    hidden = parse_widths(args.hidden);
    const train::CsvTable csv = train::read_csv(args.data);
    if (args.target.empty()) {
      std::string columns;
      for (const auto& h : csv.header) columns += (columns.empty() ? "" : ", ") + h;
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("--data {} needs --target COLUMN (its columns: {})", args.data, printable(columns)));
    }
    schema = train::infer_schema(csv, args.target, args.task, args.data);
    data = train::table_dataset(csv, schema, true, args.data);
  } else {
    data = train::load_digits(find_data(args.data));
  }
  train::Split split = train::stratified_split(data, 0.8, args.seed);
  if (table || capture) {
    if (split.train.rows() == 0 || split.test.rows() == 0)
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("{} rows leave {} to train and {} to hold out; add rows", data.rows(), split.train.rows(),
                              split.test.rows()));
  }
  if (table) {
    train::fit_standardisation(schema, split.train);
    train::standardise(schema, split.train);
    train::standardise(schema, split.test);
  }

  train::Objective objective;
  std::int64_t fixed_batch = 0;  // graphs read from a file have one batch size
  if (capture) {
    objective = tuned->objective;
    fixed_batch = tuned->batch;
  } else if (table) {
    objective.graph = [features = data.features, hidden, outputs = data.regression ? 1 : data.classes,
                       classify = !data.regression](std::int64_t b) {
      return train::table_mlp(b, features, hidden, outputs, classify);
    };
  } else if (args.model == "mlp") {
    objective.graph = [](std::int64_t b) { return train::digits_mlp(b); };
  } else if (args.model == "cnn") {
    objective.graph = [](std::int64_t b) { return train::digits_cnn(b); };
  } else {
    ir::Graph g = ir::load_graph(args.model);
    const ir::Node* x = g.find(objective.input);
    if (!x || x->type.shape.size() != 2 || x->type.shape[1] != data.features) {
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("model '{}' needs an input 'x' of shape [batch, {}]", args.model, data.features));
    }
    fixed_batch = x->type.shape[0];
    require_parameters_fit(g, args.model, args.optimizer);
    objective.graph = [g, fixed_batch, path = args.model](std::int64_t b) {
      if (b != fixed_batch) {
        throw_error(ErrorCode::invalid_argument, "train",
                    fmt::format("model '{}' has batch size {}; asked for {}", path, fixed_batch, b));
      }
      return g;
    };
  }
  const std::int64_t batch = fixed_batch ? fixed_batch : args.batch_size;
  if (batch > split.train.rows()) {
    throw_error(ErrorCode::invalid_argument, "train",
                fmt::format("batch size {} exceeds the {} training samples of '{}': no update would run", batch,
                            split.train.rows(), args.data));
  }
  objective.options.optimizer = args.optimizer;
  // AdamW's decoupled decay defaults to PyTorch's 0.01 (it equalled adam when it was fixed at 0).
  objective.options.weight_decay = args.weight_decay >= 0 ? args.weight_decay : args.optimizer == "adamw" ? 0.01 : 0.0;
  objective.options.lr = args.lr;
  objective.options.seed = args.seed;
  objective.options.profile = args.profile;
  const std::int64_t ranks = comm ? comm->size() : 1;  // an update reads batch rows on each rank
  const std::int64_t steps_per_epoch = split.train.rows() / (batch * ranks);
  objective.options.schedule.kind = train::Schedule::cosine;
  objective.options.schedule.total = steps_per_epoch * args.epochs;

  // A capture starts from its own weights; every other model from a seeded initialisation.
  train::ParameterPack initial =
      capture ? std::move(tuned->pack) : train::init_parameters(objective.graph(batch), args.seed);
  // What a resumed run continues from (Note [Exact resume]): the checkpoint's progress, when it has one.
  std::optional<train::TrainingProgress> resumed;
  // The settings a checkpoint's progress is only meaningful under: the next batches, updates and seeds.
  const Json run_settings{{"model", table ? "table-mlp" : args.model},
                          {"optimizer", args.optimizer},
                          {"batch_size", batch},
                          {"seed", args.seed},
                          {"lr", args.lr},
                          {"weight_decay", objective.options.weight_decay},
                          {"epochs", args.epochs}};
  if (!args.load.empty()) {
    train::Checkpoint loaded = train::load_checkpoint(args.load, &initial);
    const Json& m = loaded.metadata;
    if (m.is_object() && m.contains("model") && m["model"].is_string() && m["model"] != run_settings["model"]) {
      throw_error(ErrorCode::invalid_argument, "train",
                  fmt::format("checkpoint '{}' was saved by --model {}; this run trains --model {}", args.load,
                              printable(m["model"].get<std::string>()), run_settings["model"].get<std::string>()));
    }
    initial = std::move(loaded.pack);
    if (loaded.progress) {
      // Note [Exact resume]: a checkpoint with progress continues its run. The optimizer, batch size and
      // seed decide which state, batches and shuffles come next, so they must be the run's own; another
      // learning rate or epoch count re-plans the schedule, which the run says.
      for (const char* key : {"optimizer", "batch_size", "seed"}) {
        if (m.is_object() && m.contains(key) && m[key] != run_settings[key])
          throw_error(ErrorCode::invalid_argument, "train",
                      fmt::format("checkpoint '{}' continues a run with {} {}; this run has {} {} (resume with the "
                                  "same --optimizer, --batch-size and --seed)",
                                  args.load, key, printable(m[key].dump()), key, run_settings[key].dump()));
      }
      if (loaded.progress->position.epochs >= args.epochs)
        throw_error(ErrorCode::invalid_argument, "train",
                    fmt::format("checkpoint '{}' has finished {} epochs; --epochs {} leaves none to train", args.load,
                                loaded.progress->position.epochs, args.epochs));
      for (const char* key : {"lr", "weight_decay", "epochs"}) {
        if (m.is_object() && m.contains(key) && m[key] != run_settings[key])
          fmt::print(
              "note: the checkpoint's run had {} {}, this one {}: the schedule continues re-planned, not as "
              "the original run would have\n",
              key, m[key].dump(), run_settings[key].dump());
      }
      resumed = std::move(loaded.progress);
    } else {
      fmt::print("note: checkpoint '{}' holds parameters only; the optimizer and the schedule start afresh\n",
                 args.load);
    }
  }
  const std::int64_t parameter_count = initial.count();
  train::TrainingSession session(objective, std::move(initial));
  if (resumed) session.resume(resumed->position.steps, resumed->position.kernel_calls);
  if (comm)
    session.set_data_parallel(*comm, static_cast<std::size_t>(args.bucket_mb * (1 << 20)), !args.local_batch_norm);

  // Plan audit summary.
  const plan::PlanAudit& audit = session.audit(batch);
  std::set<std::string> capsules;
  std::map<std::string, int> evidence;
  std::map<plan::KernelPurpose, int> purposes;
  int external = 0;
  for (const auto& k : audit.kernels) {
    ++purposes[k.purpose];
    if (k.capsule && capsules.insert(k.capsule->name).second && k.capsule->trust == contract::Trust::trustedExternal)
      ++external;
  }
  for (const auto& r : audit.check.reports) ++evidence[std::string(contract::evidence_kind_name(r.evidence.kind))];
  fmt::print("pact train: model {}, {} parameters, {} train / {} test samples, batch {}, {} epochs, {} lr {}\n",
             args.model, parameter_count, split.train.rows(), split.test.rows(), batch, args.epochs, args.optimizer,
             args.lr);
  fmt::print(
      "plan audit ({}, {} assurance): {} kernels ({} nodes, {} accumulation, {} running statistics, {} updates{}), {} "
      "capsules admitted [",
      audit.profile, contract::assurance_policy_name(audit.assurance), audit.kernels.size(),
      purposes[plan::KernelPurpose::node], purposes[plan::KernelPurpose::accumulate],
      purposes[plan::KernelPurpose::running_stats], purposes[plan::KernelPurpose::update],
      comm ? fmt::format(", {} allreduce", purposes[plan::KernelPurpose::allreduce]) : std::string(), capsules.size());
  bool first = true;
  for (const auto& c : capsules) {
    fmt::print("{}{}", first ? "" : ", ", c);
    first = false;
  }
  fmt::print("]; evidence:");
  for (const auto& [kind, n] : evidence) fmt::print(" {} {}", n, kind);
  const contract::TestSuiteEvidence suites = audit.check.test_suite_evidence();
  fmt::print("; testSuite evidence: {} verified by a receipt at HEAD, {} by name only", suites.verified,
             suites.by_name);
  fmt::print("; trusted-external capsules: {}; verdict {}\n", external, audit.check.accepted ? "accepted" : "rejected");

  const bool tty = isatty(STDOUT_FILENO) != 0;
  train::FitOptions fit_options;
  fit_options.epochs = args.stop_after > 0 ? args.stop_after : args.epochs;
  fit_options.batch_size = batch;
  fit_options.seed = args.seed;
  fit_options.fixed_batch = fixed_batch != 0;
  if (comm) {
    fmt::print(
        "data-parallel: {} rank(s){}, {} rows per update ({} per rank), {} gradient bucket(s) of at most {} "
        "MB, reduction order {}, batch-norm statistics over {}, {} thread(s) per rank\n",
        comm->size(), dist::MpiCommunicator::launched_by_mpirun() ? "" : " (not started by mpirun)",
        batch * comm->size(), batch, session.gradient_buckets().size(), args.bucket_mb, comm->reduction_order(),
        session.syncs_batch_norm() ? "all ranks" : "each rank's own shard", omp_get_max_threads());
  }
  auto on_step = [&](const train::StepProgress& p) {
    if (!tty || (p.step % 4 != 0 && p.step + 1 != p.steps_per_epoch)) return;
    const int filled =
        static_cast<int>(30.0 * static_cast<double>(p.step + 1) / static_cast<double>(p.steps_per_epoch));
    fmt::print("\repoch {:>3}/{} [{}{}] loss {:.4f}  {:.0f} samples/s", p.epoch + 1, args.epochs,
               std::string(static_cast<std::size_t>(filled), '#'),
               std::string(static_cast<std::size_t>(30 - filled), '.'), p.loss,
               static_cast<double>((p.step + 1) * batch * ranks) / std::max(p.epoch_seconds, 1e-9));
    std::fflush(stdout);
  };
  fit_options.start_epoch = resumed ? resumed->position.epochs : 0;
  const train::TableSchema* regression = (table || capture) && !schema.classify ? &schema : nullptr;
  const bool writer = !comm || comm->rank() == 0;  // the one rank that writes checkpoints and the report
  auto on_epoch = [&](int epoch, const train::EpochReport& e, const train::OptimizerState& state) {
    if (writer && !args.save.empty()) {  // after every epoch: a stopped run resumes from its last finished epoch
      const train::TrainingPosition position{session.step_count(), session.kernel_calls(), epoch + 1};
      Json metadata = run_settings;
      metadata["accuracy"] = e.accuracy;
      if (table) {
        metadata["rmse"] = e.rmse * schema.target_scale;
        metadata["table"] = schema.to_json();
        metadata["hidden"] = hidden;
      }
      train::save_checkpoint(args.save, session.parameters(), metadata, &state, position);
    }
    const std::string line = fmt::format(
        "epoch {:>3}/{}  loss {:.4f}  {}  {:.0f} samples/s", epoch + 1, args.epochs, e.loss, metric_text(e, regression),
        static_cast<double>(steps_per_epoch * batch * ranks) / std::max(e.seconds, 1e-9));
    if (tty) {
      fmt::print("\r{:<90}\n", line);
    } else {
      fmt::print("{}\n", line);
    }
  };
  train::OptimizerState start_state;
  if (resumed) start_state = std::move(resumed->optimizer);
  const train::FitReport fitted =
      train::fit(session, split.train, split.test, fit_options, std::move(start_state), on_step, on_epoch);
  std::vector<double> epoch_acc;
  for (const auto& e : fitted.epochs) epoch_acc.push_back(e.accuracy);

  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string final_metric = metric_text(fitted.epochs.back(), regression);
  fmt::print("{} ({} test samples, {} updates, {:.2f} s)\n", final_metric, split.test.rows(), session.step_count(),
             total);

  if (!writer) return 0;  // rank 0 writes the report

  // Run report.
  const std::filesystem::path dir = make_run_dir(args);
  Json report{{"schema", "pact.train-report.v1"},
              {"config", Json{{"model", args.model},
                              {"epochs", args.epochs},
                              {"batch_size", batch},
                              {"lr", args.lr},
                              {"optimizer", args.optimizer},
                              {"weight_decay", objective.options.weight_decay},
                              {"seed", args.seed},
                              {"profile", args.profile},
                              {"schedule", "cosine"},
                              {"threads", omp_get_max_threads()}}},
              {"data", Json{{"path", args.data}, {"train", split.train.rows()}, {"test", split.test.rows()}}},
              {"plan_audit", plan::render_audit_json(audit)},
              {"epochs", Json::array()},
              {"resumed_from_epoch", fit_options.start_epoch},
              {"final_accuracy", epoch_acc.back()},
              {"final_rmse", regression ? fitted.epochs.back().rmse * schema.target_scale : 0.0},
              {"updates", session.step_count()},
              {"backward_retained_bytes_peak", fitted.retained_bytes_peak},
              {"seconds_total", total}};
  report["step_loss"] = fitted.step_loss;
  if (comm)
    report["data_parallel"] = data_parallel_summary(
        *comm, session, batch, static_cast<std::size_t>(args.bucket_mb * (1 << 20)), fitted.reductions);
  for (std::size_t e = 0; e < fitted.epochs.size(); ++e) {
    const auto& r = fitted.epochs[e];
    report["epochs"].push_back(Json{{"epoch", static_cast<std::size_t>(fit_options.start_epoch) + e + 1},
                                    {"loss", r.loss},
                                    {"accuracy", r.accuracy},
                                    {"rmse", r.rmse * schema.target_scale},
                                    {"seconds", r.seconds}});
  }
  write_run_files(dir, report,
                  picture::render_svg(picture::to_dot(
                      picture::from_graph(objective.graph(batch), args.model + " under " + args.profile, &audit), {})),
                  final_metric);
  if (!args.save.empty()) fmt::print("checkpoint: {} (saved after every epoch, with the optimizer state)\n", args.save);
  return 0;
}

namespace {

const bool registered = register_command("train", [](CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  auto* train = app.add_subcommand("train", "train a model on the embedded digits data (the main job)");
  train->add_option("--model", a->model,
                    "mlp, cnn, char-transformer, a pact.ir.v1 JSON path, or a PyTorch capture directory to fine-tune "
                    "(tools/torch_export.py; needs --loss)");
  train->add_option("--epochs", a->epochs, "epochs");
  train->add_option("--batch-size", a->batch_size, "batch size");
  train->add_option("--lr", a->lr, "base learning rate (cosine schedule)");
  train->add_option("--optimizer", a->optimizer, "sgd | adam | adamw");
  train->add_option("--seed", a->seed, "seed for the split, initialisation and shuffling");
  train->add_option("--profile", a->profile, "backend profile");
  train->add_option("--threads", a->threads, "OpenMP threads (default: all)");
  train->add_option("--out", a->out, "directory for run reports");
  train->add_option("--run-dir", a->run_dir,
                    "the run's own directory (default: a new OUT/<UTC timestamp>); refused if it holds a report");
  train->add_option("--data", a->data,
                    "the digits CSV (gzip), or a table of your own (FILE.csv with a header row; needs --target); "
                    "for a capture also FILE.npz, FILE.safetensors or a directory of .safetensors files");
  train->add_option("--target", a->target,
                    "--data FILE.csv: the column to predict; for a capture's .npz/.safetensors data: the target "
                    "array (default target)");
  train->add_option("--loss", a->loss,
                    "--model DIR (a capture): cross_entropy:OUTPUT (class ids) or mse:OUTPUT (values), OUTPUT one "
                    "of its outputs");
  train->add_option("--task", a->task, "--data FILE.csv: auto | classify | regress");
  train->add_option("--hidden", a->hidden, "--data FILE.csv: hidden layer widths, comma-separated (default 128)");
  train->add_option("--steps", a->steps, "char-transformer: number of updates");
  train->add_option("--save", a->save,
                    "save a safetensors checkpoint after every epoch: parameters, optimizer state, schedule position");
  train->add_option("--load", a->load,
                    "continue from a checkpoint saved by --save (exactly where its run stopped, up to --epochs)");
  train->add_option("--stop-after", a->stop_after,
                    "stop after this epoch; the schedule still plans --epochs (continue later with --load)");
  train->add_option("--weight-decay", a->weight_decay,
                    "decoupled weight decay for adamw (default 0.01), L2 decay for sgd (default 0)");
  train->add_flag("--data-parallel", a->data_parallel,
                  "under mpirun -np N: each rank trains its shard of every global batch (N x --batch-size rows) "
                  "and the gradients are averaged over MPI; rank 0 prints and writes (docs/guides/data-parallel.md)");
  train->add_option("--bucket-mb", a->bucket_mb, "--data-parallel: gradient bucket cap in MB")
      ->check(CLI::Range(1.0 / 1024, 4096.0));
  train
      ->add_option("--comm-timeout", a->comm_timeout,
                   "--data-parallel: seconds a collective may wait before the job ends (a dead or hung rank)")
      ->check(CLI::Range(0.1, 86400.0));
  train->add_flag("--local-batch-norm", a->local_batch_norm,
                  "--data-parallel: each rank's batch norms take their training statistics from its own shard "
                  "(default: from every rank's rows, as one process at the global batch would)");
  train->add_flag(
      "--checkpoint", a->checkpoint,
      "char-transformer: checkpoint the attention and MLP sublayers (interior values recomputed in backward)");
  return std::vector<Runner>{{train, [a, train] {
                                a->given = given_options(*train);
                                return run_train(*a);
                              }}};
});

}  // namespace

}  // namespace pact::cli
