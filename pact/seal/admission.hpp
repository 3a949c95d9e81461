#pragma once
/// Runtime admission and launch of sealed artifacts on a CUDA machine (SPEC §11, seed 002 "Complete
/// device ABI", "Validator-owned materialization", "Runtime selection and evidence").
///
/// The CUDA driver is loaded at run time (dlopen of libcuda.so.1), so every Pact binary starts without
/// it; CudaDriver (pact/core/cuda_driver.hpp) is the table of driver entry points, with cuda.h's ABI.
/// Tests substitute a fake table to exercise every admission rule without a GPU.
///
/// SealedRuntime is one process's direct-artifact authority: it is bound to one publication (a second
/// admit of another authority is refused). admit() reopens the publication GPU-free against the manifest
/// and the launch's compile profile (exact declaration and profile equality), then for each export loads
/// the exact CUBIN bytes with cuModuleLoadData, observes the driver's full kernel inventory
/// (cuModuleEnumerateFunctions, cuFuncGetName, cuFuncGetParamInfo), derives the ABI digest (ordinal,
/// name, offsets, sizes) and binds each device-plan kernel to the driver's kernel of the same extern "C"
/// name with the same parameter widths (bind_kernels_by_name; the CUBIN's kernel order is the compiler's
/// and never decides a binding). A missing, extra or mismatched kernel unloads the module and rejects.
/// Admission records aot_loaded evidence per export.
///
/// launch() selects the op's unique most-specific export of a role for the live call (specialization),
/// binds artifact storage by lifetime, evaluates grid, block, optional cluster and dynamic shared memory
/// (at most 1 MiB), materializes the exact parameter frame of every launch (tensor maps encoded through
/// the driver), performs the prelaunch fills, and launches every launch of the device plan with
/// cuLaunchKernelEx on its declared stream (a handle the call binds, or the default stream).
/// synchronize() waits and records completion. A launch, synchronize or cleanup failure poisons the runtime: from then
/// on every call fails with ErrorCode::poisoned, nothing further is authorized, and nothing aborts.
///
/// A launch over Pact tensors (launch(op, SealedCall)) takes its call data from the tensors themselves, and
/// refuses before anything launches unless each tensor is what the plan admitted for its binding (dtype and
/// shape), lies in device storage, is contiguous, and every tensor binding of the export is given exactly
/// once. Reads and writes are distinct types (SealedRead, SealedWrite): a read is a shared device access, a
/// write an exclusive one, so the borrow rules refuse a write that aliases another operand. That launch
/// returns when its completion is proven (see Note [Sealed completion] in admission.cpp).
///
/// Every driver call is made with the runtime's context current on the calling thread (made current at each
/// entry point), so admission, launches and completion may come from any thread, a submission worker
/// included. Storage whose last use has no proven completion (a failed wait, a poisoned runtime) is
/// retained, never freed: a kernel may still be writing it.
///
/// An admitted export can be offered to the planner as a trustedExternal capsule (sealed_capsule): its
/// evidence is a trusted boundary naming the artifact's execution identity, so only an external profile
/// accepts it.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pact/contract/capsule.hpp"
#include "pact/contract/check.hpp"
#include "pact/core/cuda_driver.hpp"
#include "pact/core/tensor.hpp"
#include "pact/ops/op_table.hpp"
#include "pact/seal/evidence.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/profile.hpp"

namespace pact::seal {

/// cuda.h's CUtensorMapDataType for a TMA element type, and CUtensorMapSwizzle for a swizzle name.
int cu_tensor_map_dtype(std::string_view dtype);
int cu_tensor_map_swizzle(std::string_view swizzle);

/// What the driver observed for one admitted CUBIN.
struct DriverInventory {
  std::vector<std::string> names;                                        ///< physical, per ordinal
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> params;  ///< (offset, size) per ordinal
  std::string abi_digest;                                                ///< over names, offsets and sizes
};

/// A tensor a sealed launch reads (shared device access) and the type the plan admitted for its binding.
struct SealedRead {
  TensorView tensor;
  ops::TensorType admitted;
};
/// A tensor a sealed launch writes (exclusive device access) and the type the plan admitted for its binding.
struct SealedWrite {
  TensorViewMut tensor;
  ops::TensorType admitted;
};
/// The live call of a launch over Pact tensors: its tensors by binding name, and admitted integer scalars.
struct SealedCall {
  std::map<std::string, SealedRead, std::less<>> reads;
  std::map<std::string, SealedWrite, std::less<>> writes;
  std::map<std::string, std::int64_t, std::less<>> scalars;
};

class SealedRuntime {
 public:
  /// Initializes the driver and makes `device_ordinal`'s primary context current; no_device when the
  /// driver reports no such device.
  explicit SealedRuntime(const CudaDriver& driver, int device_ordinal = 0);
  /// Unloads every admitted module and releases the context; a failure there poisons (never throws).
  ~SealedRuntime();
  SealedRuntime(const SealedRuntime&) = delete;
  SealedRuntime& operator=(const SealedRuntime&) = delete;

  /// Reopens and admits the publication (see above). invalid_argument for any mismatch (the loaded
  /// module is unloaded first); invalid_argument when this runtime is already bound to another authority.
  void admit(const std::string& publication_dir, const Manifest& manifest, const CompileProfile& launch_profile);

  /// Launches op `op`'s export of `role` for the call (run: the unique most-specific variant; other
  /// roles: the unique export of that role for the call). `pointers` maps the export's semantic bindings
  /// to device addresses, and a launch's declared stream binding to its captured CUstream handle; a
  /// launch declaring stream "default" runs on the default stream. Artifact resources are allocated by
  /// the runtime under the storage budget and bound by name, following their lifetimes: workspace.*
  /// lives for one call (freed when the call completes), prepared.* must have been produced by a
  /// completed prepare before a run consumes it, state.* lives until a destroy export that binds it
  /// completes. The allow-listed launch attributes become CUDA launch attributes. Returns the export.
  std::string launch(const std::string& op, const CallData& call,
                     const std::map<std::string, std::uint64_t, std::less<>>& pointers, Role role = Role::run);
  /// Launches op `op`'s export of `role` over Pact tensors (see above) and waits for its completion.
  /// dtype_mismatch naming the binding when a tensor is not of the admitted dtype; provider_mismatch for a
  /// tensor outside device storage; invalid_argument for a shape other than the admitted one, a strided
  /// tensor, a binding missing, given twice or not the export's, or a launch on a declared stream (only the
  /// default stream is ordered against Pact's own here). Returns the export.
  std::string launch(const std::string& op, SealedCall call, Role role = Role::run);
  /// Waits for every stream the pending launches used; records their completion and applies the
  /// lifetimes above (workspace freed, prepared marked produced, destroyed storage freed).
  void synchronize();
  /// Live artifact storage keys ("<op>/<resource>"), and those a completed prepare produced.
  std::vector<std::string> live_resources() const;

  bool poisoned() const noexcept { return poisoned_; }
  const EvidenceLog& evidence() const noexcept { return evidence_; }
  /// The driver-observed inventory of an admitted export.
  const DriverInventory& inventory(const std::string& export_name) const;
  /// The evidence key of an export: "<execution identity>/<export>" (evidence never transfers).
  std::string artifact_key(const std::string& export_name) const;

 private:
  struct Admitted {
    const AotExport* declaration = nullptr;
    void* module = nullptr;
    std::vector<void*> functions;  ///< in device-plan order, each bound by name
    DriverInventory inventory;
  };
  void require_healthy() const;
  /// Makes this runtime's context current on the calling thread; no_device when the driver refuses.
  void make_current() const;
  void poison(const std::string& what, int result);
  /// The unique most-specific export of `role` of op `op_name` for the call; `op` is set to its op.
  const AotExport& select_export(const std::string& op_name, const CallData& call, Role role,
                                 const ManifestOp*& op) const;
  void release_all() noexcept;

  const CudaDriver& driver_;
  int device_ = 0;
  void* context_ = nullptr;
  bool poisoned_ = false;
  std::string authority_;  ///< the admitted execution identity
  std::optional<Manifest> manifest_;
  std::map<std::string, Admitted> exports_;
  struct Pending {
    std::string export_name;
    Role role;
    std::vector<std::pair<std::string, Lifetime>> resources;  ///< keys the launch bound
    std::set<void*> streams;                                  ///< the streams its launches ran on
  };
  void free_resource(const std::string& key);
  std::string submit(const AotExport& e, Admitted& a, const CallData& call,
                     const std::map<std::string, std::uint64_t, std::less<>>& bound, Pending pending);

  std::map<std::string, std::uint64_t> resources_;       ///< live artifact storage by key
  std::map<std::string, std::uint64_t> resource_bytes_;  ///< and its allocated size
  std::set<std::string> produced_;                       ///< prepared keys a completed prepare produced
  StorageBudget budget_;
  std::vector<Pending> pending_;  ///< launched, not yet completed
  EvidenceLog evidence_;
};

/// The capsule an admitted export offers the planner: op from the op table (the manifest op's name),
/// provider "sealed", device cuda, trust trustedExternal, every descriptor's evidence a trusted boundary
/// "sealed:<execution identity>/<export>". unsupported when the op is not in the op table.
contract::Capsule sealed_capsule(const ManifestOp& op, const AotExport& e, const std::string& execution_identity);

/// Resolves a sealed capsule's trusted boundary "sealed:<key>" only when `runtime` holds an aot_loaded
/// receipt for exactly that key (evidence for one artifact never counts for another); every other
/// descriptor goes to `base`.
class SealedEvidenceResolver final : public contract::EvidenceResolver {
 public:
  SealedEvidenceResolver(const SealedRuntime& runtime, const contract::EvidenceResolver& base)
      : runtime_(runtime), base_(base) {}
  contract::EvidenceStatus resolve(const contract::Capsule& capsule,
                                   const contract::ContractDescriptor& descriptor) const override;

 private:
  const SealedRuntime& runtime_;
  const contract::EvidenceResolver& base_;
};

}  // namespace pact::seal
