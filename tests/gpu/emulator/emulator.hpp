#pragma once
// The CUDA emulator (tests only): the CUDA provider's device code (pact/kernels/cuda/kernels.cu) compiled
// for the host and run by a stand-in driver, so CI holds every cuda kernel to the reference provider without
// a GPU. It checks the kernels' arithmetic and indexing, and the host code's launches, grids and parameter
// packing; not the hardware's memory model, timing or anything the real compiler alone decides (a real
// device run, scripts/gpu-check.sh, still does that).
//
// A launch runs its blocks one after another; each block's threads run concurrently on host threads, so
// __syncthreads is a barrier over the block and a warp shuffle a barrier over its 32 lanes. Device memory is
// host memory: a device address is a host pointer. Everything is synchronous: the stream, events and the
// pool are bookkeeping.

#include <cstdint>
#include <string_view>

#include "pact/core/cuda_driver.hpp"

namespace pact::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// The launch's geometry, as the device code reads it (threadIdx and blockIdx per thread).
extern thread_local Dim3 thread_index;
extern thread_local Dim3 block_index;
extern Dim3 block_dim;
extern Dim3 grid_dim;

void syncthreads();
void syncwarp();
float shfl_xor(float v, int lane_mask);
double shfl_xor(double v, int lane_mask);
float* dynamic_shared();

// A kernel of the emulated module: calls the device function with cuLaunchKernel's params.
using Thunk = void (*)(void** params);
struct Kernel {
  std::string_view name;
  Thunk thunk;
};
// Every kernel of kernels.cu (device_code.cpp).
const Kernel* find_kernel(std::string_view name);

// The stand-in driver: the table the CUDA device opens (CudaDevice::open_with).
const CudaDriver& driver();
// What the host code has asked of the driver so far, so a test can bound what a step costs on a device.
struct Tally {
  std::uint64_t launches = 0;
  // The host waits for the device: stream and event synchronisation, and the synchronous copies and fills
  // (cuMemcpyHtoD, cuMemcpyDtoH, cuMemsetD8) and frees (cuMemFree), which wait on a device too.
  std::uint64_t waits = 0;
  std::uint64_t allocations = 0;             // cuMemAlloc and cuMemAllocAsync
  std::uint64_t to_host = 0, to_device = 0;  // copies, synchronous or not
};
Tally tally();
// cuDNN descriptors the emulated cuDNN has made and not destroyed (the cudnn provider destroys its own).
std::int64_t cudnn_descriptors_alive();
// The next cuDNN convolution call (forward or either gradient) returns `status` instead of running.
void fail_next_cudnn_call(int status);
// cuBLASLt descriptors (matmul, layout, preference) the emulated cuBLASLt has made and not destroyed.
std::int64_t cublaslt_descriptors_alive();
// The next cublasLtMatmul returns `status` instead of running.
void fail_next_cublaslt_matmul(int status);
// Whether the emulated cuBLASLt refuses epilogues (CUBLAS_STATUS_NOT_SUPPORTED), as cuBLASLt does where it has
// none for the types or the layout: not at all, in the heuristics (no algorithm offered), or in the matmul
// call after the heuristics offered one.
enum class EpilogueRefusal { none, heuristics, matmul };
void cublaslt_refuse_epilogues(EpilogueRefusal refusal);
// The cuBLAS SGEMM call after the next `skip` ones returns `status` instead of running.
void fail_cublas_call(int skip, int status);

}  // namespace pact::emu
