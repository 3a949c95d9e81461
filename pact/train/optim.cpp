#include "pact/train/optim.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "pact/core/simd_dispatch.hpp"

namespace pact::train {

namespace {

template <class T>
std::span<T> writable(Tensor& t) {
  auto p = t.prepare_host_mut<T>();
  if (!p) throw std::move(p).error().error;
  // Parameters and optimizer state are contiguous owners made by Pact; the span outlives the prepared
  // object only within one update, while no view of the tensor exists.
  return std::get<PreparedContiguousWrite<T>>(p.value()).as_span();
}

template <class T>
std::span<const T> readable(const TensorView& v, DType want, const char* what) {
  if (v.dtype() != want || !v.is_contiguous()) {
    throw_error(ErrorCode::dtype_mismatch, "optimizer",
                fmt::format("{} must be contiguous {} like its parameter; it is {}{}", what, dtype_name(want),
                            v.is_contiguous() ? "" : "strided ", dtype_name(v.dtype())));
  }
  auto p = TensorView(v).prepare_host<T>();
  if (!p) throw std::move(p).error().error;
  return std::get<PreparedContiguousRead<T>>(p.value()).as_span();
}

void check_lengths(std::span<Tensor> params, std::size_t grads) {
  if (params.size() != grads) {
    throw_error(ErrorCode::invalid_argument, "optimizer",
                fmt::format("{} parameters but {} gradients", params.size(), grads));
  }
}

// The parameter's dtype, which its gradient and state share: f32 or f64 (the dtypes Pact trains in).
DType trained_dtype(const Tensor& param, std::size_t i, const char* optimizer) {
  const DType d = param.dtype();
  if (d != DType::f32 && d != DType::f64) {
    throw_error(ErrorCode::dtype_mismatch, optimizer,
                fmt::format("parameter {} is {}; the optimizers update f32 and f64 parameters", i, dtype_name(d)));
  }
  return d;
}

void check_shape(const TensorView& grad, const Tensor& param, std::size_t i, const char* optimizer) {
  if (!(grad.shape() == param.shape())) {
    throw_error(
        ErrorCode::invalid_argument, optimizer,
        fmt::format("gradient {} has shape {}, parameter {}", i, grad.shape().to_string(), param.shape().to_string()));
  }
}

// One SGD pass in the parameter's own precision (an f32 parameter updates in f32, as torch.optim does).
template <class T>
void sgd_update(Tensor& param, const TensorView& grad, std::optional<Tensor>& velocity, const SgdOptions& o) {
  auto g = readable<T>(grad, dtype_of_v<T>, "gradient");
  auto w = writable<T>(param);
  std::span<T> vel;
  if (o.momentum != 0.0) {
    if (!velocity) velocity = Tensor::zeros(param.shape(), dtype_of_v<T>);
    vel = writable<T>(*velocity);
  }
  const auto lr = static_cast<T>(o.lr), mom = static_cast<T>(o.momentum), wd = static_cast<T>(o.weight_decay);
  for (std::size_t k = 0; k < w.size(); ++k) {
    T d = g[k] + wd * w[k];
    if (!vel.empty()) {
      vel[k] = mom * vel[k] + d;
      d = vel[k];
    }
    w[k] -= lr * d;
  }
}

}  // namespace

SgdState sgd_step(std::span<Tensor> params, std::span<const std::optional<TensorView>> grads, const SgdOptions& o,
                  SgdState state) {
  check_lengths(params, grads.size());
  state.velocity.resize(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!grads[i]) continue;
    check_shape(*grads[i], params[i], i, "sgd");
    if (trained_dtype(params[i], i, "sgd") == DType::f64) {
      sgd_update<double>(params[i], *grads[i], state.velocity[i], o);
    } else {
      sgd_update<float>(params[i], *grads[i], state.velocity[i], o);
    }
  }
  return state;
}

namespace {

template <class T>
struct AdamConstants {
  T b1, b2, eps, step, inv_sqrt_bc2, l2;
};

// The fused Adam pass over distinct arrays (parameter, moments, gradient), in the parameter's precision.
template <class T>
[[gnu::always_inline]] inline void adam_loop(T* __restrict w, T* __restrict m, T* __restrict v, const T* __restrict g,
                                             std::size_t n, AdamConstants<T> c) {
  for (std::size_t k = 0; k < n; ++k) {
    const T gk = g[k] + c.l2 * w[k];
    m[k] = c.b1 * m[k] + (T{1} - c.b1) * gk;
    v[k] = c.b2 * v[k] + (T{1} - c.b2) * gk * gk;
    w[k] -= c.step * m[k] / (std::sqrt(v[k]) * c.inv_sqrt_bc2 + c.eps);
  }
}

// The f32 pass, compiled per ISA level and chosen through the dispatch table (pact/core/simd_dispatch.hpp;
// -fno-math-errno lets the square root vectorise). Each level is deterministic; levels may differ from one
// another in the last bit where one contracts a multiply-add the other does not.
PACT_SIMD_INLINE void adam_f32_body(float* __restrict w, float* __restrict m, float* __restrict v,
                                    const float* __restrict g, std::size_t n, AdamConstants<float> c) {
  adam_loop(w, m, v, g, n, c);
}
PACT_SIMD_VARIANTS(adam_f32, adam_f32_body);

void adam_update(float* w, float* m, float* v, const float* g, std::size_t n, AdamConstants<float> c) {
  adam_f32(w, m, v, g, n, c);
}

void adam_update(double* __restrict w, double* __restrict m, double* __restrict v, const double* __restrict g,
                 std::size_t n, AdamConstants<double> c) {
  adam_loop(w, m, v, g, n, c);
}

template <class T>
void adam_parameter(Tensor& param, const TensorView& grad, std::optional<Tensor>& m_state,
                    std::optional<Tensor>& v_state, const AdamOptions& o, double bc1, double bc2) {
  if (!m_state) m_state = Tensor::zeros(param.shape(), dtype_of_v<T>);
  if (!v_state) v_state = Tensor::zeros(param.shape(), dtype_of_v<T>);
  auto g = readable<T>(grad, dtype_of_v<T>, "gradient");
  auto w = writable<T>(param);
  auto m = writable<T>(*m_state);
  auto v = writable<T>(*v_state);
  // The parameter's precision, with the bias corrections folded into one step size (as torch.optim.Adam).
  const auto b1 = static_cast<T>(o.beta1), b2 = static_cast<T>(o.beta2), eps = static_cast<T>(o.eps);
  const auto step = static_cast<T>(o.lr / bc1), inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bc2));
  const auto wd = static_cast<T>(o.weight_decay), decay = static_cast<T>(1.0 - o.lr * o.weight_decay);
  // Decay first (one branch outside the loop), so the update loop vectorises.
  const T l2 = o.decoupled ? T{0} : wd;
  if (o.decoupled) {
    for (std::size_t k = 0; k < w.size(); ++k) w[k] *= decay;
  }
  adam_update(w.data(), m.data(), v.data(), g.data(), w.size(), AdamConstants<T>{b1, b2, eps, step, inv_sqrt_bc2, l2});
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
    check_shape(*grads[i], params[i], i, "adam");
    if (trained_dtype(params[i], i, "adam") == DType::f64) {
      adam_parameter<double>(params[i], *grads[i], state.m[i], state.v[i], o, bc1, bc2);
    } else {
      adam_parameter<float>(params[i], *grads[i], state.m[i], state.v[i], o, bc1, bc2);
    }
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
