#include "pact/seal/registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace pact::seal {

namespace {

constexpr std::string_view kRegistrySchema = "pact.artifact-provider-registry.v1";

constexpr std::string_view kNvccProfileInputs[] = {
    "max_active_clusters.cluster_size_1", "max_active_clusters.cluster_size_2",  "max_active_clusters.cluster_size_4",
    "max_active_clusters.cluster_size_8", "max_active_clusters.cluster_size_16",
};

const ArtifactProvider kProviders[] = {{
    "nvcc.cubin.v1",
    "cuda_cubin",
    "cuda_driver_params.v1",
    "sandboxed_prebuild_only",
    "runtime_worker_only",
    "pact.build-nvcc-cubin.v1",
    "rebuild:nvcc_cubin",
    "nvcc_cubin",
    "authoritative",
    true,
    kNvccProfileInputs,
}};

std::string registered_ids() {
  std::string s;
  for (const auto& p : kProviders) s += (s.empty() ? "" : ", ") + std::string(p.id);
  return s;
}

}  // namespace

std::string ArtifactProvider::aot_feature() const { return "aot:" + std::string(id); }

std::span<const ArtifactProvider> provider_registry() noexcept { return kProviders; }

const ArtifactProvider& require_provider(std::string_view id) {
  for (const auto& p : kProviders) {
    if (p.id == id) {
      if (p.qualification != "authoritative" || !p.crownable) {
        throw_error(ErrorCode::unsupported, "seal.provider",
                    fmt::format("provider '{}' is not authoritative and crownable", id));
      }
      return p;
    }
  }
  throw_error(
      ErrorCode::unsupported, "seal.provider",
      fmt::format("unknown artifact provider '{}' (registered: {}); a bundle cannot add one", id, registered_ids()));
}

void admit_target(std::string_view provider, std::span<const std::string> features) {
  const ArtifactProvider& p = require_provider(provider);
  for (const auto& f : features) {
    const bool known = std::any_of(std::begin(kProviders), std::end(kProviders), [&](const ArtifactProvider& q) {
      return f == q.aot_feature() || f == q.rebuild_feature;
    });
    if (!known)
      throw_error(ErrorCode::unsupported, "seal.target", fmt::format("build feature '{}' is not registered", f));
  }
  for (const std::string& need : {p.aot_feature(), std::string(p.rebuild_feature)}) {
    if (std::find(features.begin(), features.end(), need) == features.end()) {
      throw_error(ErrorCode::unsupported, "seal.target",
                  fmt::format("the target does not admit '{}' (provider {} needs it)", need, p.id));
    }
  }
}

void require_profile_inputs(const ArtifactProvider& provider, std::span<const std::string> inputs) {
  std::set<std::string> seen;
  for (const auto& in : inputs) {
    if (std::find(provider.profile_inputs.begin(), provider.profile_inputs.end(), in) ==
        provider.profile_inputs.end()) {
      throw_error(ErrorCode::invalid_argument, "seal.profile_inputs",
                  fmt::format("profile input '{}' is not on provider {}'s allowlist", in, provider.id));
    }
    if (!seen.insert(in).second)
      throw_error(ErrorCode::invalid_argument, "seal.profile_inputs",
                  fmt::format("profile input '{}' appears twice", in));
  }
}

Json registry_snapshot() {
  Json providers = Json::array();
  for (const auto& p : kProviders) {
    Json inputs = Json::array();
    for (auto in : p.profile_inputs) inputs.push_back(std::string(in));
    providers.push_back({{"id", std::string(p.id)},
                         {"artifact_kind", std::string(p.artifact_kind)},
                         {"binding_abi", std::string(p.binding_abi)},
                         {"build_phase", std::string(p.build_phase)},
                         {"load_phase", std::string(p.load_phase)},
                         {"patcher", std::string(p.patcher)},
                         {"rebuild_feature", std::string(p.rebuild_feature)},
                         {"aot_feature", p.aot_feature()},
                         {"publication_dir", std::string(p.publication_dir)},
                         {"qualification", std::string(p.qualification)},
                         {"crownable", p.crownable},
                         {"profile_inputs", inputs}});
  }
  return {{"schema", std::string(kRegistrySchema)}, {"providers", providers}};
}

std::string registry_digest() { return digest_json(kRegistrySchema, registry_snapshot()); }

}  // namespace pact::seal
