#pragma once
/// The native provider's vectorised f32 loops over contiguous data: elementwise maps, a per-channel affine
/// map (inference batch norm) and a binary op against one scalar per row (a [N, C, 1, 1] operand against
/// [N, C, H, W]). Each is one family of the SIMD dispatch table (pact/core/simd_dispatch.hpp), so it runs
/// at the active ISA level, and large inputs are shared among the OpenMP threads.

#include <cstdint>

namespace pact::kernels::cpu {

/// The elementwise maps with a vector form. clamp uses [lo, hi] (either may be infinite); exp, silu and
/// sigmoid use fast_exp (fast_math.hpp), or at the AVX2 and AVX-512 levels its polynomial with a select-free
/// 2^n (exp8, exp16 in vector_ops.cpp); hardswish and hardsigmoid are the generic kernels' expressions.
enum class MapOp : std::uint8_t { neg, relu, clamp, silu, sigmoid, exp, hardswish, hardsigmoid };

/// y[i] = op(x[i]) for i in [0, n); x and y do not overlap.
void map_f32(MapOp op, const float* x, float* y, std::int64_t n, float lo, float hi);
/// y[i] = op(y[i]) in place, on the calling thread (a fused store: the caller shares the work).
void map_inplace_f32(MapOp op, float* y, std::int64_t n, float lo, float hi);
/// map_inplace_f32 on `rows` rows of `cols` elements, row r at y + r ld: a GEMM's tile of C as it is stored.
void map_tile_inplace_f32(MapOp op, float* y, std::int64_t ld, std::int64_t rows, std::int64_t cols, float lo,
                          float hi);

/// y[(r, k)] = x[(r, k)] * scale[r % channels] + shift[r % channels] for rows r in [0, rows) of `inner`
/// elements: batch norm on an [N, C, ...] tensor (rows = N C, inner = the spatial size).
void channel_affine_f32(const float* x, const float* scale, const float* shift, std::int64_t rows,
                        std::int64_t channels, std::int64_t inner, float* y);

/// The binary ops of the op table.
enum class BinaryKind : std::uint8_t { add, sub, mul, div };

/// out[(r, k)] = a[(r, k)] op b[(r, k)] over rows of `inner`, where a repeated operand is one row read
/// for every row (a [inner] operand against [rows, inner]).
void rows_f32(BinaryKind op, const float* a, const float* b, bool a_repeated, bool b_repeated, std::int64_t rows,
              std::int64_t inner, float* out);

/// out[(r, k)] = a[(r, k)] op s[r] (or s[r] op a[(r, k)] when `scalar_first`), rows of `inner`.
void row_scalar_f32(BinaryKind op, const float* a, const float* s, bool scalar_first, std::int64_t rows,
                    std::int64_t inner, float* out);

/// out[r] = scale * (x[(r, 0)] + ... + x[(r, inner - 1)]) for rows r in [0, rows): sum and mean over a
/// trailing block of dimensions (summed by lanes_sum, fast_math.hpp).
void row_sums_f32(const float* x, std::int64_t rows, std::int64_t inner, float scale, float* out);

/// out[(o, k)] = scale * (x[(o, 0, k)] + ... + x[(o, mid - 1, k)]) for x of [outer, mid, inner]: sum and mean
/// over a middle block of dimensions (a channels-last image's H and W), vectorised along `inner`; each
/// element is summed in blocks of kColumnBlock rows, the blocks' sums added in order.
void column_sums_f32(const float* x, std::int64_t outer, std::int64_t mid, std::int64_t inner, float scale, float* out);

/// Note [Weight stream prefetch]: a GEMV reads its weight once, front to back (row after row), from memory:
/// the decode step of a language model, whose weights do not fit any cache. A core's hardware prefetchers
/// alone keep too few lines in flight for a loop that does more work per byte than a plain sum: on an Intel
/// Xeon (Emerald Rapids, 2 cores, 2026-12-06) one core reads memory at 13.4-14.1 GB/s with a sum and the
/// f32 GEMV at 13.8-14.0, but the bf16 one at 8.1-10.1 and the int8 one at 7.8. Each SIMD GEMV variant
/// therefore asks, for each 64-byte line it consumes, for the line kWeightStreamNear bytes ahead into the
/// L1 and the one kWeightStreamFar ahead into the L2 (hints: they never fault, and a line past the
/// weight's end is only a wasted fetch). A [2048, 768] bf16 weight cycled through 200 MB: 13.0-13.4 GB/s on
/// one core with the near prefetch alone (1 KiB ahead: 10-12; 8 KiB: no better), 15.0-15.1 with both;
/// 23.6 and 30.3 on two cores. The f32 GEMV: 13.8-14.0 with none, 15.1 near, 15.0-15.3 both.
inline constexpr std::int64_t kWeightStreamNear = 4096, kWeightStreamFar = 16384;

/// The prefetches of Note [Weight stream prefetch] for the 64-byte line at p.
inline void prefetch_weight_stream(const void* p) noexcept {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  __builtin_prefetch(reinterpret_cast<const void*>(at + kWeightStreamNear), 0, 3);  // into the L1
  __builtin_prefetch(reinterpret_cast<const void*>(at + kWeightStreamFar), 0, 2);   // into the L2
}

/// y[j] = (bias ? bias[j] : 0) + sum_k x[k] w[j, k] for j in [0, out_f): one row of a linear layer
/// against a row-major [out_f, in_f] weight, read once in place (a GEMM would pack the whole weight for
/// one row of output). Dot products by lanes_sum (fast_math.hpp).
void gemv_f32(const float* x, const float* w, const float* bias, std::int64_t out_f, std::int64_t in_f, float* y);

/// y[j] = scale[j] * sum_k x[k] w[j, k] + (bias ? bias[j] : 0) against a row-major [out_f, in_f] int8
/// weight read in place (weight-only int8 linear, linear_int8, on a few rows).
void gemv_i8_f32(const float* x, const std::int8_t* w, const float* scale, const float* bias, std::int64_t out_f,
                 std::int64_t in_f, float* y);

/// out[j, k] = w[j, k] * scale[j]: an int8 weight with per-output-channel scales as f32 (linear_int8 on many
/// rows runs linear's GEMM on it).
void dequantize_i8_f32(const std::int8_t* w, const float* scale, std::int64_t out_f, std::int64_t in_f, float* out);

}  // namespace pact::kernels::cpu
