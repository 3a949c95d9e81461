#pragma once
/// Performance contracts (SPEC §10): each obligation a throughput ratio of a contender against a baseline
/// measured in the same run, interleaved, best of N. A baseline or contender on a forced OpenBLAS kernel
/// (OPENBLAS_CORETYPE set) is never "pass": "proxy" when PACT_ISA forced Pact to the same level
/// (openblas_baseline in pact/core/bench_report.hpp), "invalid" otherwise.

#include <string>
#include <vector>

#include "pact/spec/spec.hpp"

namespace pact::verify {

using spec::PerformanceContract;
using spec::PerformanceObligation;

struct PerformanceResult {
  std::string id;
  std::string benchmark;
  std::string contender, baseline;
  double contender_seconds = 0, baseline_seconds = 0;
  double ratio = 0;  ///< contender throughput / baseline throughput (baseline time / contender time)
  double min_ratio = 0;
  std::string verdict;  ///< pass | fail | invalid
  std::string note;
};

/// Runs every obligation (or only `only`). Unknown benchmarks or providers are invalid_argument.
std::vector<PerformanceResult> check_performance(const PerformanceContract& contract, const std::string& only = "");

}  // namespace pact::verify
