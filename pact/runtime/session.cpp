#include "pact/runtime/session.hpp"

#include <fmt/format.h>

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

EagerTensor Session::apply(ops::OpTag op, std::span<const EagerTensor> inputs, const ops::Attributes& attrs) {
  std::vector<TensorView> views;
  views.reserve(inputs.size());
  std::vector<int> dtypes;
  bool contiguous = true, needs_grad = false;
  for (const auto& in : inputs) {
    views.push_back(in.view());
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
    values.emplace(n.id, apply(n.op, in, n.attrs));
  }
  std::map<std::string, EagerTensor> outputs;
  for (const auto& o : graph.outputs) outputs.emplace(o, values.at(o));
  return outputs;
}

Gradients Session::backward(const EagerTensor& root, std::span<const int> keep) {
  if (!root.tracked()) throw_error(ErrorCode::invalid_argument, "session.backward", "the value is not on the tape");
  Tensor ones = Tensor::empty(root.shape(), root.dtype());
  ones.fill(1.0);
  return tape_.backward(root.node, ones.as_view(), keep);
}

}  // namespace pact::runtime
