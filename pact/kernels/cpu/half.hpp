#pragma once
/// The half provider's conversions and 16-bit weight GEMV (issue 22 item 2): bf16 and f16 stored in 16
/// bits, computed in f32. Each is a family of the SIMD dispatch table (pact/core/simd_dispatch.hpp):
/// portable, AVX2 (+F16C), AVX-512 and, for narrow_bf16, AVX-512 BF16 (vcvtneps2bf16).

#include <cstdint>

#include "pact/core/dtype.hpp"

namespace pact::kernels::cpu {

/// y[i] = x[i] as f32, exactly.
void widen_bf16(const BFloat16* x, float* y, std::int64_t n);
void widen_f16(const Half* x, float* y, std::int64_t n);

/// y[i] = x[i] rounded to nearest even, as the storage core's to_bf16 / to_f16 do, with one exception: the
/// AVX-512 BF16 instruction flushes f32 subnormal inputs (below 2^-126 in magnitude) to a signed zero.
/// A NaN stays a NaN (its payload may differ from the storage core's).
void narrow_bf16(const float* x, BFloat16* y, std::int64_t n);
void narrow_f16(const float* x, Half* y, std::int64_t n);

/// y[j] = (bias ? bias[j] : 0) + sum_k x[k] w[j, k] for j in [0, out_f), against a row-major [out_f, in_f]
/// 16-bit weight read once in place and widened in registers, f32 accumulation (the decode step of a
/// language model: its weights are read once per token), x never rounded (each product exact in f32), so
/// it serves linear_bf16's f32 activations too. Shared among the OpenMP threads. (A vdpbf16ps variant, x
/// rounded to bf16, read 24 GB/s against this one's 28 on a Zen 5 core, and 39 against 54 on two: dropped.)
void gemv_bf16(const float* x, const BFloat16* w, const float* bias, std::int64_t out_f, std::int64_t in_f, float* y);
void gemv_f16(const float* x, const Half* w, const float* bias, std::int64_t out_f, std::int64_t in_f, float* y);

}  // namespace pact::kernels::cpu
