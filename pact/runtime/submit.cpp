#include "pact/runtime/submit.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "pact/core/cuda_device.hpp"
#include "pact/runtime/executor.hpp"

namespace pact::runtime {

std::string_view submit_error_name(SubmitErrorKind kind) noexcept {
  switch (kind) {
    case SubmitErrorKind::invalid_binding:
      return "invalid_binding";
    case SubmitErrorKind::unsupported:
      return "unsupported";
    case SubmitErrorKind::poisoned:
      return "poisoned";
    case SubmitErrorKind::provider_refused:
      return "provider_refused";
  }
  return "?";
}
std::string_view execution_error_name(ExecutionErrorKind kind) noexcept {
  switch (kind) {
    case ExecutionErrorKind::execution_failed:
      return "execution_failed";
    case ExecutionErrorKind::enqueue_failed:
      return "enqueue_failed";
    case ExecutionErrorKind::worker_panic:
      return "worker_panic";
  }
  return "?";
}
std::string_view completion_error_name(CompletionErrorKind kind) noexcept {
  return kind == CompletionErrorKind::event_unproven ? "event_unproven" : "panic_unproven";
}
std::string_view output_extract_error_name(OutputExtractErrorKind kind) noexcept {
  switch (kind) {
    case OutputExtractErrorKind::invalid_output:
      return "invalid_output";
    case OutputExtractErrorKind::metadata_output:
      return "metadata_output";
    case OutputExtractErrorKind::borrowed_output:
      return "borrowed_output";
    case OutputExtractErrorKind::extract:
      return "extract";
  }
  return "?";
}

// ---- Program ----------------------------------------------------------------------------------------

std::shared_ptr<const Program> Program::make(plan::AcceptedGraphPlan plan, std::set<std::string> metadata_outputs) {
  std::vector<std::string> sources;
  for (const auto& n : plan.graph().nodes) {
    if (ops::op_info(n.op).role == ops::OpRole::source) sources.push_back(n.id);
  }
  for (const auto& id : metadata_outputs) {
    if (std::find(plan.graph().outputs.begin(), plan.graph().outputs.end(), id) == plan.graph().outputs.end()) {
      throw_error(ErrorCode::invalid_argument, "program",
                  fmt::format("metadata output '{}' is not a graph output", id));
    }
  }
  return std::make_shared<Program>(Program{std::move(plan), std::move(sources), std::move(metadata_outputs)});
}

// ---- Providers, workers, retirement ---------------------------------------------------------------

namespace {

// One worker thread and its queue. The state is shared with the thread, so a worker destroyed on its
// own thread (the last context reference released by a job) detaches instead of joining itself.
class Worker {
 public:
  Worker() : state_(std::make_shared<State>()) {
    thread_ = std::thread([s = state_] {
      for (;;) {
        std::function<void()> job;
        {
          std::unique_lock lock(s->m);
          s->cv.wait(lock, [&] { return s->stop || !s->jobs.empty(); });
          if (s->jobs.empty()) return;
          job = std::move(s->jobs.front());
          s->jobs.pop_front();
        }
        job();
      }
    });
  }
  ~Worker() {
    {
      std::lock_guard lock(state_->m);
      state_->stop = true;
    }
    state_->cv.notify_all();
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(state_->m);
      state_->jobs.push_back(std::move(job));
    }
    state_->cv.notify_one();
  }

 private:
  struct State {
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs;
    bool stop = false;
  };
  std::shared_ptr<State> state_;
  std::thread thread_;
};

// The provider's event for one submission: signalled by the worker when the work retired. On the CUDA
// provider it is a recorded CUDA event after the submission's last kernel, which proves its completion.
struct Event {
  bool completed = false;
  std::optional<Completion> device;
};

}  // namespace

struct ProviderContext {
  std::string name;
  bool synchronous = false;
  bool fake = false;
  bool cuda = false;  ///< runs device plans; completion proven by a CUDA event (CudaDevice::fence)
  ExecutionCounters counters;
  std::atomic<bool> poisoned{false};
  std::atomic<std::uint64_t> sequence{0};
  std::mutex m;
  std::condition_variable idle;
  std::deque<Fault> faults;
  std::uint64_t outstanding = 0;
  Worker worker;  // last: constructed after, destroyed before the state its jobs use

  Fault next_fault() {
    std::lock_guard lock(m);
    if (faults.empty()) return Fault::none;
    const Fault f = faults.front();
    faults.pop_front();
    return f;
  }
};

namespace {

// Owns, from admission until completion is proven, everything provider work may still touch: the
// provider bindings over the admitted package, the event, the package itself (its roots), the fresh
// results of the work, and a reference to the provider context.
struct RetirementRecord {
  std::shared_ptr<Event> event;
  std::vector<TensorView> bindings;
  std::shared_ptr<RetentionContainer> package;
  std::vector<Tensor> results;
  std::shared_ptr<ProviderContext> context;

  // Releases everything exactly once (completion proven). Bindings go first: they borrow the package.
  void release(ProviderContext& ctx) {
    bindings.clear();
    event.reset();
    package.reset();
    results.clear();
    context.reset();
    ctx.counters.records_released.fetch_add(1);
  }
};

// The provider-private permanent store of records whose completion was never proven. Reachable for the
// life of the process and never released: no public path recovers what they hold.
void retain_permanently(std::unique_ptr<RetirementRecord> record) {
  static std::mutex m;
  static auto* store = new std::vector<std::unique_ptr<RetirementRecord>>();  // never destroyed
  std::lock_guard lock(m);
  store->push_back(std::move(record));
}

}  // namespace

struct Task {
  std::mutex m;
  std::condition_variable cv;
  std::optional<ExecutionOutcome> outcome;

  void publish(ExecutionOutcome o) {
    {
      std::lock_guard lock(m);
      outcome.emplace(std::move(o));
    }
    cv.notify_all();
  }
};

ExecutionProvider::ExecutionProvider(std::shared_ptr<ProviderContext> context) : context_(std::move(context)) {}
ExecutionProvider::~ExecutionProvider() = default;
std::string_view ExecutionProvider::name() const noexcept { return context_->name; }
bool ExecutionProvider::synchronous() const noexcept { return context_->synchronous; }
bool ExecutionProvider::poisoned() const noexcept { return context_->poisoned.load(); }
const ExecutionCounters& ExecutionProvider::counters() const noexcept { return context_->counters; }

void ExecutionProvider::inject(std::vector<Fault> faults) {
  if (!context_->fake)
    throw_error(ErrorCode::unsupported, "execution.inject", fmt::format("{} takes no injected faults", context_->name));
  std::lock_guard lock(context_->m);
  for (auto f : faults) context_->faults.push_back(f);
}

void ExecutionProvider::drain() {
  std::unique_lock lock(context_->m);
  context_->idle.wait(lock, [&] { return context_->outstanding == 0; });
}

std::shared_ptr<ExecutionProvider> cpu_execution_provider() {
  static const std::shared_ptr<ExecutionProvider> provider = [] {
    auto ctx = std::make_shared<ProviderContext>();
    ctx->name = "cpu";
    ctx->synchronous = true;
    return std::make_shared<ExecutionProvider>(std::move(ctx));
  }();
  return provider;
}

std::shared_ptr<ExecutionProvider> cuda_execution_provider() {
  static const std::shared_ptr<ExecutionProvider> provider = [] {
    auto ctx = std::make_shared<ProviderContext>();
    ctx->name = "cuda";
    ctx->synchronous = false;
    ctx->cuda = true;
    return std::make_shared<ExecutionProvider>(std::move(ctx));
  }();
  return provider;
}

std::shared_ptr<ExecutionProvider> make_fake_execution_provider() {
  auto ctx = std::make_shared<ProviderContext>();
  ctx->name = "fake-async";
  ctx->synchronous = false;
  ctx->fake = true;
  return std::make_shared<ExecutionProvider>(std::move(ctx));
}

ExecutionOutcome ExecutionHandle::wait() && {
  std::unique_lock lock(task_->m);
  task_->cv.wait(lock, [&] { return task_->outcome.has_value(); });
  ExecutionOutcome out = std::move(*task_->outcome);
  task_->outcome.reset();
  return out;
}

bool ExecutionHandle::ready() const {
  std::lock_guard lock(task_->m);
  return task_->outcome.has_value();
}

// ---- Running a program -------------------------------------------------------------------------------

namespace {

// Why the bound values do not fit the program's sources, or nullopt.
std::optional<std::string> binding_problem(const Program& p, const std::vector<TensorView>& views) {
  if (views.size() != p.sources.size()) {
    return fmt::format("{} bindings for {} sources", views.size(), p.sources.size());
  }
  for (std::size_t i = 0; i < views.size(); ++i) {
    if (auto why =
            ir::Graph::binding_mismatch(*p.plan.graph().find(p.sources[i]), views[i].dtype(), views[i].shape())) {
      return fmt::format("binding {}: {}", i, *why);
    }
  }
  return std::nullopt;
}

// The outputs of one run: identity outputs name a source; fresh results are owners (one per distinct
// value, repeated outputs share it); metadata outputs keep only shape and dtype.
struct Identity {
  std::size_t source;
};
struct Fresh {
  std::size_t result;
};
struct Produced {
  std::vector<Tensor> results;
  std::vector<std::variant<Identity, Fresh, OutputMetadata>> outputs;
};

Produced run_program(const Program& p, const std::vector<ValueRef>& sources) {
  ExecutionResult r;
  {
    std::map<std::string, EagerTensor> bindings;
    for (std::size_t i = 0; i < sources.size(); ++i) bindings.emplace(p.sources[i], EagerTensor{sources[i], -1});
    r = execute(p.plan, bindings);
  }
  // Collect the distinct records, then drop the executor's references so each fresh one is unique.
  std::vector<const AdValueRecord*> keys;
  std::vector<OutputMetadata> metadata;
  std::map<const AdValueRecord*, ValueRef> distinct;
  for (const auto& id : p.plan.graph().outputs) {
    const ValueRef& v = r.outputs.at(id).value;
    keys.push_back(v.get());
    metadata.push_back({v->view().dtype(), v->view().shape()});
    distinct.emplace(v.get(), v);
  }
  r.outputs.clear();
  Produced out;
  std::map<const AdValueRecord*, std::size_t> result_of;
  for (std::size_t o = 0; o < keys.size(); ++o) {
    if (p.metadata_outputs.count(p.plan.graph().outputs[o])) {
      out.outputs.emplace_back(metadata[o]);
      continue;
    }
    auto src = std::find_if(sources.begin(), sources.end(), [&](const ValueRef& s) { return s.get() == keys[o]; });
    if (src != sources.end()) {
      out.outputs.emplace_back(Identity{static_cast<std::size_t>(src - sources.begin())});
      continue;
    }
    auto seen = result_of.find(keys[o]);
    if (seen == result_of.end()) {
      auto owner = into_value(std::move(distinct.at(keys[o])));
      if (!owner) throw_error(ErrorCode::aliased_allocation, "execution", "a fresh result is still retained elsewhere");
      out.results.push_back(std::move(owner).value());
      seen = result_of.emplace(keys[o], out.results.size() - 1).first;
    }
    out.outputs.emplace_back(Fresh{seen->second});
  }
  return out;
}

std::string fault_name(Fault f) {
  switch (f) {
    case Fault::none:
      return "none";
    case Fault::before_admission:
      return "before_admission";
    case Fault::after_enqueue:
      return "after_enqueue";
    case Fault::worker_panic:
      return "worker_panic";
    case Fault::unproven_completion:
      return "unproven_completion";
    case Fault::panic_unproven:
      return "panic_unproven";
  }
  return "?";
}

// The worker's job for one admitted submission: run, drain, prove completion, retire, publish.
void run_admitted(Task& task, const Program& program, std::vector<DescriptorSlot> slots,
                  std::unique_ptr<RetirementRecord> record, Fault fault, std::uint64_t sequence) {
  ProviderContext& ctx = *record->context;
  std::optional<ExecutionError> failure;
  bool panicked = false;
  std::vector<std::variant<Identity, Fresh, OutputMetadata>> map;
  {
    std::vector<ValueRef> sources;
    sources.reserve(slots.size());
    for (const auto& s : slots) sources.push_back(std::make_shared<const AdValueRecord>(record->package, s));
    try {
      if (fault == Fault::after_enqueue) {
        failure = ExecutionError{ExecutionErrorKind::enqueue_failed,
                                 "the enqueue-capable call failed after work may have been enqueued"};
      } else {
        if (fault == Fault::worker_panic || fault == Fault::panic_unproven)
          throw std::runtime_error("injected worker panic");
        Produced produced = run_program(program, sources);
        record->results = std::move(produced.results);
        map = std::move(produced.outputs);
      }
    } catch (const Error& e) {
      failure = ExecutionError{ExecutionErrorKind::execution_failed, e.what()};
    } catch (const std::exception& e) {
      failure = ExecutionError{ExecutionErrorKind::worker_panic, e.what()};
      panicked = true;
    } catch (...) {
      failure = ExecutionError{ExecutionErrorKind::worker_panic, "a non-standard exception"};
      panicked = true;
    }
  }
  // Draining: the provider proves, or cannot prove, that its event completed. The CUDA provider records an
  // event after the work it enqueued (on this worker's thread, where the device's context is current) and
  // waits for it; a driver failure there is completion unproven, and the device is poisoned.
  std::string unproven_why = "the provider cannot prove its event completed";
  if (ctx.cuda) {
    try {
      CudaDevice& device = *CudaDevice::get();  // admission required one
      record->event->device.emplace(device.fence());
      record->event->device->wait();
      record->event->completed = true;
    } catch (const Error& e) {
      unproven_why = fmt::format("the CUDA event after the work cannot be proven complete: {}", e.what());
    }
  } else {
    record->event->completed = !(fault == Fault::unproven_completion || fault == Fault::panic_unproven);
  }
  if (!record->event->completed) {
    ctx.poisoned.store(true);
    ctx.counters.unproven.fetch_add(1);
    ctx.counters.records_retained.fetch_add(1);
    const bool after_panic = panicked || fault == Fault::panic_unproven;
    CompletionUnproven out{
        {after_panic ? CompletionErrorKind::panic_unproven : CompletionErrorKind::event_unproven,
         after_panic ? "the worker panicked and the provider cannot prove its event completed" : unproven_why},
        {fmt::format("provider={}", ctx.name), fmt::format("submission={}", sequence),
         fmt::format("fault={}", fault_name(fault))}};
    retain_permanently(std::move(record));  // bindings, event, package, results and context: never released
    task.publish(std::move(out));
    return;
  }
  // Completion proven: release the record exactly once, then hand back what the caller owns.
  std::vector<Tensor> results = std::move(record->results);
  std::shared_ptr<RetentionContainer> package = record->package;
  record->release(ctx);
  record.reset();
  AllocationGroup group = RetentionContainer::into_group(std::move(package));
  if (failure) {
    results.clear();
    ctx.counters.retired_failed.fetch_add(1);
    task.publish(RetiredFailed{*failure, ExecutionInputs{std::move(group), std::move(slots)}});
    return;
  }
  std::vector<ExecutionOutput> outputs;
  std::vector<std::optional<DescriptorSlot>> inserted(results.size());
  for (const auto& o : map) {
    if (const auto* id = std::get_if<Identity>(&o)) {
      outputs.emplace_back(slots[id->source]);
    } else if (const auto* f = std::get_if<Fresh>(&o)) {
      if (!inserted[f->result]) {
        // A fresh owner never overlaps the package and the group is unborrowed here, so this holds.
        auto slot = AllocationGroup::insert(group, std::move(results[f->result]));
        inserted[f->result] = slot ? slot.value() : DescriptorSlot{};
      }
      outputs.emplace_back(*inserted[f->result]);
    } else {
      outputs.emplace_back(std::get<OutputMetadata>(o));
    }
  }
  ctx.counters.completed.fetch_add(1);
  task.publish(Completed{ExecutionBundle(std::move(group), std::move(outputs))});
}

}  // namespace

Expected<ExecutionHandle, SubmitRejected> submit(ExecutionProvider& provider, std::shared_ptr<const Program> program,
                                                 ExecutionInputs inputs) {
  const std::shared_ptr<ProviderContext>& ctx = provider.context();
  auto reject = [&](SubmitErrorKind kind, std::string detail) {
    ctx->counters.rejected.fetch_add(1);
    return Unexpected(SubmitRejected{{kind, std::move(detail)}, std::move(inputs)});
  };
  if (ctx->poisoned.load()) {
    return reject(SubmitErrorKind::poisoned, fmt::format("provider {} left an earlier completion unproven", ctx->name));
  }
  // Prepared: validation only.
  std::vector<TensorView> views;
  try {
    for (const auto& s : inputs.bindings) views.push_back(inputs.group.view(s));
  } catch (const Error& e) {
    views.clear();
    return reject(SubmitErrorKind::invalid_binding, e.what());
  }
  if (auto why = binding_problem(*program, views)) {
    views.clear();
    return reject(SubmitErrorKind::invalid_binding, *why);
  }
  if (ctx->cuda) {  // the device provider: a device to run on, and the package in its memory
    if (CudaDevice::get() == nullptr) {
      views.clear();
      return reject(SubmitErrorKind::provider_refused,
                    fmt::format("no CUDA device: {}; nothing was enqueued", CudaDevice::unavailable_reason()));
    }
    for (std::size_t i = 0; i < views.size(); ++i) {
      if (views[i].device() != DeviceKind::cuda) {
        const std::string why =
            fmt::format("binding {} ('{}') is in {} storage; the cuda provider runs on device tensors", i,
                        program->sources[i], views[i].provider_name());
        views.clear();
        return reject(SubmitErrorKind::invalid_binding, why);
      }
    }
  }
  views.clear();
  const Fault fault = ctx->next_fault();
  if (fault == Fault::before_admission) {
    return reject(SubmitErrorKind::provider_refused,
                  "the provider failed before its enqueue-capable call; nothing was enqueued");
  }
  // Admission: the package moves into the retirement record; the worker owns it from here.
  ctx->counters.admitted.fetch_add(1);
  const std::uint64_t sequence = ctx->sequence.fetch_add(1) + 1;
  auto record = std::make_unique<RetirementRecord>();
  record->event = std::make_shared<Event>();
  record->package = std::make_shared<RetentionContainer>(std::move(inputs.group));
  for (const auto& s : inputs.bindings) record->bindings.push_back(record->package->group().view(s));
  record->context = ctx;
  ctx->counters.records_created.fetch_add(1);
  auto task = std::make_shared<Task>();
  {
    std::lock_guard lock(ctx->m);
    ++ctx->outstanding;
  }
  ctx->counters.enqueues.fetch_add(1);
  // The job keeps the context alive while it runs (the record's own reference may be released first).
  ctx->worker.post([task, program, slots = std::move(inputs.bindings), rec = record.release(), fault, sequence,
                    keep = ctx]() mutable {
    run_admitted(*task, *program, std::move(slots), std::unique_ptr<RetirementRecord>(rec), fault, sequence);
    // The reaper's part: an unobserved outcome (the handle is gone) is released here, before drain() can
    // see this submission as finished.
    task.reset();
    program.reset();
    std::lock_guard lock(keep->m);
    --keep->outstanding;
    keep->idle.notify_all();
  });
  return ExecutionHandle(std::move(task));
}

// ---- Bundles ----------------------------------------------------------------------------------------

OutputRef ExecutionBundle::output(std::size_t i) const {
  if (i >= outputs_.size())
    throw_error(ErrorCode::invalid_argument, "bundle.output", fmt::format("output {} of {}", i, outputs_.size()));
  if (const auto* slot = std::get_if<DescriptorSlot>(&outputs_[i])) return group_.view(*slot);
  return &std::get<OutputMetadata>(outputs_[i]);
}

Expected<Tensor, std::pair<ExecutionBundle, OutputExtractError>> ExecutionBundle::into_output(ExecutionBundle&& bundle,
                                                                                              std::size_t i) {
  if (i >= bundle.outputs_.size()) {
    const std::size_t n = bundle.outputs_.size();
    return Unexpected(std::pair{std::move(bundle), OutputExtractError{OutputExtractErrorKind::invalid_output,
                                                                      fmt::format("output {} of {}", i, n)}});
  }
  const auto* slot = std::get_if<DescriptorSlot>(&bundle.outputs_[i]);
  if (slot == nullptr) {
    return Unexpected(std::pair{std::move(bundle), OutputExtractError{OutputExtractErrorKind::metadata_output,
                                                                      "a metadata output has no storage"}});
  }
  const DescriptorSlot s = *slot;
  auto out = AllocationGroup::into_tensor(std::move(bundle.group_), s);
  if (out) return std::move(out).value();
  auto returned = std::move(out).error();
  bundle.group_ = std::move(returned.input);
  return Unexpected(
      std::pair{std::move(bundle), OutputExtractError{OutputExtractErrorKind::extract, returned.error.what()}});
}

OutputRef ScopedExecutionBundle::output(std::size_t i) const {
  if (i >= outputs_.size())
    throw_error(ErrorCode::invalid_argument, "bundle.output", fmt::format("output {} of {}", i, outputs_.size()));
  if (const auto* b = std::get_if<ScopedBorrowed>(&outputs_[i])) return b->view;
  if (const auto* o = std::get_if<ScopedOwned>(&outputs_[i])) return owned_.view(o->slot);
  return &std::get<OutputMetadata>(outputs_[i]);
}

Expected<Tensor, std::pair<ScopedExecutionBundle, OutputExtractError>> ScopedExecutionBundle::into_owned_output(
    ScopedExecutionBundle&& bundle, std::size_t i) {
  auto refuse = [&](OutputExtractErrorKind kind, std::string detail) {
    return Unexpected(std::pair{std::move(bundle), OutputExtractError{kind, std::move(detail)}});
  };
  if (i >= bundle.outputs_.size())
    return refuse(OutputExtractErrorKind::invalid_output, fmt::format("output {} of {}", i, bundle.outputs_.size()));
  if (std::holds_alternative<ScopedBorrowed>(bundle.outputs_[i])) {
    return refuse(OutputExtractErrorKind::borrowed_output, "a borrowed output belongs to the caller's inputs");
  }
  if (std::holds_alternative<OutputMetadata>(bundle.outputs_[i])) {
    return refuse(OutputExtractErrorKind::metadata_output, "a metadata output has no storage");
  }
  const DescriptorSlot s = std::get<ScopedOwned>(bundle.outputs_[i]).slot;
  auto out = AllocationGroup::into_tensor(std::move(bundle.owned_), s);
  if (out) return std::move(out).value();
  auto returned = std::move(out).error();
  bundle.owned_ = std::move(returned.input);
  return refuse(OutputExtractErrorKind::extract, returned.error.what());
}

// ---- Scoped read-only execution ----------------------------------------------------------------------

Expected<ScopedExecutionOutcome, ScopedSubmitRejected> execute_scoped_read_only(ExecutionProvider& provider,
                                                                                const Program& program,
                                                                                ScopedReadInputs inputs) {
  ProviderContext& ctx = *provider.context();
  auto reject = [&](SubmitErrorKind kind, std::string detail) {
    ctx.counters.rejected.fetch_add(1);
    return Unexpected(ScopedSubmitRejected{{kind, std::move(detail)}, std::move(inputs)});
  };
  if (!ctx.synchronous) {
    return reject(
        SubmitErrorKind::unsupported,
        fmt::format("provider {} is asynchronous: scoped read-only execution needs work that retires before return",
                    ctx.name));
  }
  if (ctx.poisoned.load()) return reject(SubmitErrorKind::poisoned, fmt::format("provider {} is poisoned", ctx.name));
  if (auto why = binding_problem(program, inputs.bindings)) return reject(SubmitErrorKind::invalid_binding, *why);
  ctx.counters.admitted.fetch_add(1);
  std::vector<ValueRef> sources;
  for (const auto& v : inputs.bindings) sources.push_back(AdValueRecord::borrowed(v));
  try {
    Produced produced = run_program(program, sources);
    sources.clear();
    auto group = AllocationGroup::make({}, {});
    if (!group) throw std::move(group).error().error;
    AllocationGroup owned = std::move(group).value();
    std::vector<std::optional<DescriptorSlot>> inserted(produced.results.size());
    std::vector<ScopedOutput> outputs;
    for (const auto& o : produced.outputs) {
      if (const auto* id = std::get_if<Identity>(&o)) {
        outputs.emplace_back(ScopedBorrowed{inputs.bindings[id->source]});
      } else if (const auto* f = std::get_if<Fresh>(&o)) {
        if (!inserted[f->result]) {
          auto slot = AllocationGroup::insert(owned, std::move(produced.results[f->result]));
          if (!slot) throw std::move(slot).error().error;
          inserted[f->result] = slot.value();
        }
        outputs.emplace_back(ScopedOwned{*inserted[f->result]});
      } else {
        outputs.emplace_back(std::get<OutputMetadata>(o));
      }
    }
    ctx.counters.completed.fetch_add(1);
    return ScopedExecutionOutcome{ScopedCompleted{ScopedExecutionBundle(std::move(owned), std::move(outputs))}};
  } catch (const Error& e) {
    sources.clear();
    ctx.counters.retired_failed.fetch_add(1);
    return ScopedExecutionOutcome{
        ScopedRetiredFailed{{ExecutionErrorKind::execution_failed, e.what()}, std::move(inputs)}};
  }
}

}  // namespace pact::runtime
