#pragma once
/// Optimizers (SPEC §8): SGD (momentum, weight decay), Adam, AdamW. Each update runs the admitted kernel of
/// the sgd or adam op (Note [Training kernels] in pact/plan/planner.hpp), one per parameter, in place.
/// State is passed in and returned, never hidden in the optimizer. Learning-rate schedules: constant,
/// step, cosine, linear warmup.

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pact/contract/check.hpp"
#include "pact/core/tensor.hpp"

namespace pact::train {

/// The admitted update kernel of each parameter, parallel to the parameters (a training plan's, or
/// admit_updates's); nullptr only where the parameter gets no update.
using UpdateKernels = std::span<const contract::BoundKernel* const>;

/// Admits `op` (sgd or adam) for each parameter's dtype under `profile` through the one admission (Note
/// [One admission]); a parameter no capsule serves is a typed error (unsupported) listing the failing
/// obligations. `momentum`: sgd with a velocity operand.
std::vector<contract::BoundKernel> admit_updates(ops::OpTag op, std::span<const Tensor> params, bool momentum,
                                                 const contract::BackendProfile& profile);

struct SgdOptions {
  double lr = 0.1;
  double momentum = 0.0;
  double weight_decay = 0.0;  ///< L2, added to the gradient (PyTorch semantics)
};
struct SgdState {
  std::vector<std::optional<Tensor>> velocity;  ///< per parameter, created on first use
};
/// One SGD update of `params` in place through `kernels`, each parameter in its own precision (f32 or
/// f64); a gradient of another dtype or shape is a typed error raised before anything is written. Returns
/// the new state. grads[i] nullopt skips params[i].
SgdState sgd_step(UpdateKernels kernels, std::span<Tensor> params, std::span<const std::optional<TensorView>> grads,
                  const SgdOptions& options, SgdState state);

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;  ///< AdamW: decay the weights directly instead of adding to the gradient
};
struct AdamState {
  std::int64_t step = 0;
  std::vector<std::optional<Tensor>> m, v;
};
/// One Adam (or AdamW when decoupled) update in place through `kernels`, each parameter in its own
/// precision (f32 or f64); returns the new state.
AdamState adam_step(UpdateKernels kernels, std::span<Tensor> params, std::span<const std::optional<TensorView>> grads,
                    const AdamOptions& options, AdamState state);

/// A learning-rate schedule.
struct Schedule {
  enum Kind { constant, step, cosine } kind = constant;
  std::int64_t step_size = 1;  ///< step: decay every step_size updates
  double gamma = 0.1;          ///< step: multiplier
  std::int64_t total = 1;      ///< cosine: updates over which to anneal
  double eta_min = 0.0;        ///< cosine: final learning rate
  std::int64_t warmup = 0;     ///< linear warmup updates before the schedule (0: none)
};
/// The learning rate for update number `step` (0-based) given the base rate.
double learning_rate(const Schedule& schedule, double base_lr, std::int64_t step);

}  // namespace pact::train
