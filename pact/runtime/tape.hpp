#pragma once
/// The autograd tape (SPEC §8, seed 000): values, parent ids and local VJPs in evaluation order. Each
/// recorded op retains (through retention records, never copies) only the values its VJP reads: its
/// inputs, and its output only for ops whose VJP reads the output. Backward checks shapes and accumulates.

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

/// True when the op's VJP reads the forward output (so the tape retains it).
bool vjp_reads_output(ops::OpTag op) noexcept;

/// Gradients of one backward pass, by tape node id; each gradient is its own owner.
class Gradients {
 public:
  /// A view of the gradient of `node`, or nullopt when it has none.
  std::optional<TensorView> grad(int node) const;
  /// Moves the gradient of `node` out (nullopt when none). The bundle no longer holds it.
  std::optional<Tensor> take_grad(int node);
  /// Node ids that have gradients.
  std::vector<int> nodes() const;

 private:
  friend class Tape;
  std::map<int, Tensor> grads_;
};

class Tape {
 public:
  struct Node {
    ops::OpTag op = ops::OpTag::input;
    const kernels::Handler* handler = nullptr;  ///< nullptr for leaves
    ops::Attributes attrs;
    kernels::KernelContext ctx;
    std::vector<int> parents;                    ///< tape ids of the inputs (-1: untracked)
    std::vector<ValueRef> inputs;                ///< retained inputs (the VJP reads them)
    ValueRef output;                             ///< retained only when vjp_reads_output(op)
    ops::TensorType type;                        ///< the output's shape tag
    bool requires_grad = false;
  };

  /// Records a leaf (a parameter or an input that wants a gradient) and returns its id.
  int leaf(const ops::TensorType& type, bool requires_grad);
  /// Records an op application; returns its id.
  int record(Node node);
  /// Number of recorded nodes.
  std::size_t size() const noexcept { return nodes_.size(); }
  const Node& node(int id) const { return nodes_.at(static_cast<std::size_t>(id)); }
  /// Values retained by the tape (for tests of the retention policy).
  std::size_t retained_values() const noexcept;

  /// Reverse-mode pass from `root` with cotangent `seed` (shape-checked against the root's tag). Dense
  /// (keep empty): a gradient for every node that receives one. Sparse: only the ids in `keep` survive.
  Gradients backward(int root, const TensorView& seed, std::span<const int> keep = {}) const;
  /// Drops every node (and the values it retained).
  void clear() noexcept { nodes_.clear(); }

 private:
  std::vector<Node> nodes_;
};

}  // namespace pact::runtime
