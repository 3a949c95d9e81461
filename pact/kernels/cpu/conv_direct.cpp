#include "pact/kernels/cpu/conv_direct.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/parallel.hpp"

namespace pact::kernels::cpu {

namespace {

// A block of W output columns as one GCC vector of W floats, W the level's register width (16 for
// AVX-512, 8 for AVX2, 4 for the SSE2 baseline). A 16-float vector lowered to two ymm registers made the
// AVX2 variant six times slower than the AVX-512 one.
template <int W>
struct Lanes;  // GCC ignores vector_size on an alias template's dependent size: one specialisation each
template <>
struct Lanes<4> {
  using Vec = float __attribute__((vector_size(16)));
  using Mask = std::int32_t __attribute__((vector_size(16)));
};
template <>
struct Lanes<8> {
  using Vec = float __attribute__((vector_size(32)));
  using Mask = std::int32_t __attribute__((vector_size(32)));
};
template <>
struct Lanes<16> {
  using Vec = float __attribute__((vector_size(64)));
  using Mask = std::int32_t __attribute__((vector_size(64)));
};
template <int W>
using Vec = typename Lanes<W>::Vec;

// Unaligned load and the even lanes of a 2W-float run (stride 2), through pointers: a function returning a
// wide vector draws GCC's -Wpsabi note where the vector's registers are not enabled.
template <int W>
PACT_SIMD_INLINE void load(Vec<W>* v, const float* p) {
  __builtin_memcpy(v, p, sizeof(Vec<W>));
}
template <int W, std::size_t... I>
PACT_SIMD_INLINE void even_lanes(Vec<W>* v, const float* p, std::index_sequence<I...>) {
  Vec<W> lo, hi;
  load<W>(&lo, p);
  load<W>(&hi, p + W);
#if defined(__clang__)
  *v = __builtin_shufflevector(lo, hi, static_cast<int>(2 * I)...);
#else
  *v = __builtin_shuffle(lo, hi, typename Lanes<W>::Mask{static_cast<std::int32_t>(2 * I)...});
#endif
}

// The widest block of any level: the padding and the rounded-up row are sized for it.
constexpr int kBlock = 16;

// The scratch of one plane: the input plane with its columns zero-padded, so every tap of every output
// column in a block reads inside it, and one output row rounded up to whole blocks of 16.
struct PlaneScratch {
  std::int64_t owp, wp;  // padded output row, padded input row (floats)
  float* pad;            // h rows of wp: input column ix at pad[iy * wp + pw + ix], zeros around it
  float* acc;            // owp accumulators
};

// One output plane of one channel. Each block of W outputs of a row sums every tap whose input row
// exists in one register, with no bounds tests (the padding supplies the zeros), and is stored once:
// with rows as short as 7 or 14 columns (the late layers of MobileNet and EfficientNet), per-tap loops
// over exactly the valid columns ran almost entirely in scalar epilogues, and accumulating in memory tap
// by tap stalled on store-to-load forwarding (70% of the kernel's samples under perf). owp is a multiple
// of every W, so there is no remainder.
template <int W>
PACT_SIMD_INLINE void depthwise_plane_impl(const float* __restrict x, const float* __restrict w, float bias,
                                           const DirectConvGeometry* gp, PlaneScratch sc, float* __restrict out) {
  const DirectConvGeometry& g = *gp;
  for (std::int64_t iy = 0; iy < g.h; ++iy) {
    float* __restrict row = sc.pad + iy * sc.wp + g.pw;
    const float* __restrict src = x + iy * g.w;
#pragma GCC ivdep
    for (std::int64_t ix = 0; ix < g.w; ++ix) row[ix] = src[ix];
  }
  float* __restrict acc = sc.acc;
  for (std::int64_t y = 0; y < g.oh; ++y) {
    for (std::int64_t zb = 0; zb < sc.owp; zb += W) {
      Vec<W> a = Vec<W>{} + bias;
      for (std::int64_t i = 0; i < g.kh; ++i) {
        const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
        if (iy < 0 || iy >= g.h) continue;
        const float* prow = sc.pad + iy * sc.wp + zb * g.sw;
        for (std::int64_t j = 0; j < g.kw; ++j) {
          const float* s = prow + j * g.dw;
          Vec<W> v;
          if (g.sw == 1) {
            load<W>(&v, s);
          } else if (g.sw == 2) {
            even_lanes<W>(&v, s, std::make_index_sequence<W>{});
          } else {
            for (int l = 0; l < W; ++l) v[l] = s[l * g.sw];
          }
          a += w[i * g.kw + j] * v;
        }
      }
      __builtin_memcpy(acc + zb, &a, sizeof a);
    }
    float* __restrict o = out + y * g.ow;
#pragma GCC ivdep
    for (std::int64_t z = 0; z < g.ow; ++z) o[z] = acc[z];
  }
}

void depthwise_plane_portable(const float* x, const float* w, float bias, const DirectConvGeometry* g, PlaneScratch sc,
                              float* out) {
  depthwise_plane_impl<4>(x, w, bias, g, sc, out);
}
PACT_TARGET_AVX2 void depthwise_plane_avx2(const float* x, const float* w, float bias, const DirectConvGeometry* g,
                                           PlaneScratch sc, float* out) {
  depthwise_plane_impl<8>(x, w, bias, g, sc, out);
}
PACT_TARGET_AVX512 void depthwise_plane_avx512(const float* x, const float* w, float bias, const DirectConvGeometry* g,
                                               PlaneScratch sc, float* out) {
  depthwise_plane_impl<16>(x, w, bias, g, sc, out);
}
const simd::Table<decltype(&depthwise_plane_portable)> depthwise_plane{
    "depthwise_plane", PACT_SIMD_FN(depthwise_plane_portable), PACT_SIMD_FN(depthwise_plane_avx2),
    PACT_SIMD_FN(depthwise_plane_avx512)};

// Max pooling of one plane, separably: for each output row, the maximum over the window's input rows
// (kh contiguous passes over a padded row), then over the window's columns of that row (kw strided
// passes). Each pass is a plain loop the vectoriser turns into compares and blends at the level's width;
// GCC scalarises the same select on 16-float vector types. `take` keeps the generic kernel's order: the
// tap replaces the maximum when it is greater or NaN, so a NaN anywhere in the window wins.
PACT_SIMD_INLINE void max_pool_plane_body(const float* __restrict x, const DirectConvGeometry* gp,
                                          float* __restrict rowmax, std::int64_t wp, float* __restrict out) {
  const DirectConvGeometry& g = *gp;
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  for (std::int64_t y = 0; y < g.oh; ++y) {
    for (std::int64_t k = 0; k < wp; ++k) rowmax[k] = kLow;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      const float* __restrict src = x + iy * g.w;
      float* __restrict m = rowmax + g.pw;
      for (std::int64_t k = 0; k < g.w; ++k) m[k] = src[k] > m[k] || src[k] != src[k] ? src[k] : m[k];
    }
    float* __restrict o = out + y * g.ow;
    for (std::int64_t z = 0; z < g.ow; ++z) o[z] = kLow;
    for (std::int64_t j = 0; j < g.kw; ++j) {
      const float* __restrict m = rowmax + j * g.dw;
      if (g.sw == 2) {
        for (std::int64_t z = 0; z < g.ow; ++z) o[z] = m[2 * z] > o[z] || m[2 * z] != m[2 * z] ? m[2 * z] : o[z];
      } else {
        for (std::int64_t z = 0; z < g.ow; ++z) {
          const float v = m[z * g.sw];
          o[z] = v > o[z] || v != v ? v : o[z];
        }
      }
    }
  }
}
PACT_SIMD_VARIANTS(max_pool_plane, max_pool_plane_body);

}  // namespace

void depthwise_conv2d(const float* x, const float* w, const float* bias, const DirectConvGeometry& g, float* out) {
  const std::int64_t mult = g.o / g.c, planes = g.n * g.o, taps = g.kh * g.kw;
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  if (planes == 0 || out_plane == 0) return;
  const std::int64_t owp = (g.ow + kBlock - 1) / kBlock * kBlock;
  // Output column z reads padded column z sw + j dw (stride 2 loads 2W columns per block of W); the input
  // occupies [pw, pw + w).
  const std::int64_t wp = std::max((owp - 1) * g.sw + (g.kw - 1) * g.dw + 1 + (g.sw == 2 ? 1 : 0), g.pw + g.w);
  const auto f = depthwise_plane.get();
  parallel_ranges(planes, planes * out_plane * taps >= (std::int64_t{1} << 16), [&](std::int64_t p0, std::int64_t p1) {
    std::vector<float> scratch(static_cast<std::size_t>(g.h * wp + owp), 0.0f);  // padding zeroed once
    const PlaneScratch sc{owp, wp, scratch.data(), scratch.data() + g.h * wp};
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t n = p / g.o, oc = p % g.o, ic = oc / mult;
      f(x + (n * g.c + ic) * in_plane, w + oc * taps, bias != nullptr ? bias[oc] : 0.0f, &g, sc, out + p * out_plane);
    }
  });
}

void max_pool2d_planes(const float* x, const DirectConvGeometry& g, float* out) {
  const std::int64_t planes = g.c, in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  if (planes == 0 || out_plane == 0) return;
  // The row of maxima, padded: input column ix at pw + ix; window column z sw + j dw.
  const std::int64_t wp = std::max((g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1, g.pw + g.w);
  const auto f = max_pool_plane.get();
  parallel_ranges(planes, planes * out_plane * g.kh * g.kw >= (std::int64_t{1} << 16),
                  [&](std::int64_t p0, std::int64_t p1) {
                    std::vector<float> rowmax(static_cast<std::size_t>(wp));
                    for (std::int64_t p = p0; p < p1; ++p)
                      f(x + p * in_plane, &g, rowmax.data(), wp, out + p * out_plane);
                  });
}

}  // namespace pact::kernels::cpu
