#pragma once
/// The sealed-artifact manifest (SPEC §11, seed 002 "Manifest execution model", "Complete device ABI",
/// "Artifact-owned storage and lifecycle"), parsed from TOML with every bound of the seed:
///
///   [[ops]]                          name, entry (compatibility only: required, never executed, not identity)
///   [[ops.aot_exports]]              provider, name, factory, profile_inputs, bindings (<= 64), role
///                                    (init|prepare|reset|run|destroy), plan, step, specializes, prelaunch,
///                                    device_plan (schema pact.device-launch-plan.v1: sorted unique kernels
///                                    (<= 1,024) with exact parameter byte widths; contiguous launches (<= 256)
///                                    with kernel, grid, block, optional cluster, dynamic shared memory,
///                                    ordered parameters, stream, allow-listed attributes)
///   [[ops.artifact_resources]]       name (workspace.* call | prepared.* prepared | state.* engine), dtype,
///                                    power-of-two alignment (<= 1 MiB), shape (rank 1-16, each dimension
///                                    ceil(product(factors) / divisor) with bounded factors), scope
///                                    (rank_local | group_ipc, the latter only for prepared/state)
///
/// Resource ceilings: 32 resources, 64 GiB per buffer and 128 GiB in all at their bounds. Lifecycle rules:
/// no workspace in init or destroy; a prepared resource is produced by a prepare export and consumed by
/// a run export; one destroy export does not mix lifetime/scope classes. Derived capability requirements
/// are recomputed on parse and must reproduce exactly on reopen. Every fault is pact::Error naming the
/// field path.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/dtype.hpp"
#include "pact/core/error.hpp"
#include "pact/core/json.hpp"
#include "pact/seal/params.hpp"
#include "pact/seal/specialize.hpp"

namespace pact::seal {

inline constexpr std::size_t kMaxKernels = 1024;
inline constexpr std::size_t kMaxLaunches = 256;
inline constexpr std::size_t kMaxBindings = 64;
inline constexpr std::size_t kMaxResources = 32;
inline constexpr std::uint64_t kMaxAlignment = std::uint64_t{1} << 20;
inline constexpr std::uint64_t kMaxBufferBytes = std::uint64_t{64} << 30;
inline constexpr std::uint64_t kMaxAggregateBytes = std::uint64_t{128} << 30;
inline constexpr std::int64_t kMaxDynamicSharedMemory = std::int64_t{1} << 20;
inline constexpr std::string_view kDevicePlanSchema = "pact.device-launch-plan.v1";

enum class Role : std::uint8_t { init, prepare, reset, run, destroy };
std::string_view role_name(Role r) noexcept;

struct KernelContract {
  std::string name;
  std::vector<std::uint32_t> param_widths;
};
struct Launch {
  std::string kernel;
  std::vector<Expr> grid, block;  ///< three each
  std::optional<std::vector<Expr>> cluster;
  Expr dynamic_smem;
  std::vector<ParamSpec> params;
  std::string stream;  ///< "default" or a binding
  std::vector<std::string> attributes;
};
struct DevicePlan {
  std::vector<KernelContract> kernels;
  std::vector<Launch> launches;
};
struct Prelaunch {
  std::string target;  ///< an export binding or artifact resource
  std::int64_t value;  ///< the fill byte pattern value (0..255)
};
struct AotExport {
  std::string provider, name, factory;
  std::vector<std::string> profile_inputs;
  std::vector<std::string> bindings;
  Role role = Role::run;
  std::string plan;
  std::int64_t step = 0;
  std::vector<Predicate> specializes;
  std::vector<Prelaunch> prelaunch;
  DevicePlan device_plan;
};

enum class Lifetime : std::uint8_t { call, prepared, engine };
enum class Scope : std::uint8_t { rank_local, group_ipc };
/// One factor of a resource dimension: a positive constant, or a bounded projection.
struct ShapeFactor {
  std::int64_t constant = 0;  ///< > 0 for a constant
  std::string tensor;         ///< a tensor's dimension ...
  std::int64_t dim = 0;
  std::string scalar;    ///< ... or an admitted integer scalar
  std::int64_t max = 0;  ///< the projection's bound
};
struct ResourceDim {
  std::vector<ShapeFactor> factors;
  std::int64_t divisor = 1;
};
struct ArtifactResource {
  std::string name;
  DType dtype;
  std::uint64_t alignment;
  std::vector<ResourceDim> shape;
  Lifetime lifetime;
  Scope scope = Scope::rank_local;
  std::uint64_t max_bytes = 0;  ///< at the factors' bounds
};
struct ManifestOp {
  std::string name, entry;
  std::vector<AotExport> exports;
  std::vector<ArtifactResource> resources;
};
struct Manifest {  // NOLINT(bugprone-exception-escape): a false positive of its implicit moves (clang-tidy 14)
  std::vector<ManifestOp> ops;
  /// Derived when parsed: sorted provider capability requirements and specialization requirements.
  Json capability_requirements;
};

/// The tensor bindings of export `e` of `op`: its bindings less the op's artifact resources (the runtime
/// allocates those) and the streams its launches run on. What a plan binds Pact tensors to
/// (pact/seal/sealed_kernels.hpp), and what a launch over Pact tensors must be given, each exactly once.
std::set<std::string, std::less<>> tensor_bindings(const ManifestOp& op, const AotExport& e);

/// A resource's size in bytes when each projected factor takes value(factor) (a constant factor is
/// itself): per dimension ceil(product(factors) / divisor), times the dtype size. nullopt on 64-bit
/// overflow. The manifest sizes resources at their bounds with it; the runtime at the live call.
std::optional<std::uint64_t> resource_bytes(const ArtifactResource& r,
                                            const std::function<std::int64_t(const ShapeFactor&)>& value);

/// Parses and validates a manifest; parse_error / invalid_argument / unsupported naming the field path.
/// Export names are unique across the manifest and are 1-128 of [A-Za-z0-9_.-], not starting with '.'
/// (they name publication files).
Manifest parse_manifest(std::string_view toml_text, std::string_view where);

/// Every problem of a manifest at once (`pact seal scan`): each op header, resource and export is checked
/// on its own, and the checks across an op's exports run when all of them parsed. `manifest` is set only
/// when there is no problem; the first problem is what parse_manifest throws.
struct ManifestScan {  // NOLINT(bugprone-exception-escape): a false positive of its implicit moves (clang-tidy 14)
  std::optional<Manifest> manifest;
  /// When there are problems: every op, resource and export that parsed on its own (so later checks,
  /// such as the source closure, can still run over them).
  Manifest partial;
  std::vector<Error> problems;
};
ManifestScan scan_manifest(std::string_view toml_text, std::string_view where);

/// The capability requirements a manifest implies (recomputed from its content).
Json derive_capability_requirements(const Manifest& m);
/// Reopen check: the recorded requirements must equal the recomputed ones exactly.
void require_capability_requirements(const Manifest& m, const Json& recorded);

}  // namespace pact::seal

namespace pact::seal {

/// The canonical direct-execution declaration of a manifest (schema pact.direct-artifact-execution.v1):
/// every execution-bearing field — providers, factories, profile inputs, roles, plans, steps, ordered
/// bindings, specializations, prelaunch, derived capability requirements, complete device plans and the
/// resource plan — and deliberately not the compatibility entry. Expressions appear without whitespace;
/// exports and resources are ordered by their identity (TOML row order is not semantic), launches and
/// parameters keep their order (it is).
Json execution_declaration(const Manifest& m);
/// SHA-256 over the declaration's canonical JSON (domain pact.direct-artifact-execution.v1).
std::string execution_identity(const Manifest& m);

/// Most files a factory's source closure may hold.
inline constexpr std::size_t kMaxSources = 256;

/// One #include of a source, as the preprocessor's directive syntax reads it.
struct IncludeDirective {
  bool quoted = true;  ///< "path" (resolved from the including file) or <path> (the toolkit's directories)
  std::string path;
  std::size_t line = 0;
};

/// Every include directive of `body` (the source `where`), read the way translation phases 1-4 do: lines
/// spliced at backslash-newline, comments (outside string, character and raw string literals) replaced
/// by one space, so a directive may continue inside a block comment; a directive is `#` or the digraph
/// `%:` after optional white space, then include, include_next or import. An operand that is not a
/// literal "path" or <path> is invalid_argument naming the line: a macro-expanded include cannot be
/// checked before it runs. The prebuild also checks what the preprocessor itself opened (prebuild.cpp),
/// so this is the early, toolkit-free half of the check, never the only one.
std::vector<IncludeDirective> include_directives(const std::string& body, const std::string& where);

/// The transitive source closure of every factory: bundle-relative path -> bytes, following each quoted
/// include (include_directives) relative to the including file. A missing source, one that escapes the
/// bundle, a symlink, an absolute or climbing <...> include and a macro-expanded include are errors; so
/// is a closure of more than kMaxSources files.
std::map<std::string, std::string> source_closure(const Manifest& m, const std::string& bundle_dir);

/// The copy/provenance fingerprint: the declaration plus the normalized transitive source closure of
/// every factory (the CUDA source and each file it includes with #include "...", resolved inside
/// `bundle_dir`; comments and whitespace normalized away). Insensitive to formatting and TOML row order;
/// a missing, escaping or symlinked source is an error.
std::string provenance_fingerprint(const Manifest& m, const std::string& bundle_dir);

}  // namespace pact::seal
