#pragma once
/// The window geometry of the spatial ops (pact/kernels/window.hpp) from an op's inputs and attributes, for
/// every provider: conv2d's (NCHW input, [O, C / groups, KH, KW] weight), and max_pool2d's and avg_pool2d's
/// (the last two dimensions pooled, every leading one a plane). The output extents come from the op's shape
/// rule, so a provider's loop bounds are the plan's types.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "pact/core/tensor.hpp"
#include "pact/kernels/window.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::kernels {

/// An attribute given as one value or a pair (PyTorch's int-or-tuple), as a (height, width) pair.
inline std::pair<std::int64_t, std::int64_t> window_pair(const ops::Attributes& a, std::string_view op,
                                                         const char* name,
                                                         std::optional<std::vector<std::int64_t>> fallback) {
  auto v = a.get_ints(op, name, std::move(fallback));
  return v.size() == 1 ? std::pair{v[0], v[0]} : std::pair{v[0], v[1]};
}

/// conv2d's attributes: conv2d_activation's (or conv2d_nhwc's) without "activation".
inline ops::Attributes conv_attributes(const ops::Attributes& a) {
  ops::Attributes c;
  for (const auto& [name, value] : a.values())
    if (name != "activation") c.set(name, value);
  return c;
}

/// conv2d's geometry over inputs (x, weight[, bias]); the shape rule refuses what it does not type.
inline ConvGeometry conv_geometry(std::span<const TensorView> in, const ops::Attributes& a) {
  const Dims x = in[0].shape(), wt = in[1].shape();
  const Dims out =
      ops::infer_type(ops::OpTag::conv2d, std::vector<ops::TensorType>{{in[0].dtype(), x}, {in[1].dtype(), wt}}, a)
          .shape;
  ConvGeometry g{};
  g.n = x[0];
  g.c = x[1];
  g.h = x[2];
  g.w = x[3];
  g.o = wt[0];
  g.kh = wt[2];
  g.kw = wt[3];
  g.oh = out[2];
  g.ow = out[3];
  std::tie(g.sh, g.sw) = window_pair(a, "conv2d", "stride", std::vector<std::int64_t>{1});
  std::tie(g.ph, g.pw) = window_pair(a, "conv2d", "padding", std::vector<std::int64_t>{0});
  std::tie(g.dh, g.dw) = window_pair(a, "conv2d", "dilation", std::vector<std::int64_t>{1});
  g.groups = a.get_int("conv2d", "groups", 1);
  g.cg = g.c / g.groups;
  g.og = g.o / g.groups;
  return g;
}

/// max_pool2d's or avg_pool2d's geometry over input x (`op` names which).
inline PoolGeometry pool_geometry(std::string_view op, const TensorView& x, const ops::Attributes& a) {
  const bool max = op == "max_pool2d";
  const Dims out = ops::infer_type(max ? ops::OpTag::max_pool2d : ops::OpTag::avg_pool2d,
                                   std::vector<ops::TensorType>{{x.dtype(), x.shape()}}, a)
                       .shape;
  const Dims s = x.shape();
  const int r = s.size();
  PoolGeometry g{};
  g.planes = s[r - 2] * s[r - 1] == 0 ? 0 : ops::numel(s) / (s[r - 2] * s[r - 1]);
  g.h = s[r - 2];
  g.w = s[r - 1];
  g.oh = out[r - 2];
  g.ow = out[r - 1];
  std::tie(g.kh, g.kw) = window_pair(a, op, "kernel_size", std::nullopt);
  std::tie(g.sh, g.sw) = a.has("stride") ? window_pair(a, op, "stride", std::nullopt) : std::pair{g.kh, g.kw};
  std::tie(g.ph, g.pw) = window_pair(a, op, "padding", std::vector<std::int64_t>{0});
  std::tie(g.dh, g.dw) =
      max ? window_pair(a, op, "dilation", std::vector<std::int64_t>{1}) : std::pair<std::int64_t, std::int64_t>{1, 1};
  g.count_include_pad = !max && a.get_bool(op, "count_include_pad", true) ? 1 : 0;
  return g;
}

}  // namespace pact::kernels
