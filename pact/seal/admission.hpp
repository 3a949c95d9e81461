#pragma once
/// Runtime admission and launch of sealed artifacts on a CUDA machine (SPEC §11, seed 002 "Complete
/// device ABI", "Validator-owned materialization", "Runtime selection and evidence").
///
/// The CUDA driver is loaded at run time (dlopen of libcuda.so.1), so every Pact binary starts without
/// it; CudaDriver is the table of driver entry points admission uses, with cuda.h's ABI declared here.
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
#include "pact/seal/evidence.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/profile.hpp"

namespace pact::seal {

/// cuda.h's launch structures, declared with the same layout (checked against cuda.h where the toolkit
/// is installed: tests/seal/cuda_abi_test.cpp).
struct CuLaunchAttribute {
  std::uint32_t id;
  char pad[4];
  union {
    char bytes[64];
    std::int32_t scalar;  ///< cooperative, clusterSchedulingPolicyPreference, programmaticStreamSerializationAllowed
    struct {
      std::uint32_t x, y, z;
    } cluster_dim;
  } value;
};
struct CuLaunchConfig {
  std::uint32_t grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem_bytes;
  void* stream;
  CuLaunchAttribute* attrs;
  std::uint32_t num_attrs;
};
inline constexpr std::uint32_t kCuLaunchAttributeCooperative = 2;
inline constexpr std::uint32_t kCuLaunchAttributeClusterDimension = 4;
inline constexpr std::uint32_t kCuLaunchAttributeClusterSchedulingPolicyPreference = 5;
inline constexpr std::uint32_t kCuLaunchAttributeProgrammaticStreamSerialization = 6;
inline constexpr std::int32_t kCuClusterSchedulingPolicySpread = 1;
inline constexpr int kCudaSuccess = 0;
inline constexpr int kCudaErrorInvalidValue = 1;

/// The driver entry points admission and launch use (cuda.h names; the _v2 symbols where cuda.h maps
/// to them).
struct CudaDriver {
  using Result = int;
  Result (*init)(unsigned flags) = nullptr;                                      // cuInit
  Result (*device_get_count)(int* count) = nullptr;                              // cuDeviceGetCount
  Result (*device_get)(int* device, int ordinal) = nullptr;                      // cuDeviceGet
  Result (*primary_ctx_retain)(void** ctx, int device) = nullptr;                // cuDevicePrimaryCtxRetain
  Result (*primary_ctx_release)(int device) = nullptr;                           // cuDevicePrimaryCtxRelease_v2
  Result (*ctx_set_current)(void* ctx) = nullptr;                                // cuCtxSetCurrent
  Result (*module_load_data)(void** module, const void* image) = nullptr;        // cuModuleLoadData
  Result (*module_unload)(void* module) = nullptr;                               // cuModuleUnload
  Result (*module_get_function_count)(unsigned* count, void* module) = nullptr;  // cuModuleGetFunctionCount
  Result (*module_enumerate_functions)(void** functions, unsigned n,
                                       void* module) = nullptr;          // cuModuleEnumerateFunctions
  Result (*func_get_name)(const char** name, void* function) = nullptr;  // cuFuncGetName
  Result (*func_get_param_info)(void* function, std::size_t index, std::size_t* offset,
                                std::size_t* size) = nullptr;  // cuFuncGetParamInfo
  Result (*launch_kernel_ex)(const CuLaunchConfig* config, void* function, void** params,
                             void** extra) = nullptr;                                      // cuLaunchKernelEx
  Result (*stream_synchronize)(void* stream) = nullptr;                                    // cuStreamSynchronize
  Result (*mem_alloc)(std::uint64_t* pointer, std::size_t bytes) = nullptr;                // cuMemAlloc_v2
  Result (*mem_free)(std::uint64_t pointer) = nullptr;                                     // cuMemFree_v2
  Result (*memcpy_htod)(std::uint64_t dst, const void* src, std::size_t bytes) = nullptr;  // cuMemcpyHtoD_v2
  Result (*memcpy_dtoh)(void* dst, std::uint64_t src, std::size_t bytes) = nullptr;        // cuMemcpyDtoH_v2
  Result (*memset_d8)(std::uint64_t dst, unsigned char value, std::size_t n) = nullptr;    // cuMemsetD8_v2
  Result (*tensor_map_encode_tiled)(void* map, int dtype, std::uint32_t rank, void* address, const std::uint64_t* dims,
                                    const std::uint64_t* stride_bytes, const std::uint32_t* box,
                                    const std::uint32_t* element_strides, int interleave, int swizzle, int l2_promotion,
                                    int oob_fill) = nullptr;  // cuTensorMapEncodeTiled
};

/// cuda.h's CUtensorMapDataType for a TMA element type, and CUtensorMapSwizzle for a swizzle name.
int cu_tensor_map_dtype(std::string_view dtype);
int cu_tensor_map_swizzle(std::string_view swizzle);

/// The process's driver, loaded once with dlopen("libcuda.so.1"). no_device (naming dlerror or the
/// missing symbol) when the library or a needed entry point is absent.
const CudaDriver& load_cuda_driver();

/// What the driver observed for one admitted CUBIN.
struct DriverInventory {
  std::vector<std::string> names;                                        ///< physical, per ordinal
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> params;  ///< (offset, size) per ordinal
  std::string abi_digest;                                                ///< over names, offsets and sizes
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
  void poison(const std::string& what, int result);
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
