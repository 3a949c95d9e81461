#include "pact/train/optim.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "pact/plan/planner.hpp"

namespace pact::train {

namespace {

void check_lengths(UpdateKernels kernels, std::span<Tensor> params, std::size_t grads) {
  if (params.size() != grads || params.size() != kernels.size()) {
    throw_error(ErrorCode::invalid_argument, "optimizer",
                fmt::format("{} parameters, {} gradients and {} update kernels", params.size(), grads, kernels.size()));
  }
}

// Every parameter with a gradient is checked before any is written: a trained dtype (f32, f64), a gradient
// of its dtype and shape, and an admitted kernel of the optimizer's op.
void check_all(UpdateKernels kernels, std::span<Tensor> params, std::span<const std::optional<TensorView>> grads,
               ops::OpTag op) {
  const std::string name(ops::op_kind(op));
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!grads[i]) continue;
    const DType d = params[i].dtype();
    if (d != DType::f32 && d != DType::f64) {
      throw_error(ErrorCode::dtype_mismatch, name,
                  fmt::format("parameter {} is {}; the optimizers update f32 and f64 parameters", i, dtype_name(d)));
    }
    if (grads[i]->dtype() != d) {
      throw_error(
          ErrorCode::dtype_mismatch, name,
          fmt::format("gradient {} is {}; its parameter is {}", i, dtype_name(grads[i]->dtype()), dtype_name(d)));
    }
    if (!(grads[i]->shape() == params[i].shape())) {
      throw_error(ErrorCode::invalid_argument, name,
                  fmt::format("gradient {} has shape {}, parameter {}", i, grads[i]->shape().to_string(),
                              params[i].shape().to_string()));
    }
    const contract::BoundKernel* k = kernels[i];
    if (k == nullptr || k->capsule()->op != op) {
      throw_error(ErrorCode::invalid_argument, name,
                  fmt::format("parameter {} has {} update kernel", i,
                              k == nullptr ? std::string("no") : fmt::format("the {}", k->capsule()->name)));
    }
  }
}

}  // namespace

std::vector<contract::BoundKernel> admit_updates(ops::OpTag op, std::span<const Tensor> params, bool momentum,
                                                 const contract::BackendProfile& profile) {
  const contract::DefaultEvidenceResolver resolver;
  std::vector<contract::BoundKernel> out;
  out.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ops::TensorType t{params[i].dtype(), params[i].shape()};
    const std::size_t arity = op == ops::OpTag::adam ? 4 : momentum ? 3 : 2;
    const std::vector<ops::TensorType> types(arity, t);
    auto a =
        plan::admit_kernel(fmt::format("update {}", i), op, types, profile, resolver, contract::VjpMode::forward_only);
    if (!a.bound) {
      std::string why;
      for (const auto& r : a.reports)
        if (!r.accepted) why += fmt::format("; {}", r.reason);
      throw_error(ErrorCode::unsupported, std::string(ops::op_kind(op)),
                  fmt::format("profile {} admits no {} kernel for parameter {} ({}){}", profile.name, ops::op_kind(op),
                              i, dtype_name(t.dtype), why));
    }
    out.push_back(*a.bound);
  }
  return out;
}

namespace {
// An optimizer state tensor for `param`: zeros where the parameter lives (the device's memory for a
// parameter on the CUDA provider, whose update kernels read their state there).
Tensor state_like(const Tensor& param) {
  return Tensor::zeros(param.shape(), param.dtype(), provider_for(param.device()));
}
}  // namespace

SgdState sgd_step(UpdateKernels kernels, std::span<Tensor> params, std::span<const std::optional<TensorView>> grads,
                  const SgdOptions& o, SgdState state) {
  check_lengths(kernels, params, grads.size());
  check_all(kernels, params, grads, ops::OpTag::sgd);
  state.velocity.resize(params.size());
  ops::Attributes attrs{{"lr", o.lr}, {"momentum", o.momentum}, {"weight_decay", o.weight_decay}};
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!grads[i]) continue;
    std::vector<Tensor*> st{&params[i]};
    if (o.momentum != 0.0) {
      auto& vel = state.velocity[i];
      if (!vel) vel = state_like(params[i]);
      st.push_back(&*vel);
    }
    kernels::run_update(*kernels[i]->handler(), st, std::span<const TensorView>(&*grads[i], 1), attrs);
  }
  return state;
}

AdamState adam_step(UpdateKernels kernels, std::span<Tensor> params, std::span<const std::optional<TensorView>> grads,
                    const AdamOptions& o, AdamState state) {
  check_lengths(kernels, params, grads.size());
  check_all(kernels, params, grads, ops::OpTag::adam);
  state.m.resize(params.size());
  state.v.resize(params.size());
  ++state.step;
  ops::Attributes attrs{{"lr", o.lr},
                        {"beta1", o.beta1},
                        {"beta2", o.beta2},
                        {"eps", o.eps},
                        {"weight_decay", o.weight_decay},
                        {"decoupled", o.decoupled},
                        {"step", state.step}};
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!grads[i]) continue;
    if (!state.m[i]) state.m[i] = state_like(params[i]);
    if (!state.v[i]) state.v[i] = state_like(params[i]);
    std::vector<Tensor*> st{&params[i], &*state.m[i], &*state.v[i]};
    kernels::run_update(*kernels[i]->handler(), st, std::span<const TensorView>(&*grads[i], 1), attrs);
  }
  return state;
}

double learning_rate(const Schedule& s, double base, std::int64_t step) {
  if (s.warmup > 0 && step < s.warmup) return base * static_cast<double>(step + 1) / static_cast<double>(s.warmup);
  const std::int64_t t = step - s.warmup;
  switch (s.kind) {
    case Schedule::constant:
      return base;
    case Schedule::step: {
      const std::int64_t decays = t / std::max<std::int64_t>(s.step_size, 1);  // whole periods elapsed
      return base * std::pow(s.gamma, static_cast<double>(decays));
    }
    case Schedule::cosine: {
      const double frac =
          std::min(1.0, static_cast<double>(t) / static_cast<double>(std::max<std::int64_t>(s.total, 1)));
      return s.eta_min + (base - s.eta_min) * 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
    }
  }
  return base;
}

}  // namespace pact::train
