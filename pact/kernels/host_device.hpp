#pragma once
/// PACT_HOST_DEVICE marks a function that both the host providers and the CUDA provider's device code
/// (pact/kernels/cuda/kernels.cu) compile: __host__ __device__ under nvcc, nothing otherwise.

#if defined(__CUDACC__)
#define PACT_HOST_DEVICE __host__ __device__
#else
#define PACT_HOST_DEVICE
#endif
