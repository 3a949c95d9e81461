#pragma once
/// The obligations ledger (SPEC §10; seed 001, "Phase 1 verification ledger" and "v2 manifest and
/// promotion contract"): ledger/obligations.toml, its checker and its runner.
///
/// Note [Ledger v2]
/// The manifest holds one registry (revision, units, gates, edges, atomic cohorts) and one [[obligations]]
/// table. Each row has an id, one unit, one or more gates, one typed artifact (id, kind, repository-relative
/// path, optional selector), one typed command (id, allow-listed kind, argv, cwd, path_args, artifact_id;
/// never a shell string) and a tagged state: active, or deferred with its activation unit and promotion
/// rule. Nothing else records lifecycle: no status strings, no terminal flags.
///
/// The checker derives everything from the rows: every unit owns at least one obligation; an active row
/// in a unit needs every row of each direct prerequisite unit active; a cohort's rows are all active or
/// all deferred; against a base commit (an ancestor of HEAD) a candidate either promotes (deferred ->
/// active, nothing else changes, registry identical) or revises (registry.revision + 1, topology,
/// membership and states identical, only deferred rows may change gates, artifact or command). Paths are
/// confined to the repository (symlinks resolved) and their failures are reported before any command
/// identity comparison. A receipt written by the runner is the only execution proof: it is bound to HEAD,
/// accepted only on a clean tracked tree, and an active row whose artifact is missing or whose command
/// failed is never complete. A unit is complete when all its rows are active and passed in the receipt.
///
/// Diagnostics carry a stable code and an exact field set (docs/guides/obligations-ledger.md lists them);
/// the human message is free text.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pact/contract/check.hpp"
#include "pact/core/json.hpp"

namespace pact::ledger {

inline constexpr std::string_view kManifestSchema = "pact.obligations.v2";
inline constexpr std::string_view kReceiptSchema = "pact.ledger-receipt.v1";
inline constexpr std::string_view kDiagnosticsSchema = "pact.ledger-diagnostics.v1";
inline constexpr std::string_view kSummarySchema = "pact.ledger-summary.v1";
inline constexpr std::string_view kCliContractSchema = "pact.ledger-cli-contract.v1";
inline constexpr std::string_view kDefaultManifest = "ledger/obligations.toml";

/// One finding: a stable code, its identifying fields (exactly the code's registered keys) and a message.
struct Diagnostic {
  std::string code;
  Json fields;  ///< object
  std::string message;
};

/// An ordered list of findings.
class Diagnostics {
 public:
  void add(std::string code, Json fields, std::string message);
  bool empty() const noexcept { return items_.empty(); }
  std::size_t size() const noexcept { return items_.size(); }
  const std::vector<Diagnostic>& items() const noexcept { return items_; }
  /// True when some finding has this code.
  bool has(std::string_view code) const;
  /// {"schema": kDiagnosticsSchema, "diagnostics": [{code, fields, message}...]}
  Json to_json() const;
  /// One line per finding: "CODE key=value ...: message".
  std::string render() const;

 private:
  std::vector<Diagnostic> items_;
};

/// Every stable diagnostic code with its exact field keys (sorted).
struct DiagnosticSpec {
  std::string_view code;
  std::vector<std::string_view> fields;
};
const std::vector<DiagnosticSpec>& diagnostic_registry();

/// A registry unit or gate.
struct Node {
  std::string id, description;
  bool operator==(const Node&) const = default;
};
struct Edge {
  std::string from, to;
  bool operator==(const Edge&) const = default;
};
struct Cohort {
  std::string id;
  std::vector<std::string> units;
  bool operator==(const Cohort&) const = default;
};
struct Registry {
  std::int64_t revision = 1;
  std::vector<Node> units;
  std::vector<Node> gates;
  std::vector<Edge> edges;
  std::vector<Cohort> cohorts;
};

struct Artifact {
  std::string id, kind, path;
  std::optional<std::string> selector;
  bool operator==(const Artifact&) const = default;
};
struct Command {
  std::string id, kind;
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::int64_t> path_args;  ///< indexes into argv of path-bearing arguments
  std::string artifact_id;
  bool operator==(const Command&) const = default;
};
enum class StateKind : std::uint8_t { active, deferred };
struct State {
  StateKind kind = StateKind::deferred;
  std::string activation_unit;  ///< deferred only
  std::string promotion_mode;   ///< deferred only ("activate-in-place")
  bool operator==(const State&) const = default;
};
struct Obligation {
  std::string id, unit, description;
  std::vector<std::string> gates;
  Artifact artifact;
  Command command;
  State state;
  bool active() const noexcept { return state.kind == StateKind::active; }
};
struct Manifest {
  Registry registry;
  std::vector<Obligation> obligations;
  const Obligation* find(std::string_view id) const;
};

/// Parses manifest text. Schema faults (TOML syntax, wrong schema marker, unknown, missing or mistyped
/// fields, duplicate ids) go to `out`; nullopt when the text could not be read as a manifest at all.
std::optional<Manifest> parse_manifest(std::string_view text, std::string_view source, Diagnostics& out);

/// Registry graph, cohorts, unit ownership, gate references, tagged-state rules, direct prerequisites,
/// cohort atomicity, artifact and command allowlists and bindings. Command checks are skipped for rows
/// whose paths `escaped` names (path failures come first).
void check_structure(const Manifest& m, Diagnostics& out, const std::vector<std::string>& escaped = {});
/// Path confinement (manifest-relative, no "..", symlinks resolved under `root`), artifact existence for
/// active rows and selector presence. Returns the ids of rows with a path escape.
std::vector<std::string> check_paths(const Manifest& m, const std::filesystem::path& root, Diagnostics& out);
/// Promotion and revision rules between a base and a candidate manifest.
void check_transition(const Manifest& base, const Manifest& candidate, Diagnostics& out);

/// One recorded command execution.
struct Execution {
  std::string obligation_id;
  std::vector<std::string> argv;
  std::string cwd, artifact_path;
  std::int64_t exit_code = 0;
};
struct Receipt {
  std::string candidate_commit;
  std::optional<std::string> base_commit;
  std::vector<Execution> executions;
  Json to_json() const;
};
/// Parses a receipt; shape faults go to `out` (nullopt when unusable).
std::optional<Receipt> parse_receipt(std::string_view text, std::string_view source, Diagnostics& out);
/// Binds a receipt to the candidate: commit, base, sort order, one execution per active row with the
/// manifest's argv/cwd/artifact path, no execution for a deferred or unknown row, exit status 0.
void check_receipt(const Manifest& m, const Receipt& r, std::string_view candidate_commit,
                   const std::optional<std::string>& base_commit, Diagnostics& out);

/// Per-unit completeness derived from the rows and (when given) a receipt that passed check_receipt.
Json summarize(const Manifest& m, const Receipt* receipt, std::string_view candidate_commit,
               const std::optional<std::string>& base_commit);

/// The regex a ctest-case command selects its test with: ^Suite\.Case$.
std::string ctest_case_regex(std::string_view test_id);
/// The exact argv of a ctest-case command for a "Suite.Case" test.
std::vector<std::string> ctest_case_argv(std::string_view test_id);

// ---- The tools (git-bound) ------------------------------------------------------------------------

enum class Role : std::uint8_t { checker, runner };
/// The --contract-schema answer.
Json cli_contract(Role role);

struct CheckOptions {
  std::filesystem::path root = ".";
  std::string manifest{kDefaultManifest};
  std::optional<std::string> base_commit;  ///< a revision; canonicalized with git
  std::optional<std::string> receipt;      ///< a receipt file
};
struct CheckOutcome {  // NOLINT(bugprone-exception-escape): a false positive of its implicit moves (clang-tidy 14)
  Diagnostics diagnostics;
  Json summary;  ///< kSummarySchema (null when the manifest could not be parsed)
  std::optional<Manifest> manifest;
  std::optional<Receipt> receipt;  ///< the receipt, when it was given and passed
  bool ok() const noexcept { return diagnostics.empty(); }
};
/// `pact ledger check`.
CheckOutcome check(const CheckOptions& options);

struct RunOptions {
  std::filesystem::path root = ".";
  std::string manifest{kDefaultManifest};
  std::optional<std::string> base_commit;
  std::filesystem::path receipt_out;
};
struct RunOutcome {
  Diagnostics diagnostics;
  std::optional<Receipt> receipt;  ///< written to receipt_out when every command ran
  int commands_run = 0;
  bool ok() const noexcept { return diagnostics.empty(); }
};
/// `pact ledger run`: checks the manifest and the tracked tree, runs every active row's command exactly
/// once (a command shared by rows runs once) and never a deferred one, and writes the receipt atomically.
/// Child output goes to stderr.
RunOutcome run(const RunOptions& options);

/// An evidence resolver that accepts a testSuite only when an active ledger obligation runs exactly that
/// test and a receipt verified at HEAD records its successful execution (`pact plan --require-receipts`).
/// Everything the built-in resolver refuses stays refused.
class ReceiptEvidenceResolver final : public contract::EvidenceResolver {
 public:
  /// `outcome` is a check() that was given a receipt; its diagnostics, if any, refuse every testSuite.
  explicit ReceiptEvidenceResolver(const CheckOutcome& outcome);
  contract::EvidenceStatus resolve(const contract::Capsule& capsule,
                                   const contract::ContractDescriptor& d) const override;

 private:
  contract::DefaultEvidenceResolver base_;
  std::optional<Manifest> manifest_;
  std::optional<Receipt> receipt_;
  std::string refusal_;  ///< why no receipt is usable ("" when one is)
};

/// The active obligation whose ctest-case command runs `test_id`, or nullptr.
const Obligation* obligation_for_test(const Manifest& m, std::string_view test_id);

}  // namespace pact::ledger
