#pragma once
/// The one JSON schema every benchmark prints (SPEC §12, §14): "pact.bench.v1".
///
///   {"schema": "pact.bench.v1", "benchmark": NAME, "command": CMD,
///    "environment": {"threads": N, "openblas_coretype": STR|null, "compiler": STR, "build_type": STR},
///    "cases": [{"name": STR, "contender": STR, "metric": STR, "unit": STR, "value": NUM, "repetitions": N}],
///    "ratios": [{"name": STR, "numerator": CASE, "denominator": CASE, "value": NUM, "goal_max": NUM,
///                "baseline_forced": BOOL, "verdict": "pass"|"fail"|"invalid"}]}
///
/// A ratio is numerator/denominator of two cases measured in the same run (lower is better for time
/// metrics). A ratio whose baseline ran on a forced kernel (OPENBLAS_CORETYPE set) is "invalid", never
/// "pass".

#include <optional>
#include <string>
#include <vector>

#include "pact/core/json.hpp"

namespace pact {

struct BenchCase {
  std::string name;
  std::string contender;
  std::string metric;  ///< e.g. "ns_per_element", "gflops"
  std::string unit;
  double value = 0;
  int repetitions = 1;
};

struct BenchRatio {
  std::string name;
  std::string numerator;
  std::string denominator;
  double goal_max = 0;  ///< the verdict is pass when value <= goal_max
  bool baseline_forced = false;
};

/// Builds a pact.bench.v1 report.
class BenchReport {
 public:
  BenchReport(std::string benchmark, std::string command);
  void add_case(BenchCase c);
  /// Adds a ratio between two cases already added; throws invalid_argument when one is missing.
  void add_ratio(const BenchRatio& r);
  /// The report.
  Json to_json() const;

 private:
  std::string benchmark_;
  std::string command_;
  std::vector<BenchCase> cases_;
  Json ratios_ = Json::array();
};

/// The environment block: thread count (OMP_NUM_THREADS or hardware), OPENBLAS_CORETYPE, compiler.
Json bench_environment();
/// Validates a report against pact.bench.v1; throws parse_error naming the field.
void validate_bench_report(const Json& report);

}  // namespace pact
