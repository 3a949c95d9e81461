#pragma once
/// Detached and scoped submission with retirement (SPEC §8; seed 001 G3 and G5). Both wrap the one graph
/// executor (executor.hpp).
///
/// Note [Submission lifecycle]
/// Detached: Prepared -> Admitted/Running -> Draining -> Completed | RetiredFailed, or CompletionUnproven.
/// Validation and planning happen before admission; a failure there (or a provider failure that proves
/// nothing was enqueued) is SubmitRejected and returns the exact ExecutionInputs. Admission consumes the
/// inputs: from then on the worker (and, when the handle is dropped, the reaper it becomes) owns them and a
/// retirement record owns the provider bindings, the event, the admitted package (its roots) and a
/// reference to the provider context. Only when completion is proven does the record release all of that
/// exactly once, and only then is Completed (the bundle) or RetiredFailed (the exact inputs, with a typed
/// cause) published. When completion cannot be proven the record moves to a provider-private permanent
/// store, nothing is released, CompletionUnproven carries only its cause and diagnostic keys, and the
/// provider context is poisoned: later submissions are rejected with a typed error. The library never
/// aborts. Dropping an ExecutionHandle only detaches observation.
///
/// Scoped read-only: immutable views in; only a synchronous host provider may run it, on the caller's
/// thread, so it returns only after retirement; asynchronous providers reject it before admission and
/// hand the views back. Identity outputs come back Borrowed, fresh results Owned (in the bundle's group),
/// metadata outputs as shape and dtype only. Nothing copies input storage.

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "pact/core/group.hpp"
#include "pact/plan/planner.hpp"

namespace pact::runtime {

/// What submission runs: an accepted plan, its source nodes in binding order, and the outputs to return
/// as metadata (shape and dtype) only.
struct Program {
  plan::AcceptedGraphPlan plan;
  std::vector<std::string> sources;
  std::set<std::string> metadata_outputs;
  /// Sources in graph order; every id in `metadata_outputs` must be a graph output.
  static std::shared_ptr<const Program> make(plan::AcceptedGraphPlan plan, std::set<std::string> metadata_outputs = {});
};

/// The owning package of a detached submission: a group and one descriptor slot per program source.
struct ExecutionInputs {
  AllocationGroup group;
  std::vector<DescriptorSlot> bindings;
};

enum class SubmitErrorKind : std::uint8_t {
  invalid_binding,   ///< wrong count, a slot that does not resolve, or a dtype/shape other than the source's
  unsupported,       ///< the provider cannot offer this mode (scoped execution on an asynchronous provider)
  poisoned,          ///< an earlier submission left completion unproven on this provider context
  provider_refused,  ///< the provider failed before its enqueue-capable call (nothing was enqueued)
};
std::string_view submit_error_name(SubmitErrorKind kind) noexcept;
struct SubmitError {
  SubmitErrorKind kind;
  std::string detail;
};
/// A refusal before admission: the exact inputs, unchanged.
struct SubmitRejected {
  SubmitError cause;
  ExecutionInputs inputs;
};

enum class ExecutionErrorKind : std::uint8_t {
  execution_failed,  ///< a kernel refused (a typed pact::Error) after admission
  enqueue_failed,    ///< the enqueue-capable call failed after work may have been enqueued
  worker_panic,      ///< an exception escaped the work and was contained at the worker boundary
};
std::string_view execution_error_name(ExecutionErrorKind kind) noexcept;
struct ExecutionError {
  ExecutionErrorKind kind;
  std::string detail;
};
enum class CompletionErrorKind : std::uint8_t {
  event_unproven,  ///< the provider cannot prove its event completed
  panic_unproven,  ///< the worker panicked and completion could not be proven afterwards
};
std::string_view completion_error_name(CompletionErrorKind kind) noexcept;
struct CompletionError {
  CompletionErrorKind kind;
  std::string detail;
};

/// A storage-free output.
struct OutputMetadata {
  DType dtype;
  Dims shape;
};
/// One output of a bundle: a descriptor slot in the bundle's group, or metadata.
using ExecutionOutput = std::variant<DescriptorSlot, OutputMetadata>;
/// A borrowed output: a view, or the metadata.
using OutputRef = std::variant<TensorView, const OutputMetadata*>;

enum class OutputExtractErrorKind : std::uint8_t { invalid_output, metadata_output, borrowed_output, extract };
std::string_view output_extract_error_name(OutputExtractErrorKind kind) noexcept;
struct OutputExtractError {
  OutputExtractErrorKind kind;
  std::string detail;
};

/// The result of a completed detached execution: the group (inputs and fresh outputs) and the outputs.
class ExecutionBundle {
 public:
  ExecutionBundle(AllocationGroup group, std::vector<ExecutionOutput> outputs)
      : group_(std::move(group)), outputs_(std::move(outputs)) {}
  std::size_t outputs() const noexcept { return outputs_.size(); }
  const ExecutionOutput& output_record(std::size_t i) const { return outputs_.at(i); }
  /// A borrowed view of output `i`, or its metadata; invalid_argument past the end.
  OutputRef output(std::size_t i) const;
  const AllocationGroup& group() const noexcept { return group_; }
  /// Consumes the bundle and moves output `i` out through the group's into_tensor: repeated aliases, the
  /// rest of the group and the output map go together. Failure returns the exact bundle.
  static Expected<Tensor, std::pair<ExecutionBundle, OutputExtractError>> into_output(ExecutionBundle&& bundle,
                                                                                      std::size_t i);

 private:
  AllocationGroup group_;
  std::vector<ExecutionOutput> outputs_;
};

struct Completed {
  ExecutionBundle bundle;
};
struct RetiredFailed {
  ExecutionError cause;
  ExecutionInputs inputs;
};
struct CompletionUnproven {
  CompletionError cause;
  std::vector<std::string> diagnostic_keys;
};
using ExecutionOutcome = std::variant<Completed, RetiredFailed, CompletionUnproven>;

/// Counters an execution provider keeps; tests prove exactly-once release and permanent retention.
struct ExecutionCounters {
  std::atomic<std::uint64_t> admitted{0};
  std::atomic<std::uint64_t> rejected{0};
  std::atomic<std::uint64_t> enqueues{0};          ///< enqueue-capable calls made
  std::atomic<std::uint64_t> records_created{0};   ///< retirement records
  std::atomic<std::uint64_t> records_released{0};  ///< released after proven completion
  std::atomic<std::uint64_t> records_retained{0};  ///< moved to the permanent store (unproven)
  std::atomic<std::uint64_t> completed{0};
  std::atomic<std::uint64_t> retired_failed{0};
  std::atomic<std::uint64_t> unproven{0};
};

/// Where the fake provider fails (one fault per submission, consumed in order).
enum class Fault : std::uint8_t {
  none,
  before_admission,     ///< the provider refuses before its enqueue-capable call
  after_enqueue,        ///< the enqueue-capable call fails after work may have been enqueued
  worker_panic,         ///< the work throws a non-pact exception (a panic) after enqueue
  unproven_completion,  ///< the work runs but the event's completion cannot be proven
  panic_unproven,       ///< the work panics and completion cannot be proven afterwards
};

struct Task;
struct ProviderContext;

/// An execution provider: runs admitted work on its worker thread. The set is closed: the CPU provider
/// (synchronous for scoped calls), the CUDA provider and fake asynchronous providers for fault injection.
class ExecutionProvider {
 public:
  ~ExecutionProvider();
  ExecutionProvider(const ExecutionProvider&) = delete;
  ExecutionProvider& operator=(const ExecutionProvider&) = delete;

  std::string_view name() const noexcept;
  /// True for a host provider whose work retires before the call returns (scoped execution allowed).
  bool synchronous() const noexcept;
  /// True once a submission left completion unproven: every later submission is rejected (poisoned).
  bool poisoned() const noexcept;
  const ExecutionCounters& counters() const noexcept;
  /// Fake providers only: the faults of the next submissions, in order.
  void inject(std::vector<Fault> faults);
  /// Blocks until every admitted submission reached its terminal outcome (observed or not).
  void drain();

  /// Made by cpu_execution_provider() and make_fake_execution_provider() only (the context is opaque).
  explicit ExecutionProvider(std::shared_ptr<ProviderContext> context);
  /// The provider-private context (opaque outside submit.cpp).
  const std::shared_ptr<ProviderContext>& context() const noexcept { return context_; }

 private:
  std::shared_ptr<ProviderContext> context_;
};

/// The process-wide CPU execution provider (one worker thread; synchronous for scoped calls).
std::shared_ptr<ExecutionProvider> cpu_execution_provider();
/// The process-wide CUDA execution provider (asynchronous; one worker thread): runs device plans (cuda
/// capsules) on packages in device memory, and proves each submission's completion with a CUDA event
/// recorded after its work. Without a device every submission is rejected before admission
/// (provider_refused, saying why); a binding outside device memory is invalid_binding.
std::shared_ptr<ExecutionProvider> cuda_execution_provider();
/// A new asynchronous fake provider with its own worker, counters and fault plan.
std::shared_ptr<ExecutionProvider> make_fake_execution_provider();

/// Observation of a detached submission. Dropping it detaches observation only.
class ExecutionHandle {
 public:
  explicit ExecutionHandle(std::shared_ptr<Task> task) : task_(std::move(task)) {}
  ExecutionHandle(ExecutionHandle&&) noexcept = default;
  ExecutionHandle& operator=(ExecutionHandle&&) noexcept = default;
  /// Blocks until the terminal outcome and returns it.
  ExecutionOutcome wait() &&;
  /// True once the outcome is available.
  bool ready() const;

 private:
  std::shared_ptr<Task> task_;
};

/// Detached owning submission (see Note [Submission lifecycle]).
Expected<ExecutionHandle, SubmitRejected> submit(ExecutionProvider& provider, std::shared_ptr<const Program> program,
                                                 ExecutionInputs inputs);

// ---- Scoped read-only execution ----------------------------------------------------------------------

/// Immutable views only; there is no writable binding shape.
struct ScopedReadInputs {
  std::vector<TensorView> bindings;
};
struct ScopedSubmitRejected {
  SubmitError cause;
  ScopedReadInputs inputs;
};
struct ScopedBorrowed {
  TensorView view;
};
struct ScopedOwned {
  DescriptorSlot slot;
};
using ScopedOutput = std::variant<ScopedBorrowed, ScopedOwned, OutputMetadata>;

class ScopedExecutionBundle {
 public:
  ScopedExecutionBundle(AllocationGroup owned, std::vector<ScopedOutput> outputs)
      : owned_(std::move(owned)), outputs_(std::move(outputs)) {}
  std::size_t outputs() const noexcept { return outputs_.size(); }
  const ScopedOutput& output_record(std::size_t i) const { return outputs_.at(i); }
  /// Either tensor form as an immutable view, or the metadata; invalid_argument past the end.
  OutputRef output(std::size_t i) const;
  const AllocationGroup& owned() const noexcept { return owned_; }
  /// Consumes the bundle; succeeds only for an Owned output. A Borrowed or metadata output returns the
  /// exact bundle with borrowed_output / metadata_output; nothing is copied.
  static Expected<Tensor, std::pair<ScopedExecutionBundle, OutputExtractError>> into_owned_output(
      ScopedExecutionBundle&& bundle, std::size_t i);

 private:
  AllocationGroup owned_;
  std::vector<ScopedOutput> outputs_;
};

struct ScopedCompleted {
  ScopedExecutionBundle bundle;
};
struct ScopedRetiredFailed {
  ExecutionError cause;
  ScopedReadInputs inputs;
};
using ScopedExecutionOutcome = std::variant<ScopedCompleted, ScopedRetiredFailed>;

/// Runs `program` on the caller's thread over borrowed views; only synchronous providers admit it.
Expected<ScopedExecutionOutcome, ScopedSubmitRejected> execute_scoped_read_only(ExecutionProvider& provider,
                                                                                const Program& program,
                                                                                ScopedReadInputs inputs);

}  // namespace pact::runtime
