#include "pact/core/cuda_driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <type_traits>

#include "pact/core/cuda_probe.hpp"
#include "pact/core/error.hpp"

namespace pact {

const CudaDriver& load_cuda_driver() {
  static std::once_flag once;
  static CudaDriver driver;
  static std::string failure;
  std::call_once(once, [] {
    void* lib = probe_cuda().library;  // the one load of the driver (pact/core/cuda_probe.hpp)
    if (lib == nullptr) {
      failure = probe_cuda().summary;
      return;
    }
    auto bind = [&](auto& slot, const char* name) {
      void* sym = ::dlsym(lib, name);
      if (sym == nullptr && failure.empty())
        failure = fmt::format("the CUDA driver lacks {} (a driver for CUDA 12.4 or newer is needed)", name);
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(sym);
    };
    bind(driver.init, "cuInit");
    bind(driver.device_get_count, "cuDeviceGetCount");
    bind(driver.device_get, "cuDeviceGet");
    bind(driver.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    bind(driver.primary_ctx_release, "cuDevicePrimaryCtxRelease_v2");
    bind(driver.ctx_set_current, "cuCtxSetCurrent");
    bind(driver.module_load_data, "cuModuleLoadData");
    bind(driver.module_unload, "cuModuleUnload");
    bind(driver.module_get_function_count, "cuModuleGetFunctionCount");
    bind(driver.module_enumerate_functions, "cuModuleEnumerateFunctions");
    bind(driver.func_get_name, "cuFuncGetName");
    bind(driver.func_get_param_info, "cuFuncGetParamInfo");
    bind(driver.launch_kernel_ex, "cuLaunchKernelEx");
    bind(driver.stream_synchronize, "cuStreamSynchronize");
    bind(driver.mem_alloc, "cuMemAlloc_v2");
    bind(driver.mem_free, "cuMemFree_v2");
    bind(driver.memcpy_htod, "cuMemcpyHtoD_v2");
    bind(driver.memcpy_dtoh, "cuMemcpyDtoH_v2");
    bind(driver.memset_d8, "cuMemsetD8_v2");
    bind(driver.tensor_map_encode_tiled, "cuTensorMapEncodeTiled");
    bind(driver.driver_get_version, "cuDriverGetVersion");
    bind(driver.device_get_attribute, "cuDeviceGetAttribute");
    bind(driver.device_get_name, "cuDeviceGetName");
    bind(driver.device_total_mem, "cuDeviceTotalMem_v2");
    bind(driver.device_get_default_mem_pool, "cuDeviceGetDefaultMemPool");
    bind(driver.mem_pool_set_attribute, "cuMemPoolSetAttribute");
    bind(driver.stream_create, "cuStreamCreate");
    bind(driver.stream_destroy, "cuStreamDestroy_v2");
    bind(driver.mem_alloc_async, "cuMemAllocAsync");
    bind(driver.mem_free_async, "cuMemFreeAsync");
    bind(driver.memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
    bind(driver.memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
    bind(driver.memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
    bind(driver.memset_d8_async, "cuMemsetD8Async");
    bind(driver.event_create, "cuEventCreate");
    bind(driver.event_record, "cuEventRecord");
    bind(driver.event_query, "cuEventQuery");
    bind(driver.event_synchronize, "cuEventSynchronize");
    bind(driver.event_elapsed_time, "cuEventElapsedTime_v2");
    bind(driver.event_destroy, "cuEventDestroy_v2");
    bind(driver.module_get_function, "cuModuleGetFunction");
    bind(driver.func_set_attribute, "cuFuncSetAttribute");
    bind(driver.launch_kernel, "cuLaunchKernel");
    bind(driver.get_error_name, "cuGetErrorName");
  });
  if (!failure.empty()) throw_error(ErrorCode::no_device, "cuda.driver", failure);
  return driver;
}

std::string cuda_result_name(const CudaDriver& driver, int result) {
  const char* name = nullptr;
  if (driver.get_error_name != nullptr && driver.get_error_name(result, &name) == kCudaSuccess && name != nullptr)
    return name;
  return fmt::format("CUresult {}", result);
}

}  // namespace pact
