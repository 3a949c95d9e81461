#pragma once
/// The native f32 GEMM: packed, cache-blocked, with a SIMD micro-kernel per ISA level (AVX-512, AVX2+FMA, a
/// portable loop) chosen at each call through the dispatch table for the active level (pact/core/cpu.hpp;
/// PACT_ISA forces a lower one), and OpenMP threads over row blocks.
///
/// Operands are addressed by element strides, so transposed operands need no copy: element (i, k) of A
/// is a[i * a_row + k * a_col]. C is row-major with leading dimension ldc.

#include <cstdint>
#include <string_view>

namespace pact::kernels::cpu {

/// A bias added to the product as C is stored: data[i] to row i (per_row: conv2d's per output channel)
/// or data[j] to column j (linear's per output feature). No data, no bias.
struct GemmBias {
  const float* data = nullptr;
  bool per_row = false;
  float at(std::int64_t i, std::int64_t j) const noexcept { return data == nullptr ? 0.0f : data[per_row ? i : j]; }
};

/// C (+)= A * B (+ bias) for A: m x k, B: k x n. `accumulate` adds into C; otherwise C is overwritten.
/// These pointers come from prepared host access and must stay valid for the call.
void sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row, std::int64_t a_col,
           const float* b, std::int64_t b_row, std::int64_t b_col, float* c, std::int64_t ldc, bool accumulate,
           GemmBias bias = {});

/// The micro-kernel level a call runs at now: "avx512", "avx2" or "portable".
std::string_view sgemm_variant() noexcept;

/// dst[z] = src[z * stride] for z in [0, count): the strided rows of im2col. Vectorised for stride 2 on
/// AVX-512 CPUs (a two-register permute per 16 outputs); reads only src[0 .. (count - 1) * stride].
void strided_copy(const float* src, std::int64_t stride, float* dst, std::int64_t count) noexcept;

/// OpenBLAS cblas_sgemm with the same operand convention (the blas provider's GEMM; a trusted external
/// boundary). Used by the blas provider and by `pact bench gemm` as the baseline.
void openblas_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row,
                    std::int64_t a_col, const float* b, std::int64_t b_row, std::int64_t b_col, float* c,
                    std::int64_t ldc, bool accumulate, GemmBias bias = {});
/// The kernel OpenBLAS chose for this CPU (openblas_get_corename), e.g. "Cooperlake" or "Haswell".
std::string_view openblas_corename() noexcept;
/// Sets OpenBLAS's thread count.
void openblas_threads(int threads) noexcept;

}  // namespace pact::kernels::cpu
