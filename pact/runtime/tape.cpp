#include "pact/runtime/tape.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace pact::runtime {

bool vjp_reads_output(ops::OpTag op) noexcept {
  switch (op) {
    case ops::OpTag::neg: case ops::OpTag::relu: case ops::OpTag::gelu: case ops::OpTag::silu: case ops::OpTag::tanh:
    case ops::OpTag::sigmoid: case ops::OpTag::clamp: case ops::OpTag::exp: case ops::OpTag::log: case ops::OpTag::sqrt:
    case ops::OpTag::softmax: case ops::OpTag::log_softmax: case ops::OpTag::max:
      return true;
    default:
      return false;
  }
}

std::optional<TensorView> Gradients::grad(int node) const {
  auto it = grads_.find(node);
  if (it == grads_.end()) return std::nullopt;
  return it->second.as_view();
}

std::optional<Tensor> Gradients::take_grad(int node) {
  auto it = grads_.find(node);
  if (it == grads_.end()) return std::nullopt;
  Tensor t = std::move(it->second);
  grads_.erase(it);
  return t;
}

std::vector<int> Gradients::nodes() const {
  std::vector<int> ids;
  for (const auto& [id, g] : grads_) ids.push_back(id);
  return ids;
}

int Tape::leaf(const ops::TensorType& type, bool requires_grad) {
  Node n;
  n.type = type;
  n.requires_grad = requires_grad;
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size() - 1);
}

int Tape::record(Node node) {
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size() - 1);
}

std::size_t Tape::retained_values() const noexcept {
  std::size_t n = 0;
  for (const auto& node : nodes_) n += node.inputs.size() + (node.output ? 1 : 0);
  return n;
}

namespace {

void require_tag(const char* what, int node, const ops::TensorType& tag, const TensorView& v) {
  if (v.dtype() != tag.dtype || !(v.shape() == tag.shape)) {
    throw_error(ErrorCode::invalid_argument, "tape.backward",
                fmt::format("{} for node {} is {}{}; the node's tag is {}{}", what, node, dtype_name(v.dtype()),
                            v.shape().to_string(), dtype_name(tag.dtype), tag.shape.to_string()));
  }
}

// acc + g through the reference add kernel (elementwise, exact): a fresh owner, no copy event.
Tensor accumulate(Tensor acc, const TensorView& g) {
  static const kernels::Handler* add = kernels::find_handler(kernels::reference_handlers(), ops::OpTag::add);
  return kernels::run_forward(*add, std::vector<TensorView>{acc.as_view(), g}, {});
}

}  // namespace

Gradients Tape::backward(int root, const TensorView& seed, std::span<const int> keep) const {
  if (root < 0 || static_cast<std::size_t>(root) >= nodes_.size()) {
    throw_error(ErrorCode::invalid_argument, "tape.backward", fmt::format("node {} is not on the tape", root));
  }
  require_tag("the seed cotangent", root, nodes_[static_cast<std::size_t>(root)].type, seed);
  const std::set<int> kept(keep.begin(), keep.end());
  Gradients out;
  std::map<int, Tensor>& grads = out.grads_;
  grads.emplace(root, seed.duplicate());
  for (int id = root; id >= 0; --id) {
    auto it = grads.find(id);
    if (it == grads.end()) continue;
    const Node& n = nodes_[static_cast<std::size_t>(id)];
    require_tag("the accumulated gradient", id, n.type, it->second.as_view());
    if (n.handler != nullptr) {
      std::vector<TensorView> in;
      in.reserve(n.inputs.size());
      for (const auto& r : n.inputs) in.push_back(r->view());
      const TensorView g = it->second.as_view();
      // Ops whose VJP does not read the output get the cotangent in its place (same type, never read).
      const TensorView y = n.output ? n.output->view() : g;
      auto input_grads = kernels::run_vjp(*n.handler, in, y, g, n.attrs, n.ctx);
      for (std::size_t k = 0; k < n.parents.size(); ++k) {
        const int p = n.parents[k];
        if (p < 0 || !input_grads[k] || !nodes_[static_cast<std::size_t>(p)].requires_grad) continue;
        auto slot = grads.find(p);
        if (slot == grads.end()) {
          grads.emplace(p, std::move(*input_grads[k]));
        } else {
          slot->second = accumulate(std::move(slot->second), input_grads[k]->as_view());
        }
      }
    }
    if (!kept.empty() && !kept.count(id)) grads.erase(id);
  }
  return out;
}

}  // namespace pact::runtime
