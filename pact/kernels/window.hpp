#pragma once
/// The window geometry of the spatial ops (conv2d, max_pool2d, avg_pool2d) as plain integers, and the
/// divisor rule of avg_pool2d: one definition that both the host providers and the CUDA provider's device
/// code (pact/kernels/cuda/kernels.cu, which includes this file and receives these structs by value) read.
/// Dependency-free C++17 so nvcc compiles it; pact/kernels/spatial.hpp builds the structs from an op's
/// inputs and attributes.

#include <cstdint>

#include "pact/kernels/host_device.hpp"

namespace pact::kernels {

/// conv2d over an NCHW input: c input and o output channels in `groups` groups of cg and og; output oh x ow.
struct ConvGeometry {
  std::int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, groups, cg, og;
};

/// Pooling over the last two dimensions of an input of `planes` h x w planes; output oh x ow per plane.
struct PoolGeometry {
  std::int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  std::int64_t count_include_pad;  ///< avg_pool2d's divisor rule, 1 or 0 (an integer, for the device)
};

/// PyTorch's avg_pool2d divisor for output (y, z) with `valid` taps inside the input: with
/// count_include_pad, the window clipped to the padded input; otherwise the valid taps.
PACT_HOST_DEVICE inline std::int64_t avg_divisor(const PoolGeometry& g, std::int64_t y, std::int64_t z,
                                                 std::int64_t valid) {
  if (g.count_include_pad == 0) return valid;
  const std::int64_t y0 = y * g.sh - g.ph, x0 = z * g.sw - g.pw;
  const std::int64_t y1 = y0 + g.kh < g.h + g.ph ? y0 + g.kh : g.h + g.ph;
  const std::int64_t x1 = x0 + g.kw < g.w + g.pw ? x0 + g.kw : g.w + g.pw;
  return (y1 - y0) * (x1 - x0);
}

}  // namespace pact::kernels
