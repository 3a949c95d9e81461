#pragma once
// Lane helpers of the AVX-512 kernels: the mask of a vector's first lanes, and the even floats of a row (a
// stride-2 gather, as im2col's strided rows and max pooling's stride-2 columns read them). Inlined into the
// AVX-512 variants that call them (pact/core/simd_dispatch.hpp), so they take their callers' target.

#include <immintrin.h>

#include <cstdint>

#include "pact/core/simd_dispatch.hpp"

namespace pact::kernels::cpu {

// The first `count` lanes of 16 (all of them from 16 on; none at 0 or below).
PACT_TARGET_AVX512 PACT_SIMD_INLINE __mmask16 first_lanes(std::int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

// p[0], p[2], ..., p[2 (count - 1)] in the first `count` lanes (count in [1, 16]; the other lanes zero):
// two masked loads of the 2 count - 1 floats needed, so nothing past p[2 (count - 1)] is read, and one
// permute by the even indices (a lane from `count` on picks a float the masks left zero).
PACT_TARGET_AVX512 PACT_SIMD_INLINE __m512 even_floats(const float* p, std::int64_t count) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const std::int64_t need = 2 * count - 1;
  const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(need), p);
  const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(need - 16), p + 16);
  return _mm512_permutex2var_ps(lo, even, hi);
}

}  // namespace pact::kernels::cpu
