#pragma once
/// The native f32 GEMM: packed, cache-blocked, with a SIMD micro-kernel per ISA level (AVX-512, AVX2+FMA, a
/// portable loop) chosen at each call through the dispatch table for the active level (pact/core/cpu.hpp;
/// PACT_ISA forces a lower one), and OpenMP threads each computing whole column panels (or row tiles) of C
/// as a one-thread product of their own (Note [Threads own their operands] in gemm.cpp).
///
/// Operands are addressed by element strides, so transposed operands need no copy: element (i, k) of A
/// is a[i * a_row + k * a_col]. C is row-major with leading dimension ldc.

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "pact/kernels/cpu/vector_ops.hpp"

namespace pact::kernels::cpu {

/// What is done to the product as C is stored, in this order: a bias added, bias[i] to row i (per_row:
/// conv2d's per output channel) or bias[j] to column j (linear's per output feature), no bias when null;
/// then, when `clamp` is set, a clamp to [lo, hi] (relu is [0, +inf], relu6 [0, 6]), applied once to the
/// finished sum (after any accumulation into C), in registers, so a fused activation costs no pass over C;
/// or, when `mapped` is set instead, the elementwise map `op` (vector_ops.hpp: silu, sigmoid, hardswish,
/// with [lo, hi] for clamp) applied to each finished tile of C right after the micro-kernel stores it,
/// while it is in L1, or to a block of C within a quarter of the L2 once its panels are done: a pass over
/// C while it is in cache, not over the whole product once it has left it.
struct GemmEpilogue {
  const float* bias = nullptr;
  bool per_row = false;
  bool clamp = false;
  float lo = 0.0f, hi = 0.0f;
  bool mapped = false;
  MapOp op = MapOp::relu;
  float bias_at(std::int64_t i, std::int64_t j) const noexcept {
    return bias == nullptr ? 0.0f : bias[per_row ? i : j];
  }
  float clamped(float x) const noexcept { return clamp ? std::min(std::max(x, lo), hi) : x; }
};

/// C (+)= A * B, then the epilogue, for A: m x k, B: k x n. `accumulate` adds into C; otherwise C is overwritten.
/// These pointers come from prepared host access and must stay valid for the call. Where `b_rows` is not
/// null, row p of B starts at b + b_rows[p] (k entries; b_row is unused and b_col must be 1): the rows of
/// an implicit convolution's B are shifted windows of one padded input, read in place with no im2col. Such
/// a call does not count its multiply-accumulates (kernels::count_macs): its caller counts those of the
/// columns it keeps, the op's work, not the junk columns between the padded rows.
void sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row, std::int64_t a_col,
           const float* b, std::int64_t b_row, std::int64_t b_col, float* c, std::int64_t ldc, bool accumulate,
           GemmEpilogue store = {}, const std::int64_t* b_rows = nullptr);

/// The micro-kernel level a call runs at now: "avx512", "avx2" or "portable".
std::string_view sgemm_variant() noexcept;
/// The width of the column panels a product of fewer than 1024 columns is computed in at the active level
/// (the micro-kernel's NR: 32 for AVX-512, 16 for AVX2 and portable): a panel the product fills only
/// partly costs as much as a full one.
std::int64_t sgemm_panel_width() noexcept;
/// The height of the micro-kernel's row tiles at the active level (its MR: 8 for AVX-512, 6 for AVX2):
/// rows split among threads at multiples of it leave no thread a partial tile in the middle.
std::int64_t sgemm_tile_height() noexcept;

/// dst[z] = src[z * stride] for z in [0, count): the strided rows of im2col. Vectorised for stride 2 on
/// AVX-512 CPUs (a two-register permute per 16 outputs); reads only src[0 .. (count - 1) * stride].
void strided_copy(const float* src, std::int64_t stride, float* dst, std::int64_t count) noexcept;

/// OpenBLAS cblas_sgemm with the same operand convention (the blas provider's GEMM; a trusted external
/// boundary). Used by the blas provider and by `pact bench gemm` as the baseline.
void openblas_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row,
                    std::int64_t a_col, const float* b, std::int64_t b_row, std::int64_t b_col, float* c,
                    std::int64_t ldc, bool accumulate, GemmEpilogue store = {});
/// The kernel OpenBLAS chose for this CPU (openblas_get_corename), e.g. "Cooperlake" or "Haswell".
std::string_view openblas_corename() noexcept;
/// Sets OpenBLAS's thread count, its workers left parked.
void openblas_threads(int threads) noexcept;
/// Ends OpenBLAS's idle worker threads, which spin for about 0.1 s after it loads, after each threaded call
/// and after a change of its thread count (Note [OpenBLAS's idle threads] in blas.cpp); its next threaded
/// call starts them again. Done as Pact's kernels load and by openblas_threads.
void park_openblas_threads() noexcept;

}  // namespace pact::kernels::cpu
