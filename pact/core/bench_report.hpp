#pragma once
/// The one JSON schema every benchmark prints (SPEC §12, §14): "pact.bench.v1".
///
///   {"schema": "pact.bench.v1", "benchmark": NAME, "command": CMD,
///    "environment": {"threads": N, "openblas_coretype": STR|null, "compiler": STR, "build_type": STR},
///    "cases": [{"name": STR, "contender": STR, "metric": STR, "unit": STR, "value": NUM, "repetitions": N}],
///    "ratios": [{"name": STR, "numerator": CASE, "denominator": CASE, "value": NUM, "goal_max": NUM,
///                "baseline_forced": BOOL, "proxy": BOOL, "baseline_degraded": BOOL (optional, false when absent),
///                "verdict": "pass"|"fail"|"proxy"|"invalid"}]}
///
/// A ratio is numerator/denominator of two cases measured in the same run (lower is better for time
/// metrics). A ratio whose baseline ran on a forced kernel (OPENBLAS_CORETYPE set) is never "pass": it is
/// "proxy" (or "fail") when Pact's own level was forced to the same ISA (PACT_ISA=avx2 against
/// OPENBLAS_CORETYPE=Haswell: a like-for-like measurement of a lower ISA on a faster machine), and
/// "invalid" for any other forced baseline. A ratio whose baseline was left to choose its kernel but chose
/// one below the CPU's own vector level (baseline_degraded: OpenBLAS 0.3.21 runs its SSE3 Prescott kernel
/// on CPUs newer than it knows, such as Emerald Rapids) is "invalid" too: beating a baseline that does not
/// use the machine proves nothing. Forcing the baseline's kernel with a matched PACT_ISA gives a proxy.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/cpu.hpp"
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
  bool proxy = false;              ///< forced, and matched by a forced Pact level (openblas_baseline below)
  bool baseline_degraded = false;  ///< not forced, and below the CPU's own level (openblas_baseline below)
};

/// The verdict of a ratio that `met` its goal or not: "pass" / "fail" on the machine's own kernels; with a
/// forced OpenBLAS baseline, "proxy" / "fail" when it is matched by the forced Pact level and "invalid"
/// otherwise; "invalid" whenever the baseline is degraded. Every benchmark's verdict comes from here.
std::string ratio_verdict(bool met, bool baseline_forced, bool proxy, bool baseline_degraded = false);

/// The vector level an OpenBLAS kernel (openblas_get_corename, lower case or not) computes its SGEMM at:
/// avx512 for SkylakeX, Cooperlake and SapphireRapids, avx2 for Haswell and Zen, portable for every
/// other (Prescott, Nehalem, Sandybridge, ...: SSE or AVX without FMA).
Isa openblas_kernel_level(std::string_view corename) noexcept;

/// How a baseline measured by OpenBLAS in this process counts.
struct OpenBlasBaseline {
  bool forced = false;    ///< OPENBLAS_CORETYPE is set
  bool proxy = false;     ///< forced to the kernel of the ISA level PACT_ISA forced Pact to
  bool degraded = false;  ///< not forced, and OpenBLAS chose a kernel below the CPU's best level (up to avx512)
  std::string note;       ///< why, for reports ("" when neither forced nor degraded)
  /// True when every verdict against it is "invalid".
  bool invalid() const noexcept { return (forced && !proxy) || degraded; }
};
/// Reads OPENBLAS_CORETYPE and the active ISA level: avx2 matches Haswell and Zen, avx512 matches
/// SkylakeX, Cooperlake and SapphireRapids; nothing else matches. Unforced, `corename` (the kernel
/// OpenBLAS chose) is held to the CPU's best level: below it, the baseline is degraded.
OpenBlasBaseline openblas_baseline(std::string_view corename);

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
