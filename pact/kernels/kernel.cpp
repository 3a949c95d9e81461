#include "pact/kernels/kernel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "pact/kernels/guards.hpp"

namespace pact::kernels {

const Handler* find_handler(std::span<const Handler> handlers, ops::OpTag op) noexcept {
  for (const auto& h : handlers) {
    if (h.op == op) return &h;
  }
  return nullptr;
}

TensorView derive_view(ops::OpTag op, const TensorView& x, const ops::Attributes& a) {
  const Dims s = x.shape();
  const int r = s.size();
  switch (op) {
    case ops::OpTag::transpose: {
      if (r == 0) return x;
      return x.transpose(ops::normalize_dim("transpose", a.get_int("transpose", "dim0"), r),
                         ops::normalize_dim("transpose", a.get_int("transpose", "dim1"), r));
    }
    case ops::OpTag::permute: {
      // A permutation is a sequence of transpositions applied to a working view.
      auto dims = a.get_ints("permute", "dims");
      std::vector<int> current(static_cast<std::size_t>(r));
      for (int i = 0; i < r; ++i) current[static_cast<std::size_t>(i)] = i;
      TensorView v = x;
      for (int i = 0; i < r; ++i) {
        const int want = ops::normalize_dim("permute", dims[static_cast<std::size_t>(i)], r);
        const int at = static_cast<int>(std::find(current.begin(), current.end(), want) - current.begin());
        if (at != i) {
          v = v.transpose(i, at);
          std::swap(current[static_cast<std::size_t>(i)], current[static_cast<std::size_t>(at)]);
        }
      }
      return v;
    }
    case ops::OpTag::slice: {
      const int d = ops::normalize_dim("slice", a.get_int("slice", "dim"), r);
      const std::int64_t n = s[d];
      std::int64_t step = a.get_int("slice", "step", 1);
      auto clampi = [&](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + n : v, 0, n); };
      const std::int64_t start = clampi(a.get_int("slice", "start", 0));
      const std::int64_t stop =
          std::max(start, clampi(a.get_int("slice", "end", std::numeric_limits<std::int64_t>::max())));
      return x.slice(d, start, stop, step);
    }
    default:
      return x;
  }
}

std::optional<TensorView> view_result(ops::OpTag op, const TensorView& x, const ops::Attributes& a) {
  switch (op) {
    case ops::OpTag::reshape:
    case ops::OpTag::flatten:
    case ops::OpTag::transpose:
    case ops::OpTag::permute:
    case ops::OpTag::slice:
      break;
    default:
      return std::nullopt;
  }
  const std::vector<ops::TensorType> in{{x.dtype(), x.shape()}};
  const Dims shape = ops::infer_type(op, in, a).shape;
  if (op == ops::OpTag::reshape || op == ops::OpTag::flatten) {
    if (!x.is_contiguous()) return std::nullopt;
    return x.reshape(shape);
  }
  TensorView v = derive_view(op, x, a);
  if (!(v.shape() == shape)) {  // the derivation and the shape rule are one contract
    throw_error(
        ErrorCode::invalid_argument, std::string(ops::op_kind(op)),
        fmt::format("derived view {} disagrees with the shape rule's {}", v.shape().to_string(), shape.to_string()));
  }
  return v;
}

namespace {
std::vector<ops::TensorType> types_of(std::span<const TensorView> inputs) {
  std::vector<ops::TensorType> t;
  t.reserve(inputs.size());
  for (const auto& v : inputs) t.push_back({v.dtype(), v.shape()});
  return t;
}
}  // namespace

Tensor run_forward(const Handler& handler, std::span<const TensorView> inputs, const ops::Attributes& attrs,
                   const KernelContext& ctx) {
  const ops::TensorType expected = ops::infer_type(handler.op, types_of(inputs), attrs);
  hit(kGuardInputDevice);
  for (const auto& v : inputs) {
    if (v.device() != handler.device) {
      throw_error(ErrorCode::provider_mismatch, std::string(ops::op_kind(handler.op)),
                  fmt::format("a {} input reached the {} handler on {}", v.provider_name(), handler.provider,
                              device_name(handler.device)));
    }
  }
  Tensor out = handler.forward(inputs, attrs, ctx);
  hit(kGuardShapeRule);
  if (out.dtype() != expected.dtype || !(out.shape() == expected.shape)) {
    throw_error(
        ErrorCode::invalid_argument, std::string(ops::op_kind(handler.op)),
        fmt::format("{} handler produced {}{}; the shape rule says {}{}", handler.provider, dtype_name(out.dtype()),
                    out.shape().to_string(), dtype_name(expected.dtype), expected.shape.to_string()));
  }
  return out;
}

std::vector<std::optional<Tensor>> run_vjp(const Handler& handler, std::span<const TensorView> inputs,
                                           const TensorView& output, const TensorView& grad_output,
                                           const ops::Attributes& attrs, const KernelContext& ctx) {
  const std::string op(ops::op_kind(handler.op));
  if (handler.vjp == nullptr) throw_error(ErrorCode::unsupported, op, "this op has no VJP");
  hit(kGuardVjpShapes);
  if (grad_output.dtype() != output.dtype() || !(grad_output.shape() == output.shape())) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("grad_output is {}{}; the output is {}{}", dtype_name(grad_output.dtype()),
                            grad_output.shape().to_string(), dtype_name(output.dtype()), output.shape().to_string()));
  }
  // The inputs must satisfy the op's shape rule as in a forward call, and the cotangent must have the
  // shape it gives, so no VJP reads an operand by a size the others do not have.
  const ops::TensorType expected = ops::infer_type(handler.op, types_of(inputs), attrs);
  if (grad_output.dtype() != expected.dtype || !(grad_output.shape() == expected.shape)) {
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("grad_output is {}{}; the shape rule gives {}{}", dtype_name(grad_output.dtype()),
                            grad_output.shape().to_string(), dtype_name(expected.dtype), expected.shape.to_string()));
  }
  auto grads = handler.vjp(inputs, output, grad_output, attrs, ctx);
  if (grads.size() != inputs.size()) {
    throw_error(
        ErrorCode::invalid_argument, op,
        fmt::format("{} VJP returned {} gradients for {} inputs", handler.provider, grads.size(), inputs.size()));
  }
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i] && !(grads[i]->shape() == inputs[i].shape())) {
      throw_error(ErrorCode::invalid_argument, op,
                  fmt::format("gradient {} has shape {}; input has {}", i, grads[i]->shape().to_string(),
                              inputs[i].shape().to_string()));
    }
  }
  return grads;
}

}  // namespace pact::kernels
