#include "pact/kernels/cpu/conv_direct.hpp"

#include <algorithm>

#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/parallel.hpp"

namespace pact::kernels::cpu {

namespace {

// The output columns z whose input column z * stride + start lies in [0, extent): [lo, hi).
inline void valid_columns(std::int64_t start, std::int64_t stride, std::int64_t extent, std::int64_t count,
                          std::int64_t& lo, std::int64_t& hi) {
  lo = start >= 0 ? 0 : (-start + stride - 1) / stride;
  hi = extent - start <= 0 ? 0 : (extent - start + stride - 1) / stride;
  lo = std::min(lo, count);
  hi = std::clamp(hi, lo, count);
}

// One output plane of one channel: each output row starts at the bias, then every tap whose input row
// exists adds its weight times the input row (shifted by the tap's column offset and strided) over the
// columns where the input column exists. A row of outputs stays in L1 across its kh kw passes; with unit
// stride each pass is a contiguous multiply-add the vectoriser turns into full-width FMAs.
PACT_SIMD_INLINE void depthwise_plane_body(const float* __restrict x, const float* __restrict w, float bias,
                                           const DirectConvGeometry* gp, float* __restrict out) {
  const DirectConvGeometry& g = *gp;
  for (std::int64_t y = 0; y < g.oh; ++y) {
    float* __restrict o = out + y * g.ow;
    for (std::int64_t z = 0; z < g.ow; ++z) o[z] = bias;
    for (std::int64_t i = 0; i < g.kh; ++i) {
      const std::int64_t iy = y * g.sh - g.ph + i * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      const float* __restrict row = x + iy * g.w;
      for (std::int64_t j = 0; j < g.kw; ++j) {
        const float wt = w[i * g.kw + j];
        const std::int64_t x0 = j * g.dw - g.pw;
        std::int64_t lo = 0, hi = 0;
        valid_columns(x0, g.sw, g.w, g.ow, lo, hi);
        if (g.sw == 1) {
          const float* __restrict s = row + x0;
          for (std::int64_t z = lo; z < hi; ++z) o[z] += wt * s[z];
        } else if (g.sw == 2) {
          const float* __restrict s = row + x0;
          for (std::int64_t z = lo; z < hi; ++z) o[z] += wt * s[2 * z];
        } else {
          for (std::int64_t z = lo; z < hi; ++z) o[z] += wt * row[z * g.sw + x0];
        }
      }
    }
  }
}
PACT_SIMD_VARIANTS(depthwise_plane, depthwise_plane_body);

}  // namespace

void depthwise_conv2d(const float* x, const float* w, const float* bias, const DirectConvGeometry& g, float* out) {
  const std::int64_t mult = g.o / g.c, planes = g.n * g.o, taps = g.kh * g.kw;
  const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  const auto f = depthwise_plane.get();
  parallel_ranges(planes, planes * out_plane * taps >= (std::int64_t{1} << 16), [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t n = p / g.o, oc = p % g.o, ic = oc / mult;
      f(x + (n * g.c + ic) * in_plane, w + oc * taps, bias != nullptr ? bias[oc] : 0.0f, &g, out + p * out_plane);
    }
  });
}

}  // namespace pact::kernels::cpu
