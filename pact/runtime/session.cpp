#include "pact/runtime/session.hpp"

#include <fmt/format.h>

#include "pact/capture/capabilities.hpp"

namespace pact::runtime {

Session::Session(contract::BackendProfile profile, std::uint64_t seed, std::shared_ptr<const contract::EvidenceResolver> resolver)
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

EagerTensor Session::named(const std::string& name, EagerTensor value, SourceKind kind, bool persistent) {
  if (observer_ != nullptr) observer_->on_source(value, module_.empty() ? name : module_ + "." + name, kind, persistent, module_);
  return value;
}

EagerTensor Session::input(const std::string& name, Tensor value) {
  return named(name, constant(std::move(value)), SourceKind::input, true);
}

EagerTensor Session::parameter(const std::string& name, Tensor value, bool requires_grad) {
  // Structure-only captures record no gradients (backward_grads is refused), so no tape node is made.
  EagerTensor t = structure_only_ ? constant(std::move(value)) : leaf(std::move(value), requires_grad);
  return named(name, std::move(t), SourceKind::parameter, true);
}

EagerTensor Session::tie(const std::string& name, const EagerTensor& value) { return named(name, value, SourceKind::parameter, true); }

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
    capture::require_structure_only_capability(
        "value_payloads", fmt::format("{} of a {} tensor {} at {}", what, t.view().provider_name(), t.shape().to_string(),
                                      capture::where(loc)));
  }
  if (t.view().provider_name() == "meta") {
    throw capture::Refusal(std::string(capture::kMetaOutsideStructureOnly), "session.value",
                           fmt::format("{} of a meta tensor at {} outside structure-only mode", what, capture::where(loc)));
  }
}

double Session::item(const EagerTensor& t, SourceLocation loc) {
  value_escape("item()", t, loc);
  if (t.view().numel() != 1) {
    throw_error(ErrorCode::invalid_argument, "session.item", fmt::format("item() of {} elements at {}", t.view().numel(), capture::where(loc)));
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
    if (std::get<0>(sig) == static_cast<int>(op)) return bound.capsule;
  }
  return nullptr;
}

const contract::BoundKernel& Session::admit(const Signature& signature, ops::OpTag op, bool vjp) {
  auto it = cache_.find(signature);
  if (it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  const auto mode = vjp ? contract::VjpMode::with_vjp : contract::VjpMode::forward_only;
  const contract::Capsule* capsule = contract::select_capsule(profile_, op, mode);
  if (capsule == nullptr) {
    throw_error(ErrorCode::unsupported, std::string(ops::op_kind(op)),
                fmt::format("profile {} has no capsule for this op{}", profile_.name, vjp ? " with VJP support" : ""));
  }
  contract::BackendProfile effective = profile_;
  effective.policy.vjp_mode = mode;
  std::vector<contract::ObligationReport> reports;
  contract::check_kernel("eager", op, *capsule, effective, *resolver_, reports);
  std::string failures;
  for (const auto& r : reports) {
    if (!r.accepted) failures += fmt::format("; {} ({}): {}", contract::obligation_name(r.obligation), r.evidence.id, r.reason);
  }
  if (!failures.empty()) {
    throw_error(ErrorCode::unsupported, std::string(ops::op_kind(op)),
                fmt::format("capsule {} is not admitted under {}{}", capsule->name, profile_.name, failures));
  }
  return cache_.emplace(signature, contract::bind(*capsule)).first->second;
}

EagerTensor Session::apply(ops::OpTag op, std::span<const EagerTensor> inputs, const ops::Attributes& attrs,
                           std::string_view name, SourceLocation loc) {
  if (structure_only_) {
    // The substrate must stay uniform: a real tensor met mid-forward refuses at the user's line.
    std::vector<ops::TensorType> types;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].view().provider_name() != "meta") {
        capture::require_structure_only_capability("substrate_uniformity");
        throw capture::Refusal("structure_only_substrate_mismatch", std::string(ops::op_kind(op)),
                               fmt::format("operand {} is a real {} tensor {} in a structure-only capture whose inputs and "
                                           "parameters are meta, at {}",
                                           i, inputs[i].view().provider_name(), inputs[i].shape().to_string(), capture::where(loc)));
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
  bool contiguous = true, needs_grad = false;
  for (const auto& in : inputs) {
    views.push_back(in.view());
    if (views.back().provider_name() == "meta") {
      capture::require_structure_only_capability("meta_admission");
      throw capture::Refusal(std::string(capture::kMetaOutsideStructureOnly), std::string(ops::op_kind(op)),
                             fmt::format("a meta tensor {} reached the runtime outside structure-only mode at {}",
                                         in.shape().to_string(), capture::where(loc)));
    }
    dtypes.push_back(static_cast<int>(in.dtype()));
    contiguous = contiguous && views.back().is_contiguous();
    needs_grad = needs_grad || (grad_enabled_ && in.tracked() && tape_.node(in.node).requires_grad);
  }
  const int device = static_cast<int>(inputs.empty() ? profile_.policy.device : views.front().device());
  const contract::BoundKernel& bound = admit(Signature{static_cast<int>(op), dtypes, device, contiguous, needs_grad}, op, needs_grad);
  const kernels::KernelContext ctx{training_, seed_ * 0x9e3779b97f4a7c15ULL + (++calls_)};
  Tensor out = kernels::run_forward(*bound.handler, views, attrs, ctx);
  EagerTensor result{retain(std::move(out)), -1};
  if (needs_grad) {
    Tape::Node n;
    n.op = op;
    n.handler = bound.handler;
    n.attrs = attrs;
    n.ctx = ctx;
    n.type = {result.dtype(), result.shape()};
    n.requires_grad = true;
    for (const auto& in : inputs) {
      n.parents.push_back(in.node);
      n.inputs.push_back(in.value);  // shared record: retention, not a copy
    }
    if (vjp_reads_output(op)) n.output = result.value;
    result.node = tape_.record(std::move(n));
  }
  if (observer_ != nullptr) observer_->on_op(op, inputs, attrs, result, name, module_);
  return result;
}

std::map<std::string, EagerTensor> Session::run_graph(const ir::Graph& graph, const std::map<std::string, EagerTensor>& bindings) {
  std::map<std::string, EagerTensor> values;
  for (const auto& n : graph.nodes) {
    const auto role = ops::op_info(n.op).role;
    if (role == ops::OpRole::source) {
      auto it = bindings.find(n.id);
      if (it == bindings.end()) throw_error(ErrorCode::invalid_argument, "session.run_graph", fmt::format("no value bound to '{}'", n.id));
      if (it->second.dtype() != n.type.dtype || !(it->second.shape() == n.type.shape)) {
        throw_error(ErrorCode::invalid_argument, "session.run_graph",
                    fmt::format("'{}' is bound to {}{}; the graph declares {}{}", n.id, dtype_name(it->second.dtype()),
                                it->second.shape().to_string(), dtype_name(n.type.dtype), n.type.shape.to_string()));
      }
      values.emplace(n.id, it->second);
      continue;
    }
    std::vector<EagerTensor> in;
    for (const auto& id : n.inputs) in.push_back(values.at(id));
    if (role == ops::OpRole::sink) {
      values.emplace(n.id, in[0]);
      continue;
    }
    values.emplace(n.id, apply(n.op, in, n.attrs, n.id));
  }
  std::map<std::string, EagerTensor> outputs;
  for (const auto& o : graph.outputs) outputs.emplace(o, values.at(o));
  return outputs;
}

Gradients Session::backward(const EagerTensor& root, std::span<const int> keep) {
  if (structure_only_) capture::require_structure_only_capability("backward_grads", "Session::backward");
  if (!root.tracked()) throw_error(ErrorCode::invalid_argument, "session.backward", "the value is not on the tape");
  Tensor ones = Tensor::empty(root.shape(), root.dtype());
  ones.fill(1.0);
  return tape_.backward(root.node, ones.as_view(), keep);
}

}  // namespace pact::runtime
