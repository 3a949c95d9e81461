#pragma once
/// The CUDA driver, reached at run time: dlopen of libcuda.so.1 (pact/core/cuda_probe.hpp), so every Pact
/// binary starts without it, and a table of the entry points Pact calls, with cuda.h's ABI declared here
/// (tests/seal/cuda_abi_test.cpp holds the declarations to cuda.h where the toolkit is installed). The CUDA
/// provider (pact/core/cuda_device.hpp), the CUDA kernels and the sealed-artifact runtime all call through
/// this one table; tests substitute a fake table to exercise admission without a GPU.

#include <cstddef>
#include <cstdint>
#include <string>

namespace pact {

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
  // The CUDA provider's and the CUDA kernels' entry points (pact/core/cuda_device.hpp).
  Result (*driver_get_version)(int* version) = nullptr;                                // cuDriverGetVersion
  Result (*device_get_attribute)(int* value, int attribute, int device) = nullptr;     // cuDeviceGetAttribute
  Result (*device_get_name)(char* name, int length, int device) = nullptr;             // cuDeviceGetName
  Result (*device_total_mem)(std::size_t* bytes, int device) = nullptr;                // cuDeviceTotalMem_v2
  Result (*device_get_default_mem_pool)(void** pool, int device) = nullptr;            // cuDeviceGetDefaultMemPool
  Result (*mem_pool_set_attribute)(void* pool, int attribute, void* value) = nullptr;  // cuMemPoolSetAttribute
  Result (*stream_create)(void** stream, unsigned flags) = nullptr;                    // cuStreamCreate
  Result (*stream_destroy)(void* stream) = nullptr;                                    // cuStreamDestroy_v2
  Result (*mem_alloc_async)(std::uint64_t* pointer, std::size_t bytes, void* stream) = nullptr;  // cuMemAllocAsync
  Result (*mem_free_async)(std::uint64_t pointer, void* stream) = nullptr;                       // cuMemFreeAsync
  Result (*memcpy_htod_async)(std::uint64_t dst, const void* src, std::size_t bytes,
                              void* stream) = nullptr;  // cuMemcpyHtoDAsync_v2
  Result (*memcpy_dtoh_async)(void* dst, std::uint64_t src, std::size_t bytes,
                              void* stream) = nullptr;  // cuMemcpyDtoHAsync_v2
  Result (*memcpy_dtod_async)(std::uint64_t dst, std::uint64_t src, std::size_t bytes,
                              void* stream) = nullptr;  // cuMemcpyDtoDAsync_v2
  Result (*memset_d8_async)(std::uint64_t dst, unsigned char value, std::size_t n,
                            void* stream) = nullptr;                                         // cuMemsetD8Async
  Result (*event_create)(void** event, unsigned flags) = nullptr;                            // cuEventCreate
  Result (*event_record)(void* event, void* stream) = nullptr;                               // cuEventRecord
  Result (*event_query)(void* event) = nullptr;                                              // cuEventQuery
  Result (*event_synchronize)(void* event) = nullptr;                                        // cuEventSynchronize
  Result (*event_elapsed_time)(float* ms, void* start, void* end) = nullptr;                 // cuEventElapsedTime_v2
  Result (*event_destroy)(void* event) = nullptr;                                            // cuEventDestroy_v2
  Result (*module_get_function)(void** function, void* module, const char* name) = nullptr;  // cuModuleGetFunction
  Result (*func_set_attribute)(void* function, int attribute, int value) = nullptr;          // cuFuncSetAttribute
  Result (*launch_kernel)(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                          unsigned block_y, unsigned block_z, unsigned shared_mem_bytes, void* stream, void** params,
                          void** extra) = nullptr;                       // cuLaunchKernel
  Result (*get_error_name)(Result result, const char** name) = nullptr;  // cuGetErrorName
};

/// The process's driver, loaded once with dlopen("libcuda.so.1"). no_device (naming dlerror or the
/// missing symbol) when the library or a needed entry point is absent.
const CudaDriver& load_cuda_driver();

/// cuda.h's name of a CUresult ("CUDA_ERROR_OUT_OF_MEMORY"), or "CUresult N" when the driver cannot say.
std::string cuda_result_name(const CudaDriver& driver, int result);

// cuda.h's enumerators the provider uses.
inline constexpr int kCuDeviceAttributeMultiprocessorCount = 16;
inline constexpr int kCuDeviceAttributeComputeCapabilityMajor = 75;
inline constexpr int kCuDeviceAttributeComputeCapabilityMinor = 76;
inline constexpr int kCuMempoolAttrReleaseThreshold = 4;
inline constexpr unsigned kCuStreamNonBlocking = 1;
inline constexpr unsigned kCuEventDefault = 0;
inline constexpr int kCuFuncAttributeMaxDynamicSharedSizeBytes = 8;
inline constexpr int kCudaErrorNotReady = 600;
inline constexpr int kCudaErrorOutOfMemory = 2;

}  // namespace pact
