#include "bench_main.hpp"

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>

namespace pact::bench {

namespace {

// Keeps the best (lowest) per-item time of each benchmark across repetitions.
class Collector : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      const double items = run.counters.count("items") ? static_cast<double>(run.counters.at("items")) : 1.0;
      // GetAdjustedRealTime is in the run's own time unit; the multiplier is units per second.
      const double ns = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit) * 1e9 / items;
      auto& entry = best_[run.run_name.function_name];
      entry.first = entry.second == 0 ? ns : std::min(entry.first, ns);
      ++entry.second;
    }
  }
  const std::map<std::string, std::pair<double, int>>& best() const { return best_; }

 private:
  std::map<std::string, std::pair<double, int>> best_;
};

}  // namespace

int run(int argc, char** argv, const std::string& benchmark, const std::string& metric,
        const std::vector<RatioSpec>& ratios) {
  std::string json_path;
  std::string command = argv[0];
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--pact_json=", 12) == 0) {
      json_path = argv[i] + 12;
      continue;
    }
    if (i > 0) command += std::string(" ") + argv[i];
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  benchmark::Shutdown();

  BenchReport report(benchmark, command);
  for (const auto& [name, best] : collector.best()) {
    report.add_case(BenchCase{name, name, metric, "ns", best.first, best.second});
  }
  for (const auto& r : ratios) {
    if (!collector.best().count(r.numerator) || !collector.best().count(r.denominator)) continue;  // filtered out
    report.add_ratio(BenchRatio{r.name, r.numerator, r.denominator, r.goal_max, false});
  }
  Json j = report.to_json();
  validate_bench_report(j);
  const std::string text = j.dump(2);
  if (json_path.empty()) {
    fmt::print("{}\n", text);
  } else {
    std::ofstream(json_path) << text << "\n";
    fmt::print("wrote {}\n", json_path);
  }
  for (const auto& r : j["ratios"]) {
    fmt::print(stderr, "{:<28} {:>7.3f}  (goal <= {:.2f})  {}\n", r["name"].get<std::string>(),
               r["value"].get<double>(), r["goal_max"].get<double>(), r["verdict"].get<std::string>());
  }
  return 0;
}

}  // namespace pact::bench
