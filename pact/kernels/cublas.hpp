#pragma once
/// cuBLAS, the trusted external GEMM of the cublas provider (pact/kernels/cuda/cuda_kernels.cpp) and the
/// peer of the GPU GEMM benchmark: loaded at run time (dlopen of libcublas.so.13, then .12, then
/// libcublas.so), so nothing links the toolkit and every binary starts without it. One handle, created
/// on the CUDA device's primary context and bound to its one stream, so a cuBLAS call is ordered with
/// every Pact copy, allocation and kernel. Only looked for once a device exists: on a machine without one
/// the library is never opened.

#include <mutex>
#include <string>

namespace pact::kernels {

/// The cuBLAS entry points Pact calls (cublas_api.h's signatures, with handles and streams as void* and
/// the enums as int: CUBLAS_OP_N = 0, CUBLAS_OP_T = 1; status 0 is CUBLAS_STATUS_SUCCESS).
struct Cublas {
  void* library = nullptr;
  void* handle = nullptr;  ///< on the device's stream
  int (*create)(void** handle) = nullptr;
  int (*destroy)(void* handle) = nullptr;
  int (*set_stream)(void* handle, void* stream) = nullptr;
  int (*sgemm)(void* handle, int transa, int transb, int m, int n, int k, const float* alpha, const float* a, int lda,
               const float* b, int ldb, const float* beta, float* c, int ldc) = nullptr;
  int (*sgemm_strided_batched)(void* handle, int transa, int transb, int m, int n, int k, const float* alpha,
                               const float* a, int lda, long long stride_a, const float* b, int ldb, long long stride_b,
                               const float* beta, float* c, int ldc, long long stride_c, int batch_count) = nullptr;
  /// A handle serves one call at a time: every call through it holds this.
  mutable std::mutex mutex;
};

/// The process's cuBLAS on the CUDA device's stream; null when there is no device, the library is not
/// found or its handle cannot be made (cublas_unavailable_reason() says which).
const Cublas* cublas();
/// Why cublas() is null ("" when it is not).
std::string cublas_unavailable_reason();
/// Makes `table` (its entry points and handle) the process's cuBLAS instead of the library: the CUDA
/// emulator's host SGEMM (tests/gpu/emulator). Only before the first cublas(): `internal` afterwards.
/// `table` lives for the process.
void use_cublas(const Cublas& table);

}  // namespace pact::kernels
