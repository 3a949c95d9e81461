// The CUDA provider's device code compiled for the host (tests/gpu/emulator/emulator.hpp): the CUDA
// qualifiers and intrinsics the kernels use, mapped onto the emulator, then kernels.cu itself (copied at
// configure time with its one dynamic shared-memory declaration rewritten: kernels_for_host.inc), then the
// table of its kernels. A kernel the host code asks for that is missing here fails its launch loudly
// (CUDA_ERROR_NOT_FOUND), so the table cannot fall behind unnoticed.

#include <math.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tests/gpu/emulator/emulator.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() ::pact::emu::syncthreads()
#define __syncwarp() ::pact::emu::syncwarp()
#define __shfl_xor_sync(mask, value, lane_mask) ::pact::emu::shfl_xor(value, lane_mask)

#define threadIdx ::pact::emu::thread_index
#define blockIdx ::pact::emu::block_index
#define blockDim ::pact::emu::block_dim
#define gridDim ::pact::emu::grid_dim

struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline unsigned long long atomicMax(unsigned long long* address, unsigned long long value) {
  std::atomic_ref<unsigned long long> a(*address);
  unsigned long long seen = a.load();
  while (seen < value && !a.compare_exchange_weak(seen, value)) {
  }
  return seen;
}
using std::isnan;
// CUDA's integer min (the kernels call it on int64 operands).
inline std::int64_t min(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#include "kernels_for_host.inc"
#pragma GCC diagnostic pop

namespace pact::emu {
namespace {

template <class... A, std::size_t... I>
void call(void (*f)(A...), void** params, std::index_sequence<I...>) {
  f(*static_cast<std::remove_cvref_t<A>*>(params[I])...);
}
template <class... A>
constexpr std::size_t arity(void (*)(A...)) {
  return sizeof...(A);
}
template <auto F>
void thunk(void** params) {
  call(F, params, std::make_index_sequence<arity(F)>{});
}

#define PACT_EMU_KERNEL(name) \
  Kernel { #name, &thunk < &::name> }
const Kernel kKernels[] = {
    PACT_EMU_KERNEL(pact_binary_f32),
    PACT_EMU_KERNEL(pact_unary_f32),
    PACT_EMU_KERNEL(pact_unary_grad_f32),
    PACT_EMU_KERNEL(pact_sum_to_shape_f32),
    PACT_EMU_KERNEL(pact_norm_f32),
    PACT_EMU_KERNEL(pact_norm_grad_f32),
    PACT_EMU_KERNEL(pact_softmax_f32),
    PACT_EMU_KERNEL(pact_softmax_grad_f32),
    PACT_EMU_KERNEL(pact_cross_entropy_rows_f32),
    PACT_EMU_KERNEL(pact_embedding_f32),
    PACT_EMU_KERNEL(pact_embedding_grad_f32),
    PACT_EMU_KERNEL(pact_sum_f32),
    PACT_EMU_KERNEL(pact_cross_entropy_grad_f32),
    PACT_EMU_KERNEL(pact_attention_f32_v32),
    PACT_EMU_KERNEL(pact_attention_f32_v64),
    PACT_EMU_KERNEL(pact_attention_f32_v128),
    PACT_EMU_KERNEL(pact_attention_scores_f32),
    PACT_EMU_KERNEL(pact_scale_f32),
    PACT_EMU_KERNEL(pact_accumulate_f32),
    PACT_EMU_KERNEL(pact_sgd_f32),
    PACT_EMU_KERNEL(pact_adam_f32),
    PACT_EMU_KERNEL(pact_im2col_f32),
    PACT_EMU_KERNEL(pact_col2im_f32),
    PACT_EMU_KERNEL(pact_conv_depthwise_f32),
    PACT_EMU_KERNEL(pact_conv_depthwise_input_grad_f32),
    PACT_EMU_KERNEL(pact_conv_depthwise_weight_grad_f32),
    PACT_EMU_KERNEL(pact_pool2d_f32),
    PACT_EMU_KERNEL(pact_pool2d_grad_f32),
    PACT_EMU_KERNEL(pact_adaptive_pool_f32),
    PACT_EMU_KERNEL(pact_adaptive_pool_grad_f32),
    PACT_EMU_KERNEL(pact_batch_stats_f32),
    PACT_EMU_KERNEL(pact_batch_norm_apply_f32),
    PACT_EMU_KERNEL(pact_batch_norm_grad_f32),
    PACT_EMU_KERNEL(pact_batch_norm_stats_f32),
    PACT_EMU_KERNEL(pact_gemm_f32),
    PACT_EMU_KERNEL(pact_gemm_f32_vec8),
    PACT_EMU_KERNEL(pact_gemm_f32_vec8_b1),
    PACT_EMU_KERNEL(pact_gemm_f32_vec16_b1),
    PACT_EMU_KERNEL(pact_gemm_f32_vec16),
};

}  // namespace

const Kernel* find_kernel(std::string_view name) {
  for (const auto& k : kKernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

}  // namespace pact::emu
