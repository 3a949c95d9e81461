#pragma once
/// Sealed kernels in plans (SPEC §11, issue 26 item 5): an admitted publication's run exports become
/// trustedExternal capsules of the provider "sealed" that a plan selects, and the handlers of that
/// provider (pact/kernels/sealed.hpp) launch them over Pact device tensors (SealedRuntime::launch with a
/// SealedCall).
///
/// A binding file (TOML, `schema = "pact.sealed-bindings.v1"`) says which op each export serves and how the
/// op's operands meet the export's tensor bindings; nothing is inferred from binding order or names. For
/// `pact run --sealed FILE` it also names the deployment, each path relative to the file:
///
///   schema = "pact.sealed-bindings.v1"
///   publication = "out"                 # the sealed publication (pact seal build -o)
///   manifest = "bundle/manifest.toml"   # the manifest it was built from
///   launch_profile = "h100.json"        # this machine's measured compile profile
///   [[bind]]
///   op = "add"              # an op of the op table, and of the manifest (its run exports serve it)
///   inputs = ["a", "b"]     # the export binding of each operand, in the op table's order
///   output = "out"          # the export binding of the result
///   dtype = "f32"           # the dtype of every operand and of the result: the only one the capsule accepts
///
/// An op with an index or mask operand cannot be bound (an entry has one dtype for all its tensors).
/// Every run export of the op must bind exactly the named tensors (the runtime picks among them by
/// specialization at each call); an op is bound at most once, at most 64 entries. Every fault is a typed
/// error naming the entry and field.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pact/contract/check.hpp"
#include "pact/kernels/sealed.hpp"
#include "pact/seal/admission.hpp"

namespace pact::seal {

inline constexpr std::string_view kSealedBindingsSchema = "pact.sealed-bindings.v1";
inline constexpr std::size_t kMaxSealedBindings = 64;

/// One op served by a publication's run exports.
struct SealedBinding {
  ops::OpTag op{};
  std::vector<std::string> inputs;  ///< the export binding of each operand, in order
  std::string output;               ///< the export binding of the result
  DType dtype = DType::f32;         ///< every operand's and the result's
};

/// Parses a binding file against the admitted manifest (see above): parse_error for syntax and schema
/// faults, invalid_argument or unsupported for a binding the manifest or the op table contradicts.
std::vector<SealedBinding> parse_sealed_bindings(std::string_view toml_text, std::string_view where,
                                                 const Manifest& manifest);

/// The deployment a binding file names (see above), as paths resolved against `base` (its directory).
/// parse_error when one of the three is missing.
struct SealedDeployment {
  std::string publication, manifest, launch_profile;
};
SealedDeployment parse_sealed_deployment(std::string_view toml_text, std::string_view where, const std::string& base);

class SealedKernels;
/// `pact run --sealed FILE`: reads and checks the binding file, its manifest and launch profile, then admits
/// the publication on device 0 of `driver` (the system's, load_cuda_driver(), when null) and returns its
/// kernels, results allocated in `device`. Every refusal is typed: the files' first (io_error, the parsers'),
/// then no_device without a driver or device, then admission's.
std::shared_ptr<SealedKernels> load_sealed_kernels(const std::string& binding_file, std::shared_ptr<Provider> device,
                                                   const CudaDriver* driver = nullptr);

/// The sealed kernels of one admitted publication: their capsule module, the profile that prefers them,
/// the evidence resolver that accepts their boundary only on the runtime's load receipt, and the launcher
/// their handlers call (install() makes it the process's).
class SealedKernels final : public kernels::SealedLauncher {
 public:
  /// `runtime` has admitted the publication `manifest` describes; `bindings` come from
  /// parse_sealed_bindings over it. Results are allocated in `device` (the CUDA provider; tests pass the
  /// fake device provider).
  SealedKernels(std::shared_ptr<SealedRuntime> runtime, const Manifest& manifest, std::vector<SealedBinding> bindings,
                std::shared_ptr<Provider> device);

  /// One capsule per bound op (sealed_capsule of its first run export, accepting the binding's dtype).
  const contract::CapsuleModule& module() const noexcept { return module_; }
  /// `base` with the sealed provider available on cuda and preferred to every other provider.
  contract::BackendProfile profile(contract::BackendProfile base) const;
  /// Resolves the capsules' boundaries on the runtime's receipts, everything else through `base`.
  SealedEvidenceResolver resolver(const contract::EvidenceResolver& base) const { return {*runtime_, base}; }
  const SealedRuntime& runtime() const noexcept { return *runtime_; }

  /// The forward of a bound op: allocates the result of the op table's type in the device provider and
  /// launches over the operands and the result. unsupported for an op that is not bound or a node with
  /// attributes (a sealed kernel takes none).
  Tensor forward(ops::OpTag op, std::span<const TensorView> inputs, const ops::Attributes& attrs) override;

 private:
  std::shared_ptr<SealedRuntime> runtime_;
  std::vector<SealedBinding> bindings_;
  std::shared_ptr<Provider> device_;
  contract::CapsuleModule module_;
};

/// Makes `kernels` the process's sealed launcher for as long as the returned guard lives (the one it
/// replaced comes back after).
class InstalledSealedKernels {
 public:
  explicit InstalledSealedKernels(std::shared_ptr<SealedKernels> kernels)
      : previous_(kernels::install_sealed_launcher(std::move(kernels))) {}
  ~InstalledSealedKernels() { kernels::install_sealed_launcher(std::move(previous_)); }
  InstalledSealedKernels(const InstalledSealedKernels&) = delete;
  InstalledSealedKernels& operator=(const InstalledSealedKernels&) = delete;

 private:
  std::shared_ptr<kernels::SealedLauncher> previous_;
};

}  // namespace pact::seal
