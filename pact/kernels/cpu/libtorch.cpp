// The LibTorch provider (trust: trustedExternal; evidence: a trusted boundary, "libtorch.aten"): matmul,
// linear, conv2d, scaled-dot-product attention, softmax, log_softmax, layer_norm and gelu through ATen
// (Debian libtorch-dev). Forward only. Built with -DPACT_WITH_LIBTORCH=ON (the `libtorch` preset);
// otherwise the provider has no handlers and its capsule module is empty. Every process that links
// LibTorch pays about 0.7 s of start-up to load it, which is why the default build leaves it out.
//
// The boundary: inputs are read through checked prepared access (Dense, contiguous or gathered), lent to
// ATen as non-owning tensors for the duration of one call, and ATen's result is copied into a Pact
// owner. ATen errors (c10::Error) become pact::Error naming the op. f32 only.

#include "pact/kernels/kernel.hpp"

#if PACT_WITH_LIBTORCH

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "pact/kernels/cpu/common.hpp"

namespace pact::kernels::cpu::libtorch {

using ops::Attributes;

namespace {

// unsafe boundary: ATen reads `d` through a non-owning tensor for the duration of the call only; the
// functional ATen ops used here never write to their inputs.
at::Tensor lend(const Dense<float>& d) {
  const Dims shape = d.shape();
  std::vector<std::int64_t> sizes(shape.begin(), shape.end());
  return at::from_blob(const_cast<float*>(d.data()), sizes, at::TensorOptions().dtype(at::kFloat));
}

Tensor take(const at::Tensor& result) {
  const at::Tensor c = result.contiguous();
  Dims shape;
  for (auto s : c.sizes()) shape.push_back(s);
  Out<float> out(shape);
  if (c.numel() > 0) std::memcpy(out.data(), c.data_ptr<float>(), sizeof(float) * static_cast<std::size_t>(c.numel()));
  return std::move(out).finish();
}

template <class F>
Tensor call(const char* op, F&& f) {
  try {
    return take(f());
  } catch (const c10::Error& e) {
    throw_error(ErrorCode::invalid_argument, op, fmt::format("LibTorch refused: {}", e.what_without_backtrace()));
  }
}

c10::optional<at::Tensor> optional_lend(std::span<const TensorView> in, std::size_t i,
                                        std::optional<Dense<float>>& keep, const char* op, const char* name) {
  if (in.size() <= i) return c10::nullopt;
  keep.emplace(in[i], op, name);
  return lend(*keep);
}

}  // namespace

Tensor matmul_forward(std::span<const TensorView> in, const Attributes&, const KernelContext&) {
  Dense<float> a(in[0], "matmul", "a"), b(in[1], "matmul", "b");
  return call("matmul", [&] { return at::matmul(lend(a), lend(b)); });
}

Tensor linear_forward(std::span<const TensorView> in, const Attributes&, const KernelContext&) {
  Dense<float> x(in[0], "linear", "x"), w(in[1], "linear", "weight");
  std::optional<Dense<float>> b;
  auto bias = optional_lend(in, 2, b, "linear", "bias");
  return call("linear", [&] { return at::linear(lend(x), lend(w), bias); });
}

Tensor conv2d_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  constexpr const char* op = "conv2d";
  Dense<float> x(in[0], op, "input"), w(in[1], op, "weight");
  std::optional<Dense<float>> b;
  auto bias = optional_lend(in, 2, b, op, "bias");
  const auto stride = a.get_ints(op, "stride", std::vector<std::int64_t>{1, 1});
  const auto padding = a.get_ints(op, "padding", std::vector<std::int64_t>{0, 0});
  const auto dilation = a.get_ints(op, "dilation", std::vector<std::int64_t>{1, 1});
  const auto groups = a.get_int(op, "groups", 1);
  return call(op, [&] { return at::conv2d(lend(x), lend(w), bias, stride, padding, dilation, groups); });
}

Tensor softmax_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  Dense<float> x(in[0], "softmax", "x");
  return call("softmax", [&] { return at::softmax(lend(x), a.get_int("softmax", "dim", -1)); });
}

Tensor log_softmax_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  Dense<float> x(in[0], "log_softmax", "x");
  return call("log_softmax", [&] { return at::log_softmax(lend(x), a.get_int("log_softmax", "dim", -1)); });
}

Tensor layer_norm_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  constexpr const char* op = "layer_norm";
  Dense<float> x(in[0], op, "x");
  std::optional<Dense<float>> w, b;
  auto weight = optional_lend(in, 1, w, op, "weight");
  auto bias = optional_lend(in, 2, b, op, "bias");
  const auto ns = a.get_ints(op, "normalized_shape");
  return call(op, [&] { return at::layer_norm(lend(x), ns, weight, bias, a.get_float(op, "eps", 1e-5)); });
}

Tensor gelu_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  Dense<float> x(in[0], "gelu", "x");
  const std::string approximate = a.get_string("gelu", "approximate", std::string("none"));
  return call("gelu", [&] { return at::gelu(lend(x), approximate); });
}

// softmax(q kᵀ · scale + mask) v, composed of ATen ops (torch 1.13 has no public fused attention).
Tensor scaled_dot_product_attention_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  constexpr const char* op = "scaled_dot_product_attention";
  Dense<float> q(in[0], op, "query"), k(in[1], op, "key"), v(in[2], op, "value");
  const Dims qs = q.shape();
  const double scale = a.get_float(op, "scale", 1.0 / std::sqrt(static_cast<double>(qs[qs.size() - 1])));
  const bool causal = a.get_bool(op, "is_causal", false);
  std::optional<Dense<float>> additive;
  std::optional<Dense<bool>> boolean;
  if (in.size() == 4) {
    if (in[3].dtype() == DType::boolean) {
      boolean.emplace(in[3], op, "mask");
    } else {
      additive.emplace(in[3], op, "mask");
    }
  }
  return call(op, [&] {
    at::Tensor scores = at::matmul(lend(q), lend(k).transpose(-2, -1)) * scale;
    const auto l = scores.size(-2), s = scores.size(-1);
    if (causal)
      scores = scores.masked_fill(at::ones({l, s}, at::kBool).triu(1), -std::numeric_limits<float>::infinity());
    if (boolean) {
      const Dims ms = boolean->shape();
      std::vector<std::int64_t> sizes(ms.begin(), ms.end());
      at::Tensor m = at::from_blob(const_cast<bool*>(boolean->data()), sizes, at::TensorOptions().dtype(at::kBool));
      scores = scores.masked_fill(m.logical_not(), -std::numeric_limits<float>::infinity());
    }
    if (additive) scores = scores + lend(*additive);
    return at::matmul(at::softmax(scores, -1), lend(v));
  });
}

}  // namespace pact::kernels::cpu::libtorch

namespace pact::kernels {

#define PACT_LIBTORCH_HANDLER(opname)       \
  Handler{ops::OpTag::opname,               \
          "libtorch",                       \
          DeviceKind::cpu,                  \
          &cpu::libtorch::opname##_forward, \
          nullptr,                          \
          "pact/kernels/cpu/libtorch.cpp",  \
          "pact::kernels::cpu::libtorch::" #opname "_forward"},

std::span<const Handler> libtorch_handlers() {
  static const Handler table[] = {PACT_LIBTORCH_HANDLER(matmul) PACT_LIBTORCH_HANDLER(linear)
                                      PACT_LIBTORCH_HANDLER(conv2d) PACT_LIBTORCH_HANDLER(scaled_dot_product_attention)
                                          PACT_LIBTORCH_HANDLER(softmax) PACT_LIBTORCH_HANDLER(log_softmax)
                                              PACT_LIBTORCH_HANDLER(layer_norm) PACT_LIBTORCH_HANDLER(gelu)};
  return table;
}
#undef PACT_LIBTORCH_HANDLER

bool libtorch_built() noexcept { return true; }

}  // namespace pact::kernels

#else

namespace pact::kernels {

// Built without -DPACT_WITH_LIBTORCH=ON: the provider exists (profiles may name it) and offers nothing.
std::span<const Handler> libtorch_handlers() { return {}; }
bool libtorch_built() noexcept { return false; }

}  // namespace pact::kernels

#endif
