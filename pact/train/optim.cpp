#include "pact/train/optim.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

namespace pact::train {

namespace {

std::span<float> writable(Tensor& t) {
  auto p = t.prepare_host_mut<float>();
  if (!p) throw std::move(p).error().error;
  // Parameters and optimizer state are contiguous owners made by Pact; the span outlives the prepared
  // object only within one update, while no view of the tensor exists.
  return std::get<PreparedContiguousWrite<float>>(p.value()).as_span();
}

std::span<const float> readable(const TensorView& v, const char* what) {
  if (v.dtype() != DType::f32 || !v.is_contiguous()) {
    throw_error(ErrorCode::dtype_mismatch, "optimizer", fmt::format("{} must be contiguous f32", what));
  }
  auto p = TensorView(v).prepare_host<float>();
  if (!p) throw std::move(p).error().error;
  return std::get<PreparedContiguousRead<float>>(p.value()).as_span();
}

void check_lengths(std::span<Tensor> params, std::size_t grads) {
  if (params.size() != grads) {
    throw_error(ErrorCode::invalid_argument, "optimizer",
                fmt::format("{} parameters but {} gradients", params.size(), grads));
  }
}

}  // namespace

SgdState sgd_step(std::span<Tensor> params, std::span<const std::optional<TensorView>> grads, const SgdOptions& o,
                  SgdState state) {
  check_lengths(params, grads.size());
  state.velocity.resize(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!grads[i]) continue;
    if (!(grads[i]->shape() == params[i].shape())) {
      throw_error(ErrorCode::invalid_argument, "sgd",
                  fmt::format("gradient {} has shape {}, parameter {}", i, grads[i]->shape().to_string(),
                              params[i].shape().to_string()));
    }
    auto g = readable(*grads[i], "gradient");
    auto w = writable(params[i]);
    std::span<float> vel;
    if (o.momentum != 0.0) {
      if (!state.velocity[i]) state.velocity[i] = Tensor::zeros(params[i].shape(), DType::f32);
      vel = writable(*state.velocity[i]);
    }
    const auto lr = static_cast<float>(o.lr), mom = static_cast<float>(o.momentum),
               wd = static_cast<float>(o.weight_decay);
    for (std::size_t k = 0; k < w.size(); ++k) {
      float d = g[k] + wd * w[k];
      if (!vel.empty()) {
        vel[k] = mom * vel[k] + d;
        d = vel[k];
      }
      w[k] -= lr * d;
    }
  }
  return state;
}

namespace {

struct AdamConstants {
  float b1, b2, eps, step, inv_sqrt_bc2, l2;
};

// One fused Adam pass over distinct arrays (parameter, moments, gradient), chosen at load time for the
// CPU (target_clones; -fno-math-errno lets the square root vectorise). Each clone is deterministic; they
// may differ from one another in the last bit where one contracts a multiply-add the other does not.
__attribute__((target_clones("avx512f", "avx2", "default"))) void adam_update(float* __restrict w, float* __restrict m,
                                                                              float* __restrict v,
                                                                              const float* __restrict g, std::size_t n,
                                                                              AdamConstants c) {
  for (std::size_t k = 0; k < n; ++k) {
    const float gk = g[k] + c.l2 * w[k];
    m[k] = c.b1 * m[k] + (1.0f - c.b1) * gk;
    v[k] = c.b2 * v[k] + (1.0f - c.b2) * gk * gk;
    w[k] -= c.step * m[k] / (std::sqrt(v[k]) * c.inv_sqrt_bc2 + c.eps);
  }
}

}  // namespace

AdamState adam_step(std::span<Tensor> params, std::span<const std::optional<TensorView>> grads, const AdamOptions& o,
                    AdamState state) {
  check_lengths(params, grads.size());
  state.m.resize(params.size());
  state.v.resize(params.size());
  ++state.step;
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(state.step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(state.step));
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!grads[i]) continue;
    if (!(grads[i]->shape() == params[i].shape())) {
      throw_error(ErrorCode::invalid_argument, "adam",
                  fmt::format("gradient {} has shape {}, parameter {}", i, grads[i]->shape().to_string(),
                              params[i].shape().to_string()));
    }
    if (!state.m[i]) state.m[i] = Tensor::zeros(params[i].shape(), DType::f32);
    if (!state.v[i]) state.v[i] = Tensor::zeros(params[i].shape(), DType::f32);
    auto g = readable(*grads[i], "gradient");
    auto w = writable(params[i]);
    auto m = writable(*state.m[i]);
    auto v = writable(*state.v[i]);
    // f32 arithmetic with the bias corrections folded into one step size (as torch.optim.Adam does).
    const auto b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2), eps = static_cast<float>(o.eps);
    const auto step = static_cast<float>(o.lr / bc1), inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
    const auto wd = static_cast<float>(o.weight_decay), decay = static_cast<float>(1.0 - o.lr * o.weight_decay);
    // Decay first (one branch outside the loop), so the update loop vectorises.
    const float l2 = o.decoupled ? 0.0f : wd;
    if (o.decoupled) {
      for (std::size_t k = 0; k < w.size(); ++k) w[k] *= decay;
    }
    adam_update(w.data(), m.data(), v.data(), g.data(), w.size(), AdamConstants{b1, b2, eps, step, inv_sqrt_bc2, l2});
  }
  return state;
}

double learning_rate(const Schedule& s, double base, std::int64_t step) {
  if (s.warmup > 0 && step < s.warmup) return base * static_cast<double>(step + 1) / static_cast<double>(s.warmup);
  const std::int64_t t = step - s.warmup;
  switch (s.kind) {
    case Schedule::constant:
      return base;
    case Schedule::step:
      return base * std::pow(s.gamma, static_cast<double>(t / std::max<std::int64_t>(s.step_size, 1)));
    case Schedule::cosine: {
      const double frac =
          std::min(1.0, static_cast<double>(t) / static_cast<double>(std::max<std::int64_t>(s.total, 1)));
      return s.eta_min + (base - s.eta_min) * 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
    }
  }
  return base;
}

}  // namespace pact::train
