#include "pact/runtime/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "pact/core/accounting.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/capabilities.hpp"

namespace pact::runtime {

Session::Session(contract::BackendProfile profile, std::uint64_t seed,
                 std::shared_ptr<const contract::EvidenceResolver> resolver)
    : profile_(std::move(profile)),
      resolver_(resolver ? std::move(resolver) : std::make_shared<contract::DefaultEvidenceResolver>()),
      seed_(seed) {}

EagerTensor Session::constant(Tensor value) { return EagerTensor{retain(std::move(value)), -1}; }

EagerTensor Session::leaf(Tensor value, bool requires_grad) {
  const ops::TensorType type{value.dtype(), value.shape()};
  EagerTensor t{retain(std::move(value)), -1};
  t.node = tape_.leaf(type, requires_grad);
  return t;
}

EagerTensor Session::named(const std::string& name, EagerTensor value, SourceKind kind, bool persistent,
                           bool trainable) {
  if (observer_ != nullptr)
    observer_->on_source(value, module_.empty() ? name : module_ + "." + name, kind, persistent, trainable, module_);
  return value;
}

EagerTensor Session::input(const std::string& name, Tensor value) {
  return named(name, constant(std::move(value)), SourceKind::input, true);
}

EagerTensor Session::parameter(const std::string& name, Tensor value, bool requires_grad) {
  // Structure-only captures record no gradients (backward_grads is refused), so no tape node is made.
  EagerTensor t = structure_only_ ? constant(std::move(value)) : leaf(std::move(value), requires_grad);
  return named(name, std::move(t), SourceKind::parameter, true, requires_grad);
}

EagerTensor Session::tie(const std::string& name, const EagerTensor& value) {
  return named(name, value, SourceKind::parameter, true);
}

EagerTensor Session::buffer(const std::string& name, Tensor value, bool persistent) {
  return named(name, constant(std::move(value)), SourceKind::buffer, persistent);
}

Session::ModuleScope::ModuleScope(Session& s, std::string_view name) : session_(s), restore_(s.module_.size()) {
  if (!s.module_.empty()) s.module_ += '.';
  s.module_ += name;
}
Session::ModuleScope::~ModuleScope() { session_.module_.resize(restore_); }

void Session::value_escape(const char* what, const EagerTensor& t, const SourceLocation& loc) const {
  if (structure_only_) {
    require_structure_only_capability(
        "value_payloads",
        fmt::format("{} of a {} tensor {} at {}", what, t.view().provider_name(), t.shape().to_string(), where(loc)));
  }
  if (t.view().provider_name() == "meta") {
    refuse_structure_only(kMetaOutsideStructureOnly, "session.value",
                          fmt::format("{} of a meta tensor at {} outside structure-only mode", what, where(loc)));
  }
}

double Session::item(const EagerTensor& t, SourceLocation loc) {
  value_escape("item()", t, loc);
  if (t.view().numel() != 1) {
    throw_error(ErrorCode::invalid_argument, "session.item",
                fmt::format("item() of {} elements at {}", t.view().numel(), where(loc)));
  }
  Dims zero;
  for (int i = 0; i < t.shape().size(); ++i) zero.push_back(0);
  return t.view().get(zero).real;
}

double Session::read(const EagerTensor& t, const Dims& index, SourceLocation loc) {
  value_escape("an element read", t, loc);
  return t.view().get(index).real;
}

bool Session::branch(const EagerTensor& predicate, SourceLocation loc) {
  value_escape("a value-dependent branch", predicate, loc);
  return item(predicate, loc) != 0.0;
}

const contract::Capsule* Session::selected(ops::OpTag op) const noexcept {
  for (const auto& [sig, bound] : cache_) {
    if (std::get<0>(sig) == static_cast<int>(op)) return bound.capsule();
  }
  return nullptr;
}

const contract::BoundKernel& Session::admit(const Signature& signature, ops::OpTag op,
                                            std::span<const ops::TensorType> inputs, bool vjp) {
  auto it = cache_.find(signature);
  if (it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  const auto mode = vjp ? contract::VjpMode::with_vjp : contract::VjpMode::forward_only;
  plan::KernelAdmission a = plan::admit_kernel("eager", op, inputs, profile_, *resolver_, mode);
  if (!a.bound) {
    std::string failures;
    for (const auto& r : a.reports) {
      if (!r.accepted) {
        failures += r.capsule.empty() ? fmt::format("; {}", r.reason)
                                      : fmt::format("; {} ({}): {}", contract::obligation_name(r.obligation),
                                                    r.evidence.id, r.reason);
      }
    }
    if (a.capsule == nullptr) {
      throw_error(ErrorCode::unsupported, std::string(ops::op_kind(op)),
                  fmt::format("profile {} admits no kernel{}", profile_.name, failures));
    }
    throw_error(ErrorCode::unsupported, std::string(ops::op_kind(op)),
                fmt::format("capsule {} is not admitted under {}{}", a.capsule->name, profile_.name, failures));
  }
  return cache_.emplace(signature, *a.bound).first->second;
}

EagerTensor Session::apply(ops::OpTag op, std::span<const EagerTensor> inputs, const ops::Attributes& attrs,
                           std::string_view name, SourceLocation loc) {
  if (structure_only_) {
    // The substrate must stay uniform: a real tensor met mid-forward refuses at the user's line.
    std::vector<ops::TensorType> types;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].view().provider_name() != "meta") {
        require_structure_only_capability("substrate_uniformity");
        refuse_structure_only(
            kSubstrateMismatch, std::string(ops::op_kind(op)),
            fmt::format("operand {} is a real {} tensor {} in a structure-only capture whose inputs and "
                        "parameters are meta, at {}",
                        i, inputs[i].view().provider_name(), inputs[i].shape().to_string(), where(loc)));
      }
      types.push_back({inputs[i].dtype(), inputs[i].shape()});
    }
    const ops::TensorType out = ops::infer_type(op, types, attrs);
    EagerTensor result{retain(Tensor::empty(out.shape, out.dtype, meta_provider())), -1};
    if (observer_ != nullptr) observer_->on_op(op, inputs, attrs, result, name, module_);
    return result;
  }
  std::vector<TensorView> views;
  views.reserve(inputs.size());
  std::vector<int> dtypes;
  std::vector<ops::TensorType> types;
  bool contiguous = true, needs_grad = false;
  for (const auto& in : inputs) {
    views.push_back(in.view());
    if (views.back().provider_name() == "meta") {
      require_structure_only_capability("meta_admission");
      refuse_structure_only(kMetaOutsideStructureOnly, std::string(ops::op_kind(op)),
                            fmt::format("a meta tensor {} reached the runtime outside structure-only mode at {}",
                                        in.shape().to_string(), where(loc)));
    }
    dtypes.push_back(static_cast<int>(in.dtype()));
    types.push_back({in.dtype(), in.shape()});
    contiguous = contiguous && views.back().is_contiguous();
    needs_grad = needs_grad || (grad_enabled_ && in.tracked() && tape_.node(in.node).requires_grad);
  }
  const int device = static_cast<int>(inputs.empty() ? profile_.policy.device : views.front().device());
  const contract::BoundKernel& bound =
      admit(Signature{static_cast<int>(op), dtypes, device, contiguous, needs_grad}, op, types, needs_grad);
  return run_admitted(bound, op, inputs, attrs, name);
}

kernels::KernelContext Session::next_context() noexcept {
  return kernels::KernelContext{training_, seed_ * 0x9e3779b97f4a7c15ULL + (++calls_)};
}

EagerTensor Session::run_admitted(const contract::BoundKernel& kernel, ops::OpTag op,
                                  std::span<const EagerTensor> inputs, const ops::Attributes& attrs,
                                  std::string_view name) {
  EagerTensor result =
      run_recorded(*kernel.handler(), op, inputs, attrs, next_context(), grad_enabled_ ? &tape_ : nullptr);
  if (observer_ != nullptr) observer_->on_op(op, inputs, attrs, result, name, module_);
  return result;
}

EagerTensor Session::checkpoint(const RegionBody& body, std::span<const EagerTensor> inputs) {
  std::vector<bool> wants;
  bool differentiable = false;
  for (const auto& in : inputs) {
    wants.push_back(grad_enabled_ && in.tracked() && tape_.node(in.node).requires_grad);
    differentiable = differentiable || wants.back();
  }
  if (!differentiable || structure_only_) return body(*this, inputs);
  const std::uint64_t start = calls_;
  EagerTensor out;
  grad_enabled_ = false;  // no interior record: the region's values die with the body's locals
  try {
    out = body(*this, inputs);
  } catch (...) {
    grad_enabled_ = true;
    throw;
  }
  grad_enabled_ = true;
  Tape::Node n;
  n.type = {out.dtype(), out.shape()};
  n.requires_grad = true;
  for (const auto& in : inputs) {
    n.parents.push_back(in.node);
    n.inputs.push_back(in.value);  // boundary inputs: retained records, no copy
  }
  n.output = out.value;  // the boundary output
  n.vjp = [body, profile = profile_, resolver = resolver_, seed = seed_, start, training = training_, wants](
              std::span<const ValueRef> in, const TensorView& g) {
    Session sub(profile, seed, resolver);
    sub.calls_ = start;  // the same kernel seeds as the forward run (dropout masks repeat)
    sub.training_ = training;
    std::vector<EagerTensor> leaves;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const TensorView v = in[i]->view();
      leaves.push_back(EagerTensor{in[i], sub.tape_.leaf({v.dtype(), v.shape()}, wants[i])});
    }
    EagerTensor y;
    {
      AllocationReasonScope recompute(AllocationReason::CheckpointRecomputeOutput);
      y = body(sub, leaves);
    }
    std::vector<std::optional<Tensor>> grads(in.size());
    if (!y.tracked()) return grads;
    std::vector<int> keep;
    keep.reserve(leaves.size());
    for (const auto& l : leaves) keep.push_back(l.node);
    Gradients pulled = sub.tape_.run_backward(y.node, std::nullopt, &g, keep, sub.accumulator());
    for (std::size_t i = 0; i < leaves.size(); ++i) {
      if (!wants[i]) continue;
      if (y.node == leaves[i].node) {  // an identity region: the cotangent itself
        grads[i] = g.duplicate();
        continue;
      }
      auto t = pulled.take_grad(leaves[i].node);
      if (!t) throw std::move(t).error();
      grads[i] = std::move(t).value();
    }
    return grads;
  };
  out.node = tape_.record(std::move(n));
  return out;
}

Tape::Accumulator Session::accumulator(std::span<const contract::BoundKernel* const> kernels) {
  std::vector<const contract::BoundKernel*> given(kernels.begin(), kernels.end());
  return [this, given = std::move(given)](Tensor& acc, const TensorView& g) {
    // A gradient a VJP made strided (none does today) is made contiguous once, so the kernel can write it.
    if (!acc.is_contiguous()) acc = acc.as_view().duplicate();
    const std::vector<ops::TensorType> types{{acc.dtype(), acc.shape()}, {g.dtype(), g.shape()}};
    const contract::BoundKernel* k = nullptr;
    for (const auto* c : given) {
      if (c != nullptr && c->capsule()->dtypes.contains(acc.dtype())) k = c;
    }
    if (k == nullptr) {
      const std::vector<int> dtypes{static_cast<int>(acc.dtype()), static_cast<int>(g.dtype())};
      k = &admit(
          Signature{static_cast<int>(ops::OpTag::accumulate_grad), dtypes, static_cast<int>(acc.device()), true, false},
          ops::OpTag::accumulate_grad, types, false);
    }
    Tensor* state[] = {&acc};
    kernels::run_update(*k->handler(), state, std::span<const TensorView>(&g, 1), {});
  };
}

Gradients Session::backward(const EagerTensor& root, std::span<const int> keep,
                            std::span<const contract::BoundKernel* const> accumulate, const Tape::OnFinal& on_final) {
  if (structure_only_) require_structure_only_capability("backward_grads", "Session::backward");
  if (!root.tracked()) throw_error(ErrorCode::invalid_argument, "session.backward", "the value is not on the tape");
  // The seed lives where the root does: a device root's VJPs read device cotangents.
  const DeviceKind device = root.view().device();
  const ops::TensorType type{root.dtype(), root.shape()};
  auto ones = [&] {
    Tensor t = Tensor::empty(type.shape, type.dtype);
    t.fill(1.0);
    return t;
  };
  auto device_seed = [&] {
    auto it = std::find_if(device_seeds_.begin(), device_seeds_.end(),
                           [&](const auto& s) { return s.first == type && s.second.device() == device; });
    if (it == device_seeds_.end()) it = device_seeds_.insert(it, {type, placed_on(ones(), device)});
    return it->second.duplicate();  // a copy on the device: the tape may accumulate into its seed
  };
  return tape_.backward(root.node, device == DeviceKind::cpu ? ones() : device_seed(), keep, accumulator(accumulate),
                        on_final);
}

}  // namespace pact::runtime
