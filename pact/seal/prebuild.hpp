#pragma once
/// The hermetic prebuild (SPEC §11, seed 002 "Hermetic prebuild"): `pact seal build BUNDLE -o OUT`.
///
/// A bundle is a directory with manifest.toml and the CUDA sources its exports name as factories. The
/// compile profile comes from outside the bundle (a trusted measurement, never the candidate's). For each
/// export the validator-owned patcher (pact.build-nvcc-cubin.v1) runs nvcc in the sandbox
/// (pact/seal/sandbox.hpp) with the options it forces — -cubin, -arch=<the profile's compiler
/// architecture>, -rdc=false, no -G, the host compiler by absolute path — over a read-only copy of
/// the export's source closure only; the source receives exactly its declared profile inputs as macros
/// (profile_input_macro), with the profile's measured values. The sandbox's output must then hold
/// exactly one CUBIN per export and nothing else (no PTX, no host object); each must be a CUDA ELF whose
/// kernels' parameter widths equal the device plan. Only then is the publication written (index.json
/// and nvcc_cubin/, see publication.hpp) and reopened as a check.
///
/// The toolkit identity in the index: nvcc's and the host compiler's paths and SHA-256, and nvcc's
/// release line (read by running `nvcc --version` in the same sandbox).

#include <optional>
#include <string>

#include "pact/core/json.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/profile.hpp"
#include "pact/seal/sandbox.hpp"

namespace pact::seal {

struct Toolkit {
  std::string nvcc;           ///< absolute path
  std::string host_compiler;  ///< absolute path (nvcc's -ccbin)
};

/// nvcc from PATH or /usr/local/cuda/bin, and g++ from PATH or /usr/bin; nullopt when either is absent.
std::optional<Toolkit> find_toolkit();

/// One message per declared profile input the profile does not measure ("export 'x' declares profile
/// input 'y', which the compile profile does not measure"); empty when every input is measured.
std::vector<std::string> unmeasured_profile_inputs(const Manifest& m, const CompileProfile& profile);

/// The prerequisites of a make rule as the preprocessor writes it (-M -MF): continuations joined, `\ ` an
/// escaped space, `$$` a dollar; everything after the first target's colon. invalid_argument naming
/// `where` when there is no rule.
std::vector<std::string> make_prerequisites(const std::string& rule, const std::string& where);

/// "max_active_clusters.cluster_size_2" -> "PACT_PROFILE_MAX_ACTIVE_CLUSTERS_CLUSTER_SIZE_2".
std::string profile_input_macro(std::string_view input);

struct BuildOptions {
  std::optional<Toolkit> toolkit;  ///< find_toolkit() when empty
  SandboxLimits limits;
};

/// Builds and publishes BUNDLE into OUT (absent or empty) under `profile`. Typed errors: the manifest's,
/// the profile's, invalid_argument for a profile that lacks a declared input's measurement or a
/// provider mismatch, unsupported when there is no toolkit or no sandbox, invalid_argument when nvcc
/// fails or the output is not exactly the expected CUBINs. Returns the publication index.
Json build_publication(const std::string& bundle_dir, const CompileProfile& profile, const std::string& out_dir,
                       const BuildOptions& options = {});

}  // namespace pact::seal
