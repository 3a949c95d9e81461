#pragma once
/// The autograd tape (SPEC §8, seed 000): values, parent ids and local VJPs in evaluation order. Each
/// recorded op retains (through retention records, never copies) only the values its VJP reads: its
/// inputs, and its output only for ops whose VJP reads the output. Backward checks shapes and accumulates.

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "pact/kernels/kernel.hpp"
#include "pact/runtime/retention.hpp"

namespace pact::runtime {

/// A value handle: a shared read-only record plus its tape node (-1 when not tracked).
struct EagerTensor {
  ValueRef value;
  int node = -1;

  TensorView view() const { return value->view(); }
  Dims shape() const { return value->view().shape(); }
  DType dtype() const { return value->view().dtype(); }
  bool tracked() const noexcept { return node >= 0; }
};

/// Gradients of one backward pass, by tape node id: a group with one allocation per gradient (seed 001
/// G7, a G2 specialisation). The key is only a local lookup key.
class Gradients {
 public:
  Gradients();
  /// A view of the gradient of `node`, or nullopt when it has none.
  std::optional<TensorView> grad(int node) const;
  /// Three outcomes: nullopt (no gradient), the owner (moved out; the bundle no longer holds it), or the
  /// group's error with the bundle unchanged (e.g. borrow_conflict while a grad() view is alive).
  Expected<std::optional<Tensor>, Error> take_grad(int node);
  /// Node ids that have gradients.
  std::vector<int> nodes() const;

 private:
  friend class Tape;
  AllocationGroup group_;
  std::map<int, DescriptorSlot> slots_;
};

class Tape {
 public:
  struct Node {
    ops::OpTag op = ops::OpTag::input;
    const kernels::Handler* handler = nullptr;  ///< nullptr for leaves
    ops::Attributes attrs;
    kernels::KernelContext ctx;
    std::vector<int> parents;                  ///< tape ids of the inputs (-1: untracked)
    std::vector<ValueRef> inputs;              ///< the inputs the op's saves column names; null for the rest
    std::vector<ops::TensorType> input_types;  ///< the unsaved inputs' types (empty when every input is
                                               ///< saved): each reaches the VJP as a geometry-only
                                               ///< placeholder (Note [Op table])
    ValueRef output;                           ///< retained only when the op's saves column names it
    ops::TensorType type;                      ///< the output's shape tag
    bool requires_grad = false;
    /// A local VJP closure for nodes that are not one op (a checkpoint region): given the retained inputs
    /// and the output cotangent, a gradient (or none) per input. Set only when `handler` is null.
    std::function<std::vector<std::optional<Tensor>>(std::span<const ValueRef>, const TensorView&)> vjp;
  };

  /// An empty tape (it makes this thread's placeholder pool for unsaved VJP operands, if not yet made).
  Tape();

  /// Records a leaf (a parameter or an input that wants a gradient) and returns its id.
  int leaf(const ops::TensorType& type, bool requires_grad);
  /// Records an op application; returns its id.
  int record(Node node);
  /// Number of recorded nodes.
  std::size_t size() const noexcept { return nodes_.size(); }
  const Node& node(int id) const { return nodes_.at(static_cast<std::size_t>(id)); }
  /// Values retained by the tape (for tests of the retention policy).
  std::size_t retained_values() const noexcept;
  /// Bytes of the distinct values the tape retains for backward (each retained record counted once),
  /// leaving out the records `skip` names (a capture leaves out its sources: what remains is activations).
  std::uint64_t retained_bytes(const std::function<bool(const AdValueRecord*)>& skip = {}) const;

  /// Adds a gradient into the one accumulated so far for the same node, in place: the admitted
  /// accumulate_grad kernel (Note [Training kernels] in pact/plan/planner.hpp); Session::accumulator
  /// makes one.
  using Accumulator = std::function<void(Tensor& accumulated, const TensorView& gradient)>;
  /// Told that a kept node's gradient is final: every node that reads it has run its VJP, so nothing will
  /// add to it in this pass (data-parallel training starts a bucket's reduction here, Note [Gradient
  /// buckets] in pact/train/trainer.cpp). The gradient stays the pass's; the callee may read and write it.
  using OnFinal = std::function<void(int node, Tensor& gradient)>;

  /// Reverse-mode pass from `root` with cotangent `seed` (shape-checked against the root's tag). Dense
  /// (keep empty): a gradient for every node that receives one. Sparse: only the ids in `keep` survive.
  /// A node that receives more than one gradient sums them through `accumulate`; without one, such a
  /// node is a typed error (unsupported), since nothing computes outside admission.
  Gradients backward(int root, const TensorView& seed, std::span<const int> keep = {},
                     const Accumulator& accumulate = {}) const;
  /// The same with an owned seed, which becomes the root's gradient without a copy (the view overload
  /// makes one explicit duplicate).
  Gradients backward(int root, Tensor seed, std::span<const int> keep = {}, const Accumulator& accumulate = {},
                     const OnFinal& on_final = {}) const;
  /// Drops every node (and the values it retained).
  void clear() noexcept { nodes_.clear(); }

 private:
  friend class Session;
  // The one implementation: the root's cotangent is owned (`owned`) or borrowed (`borrowed`, for a
  // checkpoint's private tape; the root then gets no gradient entry of its own).
  Gradients run_backward(int root, std::optional<Tensor> owned, const TensorView* borrowed, std::span<const int> keep,
                         const Accumulator& accumulate, const OnFinal& on_final = {}) const;
  std::vector<Node> nodes_;
};

// Note [One interpreter]
// run_recorded is the one place a kernel runs on eager values: a view op keeps a zero-copy view of its
// input where one exists (an alias record of the input's value), anything else runs the handler; with a
// tape and an input that requires gradients, the op is recorded with what its VJP reads. Session::apply
// (the eager API) and runtime::execute (every planned graph: training, checkpoint regions, imported
// models, submission) both call it with a kernel that admission bound (Note [One admission]). execute
// walks a plan by position (plan::Schedule, made with the plan): no name is looked up per node.
/// Runs `handler` for `op` on `inputs` and records it on `tape` when gradients are needed (Note [One
/// interpreter]). `tape` may be null (no recording).
EagerTensor run_recorded(const kernels::Handler& handler, ops::OpTag op, std::span<const EagerTensor> inputs,
                         const ops::Attributes& attrs, const kernels::KernelContext& ctx, Tape* tape);

}  // namespace pact::runtime
