#pragma once
/// Performance contracts (SPEC §10): each obligation a throughput ratio of a contender against a baseline
/// measured in the same run, interleaved, best of N. A baseline or contender on a forced OpenBLAS kernel
/// (OPENBLAS_CORETYPE set) is never "pass": "proxy" when PACT_ISA forced Pact to the same level
/// (openblas_baseline in pact/core/bench_report.hpp), "invalid" otherwise; an unforced OpenBLAS that chose a
/// kernel below the CPU's own level (a CPU its version does not know) makes the verdict "invalid" too.

#include <string>
#include <vector>

#include "pact/core/json.hpp"
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
///
/// A peer benchmark (infer, train_step) cannot be timed in this process: PyTorch and ONNX Runtime live in
/// Python and Node. Its obligation runs the script of bench/ that times Pact (`pact run`, or the step
/// benchmark binary) and the peer interleaved in one run, /usr/bin/python3 bench/infer_vs_peers.py or
/// bench/train_step_vs_torch.py, from the current directory (the repository root, with the release or bench
/// build in place), and is evaluated from the pact.bench.v1 report the script writes (peer_result). One run
/// serves every obligation on the same model, threads and shape. ONNX Runtime is looked for under
/// $PACT_ORT_DIR/node_modules when that is set (the script's default otherwise).
std::vector<PerformanceResult> check_performance(const PerformanceContract& contract, const std::string& only = "");

/// A peer obligation's result from its script's report: the contender's and the baseline's cases (infer:
/// pact_<model>_t<threads> and <baseline>_<model>_t<threads>, warm median in ms; train_step: pact_<model>
/// and torch_<model>, seconds per step), ratio = baseline time / contender time against min_ratio, and the
/// report's forced/proxy/degraded flags of that comparison (ratio_verdict: a forced baseline is never
/// "pass", a degraded one always "invalid"). A
/// report without the baseline's case (ONNX Runtime not installed) is "invalid" with a note; a report
/// that is not a pact.bench.v1 report, or lacks Pact's case, is invalid_argument naming what is missing.
PerformanceResult peer_result(const PerformanceObligation& o, const Json& report);

}  // namespace pact::verify
