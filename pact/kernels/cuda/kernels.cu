// The CUDA provider's device code (SPEC §5 `cuda`): f32 kernels with extern "C" names, compiled by nvcc
// into one fatbin that pact/kernels/cuda/cuda_kernels.cpp loads through the driver (cuModuleLoadData) and
// launches with cuLaunchKernel on the device's stream. Nothing here allocates or synchronizes; the host
// side checks every operand's provider, dtype and shape before a launch. Index arithmetic is 64-bit.

#include <cstdint>

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

// Binary ops over a broadcast geometry: 0 add, 1 mul, 2 sub.
extern "C" __global__ void pact_binary_f32(float* out, const float* a, const float* b, Geometry g, std::int64_t n,
                                           int op) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t oa, ob;
    offsets(g, i, oa, ob);
    const float x = a[oa], y = b[ob];
    out[i] = op == 0 ? x + y : op == 1 ? x * y : x - y;
  }
}

// Unary ops over a strided input (stride0): 0 copy (makes a contiguous copy), 1 relu.
extern "C" __global__ void pact_unary_f32(float* out, const float* in, Geometry g, std::int64_t n, int op) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t o, unused;
    offsets(g, i, o, unused);
    const float x = in[o];
    // relu propagates NaN as PyTorch does (x > 0 is false for NaN, but NaN must stay NaN)
    out[i] = op == 0 ? x : (x > 0.0f || x != x ? x : 0.0f);
  }
}

// relu's VJP over contiguous operands: g where x > 0, else 0.
extern "C" __global__ void pact_relu_grad_f32(float* out, const float* x, const float* g, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    out[i] = x[i] > 0.0f ? g[i] : 0.0f;
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

// ---- softmax and cross entropy --------------------------------------------------------------------------

// Softmax (or log-softmax) along one dimension: the tensor is [outer, dim, inner] contiguous; one block per
// (outer, inner) row.
extern "C" __global__ void pact_softmax_f32(float* out, const float* in, std::int64_t outer, std::int64_t dim,
                                            std::int64_t inner, int log_form) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t o = row / inner, i = row % inner;
  const std::int64_t base = o * dim * inner + i;
  float mx = -INFINITY;
  for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) mx = fmaxf(mx, in[base + d * inner]);
  mx = block_reduce<true>(mx);
  float s = 0.0f;
  for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) s += expf(in[base + d * inner] - mx);
  s = block_reduce<false>(s);
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
  float mx = -INFINITY;
  for (std::int64_t d = threadIdx.x; d < classes; d += blockDim.x) mx = fmaxf(mx, xr[d]);
  mx = block_reduce<true>(mx);
  float s = 0.0f;
  for (std::int64_t d = threadIdx.x; d < classes; d += blockDim.x) s += expf(xr[d] - mx);
  s = block_reduce<false>(s);
  if (threadIdx.x == 0) {
    losses[row] = logf(s) + mx - xr[t];
    counted[row] = 1.0f;
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
  float mx = -INFINITY;
  for (std::int64_t d = threadIdx.x; d < classes; d += blockDim.x) mx = fmaxf(mx, xr[d]);
  mx = block_reduce<true>(mx);
  float s = 0.0f;
  for (std::int64_t d = threadIdx.x; d < classes; d += blockDim.x) s += expf(xr[d] - mx);
  s = block_reduce<false>(s);
  for (std::int64_t d = threadIdx.x; d < classes; d += blockDim.x)
    gr[d] = gi * (expf(xr[d] - mx) / s - (d == t ? 1.0f : 0.0f));
}
