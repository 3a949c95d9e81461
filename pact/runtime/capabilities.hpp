#pragma once
/// The structure-only capability table (SPEC §9, seed 003): the one in-code authority for what a
/// structure-only capture claims, with one chokepoint, require_structure_only_capability(key). Every
/// structure-only refusal in Pact goes through it, or, for the few codes the table does not own (entry gate,
/// substrate mismatch, backstop, forgery, refuted rows, graph mismatch, value selectors in a plan check),
/// through refuse_structure_only, which
/// accepts only those codes; no other code throws a Refusal (a lockstep test scans the sources for one).
/// docs/structure-only-capabilities.md mirrors the table
/// (render_capabilities_markdown(); a lockstep test keeps them equal).

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "pact/core/error.hpp"
#include "pact/core/source_location.hpp"

namespace pact::runtime {

/// The closed status grammar (status_v1): supported_structural | supported_hypothesis | refuse:<code> |
/// verify:<Vn> | out_of_scope:<contract-ref>.
struct Status {
  enum class Kind { supported_structural, supported_hypothesis, refuse, verify, out_of_scope };
  Kind kind;
  std::string argument;  ///< the refusal code, the verification id (V1, V2, ...) or the contract reference

  /// Parses a status string; anything outside the grammar is parse_error naming it.
  static Status parse(std::string_view text);
  std::string to_string() const;
  bool supported() const noexcept { return kind == Kind::supported_structural || kind == Kind::supported_hypothesis; }
  bool operator==(const Status&) const = default;
};

/// One row: the claim (conditional wording) and its governance columns.
struct CapabilityRow {
  std::string_view key;
  std::string_view claim;
  std::string_view status;        ///< status_v1 text
  std::string_view flip_event;    ///< when an amendment may change the status
  std::string_view evidence;      ///< the test(s) that pin the row
  std::string_view amend_owner;   ///< who may amend it
  std::string_view refusal_code;  ///< the typed code of a refuse row, "—" otherwise
};

/// The table, in the seed's order.
std::span<const CapabilityRow> capability_table() noexcept;
/// The row of `key`; an unknown key is invalid_argument naming it.
const CapabilityRow& capability(std::string_view key);

/// A typed structure-only refusal: code unsupported, with the seed's refusal code (and, for value escapes
/// from model code, the user's source line in the message).
class Refusal : public Error {
 public:
  Refusal(std::string refusal_code, std::string operation, std::string detail);
  const std::string& refusal_code() const noexcept { return refusal_code_; }

 private:
  std::string refusal_code_;
};

/// The chokepoint: returns the row when its status is supported, otherwise throws Refusal with the row's
/// refusal code (refuse:<code>), "unverified:<Vn>" (verify:<Vn>) or "out_of_scope:<ref>". `context` is
/// appended to the message (what was asked, where).
const CapabilityRow& require_structure_only_capability(std::string_view key, std::string_view context = {});

/// Refusal codes the table does not own (entry gate, backstop, forgery, consumers of refuted rows).
inline constexpr std::string_view kMetaOutsideStructureOnly = "structure_only_meta_outside_mode";
inline constexpr std::string_view kBackstop = "structure_only_meta_failure";
inline constexpr std::string_view kForgedArtifact = "structure_only_marker_incoherent";
inline constexpr std::string_view kRefutedRow = "structure_only_refuted_row";
inline constexpr std::string_view kGraphMismatch = "structure_only_graph_mismatch";
inline constexpr std::string_view kSubstrateMismatch = "structure_only_substrate_mismatch";
inline constexpr std::string_view kPlanCheckUnsupported = "plan_check_unsupported";

/// Throws the Refusal of one of the codes above (the table's rows refuse through
/// require_structure_only_capability); any other code is an internal error naming it.
[[noreturn]] void refuse_structure_only(std::string_view code, std::string operation, std::string detail);

/// "file:line" of a source location (the user's line in value-escape refusals).
std::string where(const SourceLocation& loc);

/// An amendment request: a new status for a row, by an owner at a flip event, with evidence, and the claim
/// the requester believes the row holds.
struct Amendment {
  std::string key;
  std::string new_status;
  std::string owner;
  std::string flip_event;
  std::string evidence;
  std::string claim;
};

/// Checks an amendment against the table's rule: the owner must be the row's amend_owner, the flip event
/// the row's, evidence non-empty, the status inside the grammar, and the claim unchanged (no amendment
/// widens a claim; a bigger claim is a new row). Returns the amended row's status; invalid_argument
/// naming the broken rule otherwise. The in-code table itself is immutable.
Status check_amendment(const Amendment& amendment);

/// The table as docs/structure-only-capabilities.md holds it.
std::string render_capabilities_markdown();

}  // namespace pact::runtime
