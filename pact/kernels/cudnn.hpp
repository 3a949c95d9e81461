#pragma once
/// cuDNN, the trusted external convolution of the cudnn provider (pact/kernels/cuda/cuda_kernels.cpp):
/// loaded at run time (libcudnn.so.9, then .8, then libcudnn.so), as cuBLAS is (pact/kernels/cublas.hpp), so
/// nothing links it; one handle on the CUDA device's stream, and only looked for once a device exists. Pact
/// calls cuDNN's descriptor-based convolution API (NCHW float tensors, cross-correlation, groups) with FMA
/// math, so no TF32 tensor-core rounding enters an f32 convolution.

#include <cstddef>
#include <mutex>
#include <string>

namespace pact::kernels {

/// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t (one layout for the three).
struct CudnnAlgorithm {
  int algo = 0;
  int status = 0;
  float time = 0;
  std::size_t memory = 0;  ///< the workspace the algorithm needs
  int determinism = 0;     ///< 1: CUDNN_DETERMINISTIC
  int math_type = 0;
  int reserved[3] = {0, 0, 0};
};

/// The cuDNN values Pact passes (cudnn_graph.h's enums).
inline constexpr int kCudnnNchw = 0, kCudnnFloat = 0, kCudnnCrossCorrelation = 1, kCudnnFmaMath = 3,
                     kCudnnDeterministic = 1;

/// The cuDNN entry points Pact calls (cudnn_ops.h's and cudnn_cnn.h's signatures, with the handle and the
/// descriptors as void* and the enums as int; status 0 is CUDNN_STATUS_SUCCESS).
struct Cudnn {
  void* library = nullptr;
  void* handle = nullptr;  ///< on the device's stream
  int (*create)(void** handle) = nullptr;
  int (*destroy)(void* handle) = nullptr;
  int (*set_stream)(void* handle, void* stream) = nullptr;
  int (*create_tensor)(void** desc) = nullptr;
  int (*set_tensor_4d)(void* desc, int format, int dtype, int n, int c, int h, int w) = nullptr;
  int (*destroy_tensor)(void* desc) = nullptr;
  int (*create_filter)(void** desc) = nullptr;
  int (*set_filter_4d)(void* desc, int dtype, int format, int k, int c, int h, int w) = nullptr;
  int (*destroy_filter)(void* desc) = nullptr;
  int (*create_convolution)(void** desc) = nullptr;
  int (*set_convolution_2d)(void* desc, int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
                            int dilation_w, int mode, int compute_type) = nullptr;
  int (*set_group_count)(void* desc, int groups) = nullptr;
  int (*set_math_type)(void* desc, int math_type) = nullptr;
  int (*destroy_convolution)(void* desc) = nullptr;
  /// The heuristics' algorithms, best first: (handle, x, w, convolution, y, ...).
  int (*forward_algorithms)(void* handle, void* x, void* w, void* conv, void* y, int requested, int* returned,
                            CudnnAlgorithm* results) = nullptr;
  int (*forward)(void* handle, const void* alpha, void* x_desc, const void* x, void* w_desc, const void* w, void* conv,
                 int algo, void* workspace, std::size_t workspace_bytes, const void* beta, void* y_desc,
                 void* y) = nullptr;
  /// (handle, w, dy, convolution, dx, ...).
  int (*backward_data_algorithms)(void* handle, void* w, void* dy, void* conv, void* dx, int requested, int* returned,
                                  CudnnAlgorithm* results) = nullptr;
  int (*backward_data)(void* handle, const void* alpha, void* w_desc, const void* w, void* dy_desc, const void* dy,
                       void* conv, int algo, void* workspace, std::size_t workspace_bytes, const void* beta,
                       void* dx_desc, void* dx) = nullptr;
  /// (handle, x, dy, convolution, dw, ...).
  int (*backward_filter_algorithms)(void* handle, void* x, void* dy, void* conv, void* dw, int requested, int* returned,
                                    CudnnAlgorithm* results) = nullptr;
  int (*backward_filter)(void* handle, const void* alpha, void* x_desc, const void* x, void* dy_desc, const void* dy,
                         void* conv, int algo, void* workspace, std::size_t workspace_bytes, const void* beta,
                         void* dw_desc, void* dw) = nullptr;
  /// A handle serves one call at a time: every call through it holds this.
  mutable std::mutex mutex;
};

/// The process's cuDNN on the CUDA device's stream; null when there is no device, the library is not found
/// or its handle cannot be made (cudnn_unavailable_reason() says which).
const Cudnn* cudnn();
/// Why cudnn() is null ("" when it is not).
std::string cudnn_unavailable_reason();
/// Makes `table` the process's cuDNN instead of the library (the CUDA emulator's host convolution). Only
/// before the first cudnn(): `internal` afterwards. `table` lives for the process.
void use_cudnn(const Cudnn& table);

}  // namespace pact::kernels
