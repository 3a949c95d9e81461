// `pact bench gemm`: native SGEMM and OpenBLAS cblas_sgemm side by side in one run, interleaved, best of
// N, with the thread count and the kernel OpenBLAS chose. A forced OpenBLAS kernel (OPENBLAS_CORETYPE
// set) makes every verdict "invalid".

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <vector>

#include "pact/core/bench_report.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/verify/perf.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Best seconds per call over `reps` timed batches, each at least ~50 ms of back-to-back calls.
template <class F>
double time_best(F&& f, int calls) {
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count() / calls;
}

}  // namespace

int run_bench_gemm(const std::vector<std::int64_t>& sizes, int threads, int repetitions, bool json) {
  if (threads <= 0)
    throw_error(ErrorCode::invalid_argument, "bench.gemm", fmt::format("--threads {} must be positive", threads));
  if (repetitions <= 0) throw_error(ErrorCode::invalid_argument, "bench.gemm", "--repetitions must be positive");
  omp_set_num_threads(threads);
  kernels::cpu::openblas_threads(threads);
  const std::string corename(kernels::cpu::openblas_corename());
  const OpenBlasBaseline baseline = openblas_baseline(corename);
  BenchReport report("gemm", fmt::format("pact bench gemm --threads {} --repetitions {}", threads, repetitions));
  if (!json) {
    fmt::print("pact bench gemm: {} thread(s), native micro-kernel {}, OpenBLAS kernel {}{}\n", threads,
               kernels::cpu::sgemm_variant(), corename,
               baseline.note.empty()
                   ? ""
                   : fmt::format(" ({}: verdicts {})", baseline.note, baseline.invalid() ? "invalid" : "proxy"));
    fmt::print("{:>6} {:>14} {:>16} {:>8} {:>7}  {}\n", "N", "native GF/s", "OpenBLAS GF/s", "ratio", "goal",
               "verdict");
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (std::int64_t n : sizes) {
    if (n <= 0) throw_error(ErrorCode::invalid_argument, "bench.gemm", fmt::format("size {} must be positive", n));
    std::vector<float> a(static_cast<std::size_t>(n * n)), b(a.size()), c(a.size());
    for (auto& x : a) x = nd(rng);
    for (auto& x : b) x = nd(rng);
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    const int calls = static_cast<int>(std::max(1.0, 0.05 * 50e9 * threads / flops));  // ~50 ms at 50 GF/s/thread
    auto native = [&] { kernels::cpu::sgemm(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false); };
    auto blas = [&] { kernels::cpu::openblas_sgemm(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false); };
    native();  // warm up both
    blas();
    double best_native = 1e30, best_blas = 1e30;
    for (int r = 0; r < repetitions; ++r) {  // interleaved
      best_native = std::min(best_native, time_best(native, calls));
      best_blas = std::min(best_blas, time_best(blas, calls));
    }
    const double goal = n >= 256 ? 0.9 : 0.8;
    const std::string nn = fmt::format("native_{}", n), bn = fmt::format("openblas_{}", n);
    report.add_case({nn, fmt::format("native sgemm ({})", kernels::cpu::sgemm_variant()), "seconds_per_call", "s",
                     best_native, repetitions});
    report.add_case(
        {bn, fmt::format("OpenBLAS cblas_sgemm ({})", corename), "seconds_per_call", "s", best_blas, repetitions});
    // Time ratio native/OpenBLAS <= 1/goal  <=>  native throughput >= goal x OpenBLAS.
    report.add_ratio({fmt::format("gemm_{}_time_native_over_openblas", n), nn, bn, 1.0 / goal, baseline.forced,
                      baseline.proxy, baseline.degraded});
    const double ratio = best_blas / best_native;  // throughput ratio for display
    if (!json) {
      fmt::print("{:>6} {:>14.1f} {:>16.1f} {:>8.3f} {:>7.2f}  {}\n", n, flops / best_native * 1e-9,
                 flops / best_blas * 1e-9, ratio, goal,
                 ratio_verdict(ratio >= goal, baseline.forced, baseline.proxy, baseline.degraded));
    }
  }
  Json j = report.to_json();
  j["environment"]["openblas_corename"] = corename;
  j["environment"]["native_variant"] = std::string(kernels::cpu::sgemm_variant());
  j["environment"]["threads"] = threads;
  if (json) fmt::print("{}\n", j.dump(2));
  return 0;
}

int run_bench_check(const std::string& file, const std::string& only, bool json) {
  const auto contract = spec::parse_performance(spec::read_text_file(file), file);
  const auto results = verify::check_performance(contract, only);
  bool failed = false, invalid = false;
  Json rows = Json::array();
  if (!json) {
    fmt::print("pact bench --check {}: OpenBLAS kernel {}, native micro-kernel {}\n", file,
               kernels::cpu::openblas_corename(), kernels::cpu::sgemm_variant());
    fmt::print("{:<34} {:<12} {:>10} {:>10} {:>9} {:>9}  {}\n", "obligation", "benchmark", "contender", "baseline",
               "ratio", "minimum", "verdict");
  }
  for (const auto& r : results) {
    failed = failed || r.verdict == "fail";
    invalid = invalid || r.verdict == "invalid";
    if (json) {
      rows.push_back(Json{{"id", r.id},
                          {"benchmark", r.benchmark},
                          {"contender", r.contender},
                          {"baseline", r.baseline},
                          {"contender_seconds", r.contender_seconds},
                          {"baseline_seconds", r.baseline_seconds},
                          {"ratio", r.ratio},
                          {"min_ratio", r.min_ratio},
                          {"verdict", r.verdict},
                          {"note", r.note}});
    } else {
      fmt::print("{:<34} {:<12} {:>10} {:>10} {:>9.3f} {:>9.2f}  {}{}\n", r.id, r.benchmark, r.contender, r.baseline,
                 r.ratio, r.min_ratio, r.verdict, r.note.empty() ? "" : " (" + r.note + ")");
    }
  }
  if (json) fmt::print("{}\n", Json{{"schema", "pact.bench-check.v1"}, {"file", file}, {"results", rows}}.dump(2));
  return failed ? 1 : invalid ? 2 : 0;
}

namespace {

struct BenchArgs {
  bool check = false, json = false;
  std::string file = "contracts/performance.yaml", only;
  std::vector<std::int64_t> gemm_sizes{128, 256, 512, 1024, 2048};
  int gemm_threads = 1, gemm_reps = 5;
  bool gemm_json = false;
};

const bool registered = register_command("bench", [](CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* bench =
      app.add_subcommand("bench", "run a benchmark; figures are ratios against a baseline measured in the same run");
  bench->require_subcommand(0, 1);
  bench->add_flag("--check", a->check, "evaluate the performance contracts (regression gate; not part of CI)");
  bench->add_option("--file", a->file, "performance contracts");
  bench->add_option("--only", a->only, "one obligation id");
  bench->add_flag("--json", a->json, "with --check: print the results as JSON");
  auto* gemm = bench->add_subcommand(
      "gemm", "native SGEMM vs OpenBLAS cblas_sgemm (run with env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)");
  gemm->add_option("--sizes", a->gemm_sizes, "square sizes")->delimiter(',');
  gemm->add_option("--threads", a->gemm_threads, "threads for both contenders");
  gemm->add_option("--repetitions", a->gemm_reps, "interleaved repetitions (best of N)");
  gemm->add_flag("--json", a->gemm_json, "print the pact.bench.v1 report");
  return std::vector<Runner>{
      {gemm,
       [a] {
         return a->check ? run_bench_check(a->file, a->only, a->json)
                         : run_bench_gemm(a->gemm_sizes, a->gemm_threads, a->gemm_reps, a->gemm_json);
       }},
      {bench, [a] {
         if (!a->check) {
           throw Error(ErrorCode::invalid_argument, "pact bench", "give a benchmark (gemm) or --check");
         }
         return run_bench_check(a->file, a->only, a->json);
       }}};
});

}  // namespace

}  // namespace pact::cli
