#pragma once
/// Sealed publication and its GPU-free reopen (SPEC §11, seed 002 "Sealed publication", "Complete device
/// ABI"). A publication is a directory holding exactly index.json and one CUBIN per export under
/// nvcc_cubin/. The index (schema pact.seal-publication.v1) binds the provider, binding ABI, patcher and
/// registry digest, the compile profile (in full) with its digest and architectures, the manifest's
/// direct-execution declaration (every export) with its execution identity, the toolkit identity and
/// forced options, and every CUBIN's path, size and SHA-256.
///
/// Reopen checks, failing closed with a typed error: the directory inventory (no extra or missing file,
/// no symlink, no path escape), the index against the manifest, profile and registry, each file's size
/// and SHA-256, the CUDA ELF header, and — as an extra GPU-free check — each kernel's parameter widths
/// read from the CUBIN's own .nv.info metadata (EIATTR_KPARAM_INFO), compared per ordinal with the device
/// plan's kernel contracts. Kernels are bound by ordinal (the order of their .nv.info sections) and width
/// vector, never by symbol name. Reopen never compiles a missing artifact or repairs an index.

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pact/core/json.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/profile.hpp"

namespace pact::seal {

inline constexpr std::string_view kPublicationSchema = "pact.seal-publication.v1";

/// One kernel of a CUBIN: its symbol (the extern "C" name it binds by) and parameter widths by ordinal.
struct CubinKernel {
  std::string symbol;
  std::vector<std::uint32_t> param_widths;
};

/// Checks the CUDA ELF header (ELF64, little-endian, machine EM_CUDA) and reads every kernel's parameter
/// widths; parse_error naming `where` and the offending structure for anything malformed or truncated.
std::vector<CubinKernel> read_cubin_kernels(std::span<const std::byte> bytes, std::string_view where);

/// Binds a device plan's kernels to a module's kernels by their extern "C" name (this replaces SPEC §11's
/// ordinal rule: a CUBIN's kernel order is the compiler's, not the plan's). Returns, per plan kernel, the
/// index of its physical kernel. invalid_argument naming `where` for a plan kernel the module lacks, a
/// parameter-width mismatch, a duplicate name or a module kernel the plan does not declare.
std::vector<std::size_t> bind_kernels_by_name(std::span<const KernelContract> plan,
                                              std::span<const CubinKernel> physical, std::string_view where);

/// Writes a publication into the empty or absent directory `dir`: nvcc_cubin/<export>.cubin for each
/// export's CUBIN (keyed by export name) and index.json. Returns the index.
Json write_publication(const std::string& dir, const Manifest& m, const CompileProfile& profile,
                       const std::map<std::string, std::vector<std::byte>>& cubins, const Json& toolkit);

/// A publication index, checked on its own: exact keys, a registered provider, a valid embedded compile
/// profile, every bound field equal to what the embedded declaration, profile and this registry give
/// (execution identity and profile digest recomputed), and exactly one well-formed entry per declared
/// export at the provider's path. Typed errors (invalid_argument, unsupported) name `where`.
struct PublicationIndex {  // NOLINT(bugprone-exception-escape): nlohmann::json's noexcept move is reported through its
                           // assertions
  Json index;
  CompileProfile profile;
  std::map<std::string, std::vector<KernelContract>> kernels;  ///< export -> its device plan's kernels
};
PublicationIndex parse_publication_index(std::string_view text, std::string_view where);

/// GPU-free reopen of a publication on its own (`pact seal verify OUT`): the index must be exactly what
/// its embedded declaration and compile profile give under this registry (identity and profile digests
/// recomputed), and the inventory, sizes, SHA-256, ELF headers and per-ordinal parameter widths must
/// match the declaration's device plans. Returns the verified index.
Json reopen_publication(const std::string& dir);
/// The same, and the index must bind exactly this manifest's declaration and this profile (the runtime's
/// reopen: exact declaration equality).
Json reopen_publication(const std::string& dir, const Manifest& m, const CompileProfile& profile);

}  // namespace pact::seal
