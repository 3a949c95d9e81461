#pragma once
/// The eager session (SPEC §8): each op call selects an admitted capsule under the session's profile,
/// caches that selection per op signature (op, dtypes, device, layout class, VJP need; never tensors or
/// cotangents), binds it to the handler with the same op/provider/device and runs it through the checked
/// binding. The dispatcher appends no autograd node: apply() records the op's own forward value and VJP
/// on the tape when gradients are enabled.

#include <map>
#include <tuple>

#include "pact/contract/check.hpp"
#include "pact/ir/graph.hpp"
#include "pact/runtime/tape.hpp"

namespace pact::runtime {

class Session {
 public:
  explicit Session(contract::BackendProfile profile, std::uint64_t seed = 0,
                   std::shared_ptr<const contract::EvidenceResolver> resolver = nullptr);

  /// An untracked value (data, targets).
  EagerTensor constant(Tensor value);
  /// A tracked leaf (a parameter); gradients reach it when requires_grad.
  EagerTensor leaf(Tensor value, bool requires_grad = true);
  /// Applies an op. Throws pact::Error when no capsule is selected or admission fails (the message lists
  /// every failing obligation).
  EagerTensor apply(ops::OpTag op, std::span<const EagerTensor> inputs, const ops::Attributes& attrs = {});
  /// Runs an IR graph node by node through apply(); `bindings` maps source node ids to values.
  std::map<std::string, EagerTensor> run_graph(const ir::Graph& graph, const std::map<std::string, EagerTensor>& bindings);

  /// Backward from a scalar (or any) tracked value with a ones cotangent; dense unless `keep` is given.
  Gradients backward(const EagerTensor& root, std::span<const int> keep = {});

  /// Gradient recording (no-grad mode when false).
  void set_grad_enabled(bool enabled) noexcept { grad_enabled_ = enabled; }
  bool grad_enabled() const noexcept { return grad_enabled_; }
  /// Training mode: dropout active, batch norm on batch statistics. Evaluation mode otherwise.
  void set_training(bool training) noexcept { training_ = training; }
  bool training() const noexcept { return training_; }

  Tape& tape() noexcept { return tape_; }
  const Tape& tape() const noexcept { return tape_; }
  const contract::BackendProfile& profile() const noexcept { return profile_; }
  /// Selection cache statistics (tests: one selection per signature).
  std::size_t cache_entries() const noexcept { return cache_.size(); }
  std::uint64_t cache_hits() const noexcept { return hits_; }
  /// The capsule the cache holds for a signature's op (the first match), or nullptr.
  const contract::Capsule* selected(ops::OpTag op) const noexcept;

 private:
  // op, input dtypes, device, layout class (all inputs contiguous), VJP need.
  using Signature = std::tuple<int, std::vector<int>, int, bool, bool>;
  const contract::BoundKernel& admit(const Signature& signature, ops::OpTag op, bool vjp);

  contract::BackendProfile profile_;
  std::shared_ptr<const contract::EvidenceResolver> resolver_;
  std::map<Signature, contract::BoundKernel> cache_;
  std::uint64_t hits_ = 0;
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
  bool grad_enabled_ = true;
  bool training_ = false;
  Tape tape_;
};

}  // namespace pact::runtime
