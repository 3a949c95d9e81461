#pragma once
// Runs Google Benchmark, collects each benchmark's best-of-repetitions time, and prints the
// pact.bench.v1 report (pact/core/bench_report.hpp) with the ratios a benchmark declares.

#include <string>
#include <vector>

#include "pact/core/bench_report.hpp"

namespace pact::bench {

/// A ratio to report: numerator and denominator are Google Benchmark names.
struct RatioSpec {
  std::string name;
  std::string numerator;
  std::string denominator;
  double goal_max;
};

/// Runs all registered benchmarks (interleaved repetitions, best of N), writes the report to stdout
/// (or --pact_json=FILE) and returns 0.
int run(int argc, char** argv, const std::string& benchmark, const std::string& metric,
        const std::vector<RatioSpec>& ratios);

}  // namespace pact::bench
