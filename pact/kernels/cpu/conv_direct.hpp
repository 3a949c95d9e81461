#pragma once
/// Direct (not GEMM) f32 convolution kernels of the CPU providers: depthwise convolution, where each
/// group has one input channel, so im2col + GEMM would multiply a 1 x (kh kw) patch per output pixel.
/// One family of the SIMD dispatch table (pact/core/simd_dispatch.hpp).

#include <cstdint>

namespace pact::kernels::cpu {

/// NCHW convolution geometry (the generic kernels' ConvGeometry, without its provider namespace).
struct DirectConvGeometry {
  std::int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
};

/// True when every group has exactly one input channel (groups == c), the depthwise case.
inline bool is_depthwise(const DirectConvGeometry& g) noexcept { return g.groups == g.c && g.o % g.c == 0; }

/// out[n, oc, y, z] = bias[oc] + sum_{i, j} w[oc, 0, i, j] x[n, oc / m, y sh - ph + i dh, z sw - pw + j dw]
/// (m = o / c, zero outside the input), for a depthwise geometry. bias may be null.
void depthwise_conv2d(const float* x, const float* w, const float* bias, const DirectConvGeometry& g, float* out);

}  // namespace pact::kernels::cpu
