#pragma once
/// The compile profile (SPEC §11, seed 002 "Compile profile and architecture"): the hardware facts a
/// GPU-free prebuild compiles against, measured beforehand and written as canonical JSON. It binds the
/// provider, the logical and compiler architecture (one family), the visible GPU count, the TP/EP/DP
/// degrees, bounded provider constants (from the provider's profile-input allowlist) and the digests of
/// the image, platform, worker distribution, logical hardware, device policy, topology and constant
/// measurement. It is checked again at launch: an artifact built under another profile is not authority
/// for this launch.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/json.hpp"

namespace pact::seal {

inline constexpr std::string_view kCompileProfileSchema = "pact.nvcc-compile-profile.v1";
/// Largest value a provider constant may take.
inline constexpr std::int64_t kMaxProviderConstant = std::int64_t{1} << 20;

struct CompileProfile {
  std::string provider;       ///< nvcc.cubin.v1
  std::string logical_arch;   ///< e.g. sm90
  std::string compiler_arch;  ///< e.g. sm_90a (the same family as logical_arch)
  std::int64_t visible_gpus = 1;
  std::int64_t tp = 1, ep = 1, dp = 1;
  std::map<std::string, std::int64_t> constants;  ///< provider profile inputs -> measured values
  std::map<std::string, std::string> digests;     ///< image, platform, ... -> "sha256:<64 hex>"
};

/// The digest names every profile binds.
const std::vector<std::string_view>& compile_profile_digest_names();

/// Parses and validates a profile (exact keys, schema, registered provider, one architecture family,
/// bounded degrees and constants, well-formed digests); typed errors name the field.
CompileProfile parse_compile_profile(std::string_view text, std::string_view where);
/// The profile as JSON (the canonical form is canonical_json of this).
Json compile_profile_json(const CompileProfile& p);
/// digest_json(kCompileProfileSchema, ...).
std::string compile_profile_digest(const CompileProfile& p);
/// The options the patcher forces on nvcc for this profile: -cubin, -arch=<compiler_arch>, -rdc=false
/// (and never -G, -lineinfo or a PTX target). Recorded in every publication index.
std::vector<std::string> nvcc_forced_options(const CompileProfile& p);
/// Launch-time check: the profile an artifact was built under must equal the launch's exactly; a
/// mismatch is invalid_argument naming the first differing field.
void require_same_profile(const CompileProfile& built_under, const CompileProfile& launch);

}  // namespace pact::seal
