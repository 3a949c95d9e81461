#pragma once
/// Execution evidence and the artifact storage budget (SPEC §11, seed 002 "Runtime selection and
/// evidence", "Artifact-owned storage and lifecycle").
///
/// Evidence has three receipts per artifact: aot_loaded (reopened, admitted and bound), aot_invoked (its
/// entry returned successfully at least once) and completed. An invocation without a load is invalid and
/// refused when recorded; a loaded artifact that never ran does not qualify; any fallback receipt (work
/// that ran on something other than the sealed artifact) fails the completion gate. Evidence for one
/// artifact never counts for another: receipts are keyed by the artifact's execution identity.
///
/// Artifact storage follows the runtime's live budget: at most 16 GiB live and 4,096 allocation keys;
/// an allocation past either is refused, typed, before anything is allocated.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pact/core/json.hpp"

namespace pact::seal {

inline constexpr std::uint64_t kLiveStorageBudget = std::uint64_t{16} << 30;
inline constexpr std::size_t kMaxAllocationKeys = 4096;

class EvidenceLog {
 public:
  /// The artifact was reopened, admitted and bound.
  void loaded(const std::string& artifact);
  /// Its entry returned successfully; invalid_argument when it was never loaded.
  void invoked(const std::string& artifact);
  /// Its work completed; invalid_argument when it was never invoked.
  void completed(const std::string& artifact);
  /// Work for `slot` ran on a fallback instead of a sealed artifact.
  void fallback(const std::string& slot);

  /// Whether the artifact has an aot_loaded receipt.
  bool is_loaded(const std::string& artifact) const { return loads_.count(artifact) != 0; }

  struct Verdict {
    bool passed = false;
    std::vector<std::string> reasons;  ///< empty when passed
  };
  /// The completion gate over the artifacts a deployment requires: each loaded, invoked and completed,
  /// and no fallback receipt at all.
  Verdict gate(const std::vector<std::string>& required) const;
  /// The receipts as JSON (schema pact.seal-evidence.v1).
  Json to_json() const;

 private:
  std::map<std::string, std::uint64_t> loads_, invocations_, completions_;
  std::vector<std::string> fallbacks_;
};

/// Live artifact storage under the budget. Keys are admitted resource keys (e.g. "op/state.cache").
class StorageBudget {
 public:
  /// Reserves `bytes` under `key`; invalid_argument when the key is live, allocation_failed when the
  /// live total would pass 16 GiB or the key count 4,096.
  void reserve(const std::string& key, std::uint64_t bytes);
  /// Releases a live key; invalid_argument when it is not live.
  void release(const std::string& key);
  std::uint64_t live_bytes() const noexcept { return live_; }
  std::size_t live_keys() const noexcept { return keys_.size(); }

 private:
  std::map<std::string, std::uint64_t> keys_;
  std::uint64_t live_ = 0;
};

}  // namespace pact::seal
