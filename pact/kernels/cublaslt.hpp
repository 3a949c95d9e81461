#pragma once
/// cuBLASLt, the trusted external GEMM with epilogues of the cublaslt provider (pact/kernels/cuda/
/// cuda_kernels.cpp): linear's product with its bias added in the GEMM's epilogue, and the weight's gradient
/// with the bias's gradient reduced in the same call (CUBLASLT_EPILOGUE_BGRADB). Loaded at run time
/// (libcublasLt.so.13, then .12, then libcublasLt.so), as cuBLAS is (pact/kernels/cublas.hpp), so nothing links
/// it; one handle, made on the CUDA device's primary context, and only looked for once a device exists. A
/// cuBLASLt handle has no stream: every matmul names Pact's. The compute type is CUBLAS_COMPUTE_32F, so no
/// TF32 tensor-core rounding enters an f32 product.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace pact::kernels {

/// cublasLtMatmulHeuristicResult_t (cublasLt.h): an algorithm (opaque), the workspace it needs, its state.
struct CublasLtHeuristic {
  std::uint64_t algo[8] = {};
  std::size_t workspace = 0;
  int state = 0;  ///< 0: CUBLAS_STATUS_SUCCESS, the other fields valid
  float waves = 0;
  int reserved[4] = {0, 0, 0, 0};
};

/// The cuBLASLt values Pact passes (cublasLt.h's, cublas_api.h's and library_types.h's enums).
inline constexpr int kLtComputeF32 = 68;  ///< CUBLAS_COMPUTE_32F: plain fp32 (not _32F_FAST_TF32, 77)
inline constexpr int kLtR32F = 0;         ///< CUDA_R_32F, the scale and every matrix type
/// cublasLtMatmulDescAttributes_t: the operations (int32), the epilogue (uint32), the bias vector (a pointer).
inline constexpr int kLtDescTransA = 3, kLtDescTransB = 4, kLtDescEpilogue = 7, kLtDescBiasPointer = 8;
/// cublasLtMatmulPreferenceAttributes_t: the workspace offered (uint64); the alignment, in bytes, that A, B, C
/// and D's addresses have (uint32, default 256: an algorithm may assume it).
inline constexpr int kLtPrefMaxWorkspace = 1, kLtPrefAlignmentA = 5, kLtPrefAlignmentB = 6, kLtPrefAlignmentC = 7,
                     kLtPrefAlignmentD = 8;
inline constexpr int kLtStatusNotSupported = 15;  ///< CUBLAS_STATUS_NOT_SUPPORTED
/// cublasLtEpilogue_t: the product alone; plus a bias per row of D; plus the sum of B over k per column of D.
inline constexpr std::uint32_t kLtEpilogueDefault = 1, kLtEpilogueBias = 4, kLtEpilogueBgradB = 512;
/// The most workspace Pact offers one matmul (cuBLASLt's recommendation for Hopper), from the device pool.
inline constexpr std::uint64_t kLtMaxWorkspace = 32ull << 20;

/// The cuBLASLt entry points Pact calls (cublasLt.h's signatures, with the handle and descriptors as void*
/// and the enums as int; status 0 is CUBLAS_STATUS_SUCCESS).
struct CublasLt {
  void* library = nullptr;
  void* handle = nullptr;
  int (*create)(void** handle) = nullptr;
  int (*destroy)(void* handle) = nullptr;
  int (*create_matmul)(void** desc, int compute_type, int scale_type) = nullptr;
  int (*set_matmul_attribute)(void* desc, int attribute, const void* value, std::size_t bytes) = nullptr;
  int (*destroy_matmul)(void* desc) = nullptr;
  int (*create_layout)(void** layout, int dtype, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) = nullptr;
  int (*destroy_layout)(void* layout) = nullptr;
  int (*create_preference)(void** pref) = nullptr;
  int (*set_preference_attribute)(void* pref, int attribute, const void* value, std::size_t bytes) = nullptr;
  int (*destroy_preference)(void* pref) = nullptr;
  /// The heuristics' algorithms, best first: (handle, matmul, A, B, C, D, preference, requested, results,
  /// returned).
  int (*heuristics)(void* handle, void* matmul, void* a, void* b, void* c, void* d, void* pref, int requested,
                    CublasLtHeuristic* results, int* returned) = nullptr;
  /// D = alpha op(A) op(B) + beta C, then the epilogue; `algo` is a heuristic result's.
  int (*matmul)(void* handle, void* desc, const void* alpha, const void* a, void* a_layout, const void* b,
                void* b_layout, const void* beta, const void* c, void* c_layout, void* d, void* d_layout,
                const std::uint64_t* algo, void* workspace, std::size_t workspace_bytes, void* stream) = nullptr;
  /// A handle serves one call at a time: every call through it holds this.
  mutable std::mutex mutex;
};

/// The process's cuBLASLt; null when there is no device, the library is not found or its handle cannot be
/// made (cublaslt_unavailable_reason() says which).
const CublasLt* cublaslt();
/// Why cublaslt() is null ("" when it is not).
std::string cublaslt_unavailable_reason();
/// Makes `table` the process's cuBLASLt instead of the library (the CUDA emulator's host GEMM). Only before
/// the first cublaslt(): `internal` afterwards. `table` lives for the process.
void use_cublaslt(const CublasLt& table);

}  // namespace pact::kernels
