#pragma once
/// QA gates (SPEC §10): per contract, the falsification results (every obligation passes on every bound
/// capsule), the mutation score (share of its mutants caught, threshold 80%) and the line coverage of
/// the kernel functions its equations name (from a coverage build's gcov JSON, threshold 95%). Each
/// figure is printed beside its threshold; a figure that was not measured makes the gate "incomplete",
/// never "pass".

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pact/core/json.hpp"
#include "pact/verify/falsify.hpp"

namespace pact::verify {

inline constexpr double kCoverageThreshold = 95.0;
inline constexpr double kMutationThreshold = 80.0;

struct LineCoverage {
  std::size_t lines = 0;
  std::size_t executed = 0;
  std::vector<std::string> functions;  ///< demangled names measured
  double percent() const noexcept {
    return lines == 0 ? 0.0 : 100.0 * static_cast<double>(executed) / static_cast<double>(lines);
  }
};

/// Parses `gcov --json-format --stdout` output (one JSON document per line; parse_error naming the line).
std::vector<Json> parse_gcov_json(std::string_view text, std::string_view where);
/// Line coverage of the functions in pact::kernels::cpu named exactly by `names` (with their template
/// instances and the lambdas and OpenMP regions nested in them; "conv2d" is not "conv2d_vjp"). Lines
/// of the same file and number (template instances, several objects) count once, executed if any ran.
LineCoverage kernel_coverage(const std::vector<Json>& gcov, const std::vector<std::string>& names);

inline constexpr std::size_t kMinSourceMutants = 20;

/// A contract's share of the generated source mutants (pact_mutation_gate's report, schema
/// pact.mutation-report.v1): the mutants its obligations reach, those killed, those listed as equivalent
/// (with the reason) and the survivors (file:line:column original -> mutated).
struct SourceMutants {
  std::size_t generated = 0, equivalent = 0, killed = 0;
  std::vector<std::string> survivors;
  std::size_t counted() const noexcept { return generated - equivalent; }
  double score() const noexcept {
    return counted() == 0 ? 0.0 : 100.0 * static_cast<double>(killed) / static_cast<double>(counted());
  }
};

struct GateResult {
  std::string contract, gate;
  std::size_t evaluated = 0, passed = 0;
  std::size_t mutants = 0, caught = 0;   ///< the falsification tests' mutants (each must be caught)
  std::optional<SourceMutants> source;   ///< nullopt: no mutation report given
  std::optional<LineCoverage> coverage;  ///< nullopt: no coverage data given
  std::string verdict;                   ///< pass | fail | incomplete
  std::vector<std::string> reasons;
  /// The mutation score the threshold applies to: the source mutants' when measured, else the
  /// falsification tests'.
  double mutation_score() const noexcept {
    if (source) return source->score();
    return mutants == 0 ? 0.0 : 100.0 * static_cast<double>(caught) / static_cast<double>(mutants);
  }
};

/// The per-contract source mutants of a pact_mutation_gate report; parse_error naming `where` when it is
/// not one.
std::map<std::string, SourceMutants> parse_mutation_report(const Json& report, std::string_view where);

/// Evaluates every contract's gate from a falsify report (with mutants), optional source-mutant results
/// (without them the gate is incomplete: its falsification tests' mutants alone do not measure which
/// mistakes in the source the obligations catch) and optional gcov data.
std::vector<GateResult> evaluate_gates(const std::vector<Contract>& contracts, const FalsifyReport& report,
                                       const std::map<std::string, SourceMutants>* source,
                                       const std::vector<Json>* gcov);

}  // namespace pact::verify
