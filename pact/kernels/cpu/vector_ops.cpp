#include "pact/kernels/cpu/vector_ops.hpp"

#include <immintrin.h>

#include <cmath>

#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/fast_math.hpp"
#include "pact/kernels/cpu/parallel.hpp"
#include "pact/kernels/kernel.hpp"

namespace pact::kernels::cpu {

namespace {

// Elementwise work below this many elements stays on one thread (an OpenMP region costs more).
constexpr std::int64_t kShareElements = std::int64_t{1} << 16;

// One map over [0, n), the op chosen outside the loop so each loop vectorises. x and y are the same array
// (map_inplace_f32) or do not overlap: each element is read and written at its own index, so no iteration
// depends on another (ivdep; __restrict would forbid the in-place call).
PACT_SIMD_INLINE void map_body(MapOp op, const float* x, float* y, std::int64_t n, float lo, float hi) {
  switch (op) {
    case MapOp::neg:
#pragma GCC ivdep
      for (std::int64_t i = 0; i < n; ++i) y[i] = -x[i];
      break;
    case MapOp::relu:
#pragma GCC ivdep
      for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];  // NaN propagates
      break;
    case MapOp::clamp:  // the generic kernel's order of tests, so NaN propagates the same way
#pragma GCC ivdep
      for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);
      break;
    case MapOp::silu:
#pragma GCC ivdep
      for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + fast_exp(-x[i]));
      break;
    case MapOp::sigmoid:
#pragma GCC ivdep
      for (std::int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + fast_exp(-x[i]));
      break;
    case MapOp::exp:
#pragma GCC ivdep
      for (std::int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i]);
      break;
    case MapOp::hardswish:  // x relu6(x + 3) / 6, as the generic kernel computes it
#pragma GCC ivdep
      for (std::int64_t i = 0; i < n; ++i) {
        const float s = x[i] + 3.0f, r = s < 0.0f ? 0.0f : (s > 6.0f ? 6.0f : s);
        y[i] = x[i] * r / 6.0f;
      }
      break;
    case MapOp::hardsigmoid:
#pragma GCC ivdep
      for (std::int64_t i = 0; i < n; ++i) {
        const float s = x[i] + 3.0f;
        y[i] = (s < 0.0f ? 0.0f : (s > 6.0f ? 6.0f : s)) / 6.0f;
      }
      break;
  }
}

// exp of 16 lanes for AVX-512: fast_exp's reduction and polynomial, with the power of two applied by
// vscalefps, which also gives 0 below the range and +inf above it, so no compare-and-select is left:
// the input is clamped to [-104, 88.8] (2^n then spans [2^-150, 2^128], past both ends of float), and a
// NaN passes the clamp (max and min return their second operand when either is NaN) and the arithmetic.
// silu and sigmoid (an exp, an add and a divide per 16 lanes) took 0.138 ns an element here against
// 0.248 for the vectorised fast_exp loop, whose range and NaN selects became masked divides (Zen 5, L1).
PACT_TARGET_AVX512 PACT_SIMD_INLINE __m512 exp16(__m512 x) {
  const __m512 t = _mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), t);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.3981999507e-3f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// silu, sigmoid or exp of 16 lanes.
template <MapOp Op>
PACT_TARGET_AVX512 PACT_SIMD_INLINE __m512 exp_map16(__m512 x) {
  if constexpr (Op == MapOp::exp) return exp16(x);
  const __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(), x)));
  return _mm512_div_ps(Op == MapOp::silu ? x : _mm512_set1_ps(1.0f), d);
}

template <MapOp Op>
PACT_TARGET_AVX512 PACT_SIMD_INLINE void exp_map_avx512(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp_map16<Op>(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, tail, exp_map16<Op>(_mm512_maskz_loadu_ps(tail, x + i)));
  }
}

// exp of 8 lanes for AVX2: exp16's clamp, reduction and polynomial, with 2^n built in the exponent bits as
// two factors 2^h 2^(n - h) (h = n / 2 rounded down), each a normal float for every n in [-150, 128], so the
// product underflows to 0 and overflows to +inf as vscalefps does, with no select; a NaN input makes p NaN.
PACT_TARGET_AVX2 PACT_SIMD_INLINE __m256 exp8(__m256 x) {
  const __m256 t = _mm256_min_ps(_mm256_set1_ps(88.8f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), t);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.3981999507e-3f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1), bias = _mm256_set1_epi32(127);
  const __m256 lo = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 hi = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, lo), hi);
}

// silu, sigmoid or exp of 8 lanes.
template <MapOp Op>
PACT_TARGET_AVX2 PACT_SIMD_INLINE __m256 exp_map8(__m256 x) {
  if constexpr (Op == MapOp::exp) return exp8(x);
  const __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), x)));
  return _mm256_div_ps(Op == MapOp::silu ? x : _mm256_set1_ps(1.0f), d);
}

template <MapOp Op>
PACT_TARGET_AVX2 PACT_SIMD_INLINE void exp_map_avx2(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_map8<Op>(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i tail =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(y + i, tail, exp_map8<Op>(_mm256_maskload_ps(x + i, tail)));
  }
}

// The AVX2 level: silu, sigmoid and exp by exp8, the other maps by map_body.
PACT_TARGET_AVX2 void map_avx2(MapOp op, const float* x, float* y, std::int64_t n, float lo, float hi) {
  switch (op) {
    case MapOp::silu:
      return exp_map_avx2<MapOp::silu>(x, y, n);
    case MapOp::sigmoid:
      return exp_map_avx2<MapOp::sigmoid>(x, y, n);
    case MapOp::exp:
      return exp_map_avx2<MapOp::exp>(x, y, n);
    default:
      return map_body(op, x, y, n, lo, hi);
  }
}

// The AVX-512 level: silu, sigmoid and exp by exp16, the other maps by map_body.
PACT_TARGET_AVX512 void map_avx512(MapOp op, const float* x, float* y, std::int64_t n, float lo, float hi) {
  switch (op) {
    case MapOp::silu:
      return exp_map_avx512<MapOp::silu>(x, y, n);
    case MapOp::sigmoid:
      return exp_map_avx512<MapOp::sigmoid>(x, y, n);
    case MapOp::exp:
      return exp_map_avx512<MapOp::exp>(x, y, n);
    default:
      return map_body(op, x, y, n, lo, hi);
  }
}
const simd::Table<decltype(&map_avx512)> map_rows{
    "map_rows", {&simd::Variants<&map_body>::portable, "map_body"}, PACT_SIMD_FN(map_avx2), PACT_SIMD_FN(map_avx512)};

PACT_SIMD_INLINE void map_tile_body(MapOp op, float* y, std::int64_t ld, std::int64_t rows, std::int64_t cols, float lo,
                                    float hi) {
  for (std::int64_t r = 0; r < rows; ++r) map_body(op, y + r * ld, y + r * ld, cols, lo, hi);
}
PACT_TARGET_AVX2 void map_tile_avx2(MapOp op, float* y, std::int64_t ld, std::int64_t rows, std::int64_t cols, float lo,
                                    float hi) {
  for (std::int64_t r = 0; r < rows; ++r) map_avx2(op, y + r * ld, y + r * ld, cols, lo, hi);
}
PACT_TARGET_AVX512 void map_tile_avx512(MapOp op, float* y, std::int64_t ld, std::int64_t rows, std::int64_t cols,
                                        float lo, float hi) {
  for (std::int64_t r = 0; r < rows; ++r) map_avx512(op, y + r * ld, y + r * ld, cols, lo, hi);
}
const simd::Table<decltype(&map_tile_avx512)> map_tile{"map_tile",
                                                       {&simd::Variants<&map_tile_body>::portable, "map_tile_body"},
                                                       PACT_SIMD_FN(map_tile_avx2),
                                                       PACT_SIMD_FN(map_tile_avx512)};

PACT_SIMD_INLINE void channel_affine_body(const float* __restrict x, const float* __restrict scale,
                                          const float* __restrict shift, std::int64_t r0, std::int64_t r1,
                                          std::int64_t channels, std::int64_t inner, float* __restrict y) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float s = scale[r % channels], t = shift[r % channels];
    const float* __restrict xr = x + r * inner;
    float* __restrict yr = y + r * inner;
    for (std::int64_t k = 0; k < inner; ++k) yr[k] = xr[k] * s + t;
  }
}
PACT_SIMD_VARIANTS(channel_affine_rows, channel_affine_body);

PACT_SIMD_INLINE void rows_body(BinaryKind op, const float* __restrict a, const float* __restrict b, bool a_rep,
                                bool b_rep, std::int64_t r0, std::int64_t r1, std::int64_t inner,
                                float* __restrict out) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* __restrict x = a + (a_rep ? 0 : r * inner);
    const float* __restrict y = b + (b_rep ? 0 : r * inner);
    float* __restrict o = out + r * inner;
    switch (op) {
      case BinaryKind::add:
        for (std::int64_t k = 0; k < inner; ++k) o[k] = x[k] + y[k];
        break;
      case BinaryKind::sub:
        for (std::int64_t k = 0; k < inner; ++k) o[k] = x[k] - y[k];
        break;
      case BinaryKind::mul:
        for (std::int64_t k = 0; k < inner; ++k) o[k] = x[k] * y[k];
        break;
      case BinaryKind::div:
        for (std::int64_t k = 0; k < inner; ++k) o[k] = x[k] / y[k];
        break;
    }
  }
}
PACT_SIMD_VARIANTS(binary_rows, rows_body);

PACT_SIMD_INLINE void row_scalar_body(BinaryKind op, const float* __restrict a, const float* __restrict s,
                                      bool scalar_first, std::int64_t r0, std::int64_t r1, std::int64_t inner,
                                      float* __restrict out) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float v = s[r];
    const float* __restrict ar = a + r * inner;
    float* __restrict o = out + r * inner;
    switch (op) {
      case BinaryKind::add:
        for (std::int64_t k = 0; k < inner; ++k) o[k] = scalar_first ? v + ar[k] : ar[k] + v;
        break;
      case BinaryKind::sub:
        for (std::int64_t k = 0; k < inner; ++k) o[k] = scalar_first ? v - ar[k] : ar[k] - v;
        break;
      case BinaryKind::mul:
        for (std::int64_t k = 0; k < inner; ++k) o[k] = scalar_first ? v * ar[k] : ar[k] * v;
        break;
      case BinaryKind::div:
        for (std::int64_t k = 0; k < inner; ++k) o[k] = scalar_first ? v / ar[k] : ar[k] / v;
        break;
    }
  }
}
PACT_SIMD_VARIANTS(row_scalar_rows, row_scalar_body);

PACT_SIMD_INLINE void row_sums_body(const float* __restrict x, std::int64_t r0, std::int64_t r1, std::int64_t inner,
                                    float scale, float* __restrict out) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const float* __restrict row = x + r * inner;
    out[r] = lanes_sum(inner, [row](std::int64_t k) { return row[k]; }) * scale;
  }
}
PACT_SIMD_VARIANTS(row_sums, row_sums_body);

// Columns [k0, k1) (at most kColumnChunk of them) of one [mid, inner] block summed into out: a stack
// block of partial sums over kColumnBlock rows at a time, added to the total in order.
constexpr std::int64_t kColumnChunk = 64, kColumnBlock = 64;
PACT_SIMD_INLINE void column_sums_body(const float* __restrict x, std::int64_t mid, std::int64_t inner, std::int64_t k0,
                                       std::int64_t k1, float scale, float* __restrict out) {
  float total[kColumnChunk], part[kColumnChunk];
  const std::int64_t w = k1 - k0;
  for (std::int64_t k = 0; k < w; ++k) total[k] = 0.0f;
  for (std::int64_t m0 = 0; m0 < mid; m0 += kColumnBlock) {
    const std::int64_t m1 = std::min(mid, m0 + kColumnBlock);
    for (std::int64_t k = 0; k < w; ++k) part[k] = 0.0f;
    for (std::int64_t m = m0; m < m1; ++m) {
      const float* __restrict row = x + m * inner + k0;
      for (std::int64_t k = 0; k < w; ++k) part[k] += row[k];
    }
    for (std::int64_t k = 0; k < w; ++k) total[k] += part[k];
  }
  for (std::int64_t k = 0; k < w; ++k) out[k0 + k] = total[k] * scale;
}
PACT_SIMD_VARIANTS(column_sums, column_sums_body);

// Rows [j0, j1) of y = x W^T + bias: lanes_sum's 32 lanes and pairing at every level. The AVX2 and AVX-512
// variants keep the lanes in registers and fold them as a tree of vector adds, whatever GCC makes of the
// plain loop: with the fold's widths as compile-time constants it emitted a chain of about thirty dependent
// scalar adds per row, and a decode step (one long stream of rows from memory) ran at two thirds of its
// speed behind it.
PACT_SIMD_INLINE void gemv_body(const float* __restrict x, const float* __restrict w, const float* __restrict bias,
                                std::int64_t j0, std::int64_t j1, std::int64_t in_f, float* __restrict y) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const float* __restrict row = w + j * in_f;
    y[j] = lanes_sum(in_f, [x, row](std::int64_t k) { return x[k] * row[k]; }) + (bias != nullptr ? bias[j] : 0.0f);
  }
}

constexpr int kF32Lanes = 32;  // lanes_sum's

PACT_SIMD_INLINE float gemv_tail(const float* x, const float* row, std::int64_t k, std::int64_t in_f) {
  float t = 0.0f;
  for (; k < in_f; ++k) t += x[k] * row[k];
  return t;
}

void gemv_portable(const float* x, const float* w, const float* bias, std::int64_t j0, std::int64_t j1,
                   std::int64_t in_f, float* y) {
  gemv_body(x, w, bias, j0, j1, in_f, y);
}

PACT_TARGET_AVX2 void gemv_avx2(const float* x, const float* w, const float* bias, std::int64_t j0, std::int64_t j1,
                                std::int64_t in_f, float* y) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const float* row = w + j * in_f;
    __m256 a[4];  // a[g] holds lanes 8g .. 8g + 7
    for (auto& v : a) v = _mm256_setzero_ps();
    std::int64_t k = 0;
    for (; k + kF32Lanes <= in_f; k += kF32Lanes) {
      prefetch_weight_stream(row + k);
      prefetch_weight_stream(row + k + 16);
      for (int g = 0; g < 4; ++g)
        a[g] = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8 * g), _mm256_loadu_ps(row + k + 8 * g), a[g]);
    }
    const float t = gemv_tail(x, row, k, in_f);
    // fold_lanes<32>: + 16, + 8, then within the register + 4 ... + 1.
    const __m256 s8 = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const float s1 = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    y[j] = (s1 + t) + (bias != nullptr ? bias[j] : 0.0f);
  }
}

PACT_TARGET_AVX512 void gemv_avx512(const float* x, const float* w, const float* bias, std::int64_t j0, std::int64_t j1,
                                    std::int64_t in_f, float* y) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const float* row = w + j * in_f;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();  // lanes 0 .. 15 and 16 .. 31
    std::int64_t k = 0;
    for (; k + kF32Lanes <= in_f; k += kF32Lanes) {
      prefetch_weight_stream(row + k);
      prefetch_weight_stream(row + k + 16);
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), _mm512_loadu_ps(row + k), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16), _mm512_loadu_ps(row + k + 16), a1);
    }
    const float t = gemv_tail(x, row, k, in_f);
    // fold_lanes<32>: + 16, then within the register + 8 ... + 1.
    const __m512 s16 = _mm512_add_ps(a0, a1);
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(s16), _mm512_extractf32x8_ps(s16, 1));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const float s1 = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    y[j] = (s1 + t) + (bias != nullptr ? bias[j] : 0.0f);
  }
}

const simd::Table<decltype(&gemv_portable)> gemv_rows{"gemv_rows", PACT_SIMD_FN(gemv_portable), PACT_SIMD_FN(gemv_avx2),
                                                      PACT_SIMD_FN(gemv_avx512)};

// Rows [j0, j1) of y = scale * (x W^T) + bias against an int8 weight: the weights widened to f32 in the loop.
// A decode step is this loop over every weight, which it reads as one sequential stream (row after row).
// Every level keeps the same 64 lanes (lane l sums the products of columns l, l + 64, ...; then
// fold_lanes), so the levels differ only where FMA contracts a product. The portable body is plain C++; the
// AVX2 and AVX-512 ones widen each int8 group in one instruction from memory (vpmovsxbd): GCC's own
// widening of the plain loop went through int16 with extracts, five instructions per 16 weights where one
// will do, and kept the lanes in memory between a row's loops.
constexpr int kI8Lanes = 64;

PACT_SIMD_INLINE float gemv_i8_tail(const float* x, const std::int8_t* row, std::int64_t k, std::int64_t in_f) {
  float t = 0.0f;
  for (; k < in_f; ++k) t += x[k] * static_cast<float>(row[k]);
  return t;
}

void gemv_i8_portable(const float* x, const std::int8_t* w, const float* scale, const float* bias, std::int64_t j0,
                      std::int64_t j1, std::int64_t in_f, float* y) {
  constexpr int L = kI8Lanes;
  for (std::int64_t j = j0; j < j1; ++j) {
    const std::int8_t* row = w + j * in_f;
    float acc[L] = {};
    std::int64_t k = 0;
    for (; k + L <= in_f; k += L)
      for (int l = 0; l < L; ++l) acc[l] += x[k + l] * static_cast<float>(row[k + l]);
    const float t = gemv_i8_tail(x, row, k, in_f);
    fold_lanes<L>(acc);
    y[j] = (acc[0] + t) * scale[j] + (bias != nullptr ? bias[j] : 0.0f);
  }
}

PACT_TARGET_AVX2 void gemv_i8_avx2(const float* x, const std::int8_t* w, const float* scale, const float* bias,
                                   std::int64_t j0, std::int64_t j1, std::int64_t in_f, float* y) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const std::int8_t* row = w + j * in_f;
    __m256 a[8];  // a[g] holds lanes 8g .. 8g + 7
    for (auto& v : a) v = _mm256_setzero_ps();
    std::int64_t k = 0;
    for (; k + kI8Lanes <= in_f; k += kI8Lanes) {
      prefetch_weight_stream(row + k);
      for (int g = 0; g < 8; ++g) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + k + 8 * g));
        a[g] = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8 * g), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), a[g]);
      }
    }
    const float t = gemv_i8_tail(x, row, k, in_f);
    // fold_lanes<64>: + 32, + 16, then within the register + 8 ... + 1.
    for (int g = 0; g < 4; ++g) a[g] = _mm256_add_ps(a[g], a[g + 4]);
    for (int g = 0; g < 2; ++g) a[g] = _mm256_add_ps(a[g], a[g + 2]);
    const __m256 s8 = _mm256_add_ps(a[0], a[1]);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const float s1 = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    y[j] = (s1 + t) * scale[j] + (bias != nullptr ? bias[j] : 0.0f);
  }
}

PACT_TARGET_AVX512 void gemv_i8_avx512(const float* x, const std::int8_t* w, const float* scale, const float* bias,
                                       std::int64_t j0, std::int64_t j1, std::int64_t in_f, float* y) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const std::int8_t* row = w + j * in_f;
    __m512 a[4];  // a[g] holds lanes 16g .. 16g + 15
    for (auto& v : a) v = _mm512_setzero_ps();
    std::int64_t k = 0;
    for (; k + kI8Lanes <= in_f; k += kI8Lanes) {
      prefetch_weight_stream(row + k);
      for (int g = 0; g < 4; ++g) {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k + 16 * g));
        a[g] = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16 * g), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), a[g]);
      }
    }
    const float t = gemv_i8_tail(x, row, k, in_f);
    // fold_lanes<64>: + 32, + 16, then within the register + 8 ... + 1.
    const __m512 s16 = _mm512_add_ps(_mm512_add_ps(a[0], a[2]), _mm512_add_ps(a[1], a[3]));
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(s16), _mm512_extractf32x8_ps(s16, 1));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const float s1 = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
    y[j] = (s1 + t) * scale[j] + (bias != nullptr ? bias[j] : 0.0f);
  }
}

const simd::Table<decltype(&gemv_i8_portable)> gemv_i8_rows{"gemv_i8_rows", PACT_SIMD_FN(gemv_i8_portable),
                                                            PACT_SIMD_FN(gemv_i8_avx2), PACT_SIMD_FN(gemv_i8_avx512)};

// Rows [j0, j1) of the dequantized weight: out[j, k] = w[j, k] * scale[j].
PACT_SIMD_INLINE void dequantize_i8_body(const std::int8_t* w, const float* scale, std::int64_t j0, std::int64_t j1,
                                         std::int64_t in_f, float* out) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const float s = scale[j];
    for (std::int64_t k = 0; k < in_f; ++k) out[j * in_f + k] = static_cast<float>(w[j * in_f + k]) * s;
  }
}
PACT_SIMD_VARIANTS(dequantize_i8_rows, dequantize_i8_body);

}  // namespace

void gemv_f32(const float* x, const float* w, const float* bias, std::int64_t out_f, std::int64_t in_f, float* y) {
  count_macs(out_f * in_f);
  const auto f = gemv_rows.get();
  parallel_ranges(out_f, out_f * in_f >= (std::int64_t{1} << 17),
                  [&](std::int64_t j0, std::int64_t j1) { f(x, w, bias, j0, j1, in_f, y); });
}

void gemv_i8_f32(const float* x, const std::int8_t* w, const float* scale, const float* bias, std::int64_t out_f,
                 std::int64_t in_f, float* y) {
  count_macs(out_f * in_f);
  const auto f = gemv_i8_rows.get();
  parallel_ranges(out_f, out_f * in_f >= (std::int64_t{1} << 17),
                  [&](std::int64_t j0, std::int64_t j1) { f(x, w, scale, bias, j0, j1, in_f, y); });
}

void dequantize_i8_f32(const std::int8_t* w, const float* scale, std::int64_t out_f, std::int64_t in_f, float* out) {
  const auto f = dequantize_i8_rows.get();
  parallel_ranges(out_f, out_f * in_f >= kShareElements,
                  [&](std::int64_t j0, std::int64_t j1) { f(w, scale, j0, j1, in_f, out); });
}

void row_sums_f32(const float* x, std::int64_t rows, std::int64_t inner, float scale, float* out) {
  const auto f = row_sums.get();
  parallel_ranges(rows, rows * inner >= kShareElements,
                  [&](std::int64_t r0, std::int64_t r1) { f(x, r0, r1, inner, scale, out); });
}

void column_sums_f32(const float* x, std::int64_t outer, std::int64_t mid, std::int64_t inner, float scale,
                     float* out) {
  const auto f = column_sums.get();
  const std::int64_t chunks = (inner + kColumnChunk - 1) / kColumnChunk;
  parallel_ranges(outer * chunks, outer * mid * inner >= kShareElements, [&](std::int64_t j0, std::int64_t j1) {
    for (std::int64_t j = j0; j < j1; ++j) {
      const std::int64_t o = j / chunks, k0 = (j % chunks) * kColumnChunk;
      f(x + o * mid * inner, mid, inner, k0, std::min(inner, k0 + kColumnChunk), scale, out + o * inner);
    }
  });
}

void map_f32(MapOp op, const float* x, float* y, std::int64_t n, float lo, float hi) {
  const auto f = map_rows.get();  // once, not per thread
  parallel_ranges(n, n >= kShareElements, [&](std::int64_t b, std::int64_t e) { f(op, x + b, y + b, e - b, lo, hi); });
}

void map_inplace_f32(MapOp op, float* y, std::int64_t n, float lo, float hi) { map_rows(op, y, y, n, lo, hi); }
void map_tile_inplace_f32(MapOp op, float* y, std::int64_t ld, std::int64_t rows, std::int64_t cols, float lo,
                          float hi) {
  map_tile(op, y, ld, rows, cols, lo, hi);
}

void channel_affine_f32(const float* x, const float* scale, const float* shift, std::int64_t rows,
                        std::int64_t channels, std::int64_t inner, float* y) {
  const auto f = channel_affine_rows.get();
  parallel_ranges(rows, rows * inner >= kShareElements,
                  [&](std::int64_t b, std::int64_t e) { f(x, scale, shift, b, e, channels, inner, y); });
}

void rows_f32(BinaryKind op, const float* a, const float* b, bool a_repeated, bool b_repeated, std::int64_t rows,
              std::int64_t inner, float* out) {
  if (inner == 1 && a_repeated != b_repeated) {
    // One operand is a single value (ViT's attention query over sqrt(d), f32[12, 197, 64] / f32[]): each
    // thread's rows are one run of elements against it, row_scalar's loop, not a row loop of one element
    // each (0.65 -> 0.10 ms for that division at AVX2, one thread; its 12 in ViT-B/16 7.7 -> 1.2 ms).
    const auto f = row_scalar_rows.get();
    const float* big = a_repeated ? b : a;
    const float* scalar = a_repeated ? a : b;
    parallel_ranges(rows, rows >= kShareElements, [&](std::int64_t r0, std::int64_t r1) {
      f(op, big + r0, scalar, a_repeated, 0, 1, r1 - r0, out + r0);
    });
    return;
  }
  const auto f = binary_rows.get();
  if (rows == 1 || (!a_repeated && !b_repeated)) {
    // Operands of one shape are one run of elements, counted as a single row (a residual add: ResNet's
    // f32[1, 96, 112, 112] + f32[1, 96, 112, 112] kept one thread, 0.54 ms on one and 0.57-0.59 on two):
    // shared among the threads by whole cache lines of elements, not by rows.
    constexpr std::int64_t kLine = 16;
    const std::int64_t n = rows * inner, lines = (n + kLine - 1) / kLine;
    parallel_ranges(lines, n >= kShareElements, [&](std::int64_t l0, std::int64_t l1) {
      const std::int64_t e0 = l0 * kLine, e1 = std::min(n, l1 * kLine);
      f(op, a + e0, b + e0, false, false, 0, 1, e1 - e0, out + e0);
    });
    return;
  }
  parallel_ranges(rows, rows * inner >= kShareElements,
                  [&](std::int64_t r0, std::int64_t r1) { f(op, a, b, a_repeated, b_repeated, r0, r1, inner, out); });
}

void row_scalar_f32(BinaryKind op, const float* a, const float* s, bool scalar_first, std::int64_t rows,
                    std::int64_t inner, float* out) {
  const auto f = row_scalar_rows.get();
  parallel_ranges(rows, rows * inner >= kShareElements,
                  [&](std::int64_t b, std::int64_t e) { f(op, a, s, scalar_first, b, e, inner, out); });
}

}  // namespace pact::kernels::cpu
