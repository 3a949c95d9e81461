// The CUDA provider's device code (SPEC §5 `cuda`): f32 kernels with extern "C" names, compiled by nvcc
// into one fatbin that pact/kernels/cuda/cuda_kernels.cpp loads through the driver (cuModuleLoadData) and
// launches with cuLaunchKernel on the device's stream. Nothing here allocates or synchronizes; the host
// side checks every operand's provider, dtype and shape before a launch. Index arithmetic is 64-bit.

#include <cstdint>

#include "pact/kernels/attention_tile.hpp"
#include "pact/kernels/window.hpp"

using pact::kernels::avg_divisor;
using pact::kernels::ConvGeometry;
using pact::kernels::PoolGeometry;

namespace {

constexpr int kMaxRank = 8;  // pact/core/layout.hpp

// A broadcast or strided traversal: the output's shape (row-major, contiguous output) and each operand's
// element strides over it (0 where it broadcasts).
struct Geometry {
  int rank;
  std::int64_t shape[kMaxRank];
  std::int64_t stride0[kMaxRank];
  std::int64_t stride1[kMaxRank];
};

__device__ inline void offsets(const Geometry& g, std::int64_t i, std::int64_t& o0, std::int64_t& o1) {
  o0 = 0;
  o1 = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const std::int64_t c = i % g.shape[d];
    i /= g.shape[d];
    o0 += c * g.stride0[d];
    o1 += c * g.stride1[d];
  }
}

// The output position that tap `tap` of a window (stride, padding, dilation) reads input position `in` into,
// or -1 when no window reads it there: the adjoint index of im2col and pooling, one axis at a time.
__device__ inline std::int64_t tap_output(std::int64_t in, std::int64_t tap, std::int64_t pad, std::int64_t dilation,
                                          std::int64_t stride, std::int64_t out_size) {
  const std::int64_t t = in + pad - tap * dilation;
  return t < 0 || t % stride != 0 || t / stride >= out_size ? -1 : t / stride;
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// A block-wide reduction (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v) {
  __shared__ float partial[32];
  __shared__ float result;
  v = kMax ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    float w = lane < warps ? partial[lane] : (kMax ? -INFINITY : 0.0f);
    w = kMax ? warp_max(w) : warp_sum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  const float r = result;
  __syncthreads();  // partial and result are reused by the next call
  return r;
}

}  // namespace

// ---- elementwise -------------------------------------------------------------------------------------

// Binary ops over a broadcast geometry: 0 add, 1 mul, 2 sub, 3 div.
extern "C" __global__ void pact_binary_f32(float* out, const float* a, const float* b, Geometry g, std::int64_t n,
                                           int op) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t oa, ob;
    offsets(g, i, oa, ob);
    const float x = a[oa], y = b[ob];
    out[i] = op == 0 ? x + y : op == 1 ? x * y : op == 2 ? x - y : x / y;
  }
}

namespace {
// The unary ops (pact/kernels/cpu/generic_kernels.inc's Unary, the same formulas in f32): 0 copy, 1 relu,
// 2 neg, 3 gelu (erf), 4 gelu (tanh approximation), 5 silu, 6 tanh, 7 sigmoid, 8 exp, 9 hardswish, 10 relu6
// (clamp to [0, 6]; NaN propagates through both, by the order of the tests).
__device__ inline float unary(int op, float x) {
  switch (op) {
    case 1:
      return x < 0.0f ? 0.0f : x;  // NaN propagates, as in PyTorch
    case 2:
      return -x;
    case 3:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case 4:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
    case 5:
      return x / (1.0f + expf(-x));
    case 6:
      return tanhf(x);
    case 7:
      return 1.0f / (1.0f + expf(-x));
    case 8:
      return expf(x);
    case 9: {
      const float s = x + 3.0f;
      return x * (s < 0.0f ? 0.0f : (s > 6.0f ? 6.0f : s)) / 6.0f;
    }
    case 10:
      return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x);
    default:
      return x;
  }
}
// d f / d x at x, given y = f(x).
__device__ inline float unary_slope(int op, float x, float y) {
  switch (op) {
    case 1:
      return y > 0.0f ? 1.0f : 0.0f;
    case 2:
      return -1.0f;
    case 3: {
      const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
      const float pdf = expf(-0.5f * x * x) * 0.39894228040143267794f;
      return cdf + x * pdf;
    }
    case 4: {
      const float c = 0.79788456080286535588f;
      const float t = tanhf(c * (x + 0.044715f * x * x * x));
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c * (1.0f + 3.0f * 0.044715f * x * x);
    }
    case 5: {
      const float sg = 1.0f / (1.0f + expf(-x));
      return sg * (1.0f + x * (1.0f - sg));
    }
    case 6:
      return 1.0f - y * y;
    case 7:
      return y * (1.0f - y);
    case 8:
      return y;
    case 9:  // PyTorch's hardswish_backward
      return x < -3.0f ? 0.0f : (x > 3.0f ? 1.0f : (2.0f * x + 3.0f) / 6.0f);
    case 10:
      return x > 0.0f && x < 6.0f ? 1.0f : 0.0f;
    default:
      return 1.0f;
  }
}
}  // namespace

// Unary ops over a strided input (stride0); op 0 makes a contiguous copy.
extern "C" __global__ void pact_unary_f32(float* out, const float* in, Geometry g, std::int64_t n, int op) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t o, unused;
    offsets(g, i, o, unused);
    out[i] = unary(op, in[o]);
  }
}

// A unary op's VJP over contiguous operands: g * f'(x), given the forward output y.
extern "C" __global__ void pact_unary_grad_f32(float* out, const float* x, const float* y, const float* g,
                                               std::int64_t n, int op) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    out[i] = g[i] * unary_slope(op, x[i], y[i]);
  }
}

// Sums a contiguous tensor over some of its dimensions: out element i (over `kept`, whose stride0 are the
// input's strides of the kept dimensions) is the sum over `reduced` (its stride0 the input's strides of the
// reduced dimensions) of in[kept offset + reduced offset], in index order.
extern "C" __global__ void pact_sum_to_shape_f32(float* out, const float* in, Geometry kept, Geometry reduced,
                                                 std::int64_t n, std::int64_t count) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t base, unused;
    offsets(kept, i, base, unused);
    float s = 0.0f;
    for (std::int64_t r = 0; r < count; ++r) {
      std::int64_t o;
      offsets(reduced, r, o, unused);
      s += in[base + o];
    }
    out[i] = s;
  }
}

// ---- GEMM ----------------------------------------------------------------------------------------------

// C[b] (+)= A[b] B[b] (+ bias[n]) for a batch of M x K by K x N products with arbitrary element strides, so
// transposed operands need no copy. The batch index maps to each operand's matrix through `batch` (its shape
// is the broadcast batch; stride0 and stride1 are A's and B's matrix strides per batch index, 0 where one
// broadcasts); C is contiguous per batch, matrix after matrix.
//
// Tiling: a 128 x 128 tile of C per block of 256 threads, each thread an 8 x 8 sub-tile held in registers,
// K consumed kBK at a time through double-buffered shared memory (A stored transposed, so both operands are
// read as float4 rows by the inner loop). The next stage's global loads are issued before the current
// stage's products and stored after them. Tiles at the edges are zero-filled. Each output is one left fold
// over k in index order within a thread, so a result does not depend on the launch.
//
// kVec: A is row-major with k contiguous (a_cs == 1) and B row-major with n contiguous (b_cs == 1), every
// row stride, batch stride and base 16-byte aligned and k, n multiples of 4 (the host checks): the loads are
// float4. Otherwise each element is loaded on its own through the strides.
namespace {
constexpr int kBM = 128, kBN = 128, kTM = 8, kTN = 8, kGemmThreads = 256;

template <int kBK, bool kVec>
__device__ __forceinline__ void gemm_body(float* c, const float* a, const float* b, const float* bias, std::int64_t m,
                                          std::int64_t n, std::int64_t k, std::int64_t a_rs, std::int64_t a_cs,
                                          std::int64_t b_rs, std::int64_t b_cs, const Geometry& batch, int accumulate) {
  // Elements of each operand's tile a thread moves per stage.
  constexpr int kLoads = kBM * kBK / kGemmThreads;  // 4 (kBK 8) or 8 (kBK 16)
  constexpr int kVecLoads = kLoads / 4;
  __shared__ __align__(16) float as[2][kBK][kBM];
  __shared__ __align__(16) float bs[2][kBK][kBN];
  std::int64_t a_off, b_off;
  offsets(batch, blockIdx.z, a_off, b_off);
  a += a_off;
  b += b_off;
  c += static_cast<std::int64_t>(blockIdx.z) * m * n;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kBM;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kBN;
  const int tid = threadIdx.x;
  const int tr = tid / (kBN / kTN);  // 0..15
  const int tc = tid % (kBN / kTN);  // 0..15

  float fa[kLoads], fb[kLoads];
  auto fetch = [&](std::int64_t k0) {
    if constexpr (kVec) {
#pragma unroll
      for (int l = 0; l < kVecLoads; ++l) {
        const int e = tid + l * kGemmThreads;  // float4 index in the tile
        // A: row e / (kBK/4), k offset 4 * (e % (kBK/4))
        const int ar = e / (kBK / 4), ak = 4 * (e % (kBK / 4));
        const std::int64_t gr = row0 + ar, gk = k0 + ak;
        float4 va = make_float4(0.f, 0.f, 0.f, 0.f);
        if (gr < m && gk < k) va = *reinterpret_cast<const float4*>(a + gr * a_rs + gk);
        fa[4 * l] = va.x, fa[4 * l + 1] = va.y, fa[4 * l + 2] = va.z, fa[4 * l + 3] = va.w;
        // B: k row e / (kBN/4), column 4 * (e % (kBN/4))
        const int bk = e / (kBN / 4), bc = 4 * (e % (kBN / 4));
        const std::int64_t gk2 = k0 + bk, gc = col0 + bc;
        float4 vb = make_float4(0.f, 0.f, 0.f, 0.f);
        if (gk2 < k && gc < n) vb = *reinterpret_cast<const float4*>(b + gk2 * b_rs + gc);
        fb[4 * l] = vb.x, fb[4 * l + 1] = vb.y, fb[4 * l + 2] = vb.z, fb[4 * l + 3] = vb.w;
      }
    } else {
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        const int e = tid + l * kGemmThreads;
        const int ar = e / kBK, ak = e % kBK;
        const std::int64_t gr = row0 + ar, gk = k0 + ak;
        fa[l] = (gr < m && gk < k) ? a[gr * a_rs + gk * a_cs] : 0.0f;
        const int bk = e / kBN, bc = e % kBN;
        const std::int64_t gk2 = k0 + bk, gc = col0 + bc;
        fb[l] = (gk2 < k && gc < n) ? b[gk2 * b_rs + gc * b_cs] : 0.0f;
      }
    }
  };
  auto store = [&](int stage) {
    if constexpr (kVec) {
#pragma unroll
      for (int l = 0; l < kVecLoads; ++l) {
        const int e = tid + l * kGemmThreads;
        const int ar = e / (kBK / 4), ak = 4 * (e % (kBK / 4));
#pragma unroll
        for (int q = 0; q < 4; ++q) as[stage][ak + q][ar] = fa[4 * l + q];
        const int bk = e / (kBN / 4), bc = 4 * (e % (kBN / 4));
        *reinterpret_cast<float4*>(&bs[stage][bk][bc]) =
            make_float4(fb[4 * l], fb[4 * l + 1], fb[4 * l + 2], fb[4 * l + 3]);
      }
    } else {
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        const int e = tid + l * kGemmThreads;
        as[stage][e % kBK][e / kBK] = fa[l];
        bs[stage][e / kBN][e % kBN] = fb[l];
      }
    }
  };

  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;

  const std::int64_t tiles = (k + kBK - 1) / kBK;
  if (tiles > 0) {
    fetch(0);
    store(0);
  }
  __syncthreads();
  for (std::int64_t t = 0; t < tiles; ++t) {
    const int cur = static_cast<int>(t & 1);
    const bool more = t + 1 < tiles;
    if (more) fetch((t + 1) * kBK);
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float ra[kTM], rb[kTN];
      const float4 a0 = *reinterpret_cast<const float4*>(&as[cur][kk][tr * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&as[cur][kk][64 + tr * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&bs[cur][kk][tc * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&bs[cur][kk][64 + tc * 4]);
      ra[0] = a0.x, ra[1] = a0.y, ra[2] = a0.z, ra[3] = a0.w, ra[4] = a1.x, ra[5] = a1.y, ra[6] = a1.z, ra[7] = a1.w;
      rb[0] = b0.x, rb[1] = b0.y, rb[2] = b0.z, rb[3] = b0.w, rb[4] = b1.x, rb[5] = b1.y, rb[6] = b1.z, rb[7] = b1.w;
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(ra[i], rb[j], acc[i][j]);
    }
    // The other stage was last read before the previous barrier: it can be overwritten now.
    if (more) store(cur ^ 1);
    __syncthreads();
  }
  // Thread (tr, tc) holds rows {tr*4 + 0..3, 64 + tr*4 + 0..3} and the same pattern of columns.
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const std::int64_t r = row0 + (i < 4 ? tr * 4 + i : 64 + tr * 4 + (i - 4));
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const std::int64_t col = col0 + (j < 4 ? tc * 4 + j : 64 + tc * 4 + (j - 4));
      if (col >= n) continue;
      float v = acc[i][j];
      if (bias != nullptr) v += bias[col];
      float& dst = c[r * n + col];
      dst = accumulate != 0 ? dst + v : v;
    }
  }
}
}  // namespace

// The GEMM kernels the host chooses among (pact/kernels/cuda/cuda_kernels.cpp): the strided one for any
// operands, the vectorized ones where kVec's conditions hold. The second number of each is the blocks per
// multiprocessor the registers are capped for.
#define PACT_GEMM_KERNEL(name, bk, vec, min_blocks)                                                                 \
  extern "C" __global__ void __launch_bounds__(kGemmThreads, min_blocks) name(                                      \
      float* c, const float* a, const float* b, const float* bias, std::int64_t m, std::int64_t n, std::int64_t k,  \
      std::int64_t a_rs, std::int64_t a_cs, std::int64_t b_rs, std::int64_t b_cs, Geometry batch, int accumulate) { \
    gemm_body<bk, vec>(c, a, b, bias, m, n, k, a_rs, a_cs, b_rs, b_cs, batch, accumulate);                          \
  }
PACT_GEMM_KERNEL(pact_gemm_f32, 8, false, 2)
PACT_GEMM_KERNEL(pact_gemm_f32_vec8, 8, true, 2)
PACT_GEMM_KERNEL(pact_gemm_f32_vec8_b1, 8, true, 1)
PACT_GEMM_KERNEL(pact_gemm_f32_vec16_b1, 16, true, 1)
PACT_GEMM_KERNEL(pact_gemm_f32_vec16, 16, true, 2)
#undef PACT_GEMM_KERNEL

// ---- layer and rms norm ------------------------------------------------------------------------------

namespace {
// A normalized row's mean (0 for rms) and 1 / sqrt(variance + eps), the variance about that mean, each a
// block-wide sum (every thread of the block gets them).
__device__ void row_statistics(const float* xr, std::int64_t width, float eps, int rms, float& mean, float& inv) {
  float s = 0.0f;
  if (rms == 0) {
    for (std::int64_t k = threadIdx.x; k < width; k += blockDim.x) s += xr[k];
    s = block_reduce<false>(s);
  }
  mean = rms != 0 ? 0.0f : s / static_cast<float>(width);
  float v = 0.0f;
  for (std::int64_t k = threadIdx.x; k < width; k += blockDim.x) v += (xr[k] - mean) * (xr[k] - mean);
  v = block_reduce<false>(v) / static_cast<float>(width);
  inv = 1.0f / sqrtf(v + eps);
}
}  // namespace

// One block per row of `width` elements: y = (x - mean) / sqrt(var + eps) (* w) (+ b); rms: mean is 0.
extern "C" __global__ void pact_norm_f32(float* y, const float* x, const float* w, const float* b, std::int64_t width,
                                         float eps, int rms) {
  const float* xr = x + static_cast<std::int64_t>(blockIdx.x) * width;
  float* yr = y + static_cast<std::int64_t>(blockIdx.x) * width;
  float mean, inv;
  row_statistics(xr, width, eps, rms, mean, inv);
  for (std::int64_t k = threadIdx.x; k < width; k += blockDim.x) {
    float o = (xr[k] - mean) * inv;
    if (w != nullptr) o *= w[k];
    if (b != nullptr) o += b[k];
    yr[k] = o;
  }
}

// The norm's VJP per row: gx, and g * xhat into gxhat (summed over rows into the weight's gradient).
extern "C" __global__ void pact_norm_grad_f32(float* gx, float* gxhat, const float* x, const float* w, const float* g,
                                              std::int64_t width, float eps, int rms) {
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * width;
  const float* xr = x + base;
  const float* gr = g + base;
  float mean, inv;
  row_statistics(xr, width, eps, rms, mean, inv);
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (std::int64_t k = threadIdx.x; k < width; k += blockDim.x) {
    const float xh = (xr[k] - mean) * inv;
    const float gh = w != nullptr ? gr[k] * w[k] : gr[k];
    sum_g += gh;
    sum_gx += gh * xh;
    gxhat[base + k] = gr[k] * xh;
  }
  sum_g = block_reduce<false>(sum_g);
  sum_gx = block_reduce<false>(sum_gx);
  const float nf = static_cast<float>(width);
  for (std::int64_t k = threadIdx.x; k < width; k += blockDim.x) {
    const float xh = (xr[k] - mean) * inv;
    const float gh = w != nullptr ? gr[k] * w[k] : gr[k];
    gx[base + k] = inv * (gh - (rms != 0 ? 0.0f : sum_g / nf) - xh * sum_gx / nf);
  }
}

// ---- softmax and cross entropy --------------------------------------------------------------------------

namespace {
// A row of `n` values `stride` apart: its max and the sum of exp(x - max), each block-wide (every thread of
// the block gets both); the softmax and cross-entropy kernels' shared reduction.
__device__ void row_max_and_exp_sum(const float* row, std::int64_t n, std::int64_t stride, float& mx, float& s) {
  mx = -INFINITY;
  for (std::int64_t d = threadIdx.x; d < n; d += blockDim.x) mx = fmaxf(mx, row[d * stride]);
  mx = block_reduce<true>(mx);
  s = 0.0f;
  for (std::int64_t d = threadIdx.x; d < n; d += blockDim.x) s += expf(row[d * stride] - mx);
  s = block_reduce<false>(s);
}
}  // namespace

// Softmax (or log-softmax) along one dimension: the tensor is [outer, dim, inner] contiguous; one block per
// (outer, inner) row.
extern "C" __global__ void pact_softmax_f32(float* out, const float* in, std::int64_t outer, std::int64_t dim,
                                            std::int64_t inner, int log_form) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t o = row / inner, i = row % inner;
  const std::int64_t base = o * dim * inner + i;
  float mx, s;
  row_max_and_exp_sum(in + base, dim, inner, mx, s);
  const float lse = logf(s);
  for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    const float x = in[base + d * inner] - mx;
    out[base + d * inner] = log_form != 0 ? x - lse : expf(x) / s;
  }
}

// softmax's VJP: gx = y (g - sum(g y)); log-softmax's: gx = g - exp(y) sum(g). Same row geometry.
extern "C" __global__ void pact_softmax_grad_f32(float* gx, const float* y, const float* g, std::int64_t outer,
                                                 std::int64_t dim, std::int64_t inner, int log_form) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t o = row / inner, i = row % inner;
  const std::int64_t base = o * dim * inner + i;
  float s = 0.0f;
  for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    const std::int64_t e = base + d * inner;
    s += log_form != 0 ? g[e] : g[e] * y[e];
  }
  s = block_reduce<false>(s);
  for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    const std::int64_t e = base + d * inner;
    gx[e] = log_form != 0 ? g[e] - expf(y[e]) * s : y[e] * (g[e] - s);
  }
}

// Cross entropy per row of [rows, classes] logits: losses[r] = logsumexp(x_r) - x_r[t_r], 0 for an ignored
// row; counted[r] = 1 for a counted row. A target outside [0, classes) (and not ignore_index) marks *bad
// (zero before the launch) with ~row, the largest mark for the first such row: the host raises
// index_out_of_range naming row ~*bad.
extern "C" __global__ void pact_cross_entropy_rows_f32(float* losses, float* counted, const float* x,
                                                       const std::int64_t* target, std::int64_t classes,
                                                       std::int64_t ignore, unsigned long long* bad) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t t = target[row];
  if (t == ignore) {
    if (threadIdx.x == 0) losses[row] = 0.0f, counted[row] = 0.0f;
    return;
  }
  if (t < 0 || t >= classes) {
    if (threadIdx.x == 0) {
      losses[row] = 0.0f, counted[row] = 0.0f;
      atomicMax(bad, ~static_cast<unsigned long long>(row));
    }
    return;
  }
  const float* xr = x + row * classes;
  float mx, s;
  row_max_and_exp_sum(xr, classes, 1, mx, s);
  if (threadIdx.x == 0) {
    losses[row] = logf(s) + mx - xr[t];
    counted[row] = 1.0f;
  }
}

// Embedding lookup over a contiguous [rows, dim] table: out[i, d] = w[idx[i], d] for the n indices. An index
// outside [0, rows) writes a zero row and marks *bad (zero before the launch) with ~i, the largest mark for the
// first such index: the host raises index_out_of_range naming index ~*bad.
extern "C" __global__ void pact_embedding_f32(float* out, const float* w, const std::int64_t* idx, std::int64_t n,
                                              std::int64_t rows, std::int64_t dim, unsigned long long* bad) {
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const std::int64_t r = idx[i];
    float* o = out + i * dim;
    const bool valid = r >= 0 && r < rows;
    if (!valid && threadIdx.x == 0) atomicMax(bad, ~static_cast<unsigned long long>(i));
    for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) o[d] = valid ? w[r * dim + d] : 0.0f;
  }
}

// Embedding's weight gradient: gw[r, d] = the sum over the indices i with idx[i] == r, in index order, of
// g[i, d]; zero for r == padding. One left fold per element, as the CPU's: independent of the launch.
// O(rows x n) index reads: a table of many rows wants a sorted scatter instead.
extern "C" __global__ void pact_embedding_grad_f32(float* gw, const float* g, const std::int64_t* idx, std::int64_t n,
                                                   std::int64_t rows, std::int64_t dim, std::int64_t padding) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float s = 0.0f;
      if (r != padding) {
        for (std::int64_t i = 0; i < n; ++i) {
          if (idx[i] == r) s += g[i * dim + d];
        }
      }
      gw[r * dim + d] = s;
    }
  }
}

// Sums `n` values (one block, in a fixed order per thread then a fixed tree): out[0] = sum(v) / divisor, or
// sum(v) / sum(w) when w is given (a mean over the counted rows; 0/0 is NaN as in PyTorch).
extern "C" __global__ void pact_sum_f32(float* out, const float* v, const float* w, std::int64_t n) {
  float s = 0.0f, c = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    s += v[i];
    if (w != nullptr) c += w[i];
  }
  s = block_reduce<false>(s);
  if (w != nullptr) c = block_reduce<false>(c);
  if (threadIdx.x == 0) out[0] = w != nullptr ? s / c : s;
}

// cross entropy's VJP: gx[r, k] = g_r (softmax(x_r)[k] - [k == t_r]) for counted rows, 0 for ignored ones.
// mode: 0 none (g_r = g[r]), 1 sum (g[0]), 2 mean (g[0] / count[0], count reduced on the device).
extern "C" __global__ void pact_cross_entropy_grad_f32(float* gx, const float* x, const std::int64_t* target,
                                                       const float* g, const float* count, std::int64_t classes,
                                                       std::int64_t ignore, int mode) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t t = target[row];
  float* gr = gx + row * classes;
  if (t == ignore || t < 0 || t >= classes) {
    for (std::int64_t d = threadIdx.x; d < classes; d += blockDim.x) gr[d] = 0.0f;
    return;
  }
  const float gi = mode == 0 ? g[row] : mode == 1 ? g[0] : g[0] / count[0];
  const float* xr = x + row * classes;
  float mx, s;
  row_max_and_exp_sum(xr, classes, 1, mx, s);
  for (std::int64_t d = threadIdx.x; d < classes; d += blockDim.x)
    gr[d] = gi * (expf(xr[d] - mx) / s - (d == t ? 1.0f : 0.0f));
}

// ---- scaled dot-product attention ----------------------------------------------------------------------

// Fused attention forward (FlashAttention-2's online softmax, f32 on CUDA cores; the tiling is
// pact/kernels/attention_tile.hpp): one block of 128 threads per 64 query rows of one batch entry, keys 32 at
// a time. The query tile stays in shared memory; each key tile and its value tile pass through it. Thread
// (ty, tx) = (tid / 8, tid % 8) owns query rows ty + 16 r (r < 4): their scores against keys tx + 8 c
// (c < 4) and their output columns 4 tx + 32 c + u (u < 4, c < kChunks), all in registers, so every shared
// load is a float4 feeding 16 multiply-adds and the L x S scores are never stored. A row's eight threads
// share one warp: its running max and sum reduce over them by shuffles, and its probabilities pass to the
// P V product through shared memory. Causal masking (key j <= query i) skips the key tiles past the block's
// last row. mask_kind: 0 none, 1 additive f32, 2 bool (true attends); the mask is read through
// `mask_geometry` (stride0 over the flattened scores index (b * L + i) * S + j). A fully masked row is NaN,
// as in PyTorch. Each score is one left fold over the head in index order.
namespace {
using pact::kernels::AttentionTile;

template <int kChunks>
__device__ __forceinline__ void attention_body(float* smem, float* out, const float* q, const float* k, const float* v,
                                               const void* mask, const Geometry& mask_geometry, int mask_kind,
                                               std::int64_t l, std::int64_t s, std::int64_t e, std::int64_t ev,
                                               float scale, int causal) {
  constexpr int kRows = AttentionTile::kRows, kKeys = AttentionTile::kKeys, kThreads = AttentionTile::kThreads;
  constexpr int kPs = AttentionTile::kProbabilityStride, kVs = 32 * kChunks;
  const int es = static_cast<int>(pact::kernels::attention_row_stride(e));
  const int e4 = static_cast<int>((e + 3) / 4 * 4);  // the head in whole float4s (zero-padded)
  float* qs = smem;                                  // [kRows][es]
  float* ks = qs + kRows * es;                       // [kKeys][es]
  float* vs = ks + kKeys * es;                       // [kKeys][kVs]
  float* ps = vs + kKeys * kVs;                      // [kRows][kPs]
  const std::int64_t b = blockIdx.y;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
  q += b * l * e;
  k += b * s * e;
  v += b * s * ev;
  out += b * l * ev;
  const int tid = threadIdx.x, ty = tid / 8, tx = tid % 8, warp = tid / 32, lane = tid % 32;
  for (int rr = warp; rr < kRows; rr += kThreads / 32) {
    for (int d = lane; d < es; d += 32) qs[rr * es + d] = row0 + rr < l && d < e ? q[(row0 + rr) * e + d] : 0.0f;
  }
  float o[4][4 * kChunks];
  float m[4], sum[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    m[r] = -INFINITY;
    sum[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < 4 * kChunks; ++c) o[r][c] = 0.0f;
  }
  const std::int64_t last_row = min(row0 + kRows, l) - 1;
  const std::int64_t key_end = causal != 0 ? min(s, last_row + 1) : s;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += kKeys) {
    __syncthreads();  // the previous tile's keys, values and probabilities are no longer read
    for (int jj = warp; jj < kKeys; jj += kThreads / 32) {
      const bool key = j0 + jj < s;
      for (int d = lane; d < es; d += 32) ks[jj * es + d] = key && d < e ? k[(j0 + jj) * e + d] : 0.0f;
      for (int d = lane; d < kVs; d += 32) vs[jj * kVs + d] = key && d < ev ? v[(j0 + jj) * ev + d] : 0.0f;
    }
    __syncthreads();
    float sc[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
#pragma unroll
      for (int c = 0; c < 4; ++c) sc[r][c] = 0.0f;
    }
    for (int d = 0; d < e4; d += 4) {
      float4 qa[4], kb[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) qa[r] = *reinterpret_cast<const float4*>(qs + (ty + 16 * r) * es + d);
#pragma unroll
      for (int c = 0; c < 4; ++c) kb[c] = *reinterpret_cast<const float4*>(ks + (tx + 8 * c) * es + d);
#pragma unroll
      for (int r = 0; r < 4; ++r) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float x = fmaf(qa[r].x, kb[c].x, sc[r][c]);
          x = fmaf(qa[r].y, kb[c].y, x);
          x = fmaf(qa[r].z, kb[c].z, x);
          sc[r][c] = fmaf(qa[r].w, kb[c].w, x);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const std::int64_t i = row0 + ty + 16 * r;
      float tile_max = -INFINITY;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const std::int64_t j = j0 + tx + 8 * c;
        float x = sc[r][c] * scale;
        if (j >= s || i >= l || (causal != 0 && j > i)) {
          x = -INFINITY;
        } else if (mask_kind != 0) {
          std::int64_t mo, unused;
          offsets(mask_geometry, (b * l + i) * s + j, mo, unused);
          if (mask_kind == 1)
            x += static_cast<const float*>(mask)[mo];
          else if (!static_cast<const bool*>(mask)[mo])
            x = -INFINITY;
        }
        sc[r][c] = x;
        tile_max = fmaxf(tile_max, x);
      }
      for (int w = 4; w > 0; w >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, w));
      const float m_new = fmaxf(m[r], tile_max);
      // Nothing attended yet (every score so far -inf): keep the sums at zero rather than exp(-inf + inf).
      const float correction = m_new == -INFINITY ? 1.0f : expf(m[r] - m_new);
      float tile_sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float p = m_new == -INFINITY ? 0.0f : expf(sc[r][c] - m_new);
        ps[(ty + 16 * r) * kPs + tx + 8 * c] = p;
        tile_sum += p;
      }
      for (int w = 4; w > 0; w >>= 1) tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, w);
      sum[r] = sum[r] * correction + tile_sum;
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < 4 * kChunks; ++c) o[r][c] *= correction;
    }
    __syncwarp();  // a row's probabilities, written by its eight threads (one warp holds four whole rows)
    for (int jj = 0; jj < kKeys; jj += 4) {
      float p[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float4 p4 = *reinterpret_cast<const float4*>(ps + (ty + 16 * r) * kPs + jj);
        p[r][0] = p4.x;
        p[r][1] = p4.y;
        p[r][2] = p4.z;
        p[r][3] = p4.w;
      }
#pragma unroll
      for (int t = 0; t < 4; ++t) {
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const float4 vb = *reinterpret_cast<const float4*>(vs + (jj + t) * kVs + 4 * tx + 32 * c);
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            o[r][4 * c] = fmaf(p[r][t], vb.x, o[r][4 * c]);
            o[r][4 * c + 1] = fmaf(p[r][t], vb.y, o[r][4 * c + 1]);
            o[r][4 * c + 2] = fmaf(p[r][t], vb.z, o[r][4 * c + 2]);
            o[r][4 * c + 3] = fmaf(p[r][t], vb.w, o[r][4 * c + 3]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const std::int64_t i = row0 + ty + 16 * r;
    if (i >= l) continue;
#pragma unroll
    for (int c = 0; c < 4 * kChunks; ++c) {
      const std::int64_t col = 4 * tx + 32 * (c / 4) + c % 4;
      if (col < ev) out[i * ev + col] = o[r][c] / sum[r];  // 0 / 0 for a fully masked row: NaN
    }
  }
}
}  // namespace

// The three variants by value width (attention_value_chunks): up to 32, 64 and 128 columns. Dynamic shared
// memory: attention_shared_floats(e, ev) floats.
#define PACT_ATTENTION_VARIANT(name, chunks)                                                                          \
  extern "C" __global__ void __launch_bounds__(AttentionTile::kThreads)                                               \
      name(float* out, const float* q, const float* k, const float* v, const void* mask, Geometry mask_geometry,      \
           int mask_kind, std::int64_t l, std::int64_t s, std::int64_t e, std::int64_t ev, float scale, int causal) { \
    extern __shared__ __align__(16) float smem[];                                                                     \
    attention_body<chunks>(smem, out, q, k, v, mask, mask_geometry, mask_kind, l, s, e, ev, scale, causal);           \
  }
PACT_ATTENTION_VARIANT(pact_attention_f32_v32, 1)
PACT_ATTENTION_VARIANT(pact_attention_f32_v64, 2)
PACT_ATTENTION_VARIANT(pact_attention_f32_v128, 4)
#undef PACT_ATTENTION_VARIANT

// The probabilities of the attention VJP (and of the forward for wide heads), a chunk of rows at a time: the
// n scores of `p` (already Q K^T), the whole [batch..., L, S]'s from index `first` on, scaled and masked in
// place; then a row softmax (pact_softmax_f32) makes them P.
extern "C" __global__ void pact_attention_scores_f32(float* p, const void* mask, Geometry mask_geometry, int mask_kind,
                                                     std::int64_t l, std::int64_t s, std::int64_t n, std::int64_t first,
                                                     float scale, int causal) {
  for (std::int64_t x = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; x < n;
       x += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t at = first + x;  // the score's index in the whole [batch..., L, S]
    const std::int64_t j = at % s, i = (at / s) % l;
    float y = p[x] * scale;
    if (causal != 0 && j > i) {
      y = -INFINITY;
    } else if (mask_kind != 0) {
      std::int64_t mo, unused;
      offsets(mask_geometry, at, mo, unused);
      if (mask_kind == 1)
        y += static_cast<const float*>(mask)[mo];
      else if (!static_cast<const bool*>(mask)[mo])
        y = -INFINITY;
    }
    p[x] = y;
  }
}

// x *= factor, in place.
extern "C" __global__ void pact_scale_f32(float* x, std::int64_t n, float factor) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    x[i] *= factor;
  }
}

// ---- updates (in place): gradient accumulation and the optimizers ----------------------------------------

// acc += g.
extern "C" __global__ void pact_accumulate_f32(float* acc, const float* g, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    acc[i] += g[i];
  }
}

// torch.optim.SGD (dampening 0, no Nesterov), as pact/kernels/cpu/generic_updates.inc: d = g + wd w;
// v = momentum v + d (with a velocity); w -= lr d (or v).
extern "C" __global__ void pact_sgd_f32(float* w, float* vel, const float* g, std::int64_t n, float lr, float mom,
                                        float wd) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if (vel == nullptr) {
      w[i] -= lr * (g[i] + wd * w[i]);
    } else {
      vel[i] = mom * vel[i] + (g[i] + wd * w[i]);
      w[i] -= lr * vel[i];
    }
  }
}

// torch.optim.Adam / AdamW with the bias corrections folded into `step` and `inv_sqrt_bc2` (the host computes
// them as the CPU kernel does); AdamW's decay first.
extern "C" __global__ void pact_adam_f32(float* w, float* m, float* v, const float* g, std::int64_t n, float b1,
                                         float b2, float eps, float step, float inv_sqrt_bc2, float l2, float decay) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float wi = w[i];
    if (decay != 1.0f) wi *= decay;
    const float gk = g[i] + l2 * wi;
    const float mi = b1 * m[i] + (1.0f - b1) * gk;
    const float vi = b2 * v[i] + (1.0f - b2) * gk * gk;
    m[i] = mi;
    v[i] = vi;
    w[i] = wi - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
}

// ---- convolution: im2col, the GEMM kernels above, col2im ------------------------------------------------

// cols[i, r, l] for the `images` images from n0: r = (channel kh + ki) kw + kj over every input channel (group
// after group, so rows [grp cg kh kw, (grp + 1) cg kh kw) are group grp's), l = y ow + z; the input tap
// x[n0 + i, channel, y sh - ph + ki dh, z sw - pw + kj dw], 0 outside the input.
extern "C" __global__ void pact_im2col_f32(float* cols, const float* x, ConvGeometry g, std::int64_t n0,
                                           std::int64_t images) {
  const std::int64_t l_count = g.oh * g.ow, rows = g.c * g.kh * g.kw, total = images * rows * l_count;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t l = i % l_count, r = (i / l_count) % rows, image = i / (l_count * rows);
    const std::int64_t kj = r % g.kw, ki = (r / g.kw) % g.kh, ch = r / (g.kw * g.kh);
    const std::int64_t iy = (l / g.ow) * g.sh - g.ph + ki * g.dh, ix = (l % g.ow) * g.sw - g.pw + kj * g.dw;
    cols[i] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[(((n0 + image) * g.c + ch) * g.h + iy) * g.w + ix] : 0.0f;
  }
}

// The adjoint of im2col: gx[n0 + i, channel, iy, ix] = the sum of every cols entry im2col read it into, in
// (ki, kj) order: one gather per input element, no atomics, the same answer on every launch.
extern "C" __global__ void pact_col2im_f32(float* gx, const float* cols, ConvGeometry g, std::int64_t n0,
                                           std::int64_t images) {
  const std::int64_t l_count = g.oh * g.ow, plane = g.h * g.w, total = images * g.c * plane;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t ix = i % g.w, iy = (i / g.w) % g.h, ch = (i / plane) % g.c, image = i / (plane * g.c);
    float acc = 0.0f;
    for (std::int64_t ki = 0; ki < g.kh; ++ki) {
      const std::int64_t y = tap_output(iy, ki, g.ph, g.dh, g.sh, g.oh);
      if (y < 0) continue;
      for (std::int64_t kj = 0; kj < g.kw; ++kj) {
        const std::int64_t z = tap_output(ix, kj, g.pw, g.dw, g.sw, g.ow);
        if (z < 0) continue;
        const std::int64_t r = (ch * g.kh + ki) * g.kw + kj;
        acc += cols[(image * g.c * g.kh * g.kw + r) * l_count + y * g.ow + z];
      }
    }
    gx[(n0 * g.c) * plane + i] = acc;
  }
}

// One input channel per group (cg 1: depthwise convolutions, with or without a channel multiplier og), where
// im2col's GEMM would have an inner dimension of only KH KW: direct kernels instead. Output channel o reads
// input channel o / og. The forward takes one thread per output, its taps in (ki, kj) order.
extern "C" __global__ void pact_conv_depthwise_f32(float* out, const float* x, const float* w, ConvGeometry g) {
  const std::int64_t total = g.n * g.o * g.oh * g.ow;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t z = i % g.ow, y = (i / g.ow) % g.oh, o = (i / (g.ow * g.oh)) % g.o, n = i / (g.ow * g.oh * g.o);
    const float* plane = x + (n * g.c + o / g.og) * g.h * g.w;
    const float* taps = w + o * g.kh * g.kw;
    float acc = 0.0f;
    for (std::int64_t ki = 0; ki < g.kh; ++ki) {
      const std::int64_t iy = y * g.sh - g.ph + ki * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      for (std::int64_t kj = 0; kj < g.kw; ++kj) {
        const std::int64_t ix = z * g.sw - g.pw + kj * g.dw;
        if (ix >= 0 && ix < g.w) acc = fmaf(plane[iy * g.w + ix], taps[ki * g.kw + kj], acc);
      }
    }
    out[i] = acc;
  }
}

// The input's gradient: one thread per input element gathers, over its channel's og outputs and the taps
// (ki, kj) that read it, gy times the tap's weight.
extern "C" __global__ void pact_conv_depthwise_input_grad_f32(float* gx, const float* gy, const float* w,
                                                              ConvGeometry g) {
  const std::int64_t plane = g.h * g.w, total = g.n * g.c * plane;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t ix = i % g.w, iy = (i / g.w) % g.h, ch = (i / plane) % g.c, n = i / (plane * g.c);
    float acc = 0.0f;
    for (std::int64_t m = 0; m < g.og; ++m) {
      const std::int64_t o = ch * g.og + m;
      const float* gplane = gy + (n * g.o + o) * g.oh * g.ow;
      const float* taps = w + o * g.kh * g.kw;
      for (std::int64_t ki = 0; ki < g.kh; ++ki) {
        const std::int64_t y = tap_output(iy, ki, g.ph, g.dh, g.sh, g.oh);
        if (y < 0) continue;
        for (std::int64_t kj = 0; kj < g.kw; ++kj) {
          const std::int64_t z = tap_output(ix, kj, g.pw, g.dw, g.sw, g.ow);
          if (z < 0) continue;
          acc = fmaf(gplane[y * g.ow + z], taps[ki * g.kw + kj], acc);
        }
      }
    }
    gx[i] = acc;
  }
}

// The weight's gradient: one block per weight (output channel o, tap ki kj) sums gy[n, o, y, z] times the
// input it read over every image and output pixel (a block reduction; blockDim.x kThreads).
extern "C" __global__ void pact_conv_depthwise_weight_grad_f32(float* gw, const float* gy, const float* x,
                                                               ConvGeometry g) {
  const std::int64_t taps = g.kh * g.kw, o = blockIdx.x / taps, kj = (blockIdx.x % taps) % g.kw,
                     ki = (blockIdx.x % taps) / g.kw, ch = o / g.og, pixels = g.oh * g.ow;
  float acc = 0.0f;
  for (std::int64_t p = threadIdx.x; p < g.n * pixels; p += blockDim.x) {
    const std::int64_t n = p / pixels, y = (p % pixels) / g.ow, z = p % g.ow;
    const std::int64_t iy = y * g.sh - g.ph + ki * g.dh, ix = z * g.sw - g.pw + kj * g.dw;
    if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
      acc = fmaf(gy[(n * g.o + o) * pixels + p % pixels], x[((n * g.c + ch) * g.h + iy) * g.w + ix], acc);
  }
  acc = block_reduce<false>(acc);
  if (threadIdx.x == 0) gw[blockIdx.x] = acc;
}

// ---- pooling ------------------------------------------------------------------------------------------

namespace {
// The input offset of pooling window (y, z)'s max in plane p: the first tap greater than every earlier one,
// or the first NaN (the CPU kernels' rule); -1 for a window with no tap inside the input.
__device__ std::int64_t window_argmax(const float* x, const PoolGeometry& g, std::int64_t p, std::int64_t y,
                                      std::int64_t z) {
  std::int64_t arg = -1;
  float best = -INFINITY;
  for (std::int64_t i = 0; i < g.kh; ++i) {
    const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
    if (iy < 0 || iy >= g.h) continue;
    for (std::int64_t j = 0; j < g.kw; ++j) {
      const std::int64_t ix = z * g.sw - g.pw + j * g.dw;
      if (ix < 0 || ix >= g.w) continue;
      const std::int64_t e = (p * g.h + iy) * g.w + ix;
      const float v = x[e];
      if (arg < 0 || v > best || (isnan(v) && !isnan(best))) {
        best = v;
        arg = e;
      }
    }
  }
  return arg;
}
// The taps of window (y, z) inside the input.
__device__ std::int64_t window_taps(const PoolGeometry& g, std::int64_t y, std::int64_t z) {
  std::int64_t rows = 0, cols = 0;
  for (std::int64_t i = 0; i < g.kh; ++i) {
    const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
    rows += iy >= 0 && iy < g.h ? 1 : 0;
  }
  for (std::int64_t j = 0; j < g.kw; ++j) {
    const std::int64_t ix = z * g.sw - g.pw + j * g.dw;
    cols += ix >= 0 && ix < g.w ? 1 : 0;
  }
  return rows * cols;
}
}  // namespace

// max_pool2d (max != 0) or avg_pool2d over contiguous planes: one thread per output.
extern "C" __global__ void pact_pool2d_f32(float* out, const float* x, PoolGeometry g, int max) {
  const std::int64_t total = g.planes * g.oh * g.ow;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t z = i % g.ow, y = (i / g.ow) % g.oh, p = i / (g.ow * g.oh);
    if (max != 0) {
      const std::int64_t arg = window_argmax(x, g, p, y, z);
      out[i] = arg < 0 ? -INFINITY : x[arg];
      continue;
    }
    float acc = 0.0f;
    for (std::int64_t a = 0; a < g.kh; ++a) {
      const std::int64_t iy = y * g.sh - g.ph + a * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      for (std::int64_t b = 0; b < g.kw; ++b) {
        const std::int64_t ix = z * g.sw - g.pw + b * g.dw;
        if (ix >= 0 && ix < g.w) acc += x[(p * g.h + iy) * g.w + ix];
      }
    }
    out[i] = acc / static_cast<float>(avg_divisor(g, y, z, window_taps(g, y, z)));
  }
}

// The pooling VJP, one thread per input element: the sum over the windows that hold it (max: whose argmax it
// is) of their cotangent (avg: divided by the window's divisor). A gather: no atomics, no launch-order
// dependence.
extern "C" __global__ void pact_pool2d_grad_f32(float* gx, const float* x, const float* gy, PoolGeometry g, int max) {
  const std::int64_t total = g.planes * g.h * g.w;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t ix = i % g.w, iy = (i / g.w) % g.h, p = i / (g.w * g.h);
    float acc = 0.0f;
    for (std::int64_t a = 0; a < g.kh; ++a) {
      const std::int64_t y = tap_output(iy, a, g.ph, g.dh, g.sh, g.oh);
      if (y < 0) continue;
      for (std::int64_t b = 0; b < g.kw; ++b) {
        const std::int64_t z = tap_output(ix, b, g.pw, g.dw, g.sw, g.ow);
        if (z < 0) continue;
        const float go = gy[(p * g.oh + y) * g.ow + z];
        if (max != 0) {
          if (window_argmax(x, g, p, y, z) == i) acc += go;
        } else {
          acc += go / static_cast<float>(avg_divisor(g, y, z, window_taps(g, y, z)));
        }
      }
    }
    gx[i] = acc;
  }
}

namespace {
// adaptive_avg_pool2d's window along one dimension: [floor(i n / o), ceil((i + 1) n / o)).
__device__ inline std::int64_t adaptive_start(std::int64_t i, std::int64_t n, std::int64_t o) { return (i * n) / o; }
__device__ inline std::int64_t adaptive_end(std::int64_t i, std::int64_t n, std::int64_t o) {
  return ((i + 1) * n + o - 1) / o;
}
}  // namespace

// adaptive_avg_pool2d over `planes` contiguous h x w planes into oh x ow: one thread per output.
extern "C" __global__ void pact_adaptive_pool_f32(float* out, const float* x, std::int64_t planes, std::int64_t h,
                                                  std::int64_t w, std::int64_t oh, std::int64_t ow) {
  const std::int64_t total = planes * oh * ow;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t z = i % ow, y = (i / ow) % oh, p = i / (ow * oh);
    const std::int64_t y0 = adaptive_start(y, h, oh), y1 = adaptive_end(y, h, oh);
    const std::int64_t x0 = adaptive_start(z, w, ow), x1 = adaptive_end(z, w, ow);
    float acc = 0.0f;
    for (std::int64_t a = y0; a < y1; ++a)
      for (std::int64_t b = x0; b < x1; ++b) acc += x[(p * h + a) * w + b];
    out[i] = acc / static_cast<float>((y1 - y0) * (x1 - x0));
  }
}

// Its VJP, one thread per input element: the sum over the windows that hold it of their share.
extern "C" __global__ void pact_adaptive_pool_grad_f32(float* gx, const float* gy, std::int64_t planes, std::int64_t h,
                                                       std::int64_t w, std::int64_t oh, std::int64_t ow) {
  const std::int64_t total = planes * h * w;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = i % w, a = (i / w) % h, p = i / (w * h);
    float acc = 0.0f;
    // Window starts grow with the index: stop at the first window that starts past the element.
    for (std::int64_t y = 0; y < oh && adaptive_start(y, h, oh) <= a; ++y) {
      const std::int64_t y1 = adaptive_end(y, h, oh);
      if (a >= y1) continue;
      const std::int64_t rows = y1 - adaptive_start(y, h, oh);
      for (std::int64_t z = 0; z < ow && adaptive_start(z, w, ow) <= b; ++z) {
        const std::int64_t x1 = adaptive_end(z, w, ow);
        if (b >= x1) continue;
        acc += gy[(p * oh + y) * ow + z] / static_cast<float>(rows * (x1 - adaptive_start(z, w, ow)));
      }
    }
    gx[i] = acc;
  }
}

// ---- batch norm: x [n, c, spatial] contiguous, one block per channel for its statistics ------------------

namespace {
// The k-th element (over the batch and the spatial positions) of channel ch of a contiguous [n, c, spatial].
__device__ inline std::int64_t channel_element(std::int64_t k, std::int64_t ch, std::int64_t c, std::int64_t spatial) {
  return ((k / spatial) * c + ch) * spatial + k % spatial;
}
__device__ double block_sum_double(double v) {
  __shared__ double partial[32];
  __shared__ double result;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double w = lane < static_cast<int>(blockDim.x >> 5) ? partial[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
    if (lane == 0) result = w;
  }
  __syncthreads();
  const double r = result;
  __syncthreads();
  return r;
}
}  // namespace

// Per channel: mean[ch] and inv[ch] = 1 / sqrt(var + eps). Training: the batch's mean and biased variance
// (two passes, the squares about the mean); evaluation: the running statistics.
extern "C" __global__ void pact_batch_stats_f32(float* mean, float* inv, const float* x, const float* running_mean,
                                                const float* running_var, std::int64_t n, std::int64_t c,
                                                std::int64_t spatial, float eps, int training) {
  const std::int64_t ch = blockIdx.x, count = n * spatial;
  if (training == 0) {
    if (threadIdx.x == 0) {
      mean[ch] = running_mean[ch];
      inv[ch] = 1.0f / sqrtf(running_var[ch] + eps);
    }
    return;
  }
  float s = 0.0f;
  for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) s += x[channel_element(k, ch, c, spatial)];
  const float m = block_reduce<false>(s) / static_cast<float>(count);
  float v = 0.0f;
  for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const float d = x[channel_element(k, ch, c, spatial)] - m;
    v += d * d;
  }
  v = block_reduce<false>(v) / static_cast<float>(count);
  if (threadIdx.x == 0) {
    mean[ch] = m;
    inv[ch] = 1.0f / sqrtf(v + eps);
  }
}

// y = (x - mean[ch]) inv[ch] w[ch] + b[ch], elementwise.
extern "C" __global__ void pact_batch_norm_apply_f32(float* y, const float* x, const float* mean, const float* inv,
                                                     const float* w, const float* b, std::int64_t total, std::int64_t c,
                                                     std::int64_t spatial) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t ch = (i / spatial) % c;
    y[i] = (x[i] - mean[ch]) * inv[ch] * w[ch] + b[ch];
  }
}

// batch_norm's VJP, one block per channel: gw[ch] = sum g xhat, gb[ch] = sum g, and gx (training: through the
// batch statistics; evaluation: g w inv).
extern "C" __global__ void pact_batch_norm_grad_f32(float* gx, float* gw, float* gb, const float* x, const float* g,
                                                    const float* mean, const float* inv, const float* w, std::int64_t n,
                                                    std::int64_t c, std::int64_t spatial, int training) {
  const std::int64_t ch = blockIdx.x, count = n * spatial;
  const float m = mean[ch], iv = inv[ch], wc = w[ch];
  float sg = 0.0f, sgx = 0.0f;
  for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const std::int64_t e = channel_element(k, ch, c, spatial);
    sg += g[e];
    sgx += g[e] * (x[e] - m) * iv;
  }
  sg = block_reduce<false>(sg);
  sgx = block_reduce<false>(sgx);
  if (threadIdx.x == 0) {
    gw[ch] = sgx;
    gb[ch] = sg;
  }
  const float cf = static_cast<float>(count);
  for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const std::int64_t e = channel_element(k, ch, c, spatial);
    const float xhat = (x[e] - m) * iv;
    gx[e] = training != 0 ? wc * iv * (g[e] - sg / cf - xhat * sgx / cf) : g[e] * wc * iv;
  }
}

// batch_norm_stats, in place, one block per channel: running = (1 - momentum) running + momentum batch
// statistic, the batch mean and unbiased variance accumulated in double (a count of 1 divides by 1).
extern "C" __global__ void pact_batch_norm_stats_f32(float* running_mean, float* running_var, const float* x,
                                                     std::int64_t n, std::int64_t c, std::int64_t spatial,
                                                     double momentum) {
  const std::int64_t ch = blockIdx.x, count = n * spatial;
  double s = 0.0;
  for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x)
    s += static_cast<double>(x[channel_element(k, ch, c, spatial)]);
  const double m = block_sum_double(s) / static_cast<double>(count);
  double v = 0.0;
  for (std::int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const double d = static_cast<double>(x[channel_element(k, ch, c, spatial)]) - m;
    v += d * d;
  }
  v = block_sum_double(v) / static_cast<double>(count > 1 ? count - 1 : 1);
  if (threadIdx.x == 0) {
    running_mean[ch] = static_cast<float>((1.0 - momentum) * static_cast<double>(running_mean[ch]) + momentum * m);
    running_var[ch] = static_cast<float>((1.0 - momentum) * static_cast<double>(running_var[ch]) + momentum * v);
  }
}
