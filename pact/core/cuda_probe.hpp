#pragma once
/// What this process sees of CUDA, probed once: the driver library (dlopen of libcuda.so.1 at run time, so
/// every Pact binary starts without it) and, when it loads, the device count its cuInit and
/// cuDeviceGetCount report. The one place that loads the driver: the sealed-artifact runtime
/// (pact/seal/admission.hpp) binds its entry points from this handle, and the planner's and `pact env`'s
/// messages say what the probe found instead of assuming.

#include <string>

namespace pact {

struct CudaProbe {
  void* library = nullptr;  ///< the driver's dlopen handle, or null when libcuda.so.1 does not load
  int devices = 0;          ///< devices the driver reports: 0 without a driver or when cuInit fails
  std::string summary;      ///< one line of what was found, e.g. "no CUDA driver (dlopen(libcuda.so.1): ...)"
};

/// The probe, run on first use (thread-safe) and kept for the process.
const CudaProbe& probe_cuda();

}  // namespace pact
