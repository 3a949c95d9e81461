#include "pact/kernels/kernel.hpp"

#include "pact/kernels/guards.hpp"

#include <fmt/format.h>

namespace pact::kernels {

const Handler* find_handler(std::span<const Handler> handlers, ops::OpTag op) noexcept {
  for (const auto& h : handlers) {
    if (h.op == op) return &h;
  }
  return nullptr;
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
    throw_error(ErrorCode::invalid_argument, std::string(ops::op_kind(handler.op)),
                fmt::format("{} handler produced {}{}; the shape rule says {}{}", handler.provider,
                            dtype_name(out.dtype()), out.shape().to_string(), dtype_name(expected.dtype),
                            expected.shape.to_string()));
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
    throw_error(ErrorCode::invalid_argument, op,
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
