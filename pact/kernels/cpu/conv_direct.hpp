#pragma once
/// Direct (not GEMM) f32 window kernels of the native provider: depthwise convolution, where each group
/// has one input channel, so im2col + GEMM would multiply a 1 x (kh kw) patch per output pixel, and max
/// pooling. Families of the SIMD dispatch table (pact/core/simd_dispatch.hpp): depthwise,
/// depthwise_nhwc_row, max_pool_plane.

#include <cstdint>
#include <functional>

namespace pact::kernels::cpu {

/// NCHW convolution geometry (the generic kernels' ConvGeometry, without its provider namespace).
struct DirectConvGeometry {
  std::int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups;
};

/// True when every group has exactly one input channel (groups == c), the depthwise case.
inline bool is_depthwise(const DirectConvGeometry& g) noexcept { return g.groups == g.c && g.o % g.c == 0; }

/// out[n, oc, y, z] = bias[oc] + sum_{i, j} w[oc, 0, i, j] x[n, oc / m, y sh - ph + i dh, z sw - pw + j dw]
/// (m = o / c, zero outside the input), for a depthwise geometry. bias may be null. `clamp`, when not null,
/// clamps each output to [clamp[0], clamp[1]] in registers as it is stored (relu, relu6; a NaN stays NaN).
/// `store`, when set, is called on each output plane (pointer, element count) right after it is written,
/// while it is in cache (conv2d_activation's other activations), on the thread that wrote it.
void depthwise_conv2d(const float* x, const float* w, const float* bias, const DirectConvGeometry& g, float* out,
                      const float* clamp = nullptr, const std::function<void(float*, std::int64_t)>& store = {});

/// The channels-last depthwise convolution (conv2d_nhwc with groups = c = o; Note [Depthwise channels-last]
/// in conv_direct.cpp): out[n, y, z, k] = bias[k] + sum_{i, j} w[i, j, 0, k] x[n, y sh - ph + i dh,
/// z sw - pw + j dw, k], taps outside the input skipped. x is [n, h, w, c], w [kh, kw, 1, c], out
/// [n, oh, ow, c]; bias may be null; `clamp` as depthwise_conv2d's. `store`, when set, is called on each
/// output row (pointer, its offset in the output, element count) right after it is written, on the thread
/// that wrote it. A family of the dispatch table: depthwise_nhwc_row.
void depthwise_conv2d_nhwc(const float* x, const float* w, const float* bias, const DirectConvGeometry& g, float* out,
                           const float* clamp = nullptr,
                           const std::function<void(float*, std::int64_t, std::int64_t)>& store = {});

/// out[p, y, z] = max over the window of x[p] (NaN if any tap is NaN), for the g.c = g.o planes of g
/// (n = 1, groups = c; padding is never the maximum of a window that has an input element).
void max_pool2d_planes(const float* x, const DirectConvGeometry& g, float* out);

}  // namespace pact::kernels::cpu
