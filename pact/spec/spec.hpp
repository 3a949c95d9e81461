#pragma once
/// Contract YAML and bindings (SPEC §10): the parsed form of contracts/*.yaml (metadata, equations,
/// proof obligations, falsification tests, QA gate) and contracts/binding.yaml (contract equation ->
/// capsule and C++ symbol, with status and allowed gaps). Every malformed document is
/// pact::Error(parse_error) whose message gives file, line and field. One parser serves the CLI, the
/// build-time binding generator and the tests.

#include <string>
#include <string_view>
#include <vector>

#include "pact/core/error.hpp"

namespace pact::spec {

struct Equation {
  std::string name;
  std::string op;  ///< the op-table kind the equation describes
  std::string formula;
  std::vector<std::string> kernel_functions;  ///< names of the kernel functions (in pact::kernels::cpu) whose line
                                              ///< coverage the gate measures
  int line = 0;
};

struct ProofObligation {
  std::string id;
  std::string kind;  ///< invariant | bound | equivariance | equivalence
  std::string equation;
  std::string property;
  std::string check;      ///< the property check that evaluates it (falsify.hpp's registry)
  double tolerance = -1;  ///< -1: the op's own tolerance
  /// Generic checks: oracle cases that set any of these attributes are outside the obligation (embedding's
  /// padding_idx makes its VJP deliberately not the derivative, so finite differences do not apply there).
  std::vector<std::string> unless_attributes;
  int line = 0;
};

struct FalsificationTest {
  std::string id;
  std::string obligation;
  std::string mutant;  ///< the mutated kernel the obligation must catch
  std::string description;
  int line = 0;
};

struct QaGate {
  std::string id;
  std::vector<std::string> checks;  ///< obligation ids
  std::string pass_criteria;
  std::vector<std::string> must_catch;  ///< mutant names
  int line = 0;
};

struct Contract {
  std::string file;
  std::string id;
  int version = 0;
  std::string description;
  std::vector<std::string> references;
  std::vector<Equation> equations;
  std::vector<ProofObligation> obligations;
  std::vector<FalsificationTest> falsification;
  QaGate gate;
};

/// Parses one contract. Unknown fields, missing fields, wrong types, duplicate ids, references to
/// equations, obligations or mutants the document does not declare: parse_error "file:line: field: why".
Contract parse_contract(std::string_view text, std::string_view file);
/// Every contracts/*.yaml of `dir` except binding.yaml, sorted by file name; duplicate contract ids are an
/// error naming both files.
std::vector<Contract> load_contracts(const std::string& dir);

enum class BindingStatus { implemented, partial, not_implemented };
std::string_view binding_status_name(BindingStatus s) noexcept;

struct Binding {
  std::string contract;
  std::string equation;
  std::string capsule;
  std::string symbol;
  BindingStatus status = BindingStatus::implemented;
  int line = 0;
};

struct GapEntry {
  std::string contract;
  std::string equation;
  int line = 0;
};

struct BindingFile {
  std::string file;
  std::string policy;  ///< AllImplemented
  std::vector<Binding> bindings;
  std::vector<GapEntry> allowed_gaps;

  /// True when (contract, equation) has an implemented binding or is an allowed gap: what a
  /// PACT_CONTRACT annotation needs under AllImplemented.
  bool admits(std::string_view contract, std::string_view equation) const noexcept;
};

/// Parses contracts/binding.yaml (same error rules).
BindingFile parse_bindings(std::string_view text, std::string_view file);

/// One performance obligation (contracts/performance.yaml): the contender's throughput must be at least
/// min_ratio times the baseline's, both measured in the same run, interleaved, best of `repetitions`.
struct PerformanceObligation {
  std::string id;
  /// gemm | an op kind (cross_entropy, softmax, layer_norm, ...) | a peer benchmark: infer (a torchvision
  /// model's warm inference, bench/infer_vs_peers.py) or train_step (bench/train_step_vs_torch.py)
  std::string benchmark;
  std::vector<std::int64_t> shape;  ///< gemm: [n]; ops: the shape of the first operand; infer: the input's
  std::string model;                ///< infer: a torchvision architecture; train_step: the script's case
  std::string contender;            ///< native | reference | blas; pact for a peer benchmark
  std::string baseline;             ///< openblas (gemm) | reference | native | blas; torch | ort for a peer
  double min_ratio = 1.0;
  int threads = 1;
  int repetitions = 5;
  int line = 0;
};

struct PerformanceContract {
  std::string file;
  std::string id;
  std::vector<PerformanceObligation> obligations;
};

/// Parses contracts/performance.yaml (same error rules as the kernel contracts).
PerformanceContract parse_performance(std::string_view text, std::string_view file);

/// Reads a file (io_error naming it when unreadable).
std::string read_text_file(const std::string& path);

}  // namespace pact::spec
