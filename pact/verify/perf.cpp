#include "pact/verify/perf.hpp"

#include <fmt/format.h>
#include <omp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include "pact/core/bench_report.hpp"
#include "pact/core/file.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::verify {

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of back-to-back calls lasting at least ~40 ms.
double seconds_per_call(const std::function<void()>& f) {
  f();
  int calls = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= 0.04 || calls >= (1 << 20)) return s / calls;
    calls *= 2;
  }
}

std::span<const kernels::Handler> handlers_of(const std::string& provider) {
  if (provider == "native") return kernels::native_handlers();
  if (provider == "reference") return kernels::reference_handlers();
  if (provider == "blas") return kernels::blas_handlers();
  throw_error(ErrorCode::invalid_argument, "bench.check", fmt::format("'{}' has no op handlers", provider));
}

Tensor random(const Dims& shape, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<std::size_t>(ops::numel(shape)));
  for (auto& x : v) x = nd(rng);
  return Tensor::from_values<float>(shape, v);
}

bool is_peer(const PerformanceObligation& o) { return o.benchmark == "infer" || o.benchmark == "train_step"; }

// Runs argv (no shell: every argument is passed as it is) and waits. The script's output goes to the
// terminal, so a long peer run shows its progress.
int run_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0)
    throw_error(ErrorCode::io_error, "bench.check", fmt::format("cannot start {}", argv[0]));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs the obligation's peer script into a temporary report and returns the report.
Json run_peer_script(const PerformanceObligation& o) {
  const std::string script = o.benchmark == "infer" ? "bench/infer_vs_peers.py" : "bench/train_step_vs_torch.py";
  if (!std::filesystem::exists(script))
    throw_error(ErrorCode::io_error, "bench.check",
                fmt::format("{}: {} not found: peer benchmarks run from the repository root", o.id, script));
  char name[] = "/tmp/pact-peer-XXXXXX.json";
  const int fd = mkstemps(name, 5);
  if (fd < 0) throw_error(ErrorCode::io_error, "bench.check", "cannot create a temporary report file");
  ::close(fd);
  const std::string out = name;
  std::vector<std::string> argv{"/usr/bin/python3", script};
  if (o.benchmark == "infer") {
    argv.insert(argv.end(), {"--models", o.model, "--threads", std::to_string(o.threads), "--rounds",
                             std::to_string(o.repetitions)});
    if (!o.shape.empty()) argv.insert(argv.end(), {"--shape", fmt::format("{}", fmt::join(o.shape, ","))});
    if (const char* ort = std::getenv("PACT_ORT_DIR"); ort != nullptr && *ort != '\0')
      argv.insert(argv.end(), {"--ort", ort});
  }
  argv.insert(argv.end(), {"--json", out});
  const int status = run_program(argv);
  std::string text;
  try {
    if (status != 0)
      throw_error(ErrorCode::io_error, "bench.check",
                  fmt::format("{}: {} exited with status {}", o.id, script, status));
    text = read_file(out, "bench.check");
  } catch (...) {
    std::filesystem::remove(out);
    throw;
  }
  std::filesystem::remove(out);
  return parse_json(text, out);
}

}  // namespace

PerformanceResult peer_result(const PerformanceObligation& o, const Json& report) {
  auto malformed = [&](const std::string& why) {
    throw_error(ErrorCode::invalid_argument, "bench.check",
                fmt::format("{}: the {} report {}", o.id, o.benchmark, why));
  };
  if (!report.is_object() || report.value("schema", Json()) != Json("pact.bench.v1") || !report.contains("cases") ||
      !report["cases"].is_array())
    malformed("is not a pact.bench.v1 report with cases");
  const bool infer = o.benchmark == "infer";
  const std::string suffix = infer ? fmt::format("_{}_t{}", o.model, o.threads) : "_" + o.model;
  // Seconds of the case `name`, or nullopt when the report has none.
  auto seconds = [&](const std::string& name) -> std::optional<double> {
    for (const auto& c : report["cases"]) {
      if (!c.is_object() || c.value("name", Json()) != Json(name)) continue;
      const Json value = c.value("value", Json()), unit = c.value("unit", Json());
      if (!value.is_number() || !(value.get<double>() > 0))
        malformed(fmt::format("gives case {} no positive value", name));
      if (unit != Json("ms") && unit != Json("s"))
        malformed(fmt::format("gives case {} a unit other than ms or s", name));
      return value.get<double>() * (unit == Json("ms") ? 1e-3 : 1.0);
    }
    return std::nullopt;
  };
  PerformanceResult r{o.id, o.benchmark, o.contender, o.baseline, 0, 0, 0, o.min_ratio, "", ""};
  const auto contender = seconds("pact" + suffix);
  if (!contender) malformed(fmt::format("has no case pact{}", suffix));
  r.contender_seconds = *contender;
  const auto baseline = seconds(o.baseline + suffix);
  if (!baseline) {
    r.verdict = "invalid";
    r.note = fmt::format("the report has no {}{} figure{}", o.baseline, suffix,
                         o.baseline == "ort" ? " (onnxruntime-node not installed?)" : "");
    return r;
  }
  r.baseline_seconds = *baseline;
  r.ratio = r.baseline_seconds / r.contender_seconds;
  // The comparison's flags, as the script recorded them.
  const std::string ratio_name =
      infer ? fmt::format("{}_t{}_pact_over_{}", o.model, o.threads, o.baseline) : "pact_over_torch_" + o.model;
  bool forced = false, proxy = false, degraded = false, found = false;
  if (report.contains("ratios") && report["ratios"].is_array())
    for (const auto& q : report["ratios"])
      if (q.is_object() && q.value("name", Json()) == Json(ratio_name)) {
        const Json f = q.value("baseline_forced", Json(false)), p = q.value("proxy", Json(false)),
                   d = q.value("baseline_degraded", Json(false));
        if (!f.is_boolean() || !p.is_boolean() || !d.is_boolean())
          malformed(fmt::format("gives ratio {} non-boolean flags", ratio_name));
        forced = f.get<bool>();
        proxy = p.get<bool>();
        degraded = d.get<bool>();
        found = true;
      }
  if (!found) malformed(fmt::format("has no ratio {}", ratio_name));
  r.verdict = ratio_verdict(r.ratio >= o.min_ratio, forced, proxy, degraded);
  if (degraded)
    r.note = "baseline on a kernel below this CPU's level (its BLAS does not know the CPU): force a matched one";
  else if (forced)
    r.note = proxy ? "baseline on a forced kernel matched by PACT_ISA: a proxy" : "baseline on a forced kernel";
  return r;
}

std::vector<PerformanceResult> check_performance(const PerformanceContract& contract, const std::string& only) {
  const OpenBlasBaseline forced = openblas_baseline(kernels::cpu::openblas_corename());
  std::vector<PerformanceResult> out;
  std::map<std::string, Json> peer_reports;
  bool matched = only.empty();
  for (const auto& o : contract.obligations) {
    if (!only.empty() && o.id != only) continue;
    matched = true;
    if (is_peer(o)) {  // one script run per benchmark, model, threads, shape and rounds
      const std::string key = fmt::format("{}|{}|{}|{}|{}", o.benchmark, o.benchmark == "infer" ? o.model : "",
                                          o.threads, fmt::join(o.shape, ","), o.repetitions);
      auto it = peer_reports.find(key);
      if (it == peer_reports.end()) it = peer_reports.emplace(key, run_peer_script(o)).first;
      out.push_back(peer_result(o, it->second));
      continue;
    }
    omp_set_num_threads(o.threads);
    kernels::cpu::openblas_threads(o.threads);
    std::function<void()> contender, baseline;
    std::vector<float> a, b, c;
    std::vector<Tensor> inputs;
    ops::Attributes attrs;
    if (o.benchmark == "gemm") {
      const std::int64_t n = o.shape[0];
      std::mt19937 rng(1);
      std::normal_distribution<float> nd;
      a.resize(static_cast<std::size_t>(n * n));
      b.resize(a.size());
      c.resize(a.size());
      for (auto& x : a) x = nd(rng);
      for (auto& x : b) x = nd(rng);
      auto gemm = [&](const std::string& who) -> std::function<void()> {
        if (who == "native")
          return [&, n] { kernels::cpu::sgemm(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false); };
        if (who == "openblas" || who == "blas") {
          return [&, n] { kernels::cpu::openblas_sgemm(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false); };
        }
        throw_error(ErrorCode::invalid_argument, "bench.check",
                    fmt::format("{}: gemm has no contender '{}'", o.id, who));
      };
      contender = gemm(o.contender);
      baseline = gemm(o.baseline);
    } else {
      const ops::OpTag op = ops::parse_op_kind(o.benchmark);
      std::mt19937 rng(1);
      const Dims shape(o.shape);
      const std::int64_t last = shape[shape.size() - 1];
      inputs.push_back(random(shape, rng));
      if (op == ops::OpTag::cross_entropy) {
        std::vector<std::int64_t> t(static_cast<std::size_t>(shape[0]));
        for (auto& x : t) x = static_cast<std::int64_t>(rng() % static_cast<unsigned>(last));
        inputs.push_back(Tensor::from_values<std::int64_t>(Dims{shape[0]}, t));
      } else if (op == ops::OpTag::layer_norm || op == ops::OpTag::rms_norm) {
        inputs.push_back(random(Dims{last}, rng));
        if (op == ops::OpTag::layer_norm) inputs.push_back(random(Dims{last}, rng));
        attrs.set("normalized_shape", std::vector<std::int64_t>{last});
      } else if (op == ops::OpTag::matmul) {
        inputs.push_back(random(Dims{last, last}, rng));
      } else if (ops::op_info(op).min_arity != 1) {
        throw_error(ErrorCode::invalid_argument, "bench.check",
                    fmt::format("{}: no input recipe for benchmark '{}'", o.id, o.benchmark));
      }
      auto run = [&](const std::string& who) -> std::function<void()> {
        const kernels::Handler* h = kernels::find_handler(handlers_of(who == "openblas" ? "blas" : who), op);
        if (h == nullptr)
          throw_error(ErrorCode::invalid_argument, "bench.check",
                      fmt::format("{}: provider '{}' has no {} kernel", o.id, who, o.benchmark));
        return [&, h] {
          std::vector<TensorView> v;
          v.reserve(inputs.size());
          for (const auto& t : inputs) v.push_back(t.as_view());
          Tensor y = kernels::run_forward(*h, v, attrs);
          (void)y;
        };
      };
      contender = run(o.contender);
      baseline = run(o.baseline);
    }
    PerformanceResult r{o.id, o.benchmark, o.contender, o.baseline, 1e30, 1e30, 0, o.min_ratio, "", ""};
    for (int rep = 0; rep < o.repetitions; ++rep) {  // interleaved, best of N
      r.contender_seconds = std::min(r.contender_seconds, seconds_per_call(contender));
      r.baseline_seconds = std::min(r.baseline_seconds, seconds_per_call(baseline));
    }
    r.ratio = r.baseline_seconds / r.contender_seconds;
    const bool uses_openblas =
        o.contender == "openblas" || o.contender == "blas" || o.baseline == "openblas" || o.baseline == "blas";
    const bool forced_here = forced.forced && uses_openblas, degraded_here = forced.degraded && uses_openblas;
    r.verdict = ratio_verdict(r.ratio >= o.min_ratio, forced_here, forced.proxy, degraded_here);
    if (forced_here || degraded_here) r.note = forced.note;
    out.push_back(std::move(r));
  }
  if (!matched)
    throw_error(ErrorCode::invalid_argument, "bench.check", fmt::format("no performance obligation '{}'", only));
  return out;
}

}  // namespace pact::verify
