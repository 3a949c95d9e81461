#pragma once
// Branch-free float math and the lane-parallel sum for the native kernels' vectorised loops (inlined into
// each ISA level's variant).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace pact::kernels::cpu {

// exp(t) as p * 2^n for t in [-87.3, 88.7]: range reduction by ln 2 (Cody-Waite split) to n and r in
// [-ln2/2, ln2/2], and p = exp(r) by a degree-6 polynomial. fast_exp and fast_exp_no_overflow assemble 2^n.
struct ExpReduced {
  float p, n;
};
__attribute__((always_inline)) inline ExpReduced exp_reduced(float t) {
  const float n = std::floor(t * 1.44269504088896341f + 0.5f);
  const float r = (t - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return {p * r * r + r + 1.0f, n};
}

// exp(x) for float, branch-free so the loops below vectorise: exp_reduced, and the power of two assembled in
// the exponent bits. Relative error below 2 ulp on [-87.3, 88.7]; underflows to 0 below -87.3, overflows to
// +inf above 88.7; NaN propagates.
inline float fast_exp(float x) {
  const auto [p, n] = exp_reduced(std::min(std::max(x, -87.3f), 88.7f));
  // 2^n as two factors: n reaches 128 from 88.38 up, whose single power of two would be +inf.
  const std::int32_t half = static_cast<std::int32_t>(n) / 2;
  const float y = p * std::bit_cast<float>((half + 127) << 23) *
                  std::bit_cast<float>((static_cast<std::int32_t>(n) - half + 127) << 23);
  return x < -87.3f ? 0.0f : (x > 88.7f ? std::numeric_limits<float>::infinity() : (x != x ? x : y));
}

// fast_exp for an argument below 88.3, bit for bit (tests/kernels/providers_test.cpp compares them over
// those floats), and NaN for a NaN: there n <= 127, so 2^n is one normal float (n >= -126 after the clamp),
// and the overflow end needs no clamp, no split power and no select. Nor does NaN need one: it passes the
// clamp (std::max keeps its first operand when the comparison is false) and every step after it, so the
// result is a NaN, though not always the argument's bits as fast_exp returns them. Softmax's x - max,
// exp(-x^2 / 2) and erfc's exponent (at most 3e-8) all qualify; their vectorised loops lose half of
// fast_exp's selects and integer work (gelu at AVX2: 0.83 -> 0.72 ms for 2^19 elements, and the NaN select
// about another tenth).
inline float fast_exp_no_overflow(float x) {
  const auto [p, n] = exp_reduced(std::max(x, -87.3f));
  const float y = p * std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  return x < -87.3f ? 0.0f : y;
}

// acc[0] += acc[1] + ... + acc[L - 1], pairwise: lane l takes lane l + L/2, then l + L/4, down to one (the
// pairing of lanes_sum, with the widths as compile-time constants). The plain-C++ levels of the lane-wise
// dot products use it; their AVX2 and AVX-512 variants fold the same pairs in registers (vector_ops.cpp).
template <int L>
__attribute__((always_inline)) inline void fold_lanes(float* acc) {
  static_assert(L > 0 && (L & (L - 1)) == 0, "a power of two");
  if constexpr (L > 1) {
    for (int l = 0; l < L / 2; ++l) acc[l] += acc[l + L / 2];
    fold_lanes<L / 2>(acc);
  }
}

// acc[0] = max(acc[0], ..., acc[L - 1]) in fold_lanes' pairing (std::max's rule: a NaN lane is skipped).
template <int L>
__attribute__((always_inline)) inline void fold_lanes_max(float* acc) {
  static_assert(L > 0 && (L & (L - 1)) == 0, "a power of two");
  if constexpr (L > 1) {
    for (int l = 0; l < L / 2; ++l) acc[l] = std::max(acc[l], acc[l + L / 2]);
    fold_lanes_max<L / 2>(acc);
  }
}

// A sum over k in [0, n) with 32 independent accumulators: vectorisable without -ffast-math (the
// summation order is fixed, so results are reproducible run to run). 32 lanes are two AVX-512 or four
// AVX2 registers, so a 128-wide row is four dependent adds per register instead of sixteen: with eight
// lanes the norms' reductions were bound by the add latency.
template <class F>
inline float lanes_sum(std::int64_t n, F&& f) {
  constexpr int L = 32;
  float acc[L] = {};
  std::int64_t k = 0;
  for (; k + L <= n; k += L) {
    for (int l = 0; l < L; ++l) acc[l] += f(k + l);
  }
  float tail = 0.0f;
  for (; k < n; ++k) tail += f(k);
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0] + tail;
}

// lanes_sum of f and of h in one pass over k: {lanes_sum(n, f), lanes_sum(n, h)}, bit for bit (the same
// lanes, tail and folding for each), for a row whose two sums would otherwise read it twice.
template <class F, class H>
inline std::pair<float, float> lanes_sum2(std::int64_t n, F&& f, H&& h) {
  constexpr int L = 32;
  float acc[L] = {}, bcc[L] = {};
  std::int64_t k = 0;
  for (; k + L <= n; k += L) {
    for (int l = 0; l < L; ++l) {
      acc[l] += f(k + l);
      bcc[l] += h(k + l);
    }
  }
  float tail = 0.0f, btail = 0.0f;
  for (; k < n; ++k) {
    tail += f(k);
    btail += h(k);
  }
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) {
      acc[l] += acc[l + w];
      bcc[l] += bcc[l + w];
    }
  return {acc[0] + tail, bcc[0] + btail};
}

}  // namespace pact::kernels::cpu
