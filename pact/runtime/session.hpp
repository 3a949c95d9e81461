#pragma once
/// The eager session (SPEC §8): each op call selects an admitted capsule under the session's profile,
/// caches that selection per op signature (op, dtypes, device, layout class, VJP need; never tensors or
/// cotangents), binds it to the handler with the same op/provider/device and runs it through the checked
/// binding. The dispatcher appends no autograd node: apply() records the op's own forward value and VJP
/// on the tape when gradients are enabled.

#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "pact/contract/check.hpp"
#include "pact/core/source_location.hpp"
#include "pact/ir/graph.hpp"
#include "pact/runtime/tape.hpp"

namespace pact::runtime {

/// What a named source is (SPEC §9's parameter geometry and persistence partition).
enum class SourceKind { input, parameter, buffer };

/// Observes the structure of what a session runs: named sources, each applied op, and the module scope
/// it ran in. pact/capture records structure-only and real captures through it.
class StructureObserver {
 public:
  virtual ~StructureObserver() = default;
  /// `trainable`: a parameter that wants a gradient (the tape would track it).
  virtual void on_source(const EagerTensor& value, const std::string& name, SourceKind kind, bool persistent,
                         bool trainable, const std::string& module) = 0;
  virtual void on_op(ops::OpTag op, std::span<const EagerTensor> inputs, const ops::Attributes& attrs,
                     const EagerTensor& output, std::string_view name, const std::string& module) = 0;
};

class Session {
 public:
  explicit Session(contract::BackendProfile profile, std::uint64_t seed = 0,
                   std::shared_ptr<const contract::EvidenceResolver> resolver = nullptr);

  /// An untracked value (data, targets).
  EagerTensor constant(Tensor value);
  /// A tracked leaf (a parameter); gradients reach it when requires_grad.
  EagerTensor leaf(Tensor value, bool requires_grad = true);
  /// A named model input (untracked).
  EagerTensor input(const std::string& name, Tensor value);
  /// A named parameter (a tracked leaf). Registering the same value under a second name ties it (an
  /// observer counts it once).
  EagerTensor parameter(const std::string& name, Tensor value, bool requires_grad = true);
  /// Registers an existing value under another parameter name (weight tying).
  EagerTensor tie(const std::string& name, const EagerTensor& value);
  /// A named buffer (persistent state that is not optimised, e.g. running statistics).
  EagerTensor buffer(const std::string& name, Tensor value, bool persistent = true);

  /// Applies an op. Throws pact::Error when no capsule is selected or admission fails (the message lists
  /// every failing obligation). Under structure-only mode no kernel runs: the op table infers the output
  /// type and the output is a meta tensor. `name` labels the node for an observer (IR node ids).
  EagerTensor apply(ops::OpTag op, std::span<const EagerTensor> inputs, const ops::Attributes& attrs = {},
                    std::string_view name = {}, SourceLocation loc = SourceLocation::current());
  /// Runs a kernel that admission bound (Note [One interpreter]): the next kernel seed of this session,
  /// recorded on its tape when gradients are enabled and needed, reported to the observer. apply() is
  /// admission plus this; runtime::execute calls it for every node of a planned graph.
  EagerTensor run_admitted(const contract::BoundKernel& kernel, ops::OpTag op, std::span<const EagerTensor> inputs,
                           const ops::Attributes& attrs = {}, std::string_view name = {});
  /// The context of the next kernel call: training mode and the next kernel seed (a checkpoint region's
  /// recompute replays the same seeds).
  kernels::KernelContext next_context() noexcept;
  /// Kernel calls made so far: the counter each kernel's seed derives from (dropout masks). A resumed
  /// training run restores it, so its masks continue where the stopped run's would have.
  std::uint64_t kernel_calls() const noexcept { return calls_; }
  void resume_kernel_calls(std::uint64_t calls) noexcept { calls_ = calls; }
  /// A checkpoint region's body: applies its ops through the given session to the boundary inputs.
  using RegionBody = std::function<EagerTensor(Session&, std::span<const EagerTensor>)>;
  /// Runs `body` as a checkpoint region (seed 001 G7). Forward runs with recording off, so the region's
  /// interior values are released as soon as the body drops them and no record of them is made; the tape
  /// gets one node retaining only the boundary (the inputs and the output). Its VJP recomputes the region
  /// on a private tape with the same kernel seeds, recording those allocations CheckpointRecomputeOutput,
  /// and pulls the cotangent back to the inputs. Without a differentiable input it is a plain call. The
  /// tape keeps a copy of `body` and calls it again in backward: whatever it captures must outlive that.
  EagerTensor checkpoint(const RegionBody& body, std::span<const EagerTensor> inputs);

  /// Backward from a scalar (or any) tracked value with a ones cotangent; dense unless `keep` is given.
  /// Gradients that meet at a node are summed by the admitted accumulate_grad kernel: one of
  /// `accumulate` that computes the gradient's dtype (a training plan's: Note [Training kernels]), else
  /// the session's own admission per signature.
  /// `on_final` is told of each kept gradient as it becomes final (Tape::OnFinal).
  Gradients backward(const EagerTensor& root, std::span<const int> keep = {},
                     std::span<const contract::BoundKernel* const> accumulate = {}, const Tape::OnFinal& on_final = {});
  /// The tape's accumulator (see backward).
  Tape::Accumulator accumulator(std::span<const contract::BoundKernel* const> kernels = {});

  /// Structure-only mode (SPEC §9): meta tensors are admitted, no kernel runs, every value escape refuses.
  /// Outside it, a meta tensor reaching apply() is refused at entry.
  void set_structure_only(bool on) noexcept { structure_only_ = on; }
  bool structure_only() const noexcept { return structure_only_; }
  /// The observer notified of sources and ops (not owned; nullptr for none).
  void set_observer(StructureObserver* observer) noexcept { observer_ = observer; }

  /// Module nesting: ops applied while a scope lives are recorded under "outer.inner".
  class ModuleScope {
   public:
    ModuleScope(ModuleScope&&) = delete;
    ~ModuleScope();

   private:
    friend class Session;
    ModuleScope(Session& s, std::string_view name);
    Session& session_;
    std::size_t restore_;
  };
  [[nodiscard]] ModuleScope module(std::string_view name) { return ModuleScope(*this, name); }
  const std::string& module_path() const noexcept { return module_; }

  /// The value-escape surface of model code. Each reads a value; under structure-only mode each refuses
  /// (structure_only_values_unsupported) naming the caller's source line, whatever the tensor's device.
  /// The one element of a single-element tensor, as double.
  double item(const EagerTensor& t, SourceLocation loc = SourceLocation::current());
  /// One element, by index.
  double read(const EagerTensor& t, const Dims& index, SourceLocation loc = SourceLocation::current());
  /// A value-dependent branch: true when the single element is non-zero.
  bool branch(const EagerTensor& predicate, SourceLocation loc = SourceLocation::current());

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
  const contract::BoundKernel& admit(const Signature& signature, ops::OpTag op, std::span<const ops::TensorType> inputs,
                                     bool vjp);

  contract::BackendProfile profile_;
  std::shared_ptr<const contract::EvidenceResolver> resolver_;
  std::map<Signature, contract::BoundKernel> cache_;
  std::uint64_t hits_ = 0;
  std::uint64_t seed_;
  std::uint64_t calls_ = 0;
  void value_escape(const char* what, const EagerTensor& t, const SourceLocation& loc) const;
  EagerTensor named(const std::string& name, EagerTensor value, SourceKind kind, bool persistent,
                    bool trainable = false);

  bool grad_enabled_ = true;
  bool training_ = false;
  bool structure_only_ = false;
  StructureObserver* observer_ = nullptr;
  std::string module_;
  /// backward's ones cotangent, per dtype and shape, for roots off the host: made once (one transfer, a wait)
  /// and duplicated on the device after, so a training step does not wait for its seed.
  std::vector<std::pair<ops::TensorType, Tensor>> device_seeds_;
  Tape tape_;
};

}  // namespace pact::runtime
