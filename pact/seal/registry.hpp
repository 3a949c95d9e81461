#pragma once
/// The closed artifact-provider registry (SPEC §11, seed 002 "Registered provider"): an immutable table
/// with exactly one provider. There is no registration API; a provider id selects data-only policy, never
/// a compiler, loader or launcher callback. Unknown providers, unregistered build features and targets
/// that do not admit both the provider's AOT feature and its rebuild feature are rejected before anything
/// is evaluated. The registry snapshot (canonical JSON) and its digest are part of a catalog's identity.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/json.hpp"

namespace pact::seal {

struct ArtifactProvider {
  std::string_view id;               ///< nvcc.cubin.v1
  std::string_view artifact_kind;    ///< cuda_cubin
  std::string_view binding_abi;      ///< cuda_driver_params.v1
  std::string_view build_phase;      ///< sandboxed_prebuild_only
  std::string_view load_phase;       ///< runtime_worker_only
  std::string_view patcher;          ///< pact.build-nvcc-cubin.v1
  std::string_view rebuild_feature;  ///< rebuild:nvcc_cubin
  std::string_view publication_dir;  ///< nvcc_cubin
  std::string_view qualification;    ///< authoritative
  bool crownable = true;
  std::span<const std::string_view> profile_inputs;  ///< the only values a factory may receive (macros)

  /// "aot:<id>": the feature a target must admit to run this provider's artifacts.
  std::string aot_feature() const;
};

/// The registry: exactly one provider.
std::span<const ArtifactProvider> provider_registry() noexcept;

/// The provider with this id; unsupported (naming the id and the registered ones) otherwise.
const ArtifactProvider& require_provider(std::string_view id);

/// Checks a target's declared build features: every feature must be registered (an aot: or rebuild:
/// feature of a registered provider), and the target must admit both features of `provider`. Typed
/// errors (unsupported) name the offending feature.
void admit_target(std::string_view provider, std::span<const std::string> features);

/// Checks an export's profile inputs: each from the provider's allowlist, none twice.
void require_profile_inputs(const ArtifactProvider& provider, std::span<const std::string> inputs);

/// The registry as canonical-JSON-ready data ({"schema": "pact.artifact-provider-registry.v1", ...}).
Json registry_snapshot();
/// SHA-256 (domain pact.artifact-provider-registry.v1) of the snapshot's canonical JSON.
std::string registry_digest();

}  // namespace pact::seal
