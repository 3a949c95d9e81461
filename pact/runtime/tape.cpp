#include "pact/runtime/tape.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

namespace pact::runtime {

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
  for (const auto& node : nodes_) {
    for (const auto& v : node.inputs) n += v ? 1 : 0;
    n += node.output ? 1 : 0;
  }
  return n;
}

std::uint64_t Tape::retained_bytes(const std::function<bool(const AdValueRecord*)>& skip) const {
  std::set<const AdValueRecord*> seen;
  std::uint64_t bytes = 0;
  auto count = [&](const ValueRef& v) {
    if (v && seen.insert(v.get()).second && !(skip && skip(v.get()))) bytes += v->view().nbytes();
  };
  for (const auto& node : nodes_) {
    for (const auto& v : node.inputs) count(v);
    count(node.output);
  }
  return bytes;
}

namespace {

void require_tag(const char* what, int node, const ops::TensorType& tag, const TensorView& v) {
  if (v.dtype() != tag.dtype || !(v.shape() == tag.shape)) {
    throw_error(ErrorCode::invalid_argument, "tape.backward",
                fmt::format("{} for node {} is {}{}; the node's tag is {}{}", what, node, dtype_name(v.dtype()),
                            v.shape().to_string(), dtype_name(tag.dtype), tag.shape.to_string()));
  }
}

// Geometry-only views for VJP operands an op does not save (Note [Op table]): views into one meta tensor
// per dtype and thread (meta storage describes bytes and has none), so a placeholder costs two checked
// view operations and no allocation; reading its elements refuses typed (no_host_bytes). The pool is made
// with the thread's first tape, so its allocation events precede any backward pass.
constexpr std::int64_t kPlaceholderElements = std::int64_t{1} << 40;

std::array<std::optional<Tensor>, kDTypeCount>& placeholder_pool() {
  thread_local std::array<std::optional<Tensor>, kDTypeCount> pool = [] {
    std::array<std::optional<Tensor>, kDTypeCount> p;
    for (int d = 0; d < kDTypeCount; ++d) {
      p[static_cast<std::size_t>(d)] =
          Tensor::empty(Dims{kPlaceholderElements}, static_cast<DType>(d), meta_provider());
    }
    return p;
  }();
  return pool;
}

TensorView placeholder(const ops::TensorType& t) {
  // The few types a model's unsaved operands take repeat every step: their views are kept (a view of a
  // meta tensor holds nothing), so a backward pass builds each placeholder once per thread.
  auto& pool = placeholder_pool();  // made before the cache, so it outlives the cache's views at thread exit
  thread_local std::vector<std::pair<ops::TensorType, TensorView>> cache;
  for (const auto& [type, view] : cache) {
    if (type.dtype == t.dtype && type.shape == t.shape) return view;
  }
  const std::int64_t n = ops::numel(t.shape);
  if (n > kPlaceholderElements) {
    throw_error(ErrorCode::unsupported, "tape.backward",
                fmt::format("an unsaved operand of {} elements exceeds the placeholder pool", n));
  }
  TensorView view = pool[static_cast<std::size_t>(t.dtype)]->as_view().slice(0, 0, n).reshape(t.shape);
  if (cache.size() >= 64) cache.erase(cache.begin());
  cache.emplace_back(t, view);
  return view;
}

// The input of `op` whose gradient is the cotangent g itself, re-described in that input's shape, among the
// `wanted` ones (bit k: input k), or -1: an input the op table's passthrough column names that has as many
// elements as the output (Note [Op table]).
int passthrough_input(ops::OpTag op, std::span<const TensorView> in, const TensorView& g, std::uint64_t wanted) {
  const ops::OpInfo& info = ops::op_info(op);
  for (std::size_t k = 0; k < in.size() && k < 64; ++k) {
    if ((wanted >> k & 1u) != 0 && info.passes_through(k) && in[k].numel() == g.numel()) return static_cast<int>(k);
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

Tape::Tape() { placeholder_pool(); }

Gradients Tape::backward(int root, const TensorView& seed, std::span<const int> keep,
                         const Accumulator& accumulate) const {
  if (root < 0 || static_cast<std::size_t>(root) >= nodes_.size()) {
    throw_error(ErrorCode::invalid_argument, "tape.backward", fmt::format("node {} is not on the tape", root));
  }
  require_tag("the seed cotangent", root, nodes_[static_cast<std::size_t>(root)].type, seed);
  return run_backward(root, seed.duplicate(), nullptr, keep, accumulate);
}

Gradients Tape::backward(int root, Tensor seed, std::span<const int> keep, const Accumulator& accumulate,
                         const OnFinal& on_final) const {
  return run_backward(root, std::move(seed), nullptr, keep, accumulate, on_final);
}

Gradients Tape::run_backward(int root, std::optional<Tensor> owned, const TensorView* borrowed,
                             std::span<const int> keep, const Accumulator& accumulate, const OnFinal& on_final) const {
  if (root < 0 || static_cast<std::size_t>(root) >= nodes_.size()) {
    throw_error(ErrorCode::invalid_argument, "tape.backward", fmt::format("node {} is not on the tape", root));
  }
  require_tag("the seed cotangent", root, nodes_[static_cast<std::size_t>(root)].type,
              owned ? owned->as_view() : *borrowed);
  const std::set<int> kept(keep.begin(), keep.end());
  std::map<int, Tensor> grads;
  if (owned) grads.emplace(root, std::move(*owned));
  // With on_final: each kept node's gradient is final once its first reader on the tape (the smallest id
  // among the nodes that read it) has run its VJP; `final_after[id]` lists the kept nodes that become final
  // then. A kept node no node reads is final from the start.
  std::map<int, std::vector<int>> final_after;
  if (on_final) {
    std::map<int, int> first_reader;
    for (int id = 0; id <= root; ++id) {
      for (int p : nodes_[static_cast<std::size_t>(id)].parents) {
        if (p >= 0 && kept.count(p) && !first_reader.count(p)) first_reader.emplace(p, id);
      }
    }
    for (const auto& [p, reader] : first_reader) final_after[reader].push_back(p);
  }
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
          // What the op's saves column names is retained; every other input, and the output when it is not
          // saved, reaches the VJP as a geometry-only placeholder that refuses to be read (Note [Op table]).
          std::vector<TensorView> in;
          in.reserve(n.inputs.size());
          for (std::size_t k = 0; k < n.inputs.size(); ++k) {
            PACT_DCHECK(n.inputs[k] || k < n.input_types.size(), "tape.backward");  // run_recorded kept its type
            in.push_back(n.inputs[k] ? n.inputs[k]->view() : placeholder(n.input_types[k]));
          }
          const TensorView y = n.output ? n.output->view() : placeholder(n.type);
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
        if (!accumulate) {
          throw_error(ErrorCode::unsupported, "tape.backward",
                      fmt::format("node {} receives more than one gradient and this pass has no admitted "
                                  "accumulation kernel",
                                  p));
        }
        accumulate(slot->second, input_grads[k]->as_view());
      }
    }
    if (dropped) grads.erase(id);
    if (auto f = final_after.find(id); f != final_after.end()) {
      for (int p : f->second) {
        if (auto g = grads.find(p); g != grads.end()) on_final(p, g->second);
      }
    }
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
  if (needs_grad && !ops::op_info(op).gradient_free) {  // no gradient flows through a gradient-free op
    Tape::Node n;
    n.op = op;
    n.handler = &handler;
    n.attrs = attrs;
    n.ctx = ctx;
    n.type = {result.dtype(), result.shape()};
    n.requires_grad = true;
    const ops::OpInfo& info = ops::op_info(op);
    n.parents.reserve(inputs.size());
    n.inputs.reserve(inputs.size());
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      n.parents.push_back(inputs[k].node);
      // Only what the VJP reads is retained (shared records: retention, not a copy); the types of the
      // rest are kept for their placeholders.
      if (info.saves_input(k)) {
        n.inputs.push_back(inputs[k].value);
      } else {
        n.inputs.emplace_back();
        if (n.input_types.empty()) n.input_types.resize(inputs.size());
        n.input_types[k] = {inputs[k].dtype(), inputs[k].shape()};
      }
    }
    if (info.saves_output()) n.output = result.value;
    result.node = tape->record(std::move(n));
  }
  return result;
}

}  // namespace pact::runtime
