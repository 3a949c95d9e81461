#include "pact/runtime/tape.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace pact::runtime {

bool vjp_reads_output(ops::OpTag op) noexcept {
  switch (op) {
    case ops::OpTag::neg:
    case ops::OpTag::relu:
    case ops::OpTag::gelu:
    case ops::OpTag::silu:
    case ops::OpTag::tanh:
    case ops::OpTag::sigmoid:
    case ops::OpTag::clamp:
    case ops::OpTag::exp:
    case ops::OpTag::log:
    case ops::OpTag::sqrt:
    case ops::OpTag::softmax:
    case ops::OpTag::log_softmax:
    case ops::OpTag::max:
      return true;
    default:
      return false;
  }
}

namespace {
AllocationGroup empty_group() {
  auto g = AllocationGroup::make({}, {});
  if (!g) throw std::move(g).error().error;
  return std::move(g).value();
}
}  // namespace

Gradients::Gradients() : group_(empty_group()) {}

std::optional<TensorView> Gradients::grad(int node) const {
  auto it = slots_.find(node);
  if (it == slots_.end()) return std::nullopt;
  return group_.view(it->second);
}

Expected<std::optional<Tensor>, Error> Gradients::take_grad(int node) {
  auto it = slots_.find(node);
  if (it == slots_.end()) return std::optional<Tensor>();
  try {
    Tensor t = group_.try_extract(it->second);
    slots_.erase(it);
    return std::optional<Tensor>(std::move(t));
  } catch (Error& e) {
    return Unexpected(std::move(e));
  }
}

std::vector<int> Gradients::nodes() const {
  std::vector<int> ids;
  for (const auto& [id, g] : slots_) ids.push_back(id);
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

// acc[i] += g[i] in place, when both are contiguous host f32 or f64 of one shape; false (nothing written)
// otherwise. The same additions, element by element, as the add kernel's same-shape loop.
template <class T>
bool accumulate_in_place(Tensor& acc, const TensorView& g) {
  if (acc.dtype() != dtype_of_v<T> || g.dtype() != dtype_of_v<T> || !(acc.shape() == g.shape()) ||
      !acc.is_contiguous() || !g.is_contiguous()) {
    return false;
  }
  auto src = TensorView(g).prepare_host<T>();
  if (!src) return false;
  auto dst = acc.prepare_host_mut<T>();
  if (!dst) return false;
  const auto in = std::get<PreparedContiguousRead<T>>(src.value()).as_span();
  const auto out = std::get<PreparedContiguousWrite<T>>(dst.value()).as_span();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] += in[i];
  return true;
}

// acc + g: in place when both are contiguous f32/f64 of one shape (no allocation), otherwise through the
// native add kernel (elementwise and exact, so every provider gives the same bits; it broadcasts and
// converts), a fresh owner. No copy event either way.
Tensor accumulate(Tensor acc, const TensorView& g) {
  if (acc.device() == DeviceKind::cpu && g.device() == DeviceKind::cpu &&
      (accumulate_in_place<float>(acc, g) || accumulate_in_place<double>(acc, g))) {
    return acc;
  }
  static const kernels::Handler* add = kernels::find_handler(kernels::native_handlers(), ops::OpTag::add);
  return kernels::run_forward(*add, std::vector<TensorView>{acc.as_view(), g}, {});
}

// The input of `op` whose gradient is the cotangent g itself, in that input's shape, among the `wanted`
// ones (bit k: input k), or -1: a reshape's or flatten's input (the same elements in row-major order), or
// an add's first operand of the output's shape.
int passthrough_input(ops::OpTag op, std::span<const TensorView> in, const TensorView& g, std::uint64_t wanted) {
  if ((op == ops::OpTag::reshape || op == ops::OpTag::flatten) && in.size() == 1 && (wanted & 1u) != 0) return 0;
  if (op == ops::OpTag::add) {
    for (std::size_t k = 0; k < 2 && k < in.size(); ++k)
      if ((wanted >> k & 1u) != 0 && in[k].shape() == g.shape()) return static_cast<int>(k);
  }
  return -1;
}

// A contiguous owner re-described in `shape`, which holds as many elements: zero copy.
Tensor reshaped(Tensor t, const Dims& shape) {
  if (t.shape() == shape) return t;
  const CheckedLayout layout = t.layout();
  auto moved =
      Tensor::from_storage(std::move(t).into_storage(),
                           LayoutRequest{layout.dtype(), shape, contiguous_strides(shape), layout.byte_offset()});
  if (!moved) throw std::move(moved).error().error;  // a contiguous layout of the same bytes: cannot happen
  return std::move(moved).value();
}

}  // namespace

Gradients Tape::backward(int root, const TensorView& seed, std::span<const int> keep) const {
  if (root < 0 || static_cast<std::size_t>(root) >= nodes_.size()) {
    throw_error(ErrorCode::invalid_argument, "tape.backward", fmt::format("node {} is not on the tape", root));
  }
  require_tag("the seed cotangent", root, nodes_[static_cast<std::size_t>(root)].type, seed);
  return run_backward(root, seed.duplicate(), nullptr, keep);
}

Gradients Tape::backward(int root, Tensor seed, std::span<const int> keep) const {
  return run_backward(root, std::move(seed), nullptr, keep);
}

Gradients Tape::run_backward(int root, std::optional<Tensor> owned, const TensorView* borrowed,
                             std::span<const int> keep) const {
  if (root < 0 || static_cast<std::size_t>(root) >= nodes_.size()) {
    throw_error(ErrorCode::invalid_argument, "tape.backward", fmt::format("node {} is not on the tape", root));
  }
  require_tag("the seed cotangent", root, nodes_[static_cast<std::size_t>(root)].type,
              owned ? owned->as_view() : *borrowed);
  const std::set<int> kept(keep.begin(), keep.end());
  std::map<int, Tensor> grads;
  if (owned) grads.emplace(root, std::move(*owned));
  for (int id = root; id >= 0; --id) {
    auto it = grads.find(id);
    const bool borrowed_root = id == root && borrowed != nullptr;
    if (it == grads.end() && !borrowed_root) continue;
    const Node& n = nodes_[static_cast<std::size_t>(id)];
    const bool dropped = !kept.empty() && !kept.count(id);  // this pass erases the node's gradient below
    std::vector<std::optional<Tensor>> input_grads;
    if (n.handler != nullptr || n.vjp) {
      // An input whose gradient is the cotangent itself (passthrough_input) takes a contiguous one this
      // pass drops anyway, zero copy, and the VJP is asked only for the other inputs' gradients.
      int pass = -1;
      Dims pass_shape;
      {  // the view of this node's gradient ends before the gradient may be moved or erased below
        const TensorView g = borrowed_root ? *borrowed : it->second.as_view();
        require_tag("the accumulated gradient", id, n.type, g);
        if (n.handler != nullptr) {
          std::vector<TensorView> in;
          in.reserve(n.inputs.size());
          for (const auto& r : n.inputs) in.push_back(r->view());
          // Ops whose VJP does not read the output get the cotangent in its place (same type, never read).
          const TensorView y = n.output ? n.output->view() : g;
          // Only the gradients some input on the tape wants are asked for.
          kernels::KernelContext ctx = n.ctx;
          ctx.wanted_grads = 0;
          for (std::size_t k = 0; k < n.parents.size() && k < 64; ++k) {
            const int p = n.parents[k];
            if (p >= 0 && nodes_[static_cast<std::size_t>(p)].requires_grad) ctx.wanted_grads |= std::uint64_t{1} << k;
          }
          if (n.parents.size() > 64) ctx.wanted_grads = ~std::uint64_t{0};
          if (!borrowed_root && dropped && g.is_contiguous()) pass = passthrough_input(n.op, in, g, ctx.wanted_grads);
          if (pass >= 0) {
            pass_shape = in[static_cast<std::size_t>(pass)].shape();
            ctx.wanted_grads &= ~(std::uint64_t{1} << pass);
          }
          if (ctx.wanted_grads != 0) input_grads = kernels::run_vjp(*n.handler, in, y, g, n.attrs, ctx);
        } else {
          input_grads = n.vjp(n.inputs, g);
        }
      }
      if (pass >= 0) {
        input_grads.resize(std::max(input_grads.size(), n.parents.size()));
        input_grads[static_cast<std::size_t>(pass)] = reshaped(std::move(it->second), pass_shape);
      }
    } else {
      require_tag("the accumulated gradient", id, n.type, borrowed_root ? *borrowed : it->second.as_view());
    }
    for (std::size_t k = 0; k < n.parents.size() && k < input_grads.size(); ++k) {
      const int p = n.parents[k];
      if (p < 0 || !input_grads[k] || !nodes_[static_cast<std::size_t>(p)].requires_grad) continue;
      auto slot = grads.find(p);
      if (slot == grads.end()) {
        grads.emplace(p, std::move(*input_grads[k]));
      } else {
        slot->second = accumulate(std::move(slot->second), input_grads[k]->as_view());
      }
    }
    if (dropped) grads.erase(id);
  }
  Gradients out;
  for (auto& [id, grad] : grads) {
    auto slot = AllocationGroup::insert(out.group_, std::move(grad));
    if (!slot) throw std::move(slot).error().error;  // fresh owners into an unborrowed group: cannot happen
    out.slots_.emplace(id, slot.value());
  }
  return out;
}

EagerTensor run_recorded(const kernels::Handler& handler, ops::OpTag op, std::span<const EagerTensor> inputs,
                         const ops::Attributes& attrs, const kernels::KernelContext& ctx, Tape* tape) {
  std::vector<TensorView> views;
  views.reserve(inputs.size());
  bool needs_grad = false;
  for (const auto& in : inputs) {
    views.push_back(in.view());
    needs_grad = needs_grad || (tape != nullptr && in.tracked() && tape->node(in.node).requires_grad);
  }
  // A view op whose result is a view of its input (a contiguous reshape, any transpose, permute or slice)
  // keeps that view, zero copy, as an alias record of the input's value; otherwise the handler runs.
  std::optional<TensorView> alias;
  if (views.size() == 1 && views.front().device() == handler.device)
    alias = kernels::view_result(op, views.front(), attrs);
  EagerTensor result{alias ? AdValueRecord::alias(inputs.front().value, std::move(*alias))
                           : retain(kernels::run_forward(handler, views, attrs, ctx)),
                     -1};
  if (needs_grad) {
    Tape::Node n;
    n.op = op;
    n.handler = &handler;
    n.attrs = attrs;
    n.ctx = ctx;
    n.type = {result.dtype(), result.shape()};
    n.requires_grad = true;
    for (const auto& in : inputs) {
      n.parents.push_back(in.node);
      n.inputs.push_back(in.value);  // shared record: retention, not a copy
    }
    if (vjp_reads_output(op)) n.output = result.value;
    result.node = tape->record(std::move(n));
  }
  return result;
}

}  // namespace pact::runtime
