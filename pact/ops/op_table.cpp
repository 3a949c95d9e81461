#include "pact/ops/op_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>

#include "pact/core/checked_math.hpp"

namespace pact::ops {

// ---- helpers ---------------------------------------------------------------------------------------

std::int64_t numel(const Dims& shape) noexcept {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  return n;
}

Dims broadcast_shapes(std::string_view op, const Dims& a, const Dims& b) {
  const int rank = std::max(a.size(), b.size());
  Dims out;
  for (int i = 0; i < rank; ++i) {
    const int ia = a.size() - rank + i;
    const int ib = b.size() - rank + i;
    const std::int64_t ea = ia >= 0 ? a[ia] : 1;
    const std::int64_t eb = ib >= 0 ? b[ib] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      throw_error(ErrorCode::invalid_argument, std::string(op),
                  fmt::format("shapes {} and {} do not broadcast (dimension {})", a.to_string(), b.to_string(), i));
    }
    out.push_back(ea == 1 ? eb : ea);
  }
  return out;
}

int normalize_dim(std::string_view op, std::int64_t dim, int rank) {
  const std::int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= std::max(rank, 1)) {
    throw_error(ErrorCode::invalid_argument, std::string(op),
                fmt::format("dim {} out of range for rank {}", dim, rank));
  }
  return static_cast<int>(d);
}

namespace {

[[noreturn]] void bad(std::string_view op, const std::string& why) {
  throw_error(ErrorCode::invalid_argument, std::string(op), why);
}

void require_float(std::string_view op, const TensorType& t, std::string_view operand) {
  if (t.dtype != DType::f32 && t.dtype != DType::f64) {
    bad(op, fmt::format("operand '{}' is {}; expected f32 or f64", operand, dtype_name(t.dtype)));
  }
}

void require_same_dtype(std::string_view op, const TensorType& a, const TensorType& b, std::string_view name_b) {
  if (a.dtype != b.dtype) {
    throw_error(
        ErrorCode::dtype_mismatch, std::string(op),
        fmt::format("operand '{}' is {}, the first operand {}", name_b, dtype_name(b.dtype), dtype_name(a.dtype)));
  }
}

void require_rank(std::string_view op, const TensorType& t, std::string_view operand, int lo, int hi) {
  if (t.shape.size() < lo || t.shape.size() > hi) {
    bad(op, fmt::format("operand '{}' has shape {}; expected rank {}..{}", operand, t.shape.to_string(), lo, hi));
  }
}

Dims dims_of(std::string_view op, const std::vector<std::int64_t>& v, std::string_view what) {
  if (v.size() > static_cast<std::size_t>(kMaxRank))
    bad(op, fmt::format("'{}' has more than {} entries", what, kMaxRank));
  return Dims(std::span<const std::int64_t>(v));
}

std::pair<std::int64_t, std::int64_t> pair_attr(std::string_view op, const Attributes& attrs, std::string_view name,
                                                std::vector<std::int64_t> fallback) {
  auto v = attrs.get_ints(op, name, fallback);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) bad(op, fmt::format("attribute '{}' needs 1 or 2 entries, got {}", name, v.size()));
  return {v[0], v[1]};
}

// ---- attribute schemas -----------------------------------------------------------------------------

constexpr AttrSpec kSourceAttrs[] = {{"shape", AttrType::i64_list, true}, {"dtype", AttrType::string, false}};
constexpr AttrSpec kGeluAttrs[] = {{"approximate", AttrType::string, false}};
constexpr AttrSpec kClampAttrs[] = {{"min", AttrType::f64, false}, {"max", AttrType::f64, false}};
constexpr AttrSpec kDimAttrs[] = {{"dim", AttrType::i64, false}};
constexpr AttrSpec kCrossEntropyAttrs[] = {{"reduction", AttrType::string, false},
                                           {"ignore_index", AttrType::i64, false}};
constexpr AttrSpec kReductionAttrs[] = {{"reduction", AttrType::string, false}};
constexpr AttrSpec kNormAttrs[] = {{"normalized_shape", AttrType::i64_list, true}, {"eps", AttrType::f64, false}};
constexpr AttrSpec kBatchNormAttrs[] = {{"eps", AttrType::f64, false}, {"momentum", AttrType::f64, false}};
constexpr AttrSpec kDropoutAttrs[] = {{"p", AttrType::f64, false}};
constexpr AttrSpec kEmbeddingAttrs[] = {{"padding_idx", AttrType::i64, false}};
constexpr AttrSpec kAttentionAttrs[] = {{"is_causal", AttrType::boolean, false}, {"scale", AttrType::f64, false}};
constexpr AttrSpec kConvAttrs[] = {{"stride", AttrType::i64_list, false},
                                   {"padding", AttrType::i64_list, false},
                                   {"dilation", AttrType::i64_list, false},
                                   {"groups", AttrType::i64, false}};
constexpr AttrSpec kConvActivationAttrs[] = {{"stride", AttrType::i64_list, false},
                                             {"padding", AttrType::i64_list, false},
                                             {"dilation", AttrType::i64_list, false},
                                             {"groups", AttrType::i64, false},
                                             {"activation", AttrType::string, true}};
constexpr AttrSpec kMaxPoolAttrs[] = {{"kernel_size", AttrType::i64_list, true},
                                      {"stride", AttrType::i64_list, false},
                                      {"padding", AttrType::i64_list, false},
                                      {"dilation", AttrType::i64_list, false},
                                      {"ceil_mode", AttrType::boolean, false}};
constexpr AttrSpec kAvgPoolAttrs[] = {{"kernel_size", AttrType::i64_list, true},
                                      {"stride", AttrType::i64_list, false},
                                      {"padding", AttrType::i64_list, false},
                                      {"ceil_mode", AttrType::boolean, false},
                                      {"count_include_pad", AttrType::boolean, false}};
constexpr AttrSpec kAdaptiveAttrs[] = {{"output_size", AttrType::i64_list, true}};
constexpr AttrSpec kReshapeAttrs[] = {{"shape", AttrType::i64_list, true}};
constexpr AttrSpec kPermuteAttrs[] = {{"dims", AttrType::i64_list, true}};
constexpr AttrSpec kTransposeAttrs[] = {{"dim0", AttrType::i64, true}, {"dim1", AttrType::i64, true}};
constexpr AttrSpec kFlattenAttrs[] = {{"start_dim", AttrType::i64, false}, {"end_dim", AttrType::i64, false}};
constexpr AttrSpec kSliceAttrs[] = {{"dim", AttrType::i64, true},
                                    {"start", AttrType::i64, false},
                                    {"end", AttrType::i64, false},
                                    {"step", AttrType::i64, false}};
constexpr AttrSpec kReduceAttrs[] = {{"dims", AttrType::i64_list, false}, {"keepdim", AttrType::boolean, false}};

// ---- shape rules -----------------------------------------------------------------------------------

TensorType shape_source(std::string_view op, std::span<const TensorType>, const Attributes& a) {
  TensorType t;
  t.shape = dims_of(op, a.get_ints(op, "shape"), "shape");
  for (auto e : t.shape) {
    if (e < 0) bad(op, fmt::format("negative extent in shape {}", t.shape.to_string()));
  }
  t.dtype = parse_dtype(a.get_string(op, "dtype", std::string("f32")));
  return t;
}
TensorType shape_input(std::span<const TensorType> in, const Attributes& a) { return shape_source("input", in, a); }
TensorType shape_parameter(std::span<const TensorType> in, const Attributes& a) {
  return shape_source("parameter", in, a);
}
TensorType shape_constant(std::span<const TensorType> in, const Attributes& a) {
  return shape_source("constant", in, a);
}

TensorType binary(std::string_view op, std::span<const TensorType> in) {
  require_float(op, in[0], "a");
  require_same_dtype(op, in[0], in[1], "b");
  return {in[0].dtype, broadcast_shapes(op, in[0].shape, in[1].shape)};
}
TensorType shape_add(std::span<const TensorType> in, const Attributes&) { return binary("add", in); }
TensorType shape_sub(std::span<const TensorType> in, const Attributes&) { return binary("sub", in); }
TensorType shape_mul(std::span<const TensorType> in, const Attributes&) { return binary("mul", in); }
TensorType shape_div(std::span<const TensorType> in, const Attributes&) { return binary("div", in); }

TensorType unary(std::string_view op, std::span<const TensorType> in) {
  require_float(op, in[0], "x");
  return in[0];
}
TensorType shape_neg(std::span<const TensorType> in, const Attributes&) { return unary("neg", in); }
TensorType shape_relu(std::span<const TensorType> in, const Attributes&) { return unary("relu", in); }
TensorType shape_gelu(std::span<const TensorType> in, const Attributes& a) {
  auto approx = a.get_string("gelu", "approximate", std::string("none"));
  if (approx != "none" && approx != "tanh") bad("gelu", fmt::format("approximate '{}' is not none|tanh", approx));
  return unary("gelu", in);
}
TensorType shape_silu(std::span<const TensorType> in, const Attributes&) { return unary("silu", in); }
TensorType shape_tanh(std::span<const TensorType> in, const Attributes&) { return unary("tanh", in); }
TensorType shape_sigmoid(std::span<const TensorType> in, const Attributes&) { return unary("sigmoid", in); }
TensorType shape_clamp(std::span<const TensorType> in, const Attributes& a) {
  auto lo = a.get_optional_float("clamp", "min");
  auto hi = a.get_optional_float("clamp", "max");
  if (lo && hi && *lo > *hi) bad("clamp", fmt::format("min {} > max {}", *lo, *hi));
  return unary("clamp", in);
}
TensorType shape_exp(std::span<const TensorType> in, const Attributes&) { return unary("exp", in); }
TensorType shape_log(std::span<const TensorType> in, const Attributes&) { return unary("log", in); }
TensorType shape_sqrt(std::span<const TensorType> in, const Attributes&) { return unary("sqrt", in); }
TensorType shape_sin(std::span<const TensorType> in, const Attributes&) { return unary("sin", in); }
TensorType shape_dropout(std::span<const TensorType> in, const Attributes& a) {
  double p = a.get_float("dropout", "p", 0.5);
  if (!(p >= 0.0 && p <= 1.0)) bad("dropout", fmt::format("p = {} is outside [0, 1]", p));
  return unary("dropout", in);
}

TensorType softmax_like(std::string_view op, std::span<const TensorType> in, const Attributes& a) {
  require_float(op, in[0], "x");
  normalize_dim(op, a.get_int(op, "dim", -1), in[0].shape.size());
  return in[0];
}
TensorType shape_softmax(std::span<const TensorType> in, const Attributes& a) { return softmax_like("softmax", in, a); }
TensorType shape_log_softmax(std::span<const TensorType> in, const Attributes& a) {
  return softmax_like("log_softmax", in, a);
}

Dims reduced_loss_shape(std::string_view op, const Attributes& a, const Dims& unreduced) {
  auto r = a.get_string(op, "reduction", std::string("mean"));
  if (r == "none") return unreduced;
  if (r != "mean" && r != "sum") bad(op, fmt::format("reduction '{}' is not mean|sum|none", r));
  return Dims{};
}

TensorType shape_cross_entropy(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "cross_entropy";
  require_float(op, in[0], "logits");
  require_rank(op, in[0], "logits", 1, 2);
  if (in[1].dtype != DType::i64) {
    throw_error(ErrorCode::dtype_mismatch, std::string(op),
                fmt::format("operand 'target' is {}; expected i64 class indices", dtype_name(in[1].dtype)));
  }
  Dims batch = in[0].shape.size() == 2 ? Dims{in[0].shape[0]} : Dims{};
  if (!(in[1].shape == batch)) {
    bad(op, fmt::format("operand 'target' has shape {}; logits {} need {}", in[1].shape.to_string(),
                        in[0].shape.to_string(), batch.to_string()));
  }
  return {in[0].dtype, reduced_loss_shape(op, a, batch)};
}

TensorType shape_mse_loss(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "mse_loss";
  require_float(op, in[0], "input");
  require_same_dtype(op, in[0], in[1], "target");
  if (!(in[0].shape == in[1].shape)) {
    bad(op, fmt::format("operand 'target' has shape {}, input {}", in[1].shape.to_string(), in[0].shape.to_string()));
  }
  return {in[0].dtype, reduced_loss_shape(op, a, in[0].shape)};
}

TensorType norm_like(std::string_view op, std::span<const TensorType> in, const Attributes& a) {
  require_float(op, in[0], "x");
  Dims ns = dims_of(op, a.get_ints(op, "normalized_shape"), "normalized_shape");
  if (a.get_float(op, "eps", 1e-5) < 0) bad(op, "eps is negative");
  const Dims& x = in[0].shape;
  bool ok = ns.size() >= 1 && ns.size() <= x.size();
  for (int i = 0; ok && i < ns.size(); ++i) ok = x[x.size() - ns.size() + i] == ns[i];
  if (!ok) bad(op, fmt::format("normalized_shape {} is not a suffix of x {}", ns.to_string(), x.to_string()));
  static constexpr std::string_view names[] = {"x", "weight", "bias"};
  for (std::size_t i = 1; i < in.size(); ++i) {
    require_same_dtype(op, in[0], in[i], names[i]);
    if (!(in[i].shape == ns)) {
      bad(op, fmt::format("operand '{}' has shape {}; expected {}", names[i], in[i].shape.to_string(), ns.to_string()));
    }
  }
  return in[0];
}
TensorType shape_layer_norm(std::span<const TensorType> in, const Attributes& a) {
  return norm_like("layer_norm", in, a);
}
TensorType shape_rms_norm(std::span<const TensorType> in, const Attributes& a) { return norm_like("rms_norm", in, a); }

TensorType shape_batch_norm(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "batch_norm";
  require_float(op, in[0], "x");
  require_rank(op, in[0], "x", 2, kMaxRank);
  const Dims c{in[0].shape[1]};
  static constexpr std::string_view names[] = {"x", "weight", "bias", "running_mean", "running_var"};
  for (std::size_t i = 1; i < 5; ++i) {
    require_same_dtype(op, in[0], in[i], names[i]);
    if (!(in[i].shape == c)) {
      bad(op, fmt::format("operand '{}' has shape {}; expected {}", names[i], in[i].shape.to_string(), c.to_string()));
    }
  }
  if (a.get_float(op, "eps", 1e-5) < 0) bad(op, "eps is negative");
  return in[0];
}

TensorType shape_embedding(std::span<const TensorType> in, const Attributes&) {
  constexpr std::string_view op = "embedding";
  require_float(op, in[0], "weight");
  require_rank(op, in[0], "weight", 2, 2);
  if (in[1].dtype != DType::i64 && in[1].dtype != DType::i32) {
    throw_error(ErrorCode::dtype_mismatch, std::string(op),
                fmt::format("operand 'indices' is {}; expected i64 or i32", dtype_name(in[1].dtype)));
  }
  Dims out = in[1].shape;
  out.push_back(in[0].shape[1]);
  return {in[0].dtype, out};
}

TensorType shape_matmul(std::span<const TensorType> in, const Attributes&) {
  constexpr std::string_view op = "matmul";
  require_float(op, in[0], "a");
  require_same_dtype(op, in[0], in[1], "b");
  Dims a = in[0].shape, b = in[1].shape;
  if (a.empty() || b.empty()) bad(op, "matmul needs operands of rank >= 1");
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a = Dims{1, a[0]};
  if (b_vec) b = Dims{b[0], 1};
  const std::int64_t k = a[a.size() - 1];
  if (b[b.size() - 2] != k) {
    bad(op, fmt::format("inner dimensions differ: a {} and b {}", in[0].shape.to_string(), in[1].shape.to_string()));
  }
  Dims ab, bb;
  for (int i = 0; i < a.size() - 2; ++i) ab.push_back(a[i]);
  for (int i = 0; i < b.size() - 2; ++i) bb.push_back(b[i]);
  Dims out = broadcast_shapes(op, ab, bb);
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b[b.size() - 1]);
  return {in[0].dtype, out};
}

TensorType shape_linear(std::span<const TensorType> in, const Attributes&) {
  constexpr std::string_view op = "linear";
  require_float(op, in[0], "x");
  require_same_dtype(op, in[0], in[1], "weight");
  require_rank(op, in[0], "x", 1, kMaxRank);
  require_rank(op, in[1], "weight", 2, 2);
  const Dims& x = in[0].shape;
  if (x[x.size() - 1] != in[1].shape[1]) {
    bad(op, fmt::format("x {} has {} features; weight {} expects {}", x.to_string(), x[x.size() - 1],
                        in[1].shape.to_string(), in[1].shape[1]));
  }
  if (in.size() == 3) {
    require_same_dtype(op, in[0], in[2], "bias");
    if (!(in[2].shape == Dims{in[1].shape[0]})) {
      bad(op, fmt::format("operand 'bias' has shape {}; expected [{}]", in[2].shape.to_string(), in[1].shape[0]));
    }
  }
  Dims out = x;
  out[out.size() - 1] = in[1].shape[0];
  return {in[0].dtype, out};
}

TensorType shape_scaled_dot_product_attention(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "scaled_dot_product_attention";
  static constexpr std::string_view names[] = {"query", "key", "value", "mask"};
  require_float(op, in[0], "query");
  for (int i = 0; i < 3; ++i) require_rank(op, in[i], names[i], 2, kMaxRank);
  require_same_dtype(op, in[0], in[1], "key");
  require_same_dtype(op, in[0], in[2], "value");
  const Dims &q = in[0].shape, &k = in[1].shape, &v = in[2].shape;
  const int r = q.size();
  if (k.size() != r || v.size() != r) bad(op, "query, key and value must have the same rank");
  for (int i = 0; i < r - 2; ++i) {
    if (k[i] != q[i] || v[i] != q[i]) {
      bad(op, fmt::format("batch dimensions differ: query {}, key {}, value {}", q.to_string(), k.to_string(),
                          v.to_string()));
    }
  }
  if (k[r - 1] != q[r - 1])
    bad(op, fmt::format("key {} and query {} differ in embedding size", k.to_string(), q.to_string()));
  if (v[r - 2] != k[r - 2])
    bad(op, fmt::format("value {} and key {} differ in sequence length", v.to_string(), k.to_string()));
  if (in.size() == 4) {
    if (a.get_bool(op, "is_causal", false)) bad(op, "a mask and is_causal are exclusive");
    if (in[3].dtype != DType::boolean && in[3].dtype != in[0].dtype) {
      throw_error(
          ErrorCode::dtype_mismatch, std::string(op),
          fmt::format("operand 'mask' is {}; expected bool or {}", dtype_name(in[3].dtype), dtype_name(in[0].dtype)));
    }
    Dims scores = q;
    scores[r - 1] = k[r - 2];
    if (!(broadcast_shapes(op, in[3].shape, scores) == scores)) {
      bad(op, fmt::format("operand 'mask' {} does not broadcast to scores {}", in[3].shape.to_string(),
                          scores.to_string()));
    }
  }
  Dims out = q;
  out[r - 1] = v[r - 1];
  return {in[0].dtype, out};
}

std::int64_t pool_extent(std::string_view op, std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                         std::int64_t d, bool ceil_mode) {
  if (k <= 0 || s <= 0 || d <= 0 || p < 0) bad(op, "kernel, stride and dilation must be positive, padding >= 0");
  const std::int64_t span = in + 2 * p - d * (k - 1) - 1;
  if (span < 0)
    bad(op, fmt::format("input extent {} is smaller than the dilated kernel {}", in + 2 * p, d * (k - 1) + 1));
  std::int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // PyTorch: the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

TensorType conv_shape(std::string_view op, std::span<const TensorType> in, const Attributes& a) {
  require_float(op, in[0], "input");
  require_rank(op, in[0], "input", 4, 4);
  require_rank(op, in[1], "weight", 4, 4);
  require_same_dtype(op, in[0], in[1], "weight");
  const Dims &x = in[0].shape, &w = in[1].shape;
  const std::int64_t groups = a.get_int(op, "groups", 1);
  if (groups <= 0 || x[1] % groups != 0 || w[0] % groups != 0) {
    bad(op, fmt::format("groups {} must divide input channels {} and output channels {}", groups, x[1], w[0]));
  }
  if (w[1] != x[1] / groups) {
    bad(op, fmt::format("weight {} expects {} input channels per group; input {} with groups {} gives {}",
                        w.to_string(), w[1], x.to_string(), groups, x[1] / groups));
  }
  if (in.size() == 3) {
    require_same_dtype(op, in[0], in[2], "bias");
    if (!(in[2].shape == Dims{w[0]}))
      bad(op, fmt::format("operand 'bias' has shape {}; expected [{}]", in[2].shape.to_string(), w[0]));
  }
  auto [sh, sw] = pair_attr(op, a, "stride", {1});
  auto [ph, pw] = pair_attr(op, a, "padding", {0});
  auto [dh, dw] = pair_attr(op, a, "dilation", {1});
  return TensorType{in[0].dtype, Dims{x[0], w[0], pool_extent(op, x[2], w[2], sh, ph, dh, false),
                                      pool_extent(op, x[3], w[3], sw, pw, dw, false)}};
}

TensorType shape_conv2d(std::span<const TensorType> in, const Attributes& a) { return conv_shape("conv2d", in, a); }

// conv2d followed by an elementwise activation in one kernel (the inference fusion of pact/plan/fusion.hpp).
TensorType shape_conv2d_activation(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "conv2d_activation";
  const std::string act = a.get_string(op, "activation");
  if (act != "relu" && act != "relu6" && act != "silu")
    bad(op, fmt::format("activation '{}' is not relu, relu6 or silu", act));
  return conv_shape(op, in, a);
}

TensorType pool(std::string_view op, std::span<const TensorType> in, const Attributes& a, bool dilation) {
  require_float(op, in[0], "input");
  require_rank(op, in[0], "input", 3, 4);
  auto [kh, kw] = pair_attr(op, a, "kernel_size", {});
  auto stride = a.has("stride") ? a.get_ints(op, "stride") : std::vector<std::int64_t>{};
  auto [sh, sw] = stride.empty() ? std::pair{kh, kw} : pair_attr(op, a, "stride", {});
  auto [ph, pw] = pair_attr(op, a, "padding", {0});
  auto [dh, dw] = dilation ? pair_attr(op, a, "dilation", {1}) : std::pair<std::int64_t, std::int64_t>{1, 1};
  if (ph > kh / 2 || pw > kw / 2)
    bad(op, fmt::format("padding ({}, {}) exceeds half the kernel ({}, {})", ph, pw, kh, kw));
  const bool ceil_mode = a.get_bool(op, "ceil_mode", false);
  Dims out = in[0].shape;
  const int r = out.size();
  out[r - 2] = pool_extent(op, out[r - 2], kh, sh, ph, dh, ceil_mode);
  out[r - 1] = pool_extent(op, out[r - 1], kw, sw, pw, dw, ceil_mode);
  return {in[0].dtype, out};
}
TensorType shape_max_pool2d(std::span<const TensorType> in, const Attributes& a) {
  return pool("max_pool2d", in, a, true);
}
TensorType shape_avg_pool2d(std::span<const TensorType> in, const Attributes& a) {
  return pool("avg_pool2d", in, a, false);
}

TensorType shape_adaptive_avg_pool2d(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "adaptive_avg_pool2d";
  require_float(op, in[0], "input");
  require_rank(op, in[0], "input", 3, 4);
  auto [oh, ow] = pair_attr(op, a, "output_size", {});
  if (oh <= 0 || ow <= 0) bad(op, fmt::format("output_size ({}, {}) must be positive", oh, ow));
  Dims out = in[0].shape;
  out[out.size() - 2] = oh;
  out[out.size() - 1] = ow;
  return {in[0].dtype, out};
}

TensorType shape_reshape(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "reshape";
  Dims shape = dims_of(op, a.get_ints(op, "shape"), "shape");
  int infer = -1;
  std::int64_t known = 1;
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) bad(op, "more than one -1 in shape");
      infer = i;
    } else if (shape[i] < 0) {
      bad(op, fmt::format("negative extent in shape {}", shape.to_string()));
    } else {
      auto k = core::checked_mul(known, shape[i]);
      if (!k) bad(op, "shape overflows");
      known = *k;
    }
  }
  const std::int64_t total = numel(in[0].shape);
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      bad(op, fmt::format("cannot infer -1 in {} from {} elements", shape.to_string(), total));
    shape[infer] = total / known;
  } else if (known != total) {
    bad(op, fmt::format("shape {} has {} elements; input {} has {}", shape.to_string(), known, in[0].shape.to_string(),
                        total));
  }
  return {in[0].dtype, shape};
}

TensorType shape_permute(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "permute";
  auto dims = a.get_ints(op, "dims");
  const int r = in[0].shape.size();
  if (static_cast<int>(dims.size()) != r) bad(op, fmt::format("dims has {} entries for rank {}", dims.size(), r));
  std::vector<bool> seen(static_cast<std::size_t>(r), false);
  Dims out;
  for (auto d : dims) {
    int k = normalize_dim(op, d, r);
    if (seen[static_cast<std::size_t>(k)]) bad(op, fmt::format("dim {} repeats", d));
    seen[static_cast<std::size_t>(k)] = true;
    out.push_back(in[0].shape[k]);
  }
  return {in[0].dtype, out};
}

TensorType shape_transpose(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "transpose";
  const int r = in[0].shape.size();
  int d0 = normalize_dim(op, a.get_int(op, "dim0"), r);
  int d1 = normalize_dim(op, a.get_int(op, "dim1"), r);
  Dims out = in[0].shape;
  if (r > 0) std::swap(out[d0], out[d1]);
  return {in[0].dtype, out};
}

TensorType shape_flatten(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "flatten";
  const int r = in[0].shape.size();
  if (r == 0) return {in[0].dtype, Dims{1}};
  int s = normalize_dim(op, a.get_int(op, "start_dim", 0), r);
  int e = normalize_dim(op, a.get_int(op, "end_dim", -1), r);
  if (s > e) bad(op, fmt::format("start_dim {} > end_dim {}", s, e));
  Dims out;
  for (int i = 0; i < s; ++i) out.push_back(in[0].shape[i]);
  std::int64_t n = 1;
  for (int i = s; i <= e; ++i) n *= in[0].shape[i];
  out.push_back(n);
  for (int i = e + 1; i < r; ++i) out.push_back(in[0].shape[i]);
  return {in[0].dtype, out};
}

TensorType shape_concat(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "concat";
  const int r = in[0].shape.size();
  if (r == 0) bad(op, "cannot concatenate rank-0 tensors");
  int d = normalize_dim(op, a.get_int(op, "dim", 0), r);
  Dims out = in[0].shape;
  for (std::size_t i = 1; i < in.size(); ++i) {
    require_same_dtype(op, in[0], in[i], fmt::format("inputs[{}]", i));
    bool ok = in[i].shape.size() == r;
    for (int k = 0; ok && k < r; ++k) ok = k == d || in[i].shape[k] == out[k];
    if (!ok)
      bad(op, fmt::format("inputs[{}] has shape {}; incompatible with {} along dim {}", i, in[i].shape.to_string(),
                          in[0].shape.to_string(), d));
    out[d] += in[i].shape[d];
  }
  return {in[0].dtype, out};
}

/// Python-style slice bounds clamped to [0, n]; step > 0.
struct SliceBounds {
  std::int64_t start, stop, step, count;
};
SliceBounds slice_bounds(std::string_view op, std::int64_t n, const Attributes& a) {
  std::int64_t step = a.get_int(op, "step", 1);
  if (step <= 0) bad(op, fmt::format("step {} must be positive", step));
  auto clampi = [&](std::int64_t v) {
    if (v < 0) v += n;
    return std::clamp<std::int64_t>(v, 0, n);
  };
  std::int64_t start = clampi(a.get_int(op, "start", 0));
  std::int64_t stop = clampi(a.get_int(op, "end", std::numeric_limits<std::int64_t>::max()));
  std::int64_t count = stop > start ? (stop - start + step - 1) / step : 0;
  return {start, stop, step, count};
}

TensorType shape_slice(std::span<const TensorType> in, const Attributes& a) {
  constexpr std::string_view op = "slice";
  const int r = in[0].shape.size();
  int d = normalize_dim(op, a.get_int(op, "dim"), r);
  if (r == 0) bad(op, "cannot slice a rank-0 tensor");
  Dims out = in[0].shape;
  out[d] = slice_bounds(op, out[d], a).count;
  return {in[0].dtype, out};
}

TensorType reduce(std::string_view op, std::span<const TensorType> in, const Attributes& a) {
  require_float(op, in[0], "x");
  const int r = in[0].shape.size();
  auto dims = a.get_ints(op, "dims", std::vector<std::int64_t>{});
  const bool keepdim = a.get_bool(op, "keepdim", false);
  std::vector<bool> reduced(static_cast<std::size_t>(std::max(r, 1)), dims.empty());
  for (auto d : dims) {
    int k = normalize_dim(op, d, r);
    if (reduced[static_cast<std::size_t>(k)]) bad(op, fmt::format("dim {} repeats", d));
    reduced[static_cast<std::size_t>(k)] = true;
  }
  Dims out;
  for (int i = 0; i < r; ++i) {
    if (!reduced[static_cast<std::size_t>(i)]) {
      out.push_back(in[0].shape[i]);
    } else {
      if (op == "max" && in[0].shape[i] == 0) bad(op, fmt::format("max over an empty dimension {}", i));
      if (keepdim) out.push_back(1);
    }
  }
  return {in[0].dtype, out};
}
TensorType shape_sum(std::span<const TensorType> in, const Attributes& a) { return reduce("sum", in, a); }
TensorType shape_mean(std::span<const TensorType> in, const Attributes& a) { return reduce("mean", in, a); }
TensorType shape_max(std::span<const TensorType> in, const Attributes& a) { return reduce("max", in, a); }
TensorType shape_output(std::span<const TensorType> in, const Attributes&) { return in[0]; }

// ---- FLOP rules (SPEC §9: 2 per multiply-add; elementwise and normalization count their arithmetic) ----

std::int64_t per_output(const TensorType& out, std::int64_t k) { return k * numel(out.shape); }
std::int64_t flops_none(std::span<const TensorType>, const TensorType&, const Attributes&) { return 0; }
#define PACT_PER_OUTPUT(name, k)                                                                     \
  std::int64_t flops_##name(std::span<const TensorType>, const TensorType& out, const Attributes&) { \
    return per_output(out, k);                                                                       \
  }
PACT_PER_OUTPUT(add, 1)
PACT_PER_OUTPUT(sub, 1)
PACT_PER_OUTPUT(mul, 1)
PACT_PER_OUTPUT(div, 1)
PACT_PER_OUTPUT(neg, 1)
PACT_PER_OUTPUT(relu, 1)
PACT_PER_OUTPUT(gelu, 8)
PACT_PER_OUTPUT(silu, 4)
PACT_PER_OUTPUT(tanh, 4)
PACT_PER_OUTPUT(sigmoid, 4)
PACT_PER_OUTPUT(clamp, 2)
PACT_PER_OUTPUT(exp, 1)
PACT_PER_OUTPUT(log, 1)
PACT_PER_OUTPUT(sqrt, 1)
PACT_PER_OUTPUT(sin, 1)
PACT_PER_OUTPUT(softmax, 5)
PACT_PER_OUTPUT(log_softmax, 5)
PACT_PER_OUTPUT(layer_norm, 8)
PACT_PER_OUTPUT(rms_norm, 5)
PACT_PER_OUTPUT(batch_norm, 4)
PACT_PER_OUTPUT(dropout, 1)
#undef PACT_PER_OUTPUT

std::int64_t flops_input_elements(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return numel(in[0].shape);
}
std::int64_t flops_cross_entropy(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return 5 * numel(in[0].shape) + numel(in[1].shape);
}
std::int64_t flops_mse_loss(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return 3 * numel(in[0].shape);
}
std::int64_t flops_matmul(std::span<const TensorType> in, const TensorType& out, const Attributes&) {
  const Dims& a = in[0].shape;
  const std::int64_t k = a[a.size() - 1];
  return 2 * numel(out.shape) * k;
}
std::int64_t flops_linear(std::span<const TensorType> in, const TensorType& out, const Attributes&) {
  const std::int64_t k = in[1].shape[1];
  return 2 * numel(out.shape) * k + (in.size() == 3 ? numel(out.shape) : 0);
}
std::int64_t flops_scaled_dot_product_attention(std::span<const TensorType> in, const TensorType& out,
                                                const Attributes&) {
  const Dims& q = in[0].shape;
  const int r = q.size();
  const std::int64_t e = q[r - 1], s = in[1].shape[r - 2];
  const std::int64_t rows = numel(q) / e;  // batch * L
  const std::int64_t ev = out.shape[r - 1];
  return 2 * rows * s * e + 5 * rows * s + 2 * rows * s * ev;  // scores, softmax, values (no causal halving)
}
std::int64_t flops_conv2d(std::span<const TensorType> in, const TensorType& out, const Attributes&) {
  const Dims& w = in[1].shape;
  return 2 * numel(out.shape) * w[1] * w[2] * w[3] + (in.size() == 3 ? numel(out.shape) : 0);
}
std::int64_t flops_conv2d_activation(std::span<const TensorType> in, const TensorType& out, const Attributes& a) {
  return flops_conv2d(in, out, a) + numel(out.shape);
}
std::int64_t flops_pool(std::span<const TensorType>, const TensorType& out, const Attributes& a) {
  auto k = a.get_ints("pool", "kernel_size");
  const std::int64_t window = k.size() == 1 ? k[0] * k[0] : k.size() == 2 ? k[0] * k[1] : 1;
  return numel(out.shape) * window;
}
#define flops_input flops_none
#define flops_parameter flops_none
#define flops_constant flops_none
#define flops_embedding flops_none
#define flops_max_pool2d flops_pool
#define flops_avg_pool2d flops_pool
#define flops_adaptive_avg_pool2d flops_input_elements
#define flops_reshape flops_none
#define flops_permute flops_none
#define flops_transpose flops_none
#define flops_flatten flops_none
#define flops_concat flops_none
#define flops_slice flops_none
#define flops_sum flops_input_elements
#define flops_mean flops_input_elements
#define flops_max flops_input_elements
#define flops_output flops_none

// Each op's attribute schema (empty span when it has none).
template <std::size_t N>
constexpr std::span<const AttrSpec> span_of(const AttrSpec (&a)[N]) {
  return {a, N};
}
constexpr std::span<const AttrSpec> kEmpty{};
#define attrs_input span_of(kSourceAttrs)
#define attrs_parameter span_of(kSourceAttrs)
#define attrs_constant span_of(kSourceAttrs)
#define attrs_add kEmpty
#define attrs_sub kEmpty
#define attrs_mul kEmpty
#define attrs_div kEmpty
#define attrs_neg kEmpty
#define attrs_matmul kEmpty
#define attrs_linear kEmpty
#define attrs_relu kEmpty
#define attrs_gelu span_of(kGeluAttrs)
#define attrs_silu kEmpty
#define attrs_tanh kEmpty
#define attrs_sigmoid kEmpty
#define attrs_clamp span_of(kClampAttrs)
#define attrs_exp kEmpty
#define attrs_log kEmpty
#define attrs_sqrt kEmpty
#define attrs_sin kEmpty
#define attrs_softmax span_of(kDimAttrs)
#define attrs_log_softmax span_of(kDimAttrs)
#define attrs_cross_entropy span_of(kCrossEntropyAttrs)
#define attrs_mse_loss span_of(kReductionAttrs)
#define attrs_layer_norm span_of(kNormAttrs)
#define attrs_rms_norm span_of(kNormAttrs)
#define attrs_batch_norm span_of(kBatchNormAttrs)
#define attrs_dropout span_of(kDropoutAttrs)
#define attrs_embedding span_of(kEmbeddingAttrs)
#define attrs_scaled_dot_product_attention span_of(kAttentionAttrs)
#define attrs_conv2d span_of(kConvAttrs)
#define attrs_conv2d_activation span_of(kConvActivationAttrs)
#define attrs_max_pool2d span_of(kMaxPoolAttrs)
#define attrs_avg_pool2d span_of(kAvgPoolAttrs)
#define attrs_adaptive_avg_pool2d span_of(kAdaptiveAttrs)
#define attrs_reshape span_of(kReshapeAttrs)
#define attrs_permute span_of(kPermuteAttrs)
#define attrs_transpose span_of(kTransposeAttrs)
#define attrs_flatten span_of(kFlattenAttrs)
#define attrs_concat span_of(kDimAttrs)
#define attrs_slice span_of(kSliceAttrs)
#define attrs_sum span_of(kReduceAttrs)
#define attrs_mean span_of(kReduceAttrs)
#define attrs_max span_of(kReduceAttrs)
#define attrs_output kEmpty

using namespace operand;  // the saves and passthrough columns name operands in0..in4, out, none

const OpInfo kTable[] = {
#define PACT_OP_ROW(tag, kind, lo, hi, vjp, mode, role, tol, saves, pass, roles)                \
  OpInfo{OpTag::tag,          kind,        lo,          hi,          vjp,   mode, OpRole::role, \
         ToleranceClass::tol, attrs_##tag, shape_##tag, flops_##tag, saves, pass, roles},
    PACT_OPS(PACT_OP_ROW)
#undef PACT_OP_ROW
};
static_assert(sizeof(kTable) / sizeof(kTable[0]) == static_cast<std::size_t>(kOpCount));

// The roles column's length: one letter per operand, one for a variadic op (its letter repeats).
constexpr std::size_t roles_length(int max_arity) { return max_arity < 0 ? 1 : static_cast<std::size_t>(max_arity); }

// Every roles string has one letter per operand (a variadic op: at least one), every letter is known.
constexpr bool roles_well_formed() {
#define PACT_OP_ROLES_OK(tag, kind, lo, hi, vjp, mode, role, tol, saves, pass, roles) \
  if (std::string_view(roles).size() != roles_length(hi)) return false;               \
  for (char c : std::string_view(roles))                                              \
    if (std::string_view("dwbsim").find(c) == std::string_view::npos) return false;   \
  if (hi >= 0 && ((saves | pass) & 0xFFFFu) >= (1u << hi)) return false;
  PACT_OPS(PACT_OP_ROLES_OK)
#undef PACT_OP_ROLES_OK
  return true;
}
static_assert(roles_well_formed(),
              "the op table: one known role letter per operand, saves and passthrough only of operands that exist "
              "(Note [Op table])");

}  // namespace

InputRole OpInfo::input_role(std::size_t k) const noexcept {
  if (roles.empty()) return InputRole::data;
  switch (roles[std::min(k, roles.size() - 1)]) {
    case 'w':
      return InputRole::weight;
    case 'b':
      return InputRole::bias;
    case 's':
      return InputRole::running_statistic;
    case 'i':
      return InputRole::index;
    case 'm':
      return InputRole::mask;
    default:
      return InputRole::data;
  }
}

Agreement compare(std::span<const double> candidate, std::span<const double> reference, Tolerance tolerance) {
  if (candidate.size() != reference.size()) {
    throw_error(ErrorCode::invalid_argument, "compare",
                fmt::format("{} candidate elements against {} reference elements", candidate.size(), reference.size()));
  }
  Agreement a;
  for (double r : reference) {
    if (std::isfinite(r)) a.scale = std::max(a.scale, std::abs(r));
  }
  const double bound = tolerance.abs + tolerance.rel * a.scale;
  for (std::size_t i = 0; i < candidate.size(); ++i) {
    const double c = candidate[i], r = reference[i];
    const bool same = c == r || (std::isnan(c) && std::isnan(r));
    const double d = same ? 0.0 : std::abs(c - r);
    const double error = std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
    if (error > a.max_abs_error) {
      a.max_abs_error = error;
      a.worst = i;
    }
    if (!(error <= bound)) a.within = false;
  }
  return a;
}

Tolerance OpInfo::tolerance() const noexcept {
  switch (tolerance_class) {
    case ToleranceClass::exact:
      return {0.0, 0.0};
    case ToleranceClass::transcendental:
      return {1e-6, 4e-6};
    case ToleranceClass::reduction:
      return {1e-6, 2e-5};
    case ToleranceClass::contraction:
      return {1e-5, 1e-4};
  }
  return {};
}

Tolerance OpInfo::vjp_tolerance() const noexcept {
  // A VJP accumulates over broadcast or reduced dimensions even for exact forward ops.
  Tolerance t = tolerance();
  return {std::max(t.abs * 10, 1e-6), std::max(t.rel * 10, 2e-5)};
}

std::span<const OpInfo> op_table() noexcept { return kTable; }

const OpInfo& op_info(OpTag tag) noexcept { return kTable[static_cast<std::size_t>(tag)]; }

std::string_view op_kind(OpTag tag) noexcept { return op_info(tag).kind; }

OpTag parse_op_kind(std::string_view kind) {
  for (const auto& row : kTable) {
    if (row.kind == kind) return row.tag;
  }
  throw_error(ErrorCode::parse_error, "op.parse", fmt::format("unknown op kind '{}'", kind));
}

TensorType infer_type(OpTag tag, std::span<const TensorType> inputs, const Attributes& attrs) {
  const OpInfo& info = op_info(tag);
  const auto n = static_cast<int>(inputs.size());
  if (n < info.min_arity || (info.max_arity >= 0 && n > info.max_arity)) {
    throw_error(ErrorCode::invalid_argument, std::string(info.kind),
                info.max_arity < 0 ? fmt::format("takes at least {} inputs, got {}", info.min_arity, n)
                                   : fmt::format("takes {}..{} inputs, got {}", info.min_arity, info.max_arity, n));
  }
  for (const auto& [name, value] : attrs.values()) {
    const std::string& key = name;  // lambdas cannot capture structured bindings before clang 16
    auto spec =
        std::find_if(info.attributes.begin(), info.attributes.end(), [&](const AttrSpec& s) { return s.name == key; });
    if (spec == info.attributes.end()) {
      throw_error(ErrorCode::invalid_argument, std::string(info.kind), fmt::format("unknown attribute '{}'", name));
    }
    const bool widened = spec->type == AttrType::f64 && attr_type_of(value) == AttrType::i64;
    if (attr_type_of(value) != spec->type && !widened) {
      throw_error(ErrorCode::invalid_argument, std::string(info.kind),
                  fmt::format("attribute '{}' is {}, expected {}", name, attr_type_name(attr_type_of(value)),
                              attr_type_name(spec->type)));
    }
  }
  for (const auto& spec : info.attributes) {
    if (spec.required && !attrs.has(spec.name)) {
      throw_error(ErrorCode::invalid_argument, std::string(info.kind),
                  fmt::format("missing attribute '{}'", spec.name));
    }
  }
  return info.shape(inputs, attrs);
}

std::int64_t estimate_flops(OpTag tag, std::span<const TensorType> inputs, const TensorType& output,
                            const Attributes& attrs) {
  return op_info(tag).flops(inputs, output, attrs);
}

}  // namespace pact::ops
