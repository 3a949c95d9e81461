#include "pact/core/cuda_probe.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace pact {

const CudaProbe& probe_cuda() {
  static const CudaProbe probe = [] {
    CudaProbe p;
    // unsafe boundary: the driver is a C library reached through dlsym'd entry points (cuda.h's
    // CUresult cuInit(unsigned) and cuDeviceGetCount(int*); 0 is CUDA_SUCCESS).
    p.library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (p.library == nullptr) {
      const char* why = ::dlerror();
      p.summary = fmt::format("no CUDA driver (dlopen(libcuda.so.1): {})", why != nullptr ? why : "unknown");
      return p;
    }
    using Init = int (*)(unsigned);
    using Count = int (*)(int*);
    const auto init = reinterpret_cast<Init>(::dlsym(p.library, "cuInit"));
    const auto count = reinterpret_cast<Count>(::dlsym(p.library, "cuDeviceGetCount"));
    if (init == nullptr || count == nullptr) {
      p.summary = "a CUDA driver without cuInit or cuDeviceGetCount";
      return p;
    }
    if (const int rc = init(0); rc != 0) {
      p.summary = fmt::format("a CUDA driver whose cuInit failed (CUresult {}): no usable device", rc);
      return p;
    }
    int devices = 0;
    if (count(&devices) != 0) devices = 0;
    p.devices = devices;
    p.summary = fmt::format("a CUDA driver reporting {} device(s)", devices);
    return p;
  }();
  return probe;
}

}  // namespace pact
