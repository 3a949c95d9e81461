#include "pact/kernels/cpu/conv_direct.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/parallel.hpp"
#include "pact/kernels/kernel.hpp"

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

// The scratch of one plane: the input plane zero-padded on every side, so every tap of every output block
// reads inside it with no bounds test.
struct PlaneScratch {
  std::int64_t wp;          // padded input row (floats)
  float* pad;               // input (iy, ix) at pad[(ph + iy) wp + pw + ix], zeros around it
  const std::int64_t* tap;  // kh kw offsets into pad of the taps: i dh wp + j dw
  const float* clamp;       // null, or [lo, hi]: each output clamped in registers before it is stored
};

// W columns of one tap: contiguous (S = 1), every other (S = 2), or strided by sw (S = 0).
template <int W, int S>
PACT_SIMD_INLINE void tap_lanes(Vec<W>* v, const float* s, std::int64_t sw) {
  if constexpr (S == 1) {
    load<W>(v, s);
  } else if constexpr (S == 2) {
    even_lanes<W>(v, s, std::make_index_sequence<W>{});
  } else {
    for (int l = 0; l < W; ++l) (*v)[l] = s[l * sw];
  }
}

// The plane's output as units of W columns (unit k: output row k / nb, columns (k % nb) W, nb = ceil(ow / W)
// blocks per row), four units at a time: four independent accumulators, so the multiply-adds of one tap do
// not wait on one another (with one accumulator, each block's taps formed one chain of dependent FMAs, and
// the FMA latency, not the loads, set the kernel's speed: 38% of its samples on the instruction after the
// FMA). Each unit is clamped (when asked) and stored straight into the output row, its last block only up
// to the row's end: no rounded-up rows to copy out, and no pass over the plane for relu or relu6.
template <int W, int S>
PACT_SIMD_INLINE void depthwise_units(const float* __restrict w, float bias, const DirectConvGeometry& g,
                                      const PlaneScratch& sc, float* __restrict out) {
  const std::int64_t nb = (g.ow + W - 1) / W, units = g.oh * nb, taps = g.kh * g.kw, sw = S == 0 ? g.sw : S;
  const std::int64_t last = g.ow - (nb - 1) * W;  // columns of a row's last block, 1 to W
  const std::int64_t* __restrict tap = sc.tap;
  // The units' input blocks and output columns in order, stepped without a division per unit.
  std::int64_t row = 0, blk = 0;
  struct Unit {
    const float* in;
    float* out;
    std::int64_t cols;
  };
  auto next = [&] {
    const Unit u{sc.pad + row * g.sh * sc.wp + blk * W * sw, out + row * g.ow + blk * W, blk + 1 == nb ? last : W};
    if (++blk == nb) {
      blk = 0;
      ++row;
    }
    return u;
  };
  const bool clamped = sc.clamp != nullptr;
  const Vec<W> lo = Vec<W>{} + (clamped ? sc.clamp[0] : 0.0f), hi = Vec<W>{} + (clamped ? sc.clamp[1] : 0.0f);
  auto put = [&](Vec<W> a, const Unit& u) {
    if (clamped) a = a < lo ? lo : (a > hi ? hi : a);  // the generic clamp's tests: a NaN stays NaN
    if (u.cols == W) {
      __builtin_memcpy(u.out, &a, sizeof a);
    } else {
      for (std::int64_t z = 0; z < u.cols; ++z) u.out[z] = a[z];
    }
  };
  std::int64_t k = 0;
  for (; k + 4 <= units; k += 4) {
    const Unit u0 = next(), u1 = next(), u2 = next(), u3 = next();
    Vec<W> a0 = Vec<W>{} + bias, a1 = a0, a2 = a0, a3 = a0;
    for (std::int64_t t = 0; t < taps; ++t) {
      const float wt = w[t];
      const std::int64_t o = tap[t];
      Vec<W> v0, v1, v2, v3;
      tap_lanes<W, S>(&v0, u0.in + o, g.sw);
      tap_lanes<W, S>(&v1, u1.in + o, g.sw);
      tap_lanes<W, S>(&v2, u2.in + o, g.sw);
      tap_lanes<W, S>(&v3, u3.in + o, g.sw);
      a0 += wt * v0;
      a1 += wt * v1;
      a2 += wt * v2;
      a3 += wt * v3;
    }
    put(a0, u0);
    put(a1, u1);
    put(a2, u2);
    put(a3, u3);
  }
  for (; k < units; ++k) {
    const Unit u = next();
    Vec<W> a = Vec<W>{} + bias;
    for (std::int64_t t = 0; t < taps; ++t) {
      Vec<W> v;
      tap_lanes<W, S>(&v, u.in + tap[t], g.sw);
      a += w[t] * v;
    }
    put(a, u);
  }
}

// One output plane of one channel: the input copied into the padded plane, then the units.
template <int W>
PACT_SIMD_INLINE void depthwise_plane_impl(const float* __restrict x, const float* __restrict w, float bias,
                                           const DirectConvGeometry* gp, PlaneScratch sc, float* __restrict out) {
  const DirectConvGeometry& g = *gp;
  for (std::int64_t iy = 0; iy < g.h; ++iy) {
    float* __restrict row = sc.pad + (g.ph + iy) * sc.wp + g.pw;
    const float* __restrict src = x + iy * g.w;
#pragma GCC ivdep
    for (std::int64_t ix = 0; ix < g.w; ++ix) row[ix] = src[ix];
  }
  if (g.sw == 1) {
    depthwise_units<W, 1>(w, bias, g, sc, out);
  } else if (g.sw == 2) {
    depthwise_units<W, 2>(w, bias, g, sc, out);
  } else {
    depthwise_units<W, 0>(w, bias, g, sc, out);
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

void depthwise_conv2d(const float* x, const float* w, const float* bias, const DirectConvGeometry& g, float* out,
                      const float* clamp, const std::function<void(float*, std::int64_t)>& store) {
  const std::int64_t mult = g.o / g.c, planes = g.n * g.o, taps = g.kh * g.kw;
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  count_macs(planes * out_plane * taps);
  if (planes == 0 || out_plane == 0) return;
  const std::int64_t owp = (g.ow + kBlock - 1) / kBlock * kBlock;
  // Output column z reads padded column z sw + j dw (stride 2 loads 2W columns per block of W), output row
  // y padded row y sh + i dh; the input occupies rows [ph, ph + h) and columns [pw, pw + w).
  const std::int64_t wp = std::max((owp - 1) * g.sw + (g.kw - 1) * g.dw + 1 + (g.sw == 2 ? 1 : 0), g.pw + g.w);
  const std::int64_t hp = std::max((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1, g.ph + g.h);
  std::vector<std::int64_t> tap(static_cast<std::size_t>(taps));
  for (std::int64_t i = 0; i < g.kh; ++i)
    for (std::int64_t j = 0; j < g.kw; ++j) tap[static_cast<std::size_t>(i * g.kw + j)] = i * g.dh * wp + j * g.dw;
  const auto f = depthwise_plane.get();
  parallel_ranges(planes, planes * out_plane * taps >= (std::int64_t{1} << 16), [&](std::int64_t p0, std::int64_t p1) {
    std::vector<float> scratch(static_cast<std::size_t>(hp * wp), 0.0f);  // padding zeroed once
    const PlaneScratch sc{wp, scratch.data(), tap.data(), clamp};
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t n = p / g.o, oc = p % g.o, ic = oc / mult;
      float* plane = out + p * out_plane;
      f(x + (n * g.c + ic) * in_plane, w + oc * taps, bias != nullptr ? bias[oc] : 0.0f, &g, sc, plane);
      if (store) store(plane, out_plane);
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
