#pragma once
/// Contract checking (SPEC §10): every proof obligation runs as a seeded property test against every
/// capsule bound to its contract, and every QA gate is proven able to fail by running the same
/// obligation against a deliberately mutated kernel that it must catch. Also the audit of
/// contracts/binding.yaml against the capsule registry, per-contract scores and test scaffolding.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pact/core/tensor.hpp"
#include "pact/ops/attributes.hpp"
#include "pact/spec/spec.hpp"

namespace pact::verify {

// The contract vocabulary verify works in, parsed by pact/spec.
using spec::Binding;
using spec::BindingFile;
using spec::BindingStatus;
using spec::Contract;
using spec::Equation;
using spec::FalsificationTest;
using spec::GapEntry;
using spec::ProofObligation;
using spec::QaGate;

/// A kernel under test: inputs and attributes to a new output.
using KernelFn = std::function<Tensor(std::span<const TensorView>, const ops::Attributes&)>;

/// The property checks obligations may name, and the mutants falsification tests may name.
std::vector<std::string> known_checks();
std::vector<std::string> known_mutants();
/// True for the checks that run from contract YAML alone on the op oracle's cases (matches_oracle,
/// shape_rule, fd_vjp: Note [Generic checks] in oracle.cpp), and for the mutants that alter a bound
/// capsule's results (Note [Generic mutants] in falsify.cpp); the others are written per op in C++.
bool is_generic_check(const std::string& check);
bool is_generic_mutant(const std::string& mutant);
/// The mutated kernel `name` (invalid_argument for an unknown or generic name).
KernelFn mutant(const std::string& name);
/// The kernel of a capsule of the maintained registry, by name ("native.softmax"); unsupported when none.
KernelFn capsule_kernel(const std::string& capsule);

/// One evaluation of an obligation against a kernel: `trials` seeded random cases, or for a generic check
/// one per oracle case and dtype.
struct PropertyOutcome {
  int trials = 0;
  int failed = 0;
  std::string first_failure;   ///< what the first failing case showed
  std::string not_applicable;  ///< why the check does not apply to this capsule (then trials is 0)
};
/// Runs `obligation` (whose equation is `op`) against `kernel`. An unknown or generic check is
/// invalid_argument.
PropertyOutcome evaluate(const ProofObligation& obligation, const std::string& op, const KernelFn& kernel,
                         std::uint64_t seed, int trials);
/// Runs `obligation` against the capsule named `capsule` of the maintained registry, in the dtypes the
/// capsule computes; with `mutant`, against that mutant of the capsule instead (a generic mutant alters the
/// capsule's results; another names its own kernel). Generic checks read their cases from the oracle
/// fixture in `oracle_dir`. A check that cannot apply to the capsule (a float32 property on a 16-bit
/// capsule, finite differences in 16 bits) says why in not_applicable.
PropertyOutcome evaluate_capsule(const ProofObligation& obligation, const std::string& op, const std::string& capsule,
                                 std::uint64_t seed, int trials, const std::string& oracle_dir,
                                 const std::string& mutant = {});

/// One evaluation a contract asks for: an obligation on one capsule bound (implemented) to its equation,
/// whose op is `op`. falsify() runs them in this order; the mutation gate runs them one at a time.
struct Evaluation {
  const ProofObligation* obligation = nullptr;
  std::string op, capsule;
};
/// The evaluations of `contract` under `bindings`, obligation by obligation, each capsule in binding order
/// (an obligation whose equation the contract does not declare has none: the audit reports it).
std::vector<Evaluation> evaluations_of(const Contract& contract, const BindingFile& bindings);

/// Whether an evaluation stops at its first failing case (off: every case runs, and trials counts them all).
/// The mutation gate turns it on: one failure kills a mutant, and the cases after it only cost time.
void set_stop_at_first_failure(bool stop) noexcept;

/// The mutation gate's memo of the reference's work: computes the reference provider's results for every
/// sample of the op sweep in float32 (the inputs, the forward result, the cotangent and the VJP, drawn as
/// matches_reference_on_samples draws them under `seed`) and keeps them, and from then on that check compares
/// its candidates with what it keeps (computing and keeping what it lacks: the 16-bit capsules' baselines)
/// instead of running the reference again each time: for each capsule of an op, at each ISA level, and in
/// every process forked after.
void keep_sample_baselines(std::uint64_t seed);
/// Forgets them and stops keeping: in a gate child whose mutant the reference's own run reaches, they no
/// longer hold. With `release` false the memory is not freed, only never read again: a forked child about to
/// exit would otherwise write to (and so copy) every page of the parent's that holds them.
void drop_sample_baselines(bool release = true) noexcept;

struct ObligationResult {
  std::string contract, obligation, capsule;
  PropertyOutcome outcome;
};
struct MutantResult {
  std::string contract, test, mutant, obligation;
  bool caught = false;
  std::string detail;
};
struct FalsifyReport {
  std::vector<ObligationResult> obligations;  ///< evaluated, and those that did not apply (not_applicable)
  std::vector<MutantResult> mutants;
  std::size_t declared = 0;  ///< obligations declared by the contracts considered

  std::size_t evaluated() const noexcept;
  std::size_t not_applicable() const noexcept;
  std::size_t failed() const noexcept;
  std::size_t caught() const noexcept;
  /// True when something was evaluated, nothing failed, and every gate caught every mutant it names.
  bool ok() const noexcept;
};

/// Evaluates `contracts` (all, or only `only`) against the capsules `bindings` binds them to; with
/// `mutants`, also runs every falsification test against its mutant (a generic mutant alters the first
/// capsule bound to the obligation's equation). Generic checks read the oracle fixture in `oracle_dir`.
/// Seeded and reproducible.
FalsifyReport falsify(const std::vector<Contract>& contracts, const BindingFile& bindings, const std::string& only,
                      std::uint64_t seed, int trials, bool mutants, const std::string& oracle_dir);

/// Audit findings: binding coverage and problems. `problems` non-empty means the audit fails.
struct AuditReport {
  struct Coverage {
    std::string contract;
    std::size_t equations = 0, bound = 0;
    std::vector<std::string> unbound;
  };
  std::vector<Coverage> coverage;
  std::vector<std::string> problems;  ///< bindings to unknown contracts, equations, capsules, or mismatched symbols
  std::vector<std::string> unlinked_capsules;  ///< capsules citing testSuite evidence that no contract obligation binds
};
/// Also a problem: a falsification test that pairs a generic check with a mutant written in C++ (that
/// mutant is a forward function; the generic checks need a capsule's VJP too).
AuditReport audit(const std::vector<Contract>& contracts, const BindingFile& bindings);

/// A GoogleTest skeleton for a contract: one test per obligation per bound capsule, one per
/// falsification test, each calling this library (generic checks read the oracle in `oracle_dir`).
std::string scaffold(const Contract& contract, const BindingFile& bindings, const std::string& oracle_dir);

}  // namespace pact::verify
