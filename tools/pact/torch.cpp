// `pact import` and `pact run`: PyTorch captures written by tools/torch_export.py.

#include <fmt/format.h>
#include <omp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>

#include "pact/contract/check.hpp"
#include "pact/core/cpu.hpp"
#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/ir/numpy.hpp"
#include "pact/ir/torch_import.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/torch_run.hpp"
#include "pact/seal/sealed_kernels.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace {

std::size_t count_kind(const ir::TorchImport& m, ir::TorchSource::Kind kind, std::int64_t* elements) {
  std::size_t n = 0;
  for (const auto& s : m.sources) {
    if (s.kind != kind || m.graph.find(s.name) == nullptr) continue;
    ++n;
    if (elements) *elements += ops::numel(s.type.shape);
  }
  return n;
}

}  // namespace

int run_import(const std::string& dir, const std::string& out, const std::string& weights_out) {
  require_writable_destination(out, "pact import -o");
  if (!weights_out.empty()) require_writable_destination(weights_out, "pact import --weights");
  const auto start = std::chrono::steady_clock::now();
  ir::TorchBundle bundle = ir::load_torch_export(dir);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const auto& m = bundle.model;
  if (!weights_out.empty()) ir::require_weights(m, dir, "pact import --weights");
  write_file_atomic(out, ir::to_json(m.graph).dump(1) + "\n", "pact import");
  if (!weights_out.empty()) {
    std::vector<std::pair<std::string, TensorView>> tensors;
    for (auto& [name, view] : bundle.state()) tensors.emplace_back(name, view);
    ir::write_safetensors(weights_out, tensors, {{"pact.source", dir}});
  }
  std::int64_t params = 0, buffers = 0;
  const auto np = count_kind(m, ir::TorchSource::Kind::parameter, &params);
  const auto nb = count_kind(m, ir::TorchSource::Kind::buffer, &buffers);
  std::printf(
      "imported %s (captured with %s): %zu aten nodes -> %zu IR nodes, %zu parameters (%lld elements), "
      "%zu buffers (%lld elements), %zu outputs, in %.1f ms\n",
      dir.c_str(), m.capture_method.empty() ? "unknown" : m.capture_method.c_str(), m.aten_nodes, m.graph.nodes.size(),
      np, static_cast<long long>(params), nb, static_cast<long long>(buffers), m.outputs.size(), ms);
  std::printf("wrote %s%s%s\n", out.c_str(), weights_out.empty() ? "" : " and ", weights_out.c_str());
  return 0;
}

namespace {

// Note [Run audit]
// `pact run DIR --audit`: per planned node, the PyTorch module it came from, the op, its input and output
// shapes, the capsule, provider and ISA level, the evidence kinds its obligations rest on and, with
// --time-nodes, its warm time. The table fits the terminal (COLUMNS, or the window, or 120): the module
// column gives way first, cut from the left with ".."; the table shows the first input (the value the op
// works on) and the output, and --json carries every field in full, every input's type included.
struct AuditRow {
  std::string node, module, op, inputs, output, capsule, provider, isa, evidence;
  std::string first_input;     // the table's: the value the op works on (weights are in --json's inputs)
  std::string evidence_short;  // the table's: guard, test, boundary, n/a
  double ms = -1;
};

std::vector<AuditRow> audit_rows(const runtime::TorchRunResult& result) {
  std::map<std::string, std::set<std::string>> kinds;
  for (const auto& r : result.audit.check.reports)
    kinds[r.node].insert(std::string(contract::evidence_kind_name(r.evidence.kind)));
  std::map<std::string, double> ms;
  for (const auto& n : result.nodes) ms[n.node] = n.warm_median_ms;
  std::vector<AuditRow> rows;
  for (const auto& k : result.audit.kernels) {
    if (k.purpose != plan::KernelPurpose::node) continue;
    AuditRow row;
    row.node = k.node;
    if (auto it = result.module_of.find(k.node); it != result.module_of.end()) row.module = it->second;
    row.op = std::string(ops::op_kind(k.op));
    row.inputs = contract::describe_types(k.inputs);
    if (!k.inputs.empty()) row.first_input = contract::describe_type(k.inputs.front());
    if (const ir::Node* n = result.graph.find(k.node)) row.output = contract::describe_type(n->type);
    if (k.capsule != nullptr) {
      row.capsule = k.capsule->name;
      row.provider = k.capsule->provider;
      row.isa = std::string(plan::capsule_isa(*k.capsule));
    }
    for (const auto& kind : kinds[k.node]) {
      row.evidence += (row.evidence.empty() ? "" : ",") + kind;
      const std::string brief = kind == "runtimeGuard"      ? "guard"
                                : kind == "testSuite"       ? "test"
                                : kind == "trustedBoundary" ? "boundary"
                                : kind == "notApplicable"   ? "n/a"
                                                            : kind;
      row.evidence_short += (row.evidence_short.empty() ? "" : ",") + brief;
    }
    if (auto it = ms.find(k.node); it != ms.end()) row.ms = it->second;
    rows.push_back(std::move(row));
  }
  return rows;
}

int terminal_columns() {
  if (const char* c = std::getenv("COLUMNS")) {
    const int n = std::atoi(c);
    if (n >= 40 && n <= 1000) return n;
  }
  winsize w{};
  if (isatty(STDOUT_FILENO) != 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col >= 40) return w.ws_col;
  return 120;
}

// `text` in at most `width` characters: its end kept, its start replaced by "..".
std::string fit_left(const std::string& text, std::size_t width) {
  if (text.size() <= width) return text;
  if (width <= 2) return text.substr(text.size() - width);
  return ".." + text.substr(text.size() - (width - 2));
}

void print_audit_table(const std::vector<AuditRow>& rows, bool timed) {
  const std::size_t columns = static_cast<std::size_t>(terminal_columns());
  std::size_t op = 2, capsule = 7, isa = 3, evidence = 8;
  for (const auto& r : rows) {
    op = std::max(op, r.op.size());
    capsule = std::max(capsule, r.capsule.size());
    isa = std::max(isa, r.isa.size());
    evidence = std::max(evidence, r.evidence_short.size());
  }
  const std::size_t fixed = op + capsule + isa + evidence + (timed ? 9 : 0) + 12;  // separators
  // What is left goes to the shapes (first input -> output) first, then to the module path.
  std::size_t shapes = 16;
  for (const auto& r : rows) shapes = std::max(shapes, r.first_input.size() + 4 + r.output.size());
  const std::size_t left = columns > fixed + 24 ? columns - fixed : 24;
  shapes = std::min(shapes, left - 10);
  const std::size_t module = std::max<std::size_t>(10, left - shapes);
  std::printf("%-*s  %-*s  %-*s  %-*s  %-*s  %-*s%s\n", static_cast<int>(module), "module", static_cast<int>(op), "op",
              static_cast<int>(shapes), "input -> output", static_cast<int>(capsule), "capsule", static_cast<int>(isa),
              "isa", static_cast<int>(evidence), "evidence", timed ? "  warm ms" : "");
  for (const auto& r : rows) {
    const std::string where = r.module.empty() ? r.node : r.module;
    std::printf("%-*s  %-*s  %-*s  %-*s  %-*s  %-*s", static_cast<int>(module), fit_left(where, module).c_str(),
                static_cast<int>(op), r.op.c_str(), static_cast<int>(shapes),
                fit_left(r.first_input + " -> " + r.output, shapes).c_str(), static_cast<int>(capsule),
                r.capsule.c_str(), static_cast<int>(isa), r.isa.c_str(), static_cast<int>(evidence),
                r.evidence_short.c_str());
    if (timed) std::printf("  %7.3f", r.ms);
    std::printf("\n");
  }
}

Json audit_json(const std::vector<AuditRow>& rows) {
  Json out = Json::array();
  for (const auto& r : rows) {
    Json j{{"node", r.node},         {"module", r.module}, {"op", r.op},
           {"inputs", r.inputs},     {"output", r.output}, {"capsule", r.capsule},
           {"provider", r.provider}, {"isa", r.isa},       {"evidence", r.evidence}};
    if (r.ms >= 0) j["warm_median_ms"] = r.ms;
    out.push_back(std::move(j));
  }
  return out;
}

// A rejected plan: its audit (why), as a table or JSON; exit status 2.
int print_rejection(const plan::PlanAudit& audit, bool json) {
  if (json) {
    std::printf("%s\n", plan::render_audit_json(audit).dump(2).c_str());
  } else {
    std::fputs(plan::render_audit_table(audit).c_str(), stdout);
  }
  return 2;
}
}  // namespace

namespace {

// The profile and evidence a run plans under: the named profile, and with --sealed the sealed kernels of a
// binding file, admitted on this machine's GPU, installed as the process's sealed launcher and preferred
// for the ops they bind (pact/seal/sealed_kernels.hpp).
class RunBackend {
 public:
  RunBackend(const std::string& profile_name, const std::string& sealed)
      : profile_(contract::builtin_profile(profile_name)) {
    if (sealed.empty()) return;
    if (profile_.policy.device != DeviceKind::cuda) {
      throw_error(ErrorCode::invalid_argument, "pact run",
                  fmt::format("--sealed runs sealed GPU kernels: give a cuda profile (--profile cuda-external), not "
                              "'{}'",
                              profile_name));
    }
    kernels_ = seal::load_sealed_kernels(sealed, cuda_provider());
    profile_ = kernels_->profile(std::move(profile_));
    resolver_.emplace(kernels_->resolver(base_));
    installed_.emplace(kernels_);
  }
  const contract::BackendProfile& profile() const noexcept { return profile_; }
  const contract::EvidenceResolver& resolver() const noexcept {
    return resolver_ ? static_cast<const contract::EvidenceResolver&>(*resolver_) : base_;
  }

 private:
  contract::BackendProfile profile_;
  contract::DefaultEvidenceResolver base_;
  std::shared_ptr<seal::SealedKernels> kernels_;
  std::optional<seal::SealedEvidenceResolver> resolver_;
  std::optional<seal::InstalledSealedKernels> installed_;
};

}  // namespace

int run_torch(const std::string& dir, const std::string& profile_name, bool json, double tolerance,
              const RunTiming& timing, const PictureArgs& picture_args) {
  require_picture_destination(picture_args, "pact run");
  if (timing.repeat < 0)
    throw_error(ErrorCode::invalid_argument, "pact run",
                fmt::format("--repeat {} must not be negative", timing.repeat));
  if (timing.threads < 0)
    throw_error(ErrorCode::invalid_argument, "pact run", fmt::format("--threads {} must be positive", timing.threads));
  if (timing.time_nodes && timing.repeat == 0)
    throw_error(ErrorCode::invalid_argument, "pact run", "--time-nodes needs warm runs to time: give --repeat N");
  if (timing.threads > 0) {
    omp_set_num_threads(timing.threads);
    kernels::cpu::openblas_threads(timing.threads);
  }
  const RunBackend backend(profile_name, timing.sealed);
  ir::TorchBundle bundle = ir::load_torch_export(dir);
  ir::require_weights(bundle.model, dir, "pact run");
  ir::SafetensorsFile inputs = ir::read_safetensors(dir + "/example_input.safetensors");
  const ir::SafetensorsFile expected = ir::read_safetensors(dir + "/expected_output.safetensors");
  const std::string method = bundle.model.capture_method;
  std::vector<std::string> names;
  for (const auto& o : bundle.model.outputs) {
    if (expected.find(o.name) == nullptr) {
      throw_error(ErrorCode::invalid_argument, "pact run",
                  fmt::format("{}/expected_output.safetensors has no output '{}'", dir, o.name));
    }
    names.push_back(o.name);
  }
  const auto start = std::chrono::steady_clock::now();
  auto result = runtime::run_imported(std::move(bundle), std::move(inputs), backend.profile(), backend.resolver(),
                                      {timing.repeat, timing.time_nodes, timing.fuse,
                                       plan::parse_layout(timing.layout).value_or(plan::Layout::automatic)});
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  auto drawing = picture::from_graph(result.graph, dir + " under " + profile_name, &result.audit, &result.module_of);
  drawing.module_types = result.module_type;
  write_picture(picture_args, drawing, json);
  if (!result.accepted) return print_rejection(result.audit, json);
  std::vector<runtime::OutputAgreement> agreement;
  bool ok = true;
  for (const auto& name : names) {
    agreement.push_back(
        runtime::compare_outputs(name, result.outputs.at(name).as_view(), expected.find(name)->as_view()));
    ok = ok && agreement.back().relative_error <= tolerance;
  }
  if (json) {
    Json doc{
        {"schema", "pact.torch-run.v1"}, {"model", dir}, {"capture_method", method}, {"profile", profile_name},
        {"tolerance", tolerance},        {"passed", ok}, {"milliseconds", ms},       {"peak_bytes", result.peak_bytes},
        {"outputs", Json::array()}};
    for (const auto& a : agreement) {
      doc["outputs"].push_back({{"name", a.name},
                                {"shape", std::vector<std::int64_t>(a.shape.begin(), a.shape.end())},
                                {"max_abs_error", a.max_abs_error},
                                {"max_abs_reference", a.max_abs_reference},
                                {"relative_error", a.relative_error}});
    }
    doc["rewrites"] = plan::render_audit_json(result.audit)["rewrites"];
    if (timing.repeat > 0) {
      doc["cold_ms"] = result.cold_ms;
      doc["warm_median_ms"] = runtime::median(result.warm_ms);
      doc["warm_best_ms"] = *std::min_element(result.warm_ms.begin(), result.warm_ms.end());
      doc["warm_ms"] = result.warm_ms;
      doc["repeat"] = timing.repeat;
      doc["threads"] = omp_get_max_threads();
      doc["cpu"] = cpu_facts().model;
      doc["isa"] = std::string(isa_name(active_isa()));
    }
    if (timing.audit) doc["audit"] = audit_json(audit_rows(result));
    if (timing.time_nodes) {
      Json nodes = Json::array();
      for (const auto& n : result.nodes) {
        Json inputs = Json::array();
        for (const auto& t : n.inputs) inputs.push_back(contract::describe_type(t));
        nodes.push_back({{"node", n.node},
                         {"op", std::string(ops::op_kind(n.op))},
                         {"inputs", std::move(inputs)},
                         {"capsule", n.capsule},
                         {"isa", n.isa},
                         {"warm_median_ms", n.warm_median_ms}});
      }
      doc["nodes"] = std::move(nodes);
    }
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    std::printf("%s (captured with %s) under %s: %zu kernels planned, ran in %.1f ms, peak %.2f MiB live\n",
                dir.c_str(), method.c_str(), profile_name.c_str(), result.audit.kernels.size(), ms,
                static_cast<double>(result.peak_bytes) / (1024.0 * 1024.0));
    if (!result.audit.rewrites.empty()) {
      std::size_t folded = 0, residual = 0, channels_last = 0;
      for (const auto& r : result.audit.rewrites) {
        folded += r.kind == "fold_batch_norm" ? 1 : 0;
        residual += r.kind == "conv2d_residual" ? 1 : 0;
        channels_last += r.kind == "conv2d_nhwc" ? 1 : 0;
      }
      std::printf(
          "fused for inference: %zu batch norm(s) folded into their convolutions, %zu residual add(s) and %zu "
          "activation(s) into conv2d_activation, %zu convolution(s) channels-last (--no-fuse to run the graph as "
          "captured)\n",
          folded, residual, result.audit.rewrites.size() - folded - residual - channels_last, channels_last);
    }
    std::printf("%-16s %-18s %14s %14s %14s\n", "output", "shape", "max|pact-torch|", "max|torch|", "relative");
    for (const auto& a : agreement) {
      std::printf("%-16s %-18s %14.3e %14.3e %14.3e %s\n", a.name.c_str(), a.shape.to_string().c_str(), a.max_abs_error,
                  a.max_abs_reference, a.relative_error, a.relative_error <= tolerance ? "ok" : "ABOVE TOLERANCE");
    }
    std::printf("%s: every output within %.0e (max|pact - torch| / max(1, max|torch|))\n", ok ? "pass" : "FAIL",
                tolerance);
    if (timing.repeat > 0) {
      std::printf("latency: cold %.2f ms, warm median %.2f ms, best %.2f ms over %d run(s); %d thread(s), %s, %s\n",
                  result.cold_ms, runtime::median(result.warm_ms),
                  *std::min_element(result.warm_ms.begin(), result.warm_ms.end()), timing.repeat, omp_get_max_threads(),
                  cpu_facts().model.c_str(), std::string(isa_name(active_isa())).c_str());
    }
    if (timing.audit) print_audit_table(audit_rows(result), timing.time_nodes);
    if (timing.time_nodes && !timing.audit) {
      std::vector<const runtime::NodeTiming*> order;
      double total = 0;
      for (const auto& n : result.nodes) {
        order.push_back(&n);
        total += n.warm_median_ms;
      }
      std::stable_sort(order.begin(), order.end(),
                       [](const auto* a, const auto* b) { return a->warm_median_ms > b->warm_median_ms; });
      std::printf("%-28s %-24s %10s %6s  %-26s %-9s %s\n", "node", "op", "warm ms", "share", "capsule", "isa",
                  "inputs");
      for (const auto* n : order) {
        std::string inputs;
        for (const auto& t : n->inputs) inputs += (inputs.empty() ? "" : ", ") + contract::describe_type(t);
        std::printf("%-28s %-24s %10.3f %5.1f%%  %-26s %-9s %s\n", n->node.c_str(),
                    std::string(ops::op_kind(n->op)).c_str(), n->warm_median_ms,
                    total > 0 ? 100.0 * n->warm_median_ms / total : 0.0, n->capsule.c_str(), n->isa.c_str(),
                    inputs.c_str());
      }
    }
  }
  return ok ? 0 : 3;
}

namespace {

// Up to `n` leading values of a tensor, as text.
std::string leading_values(const TensorView& v, std::size_t n) {
  const std::vector<double> xs = v.to_doubles();
  std::string s = "[";
  for (std::size_t i = 0; i < std::min(n, xs.size()); ++i) s += fmt::format("{}{:.6g}", i ? ", " : "", xs[i]);
  return s + (xs.size() > n ? ", ...]" : "]");
}

// The argmax of each row of a classifier's [N, C] float output (C > 1), or nothing for another output.
std::optional<std::vector<std::int64_t>> row_argmax(const TensorView& v) {
  if (v.shape().size() != 2 || v.shape()[1] < 2 || !is_floating(v.dtype())) return std::nullopt;
  const std::vector<double> xs = v.to_doubles();
  const std::int64_t rows = v.shape()[0], cols = v.shape()[1];
  std::vector<std::int64_t> best(static_cast<std::size_t>(rows), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 1; c < cols; ++c) {
      if (xs[static_cast<std::size_t>(r * cols + c)] >
          xs[static_cast<std::size_t>(r * cols + best[static_cast<std::size_t>(r)])])
        best[static_cast<std::size_t>(r)] = c;
    }
  }
  return best;
}

}  // namespace

int run_torch_on(const std::string& dir, const std::string& input, const std::string& output,
                 const std::string& profile_name, bool json, const std::string& sealed) {
  if (!output.empty()) require_writable_destination(output, "pact run");
  const RunBackend backend(profile_name, sealed);
  ir::TorchBundle bundle = ir::load_torch_export(dir);
  ir::require_weights(bundle.model, dir, "pact run");
  ir::SafetensorsFile inputs = ir::read_tensor_file(input);
  runtime::fit_inputs(bundle, inputs, input);
  std::vector<ir::TorchOutput> outs = bundle.model.outputs;
  const auto start = std::chrono::steady_clock::now();
  auto result = runtime::run_imported(std::move(bundle), std::move(inputs), backend.profile(), backend.resolver());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!result.accepted) return print_rejection(result.audit, json);
  if (!output.empty()) {
    std::vector<std::pair<std::string, TensorView>> tensors;
    tensors.reserve(outs.size());
    for (const auto& o : outs) tensors.emplace_back(o.name, result.outputs.at(o.name).as_view());
    ir::write_tensor_file(output, tensors);
  }
  constexpr std::size_t kShown = 6, kMaxArgmax = 10000;
  if (json) {
    Json doc{{"schema", "pact.torch-run-inputs.v1"},
             {"model", dir},
             {"input", input},
             {"profile", profile_name},
             {"milliseconds", ms},
             {"peak_bytes", result.peak_bytes},
             {"outputs", Json::array()}};
    if (!output.empty()) doc["written"] = output;
    for (const auto& o : outs) {
      const TensorView v = result.outputs.at(o.name).as_view();
      const Dims shape = v.shape();
      Json j{{"name", o.name},
             {"dtype", std::string(dtype_name(v.dtype()))},
             {"shape", std::vector<std::int64_t>(shape.begin(), shape.end())},
             {"leading_values", leading_values(v, kShown)}};
      if (auto best = row_argmax(v)) {
        if (best->size() > kMaxArgmax) best->resize(kMaxArgmax);
        j["argmax"] = *best;
      }
      doc["outputs"].push_back(std::move(j));
    }
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  std::printf("%s on %s under %s: %zu kernels planned, ran in %.1f ms, peak %.2f MiB live\n", dir.c_str(),
              input.c_str(), profile_name.c_str(), result.audit.kernels.size(), ms,
              static_cast<double>(result.peak_bytes) / (1024.0 * 1024.0));
  for (const auto& o : outs) {
    const TensorView v = result.outputs.at(o.name).as_view();
    std::printf("%s: %s%s %s\n", o.name.c_str(), std::string(dtype_name(v.dtype())).c_str(),
                v.shape().to_string().c_str(), leading_values(v, kShown).c_str());
    if (auto best = row_argmax(v)) {
      std::string rows;
      for (std::size_t r = 0; r < std::min<std::size_t>(best->size(), 16); ++r)
        rows += fmt::format("{}{}", r ? ", " : "", (*best)[r]);
      std::printf("  argmax per row: [%s%s]\n", rows.c_str(), best->size() > 16 ? ", ..." : "");
    }
  }
  if (!output.empty()) std::printf("wrote %s\n", output.c_str());
  return 0;
}

namespace {

struct ImportArgs {
  std::string dir, out, weights;
};
const bool import_registered = register_command("import", [](CLI::App& app) {
  auto a = std::make_shared<ImportArgs>();
  auto* import_cmd = app.add_subcommand("import", "lower a tools/torch_export.py capture directory to Pact's IR");
  import_cmd->add_option("dir", a->dir, "directory with graph.json and weights.safetensors")->required();
  import_cmd->add_option("-o,--out", a->out, "where to write the pact.ir.v1 model")->required();
  import_cmd->add_option("--weights", a->weights, "also write every source value (weights and lowering constants)");
  return std::vector<Runner>{{import_cmd, [a] { return run_import(a->dir, a->out, a->weights); }}};
});

struct RunArgs {
  std::string dir, profile = "cpu-checked", input, output;
  bool json = false;
  double tolerance = 1e-4;
  RunTiming timing;
  PictureArgs picture;
};
const bool run_registered = register_command("run", [](CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  auto* run_cmd = app.add_subcommand(
      "run", "plan and run a torch_export.py capture: on its example input, compared with PyTorch, or on --input");
  run_cmd->add_option("dir", a->dir, "capture directory")->required();
  run_cmd->add_option("--input", a->input,
                      "run on these inputs instead (.safetensors, .npz or .npy; tensors named by the model's "
                      "inputs; the leading batch dimension may differ) and print the outputs");
  run_cmd->add_option("--output", a->output, "with --input: write the outputs (.safetensors, .npz, or .npy for one)");
  run_cmd->add_option("--profile", a->profile, "backend profile");
  run_cmd->add_flag("--json", a->json, "print a JSON report");
  run_cmd->add_option("--tolerance", a->tolerance, "largest accepted max|pact - torch| / max(1, max|torch|)");
  run_cmd->add_option("--repeat", a->timing.repeat, "after the first (cold) run, run N more warm and report latency");
  run_cmd->add_option("--threads", a->timing.threads, "threads for the kernels (default: OMP_NUM_THREADS or all)");
  run_cmd->add_flag("--time-nodes", a->timing.time_nodes, "report each planned node's warm time (needs --repeat)");
  run_cmd->add_flag("--audit", a->timing.audit,
                    "print the plan beside the run: per node its module, op, shapes, capsule, ISA level, evidence "
                    "(and warm time with --time-nodes)");
  run_cmd->add_flag("--no-fuse{false}", a->timing.fuse,
                    "run the graph as captured: no batch norm folding, no conv2d_activation fusion");
  run_cmd
      ->add_option("--layout", a->timing.layout,
                   "which convolutions run on channels-last activations, their weights re-packed at plan time: "
                   "auto (where it pays), nchw (none) or nhwc (every one it can); with the fusions only")
      ->check(CLI::IsMember({"auto", "nchw", "nhwc"}));
  run_cmd->add_option("--sealed", a->timing.sealed,
                      "a sealed-kernel binding file (pact.sealed-bindings.v1): admit its publication on this "
                      "machine's GPU and run the ops it binds on it (with --profile cuda-external)");
  add_picture_options(run_cmd, a->picture);
  return std::vector<Runner>{
      {run_cmd, [a] {
         if (!a->output.empty() && a->input.empty())
           throw_error(ErrorCode::invalid_argument, "pact run",
                       "--output needs --input (the example run compares, it writes nothing)");
         if (!a->input.empty()) {
           if (!a->picture.svg.empty())
             throw_error(ErrorCode::invalid_argument, "pact run", "--svg draws the example run's plan; drop --input");
           if (a->timing.repeat != 0 || a->timing.time_nodes || a->timing.audit)
             throw_error(ErrorCode::invalid_argument, "pact run",
                         "--repeat, --time-nodes and --audit report the example run; drop --input");
           return run_torch_on(a->dir, a->input, a->output, a->profile, a->json, a->timing.sealed);
         }
         return run_torch(a->dir, a->profile, a->json, a->tolerance, a->timing, a->picture);
       }}};
});

}  // namespace

}  // namespace pact::cli
