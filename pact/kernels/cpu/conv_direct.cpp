#include "pact/kernels/cpu/conv_direct.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/avx512_lanes.hpp"
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
// The first `cols` (at most W) lanes of *a at out, each clamped to [*lo, *hi] first when `clamped` (the
// generic clamp's tests: a NaN stays NaN). The store of every depthwise kernel's output block.
template <int W>
PACT_SIMD_INLINE void store_block(const Vec<W>* a, float* out, std::int64_t cols, bool clamped, const Vec<W>* lo,
                                  const Vec<W>* hi) {
  Vec<W> v = *a;
  if (clamped) v = v < *lo ? *lo : (v > *hi ? *hi : v);
  if (cols == W) {
    __builtin_memcpy(out, &v, sizeof v);
  } else {
    for (std::int64_t z = 0; z < cols; ++z) out[z] = v[z];
  }
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
  // By reference (depthwise_in_place_avx512's put says why).
  auto put = [&](const Vec<W>& a, const Unit& u) { store_block<W>(&a, u.out, u.cols, clamped, &lo, &hi); };
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

// Note [Depthwise in place]
// A stride-1 depthwise convolution whose output rows are as wide as its input rows (the "same" padding of
// 3 x 3 / 1 and 5 x 5 / 2, at any dilation) reads tap (i, j) of output pixel q = y ow + z at input pixel
// q + (i dh - ph) w + j dw - pw of the unpadded plane: one offset per tap, whatever the pixel. So a block
// of 16 consecutive output pixels, in flat order across the ends of rows, reads each tap as one load at a
// fixed offset from the block, with the lanes whose tap falls outside the plane (a column past either end
// of its row, a row above or below the plane) masked off in the load. No padded copy of the plane, and no
// lane idles at a row's end however narrow the plane (a 7 x 7 plane fills 49 of 64 lanes; the plane
// kernel's row blocks filled 49 of 112). The masks depend on the geometry alone: one bit per lane, per
// block and tap, built once per call and shared by every plane. A masked-off lane is never read (an
// AVX-512 masked load suppresses its fault), so the offsets may point before or past the plane.
//
// Stride 2 with ow = ceil(w / 2) (the same paddings, halving the plane) becomes the same problem after one
// pass over the plane: its four phases (even and odd rows by even and odd columns) copied apart, each with
// rows of ow, so tap (i, j) of output pixel q reads phase ((i dh - ph) mod 2, (j dw - pw) mod 2) at pixel
// q + floor((i dh - ph) / 2) ow + floor((j dw - pw) / 2). The split replaces the plane kernel's padded copy,
// and no load shuffles even lanes out of odd ones.
struct InPlaceTaps {
  std::int64_t outputs;       // pixels of an output plane
  std::int64_t taps;          // kh kw
  const std::int64_t* off;    // per tap: the input offset from the output pixel (into the phases at stride 2)
  const std::uint16_t* mask;  // per block of 16 outputs, per tap: bit l set when lane l reads the plane
  const float* clamp;         // null, or [lo, hi]
  std::int64_t h, w, ow;      // stride 2: the input plane and the phases' rows (ceil(h / 2) of ow each)
};

// The phases of a plane (Note [Depthwise in place]): row r, column c at phases[((r % 2) 2 + c % 2) hq ow +
// (r / 2) ow + c / 2], hq = ceil(h / 2).
PACT_SIMD_INLINE void split_phases(const float* __restrict x, const InPlaceTaps& s, float* __restrict phases) {
  const std::int64_t hq = (s.h + 1) / 2, half = s.w / 2;
  for (std::int64_t r = 0; r < s.h; ++r) {
    const float* __restrict src = x + r * s.w;
    float* __restrict even = phases + ((r % 2) * 2 * hq + r / 2) * s.ow;
    float* __restrict odd = even + hq * s.ow;
    for (std::int64_t v = 0; v < half; ++v) {
      even[v] = src[2 * v];
      odd[v] = src[2 * v + 1];
    }
    if (s.w % 2 != 0) even[half] = src[s.w - 1];
  }
}

// A masked-off lane reads nothing and is zero.
PACT_TARGET_AVX512 PACT_SIMD_INLINE void masked_load(Vec<16>* v, const float* p, unsigned m) {
  *v = reinterpret_cast<Vec<16>>(_mm512_maskz_loadu_ps(static_cast<__mmask16>(m), p));
}

// One output plane of one channel, in blocks of 16 pixels, four blocks at a time (independent accumulators,
// as in depthwise_units).
PACT_TARGET_AVX512 void depthwise_in_place_avx512(const float* __restrict x, const float* __restrict w, float bias,
                                                  const InPlaceTaps* tp, float* __restrict phases,
                                                  float* __restrict out) {
  constexpr int W = 16;
  const InPlaceTaps& s = *tp;
  // What the taps read: the plane, or at stride 2 its phases (not x reassigned: a restrict pointer given the
  // value of another restrict pointer of the same block is undefined in C's rules, which GCC follows).
  const float* src = x;
  if (phases != nullptr) {
    split_phases(x, s, phases);
    src = phases;
  }
  const std::int64_t n = s.outputs, blocks = (n + W - 1) / W, taps = s.taps;
  const std::int64_t* __restrict off = s.off;
  const std::uint16_t* __restrict mask = s.mask;
  const bool clamped = s.clamp != nullptr;
  const Vec<W> lo = Vec<W>{} + (clamped ? s.clamp[0] : 0.0f), hi = Vec<W>{} + (clamped ? s.clamp[1] : 0.0f);
  // The block by reference, as every helper here takes vectors: a lambda does not inherit the function's
  // target, so by value a 64-byte vector would pass in a ZMM register from here and be read from the stack
  // in the lambda wherever it is not inlined (-O0 to -O2 with the mutation gate's schemata: every output
  // wrong; -Wpsabi's note).
  auto put = [&](const Vec<W>& a, std::int64_t q) {
    store_block<W>(&a, out + q, std::min<std::int64_t>(W, n - q), clamped, &lo, &hi);
  };
  std::int64_t b = 0;
  for (; b + 4 <= blocks; b += 4) {
    const float* in = src + b * W;
    const std::uint16_t* m = mask + b * taps;
    Vec<W> a0 = Vec<W>{} + bias, a1 = a0, a2 = a0, a3 = a0;
    for (std::int64_t t = 0; t < taps; ++t) {
      const float wt = w[t];
      const float* p = in + off[t];
      Vec<W> v0, v1, v2, v3;
      masked_load(&v0, p, m[t]);
      masked_load(&v1, p + W, m[taps + t]);
      masked_load(&v2, p + 2 * W, m[2 * taps + t]);
      masked_load(&v3, p + 3 * W, m[3 * taps + t]);
      a0 += wt * v0;
      a1 += wt * v1;
      a2 += wt * v2;
      a3 += wt * v3;
    }
    put(a0, b * W);
    put(a1, (b + 1) * W);
    put(a2, (b + 2) * W);
    put(a3, (b + 3) * W);
  }
  for (; b < blocks; ++b) {
    const std::uint16_t* m = mask + b * taps;
    Vec<W> a = Vec<W>{} + bias;
    for (std::int64_t t = 0; t < taps; ++t) {
      Vec<W> v;
      masked_load(&v, src + b * W + off[t], m[t]);
      a += w[t] * v;
    }
    put(a, b * W);
  }
}

// The depthwise kernels of a level: the plane kernel serves every geometry, the in-place kernel (Note
// [Depthwise in place]) the geometries it takes at AVX-512, whose masked loads cost what a load costs. An
// AVX2 variant (vmaskmovps, its lane masks from a table) measured level with the plane kernel over
// mobilenet_v2's depthwise layers (1.006 of their time, min of six interleaved runs each: 0.82-0.90 on planes
// of 56 x 56 and less at stride 1, 1.28-1.33 on 32 x 112 x 112 and on 56 -> 28 at stride 2), so AVX2 keeps
// the plane kernel alone.
struct DepthwiseKernels {
  decltype(&depthwise_plane_portable) plane;
  decltype(&depthwise_in_place_avx512) in_place;  // null where the level has none
};
constexpr DepthwiseKernels kDepthwisePortable{&depthwise_plane_portable, nullptr};
constexpr DepthwiseKernels kDepthwiseAvx2{&depthwise_plane_avx2, nullptr};
constexpr DepthwiseKernels kDepthwiseAvx512{&depthwise_plane_avx512, &depthwise_in_place_avx512};
const simd::Table<const DepthwiseKernels*> depthwise{
    "depthwise",
    {&kDepthwisePortable, "depthwise_plane_portable"},
    {&kDepthwiseAvx2, "depthwise_plane_avx2"},
    {&kDepthwiseAvx512, "depthwise_plane_avx512 depthwise_in_place_avx512 masked_load"}};

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
// The same plane at AVX-512 for column strides 1 and 2 (others: the body above), each pass a loop of
// 16-float steps whose last step is masked: a 111-column row was 6 vectors and a tail of 15 the vectoriser
// left to 8-wide and scalar code, and a row's six short loops cost more in their tails than in their
// vectors (squeezenet1_1's 64 x 111 x 111 -> 55 x 55 layer: 0.35 ms with its input in cache, Zen 4 VM).
// Stride 2 takes the even columns of two loads with one permute. Same taps in the same order as the body.
PACT_TARGET_AVX512 PACT_SIMD_INLINE __m512 take_max(__m512 tap, __m512 max) {
  const __mmask16 wins = _mm512_cmp_ps_mask(tap, max, _CMP_GT_OQ) | _mm512_cmp_ps_mask(tap, tap, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(wins, max, tap);
}

PACT_TARGET_AVX512 void max_pool_plane_avx512(const float* __restrict x, const DirectConvGeometry* gp,
                                              float* __restrict rowmax, std::int64_t wp, float* __restrict out) {
  const DirectConvGeometry& g = *gp;
  if (g.sw != 1 && g.sw != 2) {
    max_pool_plane_body(x, gp, rowmax, wp, out);
    return;
  }
  const __m512 low = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (std::int64_t y = 0; y < g.oh; ++y) {
    for (std::int64_t k = 0; k < wp; k += 16) _mm512_mask_storeu_ps(rowmax + k, first_lanes(wp - k), low);
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      const float* src = x + iy * g.w;
      float* m = rowmax + g.pw;
      for (std::int64_t k = 0; k < g.w; k += 16) {
        const __mmask16 lanes = first_lanes(g.w - k);
        const __m512 max = take_max(_mm512_maskz_loadu_ps(lanes, src + k), _mm512_maskz_loadu_ps(lanes, m + k));
        _mm512_mask_storeu_ps(m + k, lanes, max);
      }
    }
    float* o = out + y * g.ow;
    for (std::int64_t z = 0; z < g.ow; z += 16) {
      const std::int64_t count = std::min<std::int64_t>(16, g.ow - z);
      __m512 max = low;
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const float* m = rowmax + j * g.dw;
        // m[2 z .. 2 (z + count - 1)] for stride 2: 2 count - 1 floats, all inside the padded row
        max =
            take_max(g.sw == 1 ? _mm512_maskz_loadu_ps(first_lanes(count), m + z) : even_floats(m + 2 * z, count), max);
      }
      _mm512_mask_storeu_ps(o + z, first_lanes(count), max);
    }
  }
}

const simd::Table<void (*)(const float*, const DirectConvGeometry*, float*, std::int64_t, float*)> max_pool_plane{
    "max_pool_plane",
    {&simd::Variants<&max_pool_plane_body>::portable, "max_pool_plane_body"},
    {&simd::Variants<&max_pool_plane_body>::avx2, "max_pool_plane_body"},
    {&max_pool_plane_avx512, "max_pool_plane_avx512 max_pool_plane_body take_max first_lanes even_floats"}};

// Note [Depthwise channels-last]
// With channels-last activations (conv2d_nhwc) a depthwise convolution's channels are the contiguous axis
// of the input, the weight ([kh, kw, 1, c]) and the output alike, so an output pixel is kh kw multiply-adds
// of whole channel vectors: no padded copy, no lane idle at a row's end (the planes of mobilenet's and
// efficientnet's late layers are 7 or 14 pixels wide), and every load is a full vector when the channel
// count is a multiple of the width. A block of four vectors of channels accumulates in registers over the
// window's taps (the taps outside the input skipped, not multiplied by zero; the columns' ranges computed
// once per call, not divided out per pixel), then takes the bias, as the reference does after its fold over
// the taps; the channels left over take a block of two vectors, then one, then half a vector, then a
// scalar tail. Four pixels of a row's interior go together, each tap's weights loaded once for the four
// (a plane of 16 or 48 channels otherwise spends its time on each pixel's loop over the taps).
// V vectors of channels [k, k + V W) of P consecutive output pixels z, z + 1, ... (whose taps inside the
// input are the same: kernel rows [i0, i1), columns [j0, j1)), accumulated in registers over those taps,
// each tap's weights loaded once for the P pixels; then the bias and the clamp.
template <int W, int V, int P>
PACT_SIMD_INLINE void depthwise_nhwc_block(const float* __restrict x, const float* __restrict w,
                                           const float* __restrict bias, const DirectConvGeometry& g, std::int64_t y,
                                           std::int64_t z, std::int64_t k, std::int64_t i0, std::int64_t i1,
                                           std::int64_t j0, std::int64_t j1, float* __restrict o, const float* clamp,
                                           const Vec<W>* lo, const Vec<W>* hi) {
  const std::int64_t c = g.c, step = g.sw * c;
  Vec<W> a[P][V] = {};
  for (std::int64_t i = i0; i < i1; ++i)
    for (std::int64_t j = j0; j < j1; ++j) {
      const float* xp = x + ((y * g.sh - g.ph + i * g.dh) * g.w + (z * g.sw - g.pw + j * g.dw)) * c + k;
      const float* wp = w + (i * g.kw + j) * c + k;
      Vec<W> wv[V];
      for (int v = 0; v < V; ++v) load<W>(&wv[v], wp + v * W);
      for (int p = 0; p < P; ++p)
        for (int v = 0; v < V; ++v) {
          Vec<W> xv;
          load<W>(&xv, xp + p * step + v * W);
          a[p][v] += xv * wv[v];
        }
    }
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < V; ++v) {
      if (bias != nullptr) {
        Vec<W> bv;
        load<W>(&bv, bias + k + v * W);
        a[p][v] += bv;
      }
      store_block<W>(&a[p][v], o + p * c + k + v * W, W, clamp != nullptr, lo, hi);
    }
}

// The vector blocks of P pixels' channels (P = 4: two vectors at a time; P = 1: four, then two), then one
// vector, then half a register (24 or 72 channels at AVX-512 end in 8). Returns the first channel left to
// the scalar tail.
template <int W, int P>
PACT_SIMD_INLINE std::int64_t depthwise_nhwc_pixels(const float* __restrict x, const float* __restrict w,
                                                    const float* __restrict bias, const DirectConvGeometry& g,
                                                    std::int64_t y, std::int64_t z, std::int64_t i0, std::int64_t i1,
                                                    std::int64_t j0, std::int64_t j1, float* __restrict o,
                                                    const float* clamp) {
  constexpr int H = W >= 8 ? W / 2 : W;
  constexpr int V = P == 1 ? 4 : 2;  // four vectors by four pixels spill at AVX2
  Vec<W> lo{}, hi{};
  Vec<H> half_lo{}, half_hi{};
  if (clamp != nullptr) {
    lo = lo + clamp[0];
    hi = hi + clamp[1];
    half_lo = half_lo + clamp[0];
    half_hi = half_hi + clamp[1];
  }
  const std::int64_t c = g.c;
  std::int64_t k = 0;
  for (; k + V * W <= c; k += V * W)
    depthwise_nhwc_block<W, V, P>(x, w, bias, g, y, z, k, i0, i1, j0, j1, o, clamp, &lo, &hi);
  if (V > 2 && k + 2 * W <= c) {
    depthwise_nhwc_block<W, 2, P>(x, w, bias, g, y, z, k, i0, i1, j0, j1, o, clamp, &lo, &hi);
    k += 2 * W;
  }
  if (k + W <= c) {
    depthwise_nhwc_block<W, 1, P>(x, w, bias, g, y, z, k, i0, i1, j0, j1, o, clamp, &lo, &hi);
    k += W;
  }
  if (H < W && k + H <= c) {
    depthwise_nhwc_block<H, 1, P>(x, w, bias, g, y, z, k, i0, i1, j0, j1, o, clamp, &half_lo, &half_hi);
    k += H;
  }
  return k;
}

template <int W>
PACT_SIMD_INLINE void depthwise_nhwc_row_impl(const float* __restrict x, const float* __restrict w,
                                              const float* __restrict bias, const DirectConvGeometry* gp,
                                              std::int64_t y, const std::int64_t* __restrict taps_j,
                                              float* __restrict out, const float* clamp) {
  const DirectConvGeometry& g = *gp;
  const std::int64_t c = g.c;
  const std::int64_t i0 = std::max<std::int64_t>(0, (g.ph - y * g.sh + g.dh - 1) / g.dh);
  const std::int64_t i1 = std::min(g.kh, (g.h - y * g.sh + g.ph + g.dh - 1) / g.dh);
  // Four pixels at a time where their taps' columns are the same (every column inside the input: all but
  // the row's ends); the first and last column of a range bound it, the ranges being monotone in z.
  auto same = [&](std::int64_t a, std::int64_t b) {
    return b < g.ow && taps_j[2 * a] == taps_j[2 * b] && taps_j[2 * a + 1] == taps_j[2 * b + 1];
  };
  for (std::int64_t z = 0; z < g.ow;) {
    const std::int64_t j0 = taps_j[2 * z], j1 = taps_j[2 * z + 1];
    float* __restrict o = out + z * c;
    const std::int64_t pixels = same(z, z + 3) ? 4 : 1;
    const std::int64_t k = pixels == 4 ? depthwise_nhwc_pixels<W, 4>(x, w, bias, g, y, z, i0, i1, j0, j1, o, clamp)
                                       : depthwise_nhwc_pixels<W, 1>(x, w, bias, g, y, z, i0, i1, j0, j1, o, clamp);
    for (std::int64_t p = 0; p < pixels; ++p)
      for (std::int64_t kk = k; kk < c; ++kk) {  // the scalar tail, in the same order
        float a = 0.0f;
        for (std::int64_t i = i0; i < i1; ++i)
          for (std::int64_t j = j0; j < j1; ++j)
            a += x[((y * g.sh - g.ph + i * g.dh) * g.w + ((z + p) * g.sw - g.pw + j * g.dw)) * c + kk] *
                 w[(i * g.kw + j) * c + kk];
        if (bias != nullptr) a += bias[kk];
        if (clamp != nullptr) a = a < clamp[0] ? clamp[0] : (a > clamp[1] ? clamp[1] : a);
        o[p * c + kk] = a;
      }
    z += pixels;
  }
}

void depthwise_nhwc_row_portable(const float* x, const float* w, const float* bias, const DirectConvGeometry* g,
                                 std::int64_t y, const std::int64_t* taps_j, float* out, const float* clamp) {
  depthwise_nhwc_row_impl<4>(x, w, bias, g, y, taps_j, out, clamp);
}
PACT_TARGET_AVX2 void depthwise_nhwc_row_avx2(const float* x, const float* w, const float* bias,
                                              const DirectConvGeometry* g, std::int64_t y, const std::int64_t* taps_j,
                                              float* out, const float* clamp) {
  depthwise_nhwc_row_impl<8>(x, w, bias, g, y, taps_j, out, clamp);
}
PACT_TARGET_AVX512 void depthwise_nhwc_row_avx512(const float* x, const float* w, const float* bias,
                                                  const DirectConvGeometry* g, std::int64_t y,
                                                  const std::int64_t* taps_j, float* out, const float* clamp) {
  depthwise_nhwc_row_impl<16>(x, w, bias, g, y, taps_j, out, clamp);
}
const simd::Table<decltype(&depthwise_nhwc_row_portable)> depthwise_nhwc_row{
    "depthwise_nhwc_row",
    {&depthwise_nhwc_row_portable, "depthwise_nhwc_row_portable"},
    {&depthwise_nhwc_row_avx2, "depthwise_nhwc_row_avx2"},
    {&depthwise_nhwc_row_avx512, "depthwise_nhwc_row_avx512"}};

}  // namespace

void depthwise_conv2d_nhwc(const float* x, const float* w, const float* bias, const DirectConvGeometry& g, float* out,
                           const float* clamp, const std::function<void(float*, std::int64_t, std::int64_t)>& store) {
  const std::int64_t rows = g.n * g.oh, row = g.ow * g.c, taps = g.kh * g.kw;
  count_macs(rows * row * taps);
  if (rows == 0 || row == 0) return;
  // The kernel columns [j0, j1) whose taps fall inside the input, per output column: the same for every row.
  std::vector<std::int64_t> taps_j(static_cast<std::size_t>(2 * g.ow));
  for (std::int64_t z = 0; z < g.ow; ++z) {
    std::int64_t j0 = 0, j1 = 0;
    while (j0 < g.kw && z * g.sw - g.pw + j0 * g.dw < 0) ++j0;
    for (j1 = j0; j1 < g.kw && z * g.sw - g.pw + j1 * g.dw < g.w;) ++j1;
    taps_j[static_cast<std::size_t>(2 * z)] = j0;
    taps_j[static_cast<std::size_t>(2 * z + 1)] = j1;
  }
  const auto f = depthwise_nhwc_row.get();
  parallel_ranges(rows, rows * row * taps >= (std::int64_t{1} << 16), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t n = r / g.oh, y = r % g.oh;
      f(x + n * g.h * g.w * g.c, w, bias, &g, y, taps_j.data(), out + r * row, clamp);
      if (store) store(out + r * row, r * row, row);
    }
  });
}

void depthwise_conv2d(const float* x, const float* w, const float* bias, const DirectConvGeometry& g, float* out,
                      const float* clamp, const std::function<void(float*, std::int64_t)>& store) {
  const std::int64_t mult = g.o / g.c, planes = g.n * g.o, taps = g.kh * g.kw;
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  count_macs(planes * out_plane * taps);
  if (planes == 0 || out_plane == 0) return;
  const bool share = planes * out_plane * taps >= (std::int64_t{1} << 16);
  const std::int64_t st = g.sw;  // Note [Depthwise in place]: stride 1 or 2, rows of ceil(w / st)
  const DepthwiseKernels& k = *depthwise.get();
  if (k.in_place != nullptr && g.sh == st && (st == 1 || st == 2) && g.ow == (g.w + st - 1) / st) {
    constexpr std::int64_t lanes = 16;
    const std::int64_t blocks = (out_plane + lanes - 1) / lanes;
    std::vector<std::int64_t> off(static_cast<std::size_t>(taps));
    std::vector<std::uint16_t> mask(static_cast<std::size_t>(blocks * taps), 0);
    // Tap t reads the plane at output pixels [a, b) of each row in [y0, y1): set those bits, a run at a time.
    auto set_run = [&](std::int64_t t, std::int64_t a, std::int64_t b) {
      while (a < b) {
        const std::int64_t blk = a / lanes, l0 = a - blk * lanes, l1 = std::min(b - blk * lanes, lanes);
        mask[static_cast<std::size_t>(blk * taps + t)] |=
            static_cast<std::uint16_t>(((1u << l1) - 1u) & ~((1u << l0) - 1u));
        a = blk * lanes + l1;
      }
    };
    auto floor_div = [](std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((b - 1 - a) / b); };
    const std::int64_t hq = (g.h + 1) / 2;  // rows of a phase at stride 2
    for (std::int64_t i = 0; i < g.kh; ++i)
      for (std::int64_t j = 0; j < g.kw; ++j) {
        // Output (y, z) reads input (y st + dy, z st + dx): rows [y0, y1) and columns [z0, z1) read the plane.
        const std::int64_t t = i * g.kw + j, dy = i * g.dh - g.ph, dx = j * g.dw - g.pw;
        const std::int64_t fy = floor_div(dy, st), fx = floor_div(dx, st);
        off[static_cast<std::size_t>(t)] =
            st == 1 ? dy * g.w + dx : ((dy - 2 * fy) * 2 + (dx - 2 * fx)) * hq * g.ow + fy * g.ow + fx;
        const std::int64_t y0 = std::max<std::int64_t>(0, -fy), y1 = std::min(g.oh, floor_div(g.h - 1 - dy, st) + 1);
        const std::int64_t z0 = std::max<std::int64_t>(0, -fx), z1 = std::min(g.ow, floor_div(g.w - 1 - dx, st) + 1);
        for (std::int64_t y = y0; y < y1 && z0 < z1; ++y) set_run(t, y * g.ow + z0, y * g.ow + z1);
      }
    const InPlaceTaps s{out_plane, taps, off.data(), mask.data(), clamp, g.h, g.w, g.ow};
    parallel_ranges(planes, share, [&](std::int64_t p0, std::int64_t p1) {
      std::vector<float> phases(st == 2 ? static_cast<std::size_t>(4 * hq * g.ow) : 0);
      for (std::int64_t p = p0; p < p1; ++p) {
        const std::int64_t n = p / g.o, oc = p % g.o, ic = oc / mult;
        float* plane = out + p * out_plane;
        k.in_place(x + (n * g.c + ic) * in_plane, w + oc * taps, bias != nullptr ? bias[oc] : 0.0f, &s,
                   st == 2 ? phases.data() : nullptr, plane);
        if (store) store(plane, out_plane);
      }
    });
    return;
  }
  const std::int64_t owp = (g.ow + kBlock - 1) / kBlock * kBlock;
  // Output column z reads padded column z sw + j dw (stride 2 loads 2W columns per block of W), output row
  // y padded row y sh + i dh; the input occupies rows [ph, ph + h) and columns [pw, pw + w).
  const std::int64_t wp = std::max((owp - 1) * g.sw + (g.kw - 1) * g.dw + 1 + (g.sw == 2 ? 1 : 0), g.pw + g.w);
  const std::int64_t hp = std::max((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1, g.ph + g.h);
  std::vector<std::int64_t> tap(static_cast<std::size_t>(taps));
  for (std::int64_t i = 0; i < g.kh; ++i)
    for (std::int64_t j = 0; j < g.kw; ++j) tap[static_cast<std::size_t>(i * g.kw + j)] = i * g.dh * wp + j * g.dw;
  parallel_ranges(planes, share, [&](std::int64_t p0, std::int64_t p1) {
    std::vector<float> scratch(static_cast<std::size_t>(hp * wp), 0.0f);  // padding zeroed once
    const PlaneScratch sc{wp, scratch.data(), tap.data(), clamp};
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t n = p / g.o, oc = p % g.o, ic = oc / mult;
      float* plane = out + p * out_plane;
      k.plane(x + (n * g.c + ic) * in_plane, w + oc * taps, bias != nullptr ? bias[oc] : 0.0f, &g, sc, plane);
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
