// Detached and scoped submission with retirement (issue 10, items 1-4; seed 001 G3 and G5), and the AD
// retention surface around it (item 5): exact input return before admission, the three terminal outcomes
// after it, exactly-once release of retirement records, permanent retention when completion is unproven,
// handle detachment, bundle extraction, scoped borrowed/owned/metadata outputs.

#include <gtest/gtest.h>

#include <cmath>

#include "../support/expect_error.hpp"
#include "pact/core/accounting.hpp"
#include "pact/core/cuda_device.hpp"
#include "pact/runtime/retention.hpp"
#include "pact/runtime/submit.hpp"

namespace pact::runtime {
namespace {

using ::pact::test::code_of;

// y = relu(x W^T); outputs: y, x (identity), y again (repeated), sum(y) (metadata only).
std::shared_ptr<const Program> mlp_program(bool with_metadata = true) {
  ir::GraphBuilder b;
  b.input("x", Dims{2, 3});
  b.parameter("w", Dims{4, 3});
  b.op("h", ops::OpTag::linear, {"x", "w"});
  b.op("y", ops::OpTag::relu, {"h"});
  b.op("s", ops::OpTag::sum, {"y"});
  b.output("y");
  b.output("x");
  b.output("y");
  b.output("s");
  auto plan = plan::plan_graph(b.build(), contract::builtin_profile("cpu-checked"), contract::DefaultEvidenceResolver{},
                               contract::VjpMode::forward_only);
  EXPECT_TRUE(plan.has_value());
  return Program::make(std::move(plan).value(), with_metadata ? std::set<std::string>{"s"} : std::set<std::string>{});
}

const std::vector<float> kX{0.5f, -1.0f, 2.0f, 1.5f, 0.25f, -0.75f};
const std::vector<float> kW{1, 0, 0, 0, 1, 0, 0, 0, 1, -1, -1, -1};

float expected_y(std::int64_t i, std::int64_t j) {
  float acc = 0;
  for (std::int64_t k = 0; k < 3; ++k)
    acc += kX[static_cast<std::size_t>(i * 3 + k)] * kW[static_cast<std::size_t>(j * 3 + k)];
  return std::max(acc, 0.0f);
}

// A package of owners in one group, bound in order.
ExecutionInputs package(std::vector<Tensor> tensors) {
  std::vector<Storage> owners;
  std::vector<DescriptorSpec> specs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const CheckedLayout l = tensors[i].layout();
    specs.push_back({AllocationSlot{static_cast<std::uint32_t>(i)},
                     LayoutRequest{l.dtype(), l.shape(), l.strides(), l.byte_offset()}});
    owners.push_back(std::move(tensors[i]).into_storage());
  }
  auto g = AllocationGroup::make(std::move(owners), specs);
  EXPECT_TRUE(g.has_value());
  ExecutionInputs in{std::move(g).value(), {}};
  for (std::uint32_t i = 0; i < specs.size(); ++i) in.bindings.push_back(in.group.slot(i));
  return in;
}

ExecutionInputs mlp_inputs() {
  std::vector<Tensor> t;
  t.push_back(Tensor::from_values<float>(Dims{2, 3}, kX));
  t.push_back(Tensor::from_values<float>(Dims{4, 3}, kW));
  return package(std::move(t));
}

// Inputs on a fake storage provider, whose counters show when their allocations are released.
ExecutionInputs counted_inputs(const std::shared_ptr<Provider>& storage) {
  std::vector<Tensor> t;
  t.push_back(Tensor::zeros(Dims{2, 3}, DType::f32, storage));
  t.push_back(Tensor::zeros(Dims{4, 3}, DType::f32, storage));
  return package(std::move(t));
}

TEST(Submission, CompletedBundleHoldsTheResultsAndTheRecordIsReleasedOnce) {
  auto provider = cpu_execution_provider();
  const auto before_created = provider->counters().records_created.load();
  const auto before_released = provider->counters().records_released.load();
  ExecutionInputs in = mlp_inputs();
  const DescriptorSlot x_slot = in.bindings[0];
  auto handle = submit(*provider, mlp_program(), std::move(in));
  ASSERT_TRUE(handle.has_value());
  ExecutionOutcome outcome = std::move(handle).value().wait();
  ASSERT_TRUE(std::holds_alternative<Completed>(outcome));
  ExecutionBundle bundle = std::move(std::get<Completed>(outcome).bundle);
  EXPECT_EQ(provider->counters().records_created.load() - before_created, 1u);
  EXPECT_EQ(provider->counters().records_released.load() - before_released, 1u);

  ASSERT_EQ(bundle.outputs(), 4u);
  {
    const TensorView y = std::get<TensorView>(bundle.output(0));
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 4; ++j)
        EXPECT_FLOAT_EQ(static_cast<float>(y.get(Dims{i, j}).real), expected_y(i, j));
    // While a borrowed output view lives, extraction is refused and the bundle comes back.
    auto held = ExecutionBundle::into_output(std::move(bundle), 0);
    ASSERT_FALSE(held.has_value());
    EXPECT_EQ(held.error().second.kind, OutputExtractErrorKind::extract);
    bundle = std::move(held.error().first);
  }
  // The identity output is the input's own slot; the repeated output shares the first one's slot.
  EXPECT_EQ(std::get<DescriptorSlot>(bundle.output_record(1)), x_slot);
  EXPECT_EQ(std::get<DescriptorSlot>(bundle.output_record(2)), std::get<DescriptorSlot>(bundle.output_record(0)));
  const OutputMetadata* meta = std::get<const OutputMetadata*>(bundle.output(3));
  EXPECT_EQ(meta->dtype, DType::f32);
  EXPECT_EQ(meta->shape, Dims{});
  EXPECT_EQ(code_of([&] { (void)bundle.output(4); }), ErrorCode::invalid_argument);

  // Extraction failures hand back the exact bundle.
  auto meta_out = ExecutionBundle::into_output(std::move(bundle), 3);
  ASSERT_FALSE(meta_out.has_value());
  EXPECT_EQ(meta_out.error().second.kind, OutputExtractErrorKind::metadata_output);
  bundle = std::move(meta_out.error().first);
  auto past = ExecutionBundle::into_output(std::move(bundle), 7);
  ASSERT_FALSE(past.has_value());
  EXPECT_EQ(past.error().second.kind, OutputExtractErrorKind::invalid_output);
  bundle = std::move(past.error().first);
  EXPECT_EQ(bundle.outputs(), 4u);
  // Success consumes the bundle: the repeated alias, the rest of the group and the map go together.
  auto y_owner = ExecutionBundle::into_output(std::move(bundle), 2);
  ASSERT_TRUE(y_owner.has_value());
  EXPECT_FLOAT_EQ(static_cast<float>(y_owner.value().as_view().get(Dims{1, 0}).real), expected_y(1, 0));
}

TEST(Submission, RejectionBeforeAdmissionReturnsTheExactInputs) {
  auto provider = make_fake_execution_provider();
  auto program = mlp_program();
  // Too few bindings.
  ExecutionInputs in = mlp_inputs();
  const DescriptorSlot x = in.bindings[0];
  in.bindings.pop_back();
  auto r = submit(*provider, program, std::move(in));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().cause.kind, SubmitErrorKind::invalid_binding);
  EXPECT_EQ(r.error().inputs.bindings, std::vector<DescriptorSlot>{x});
  EXPECT_EQ(r.error().inputs.group.slot(0), x);  // the same group, unchanged
  EXPECT_EQ(r.error().inputs.group.live_allocations(), 2u);

  // A slot of another group.
  ExecutionInputs other = mlp_inputs();
  ExecutionInputs foreign = mlp_inputs();
  foreign.bindings[1] = other.bindings[1];
  auto f = submit(*provider, program, std::move(foreign));
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.error().cause.kind, SubmitErrorKind::invalid_binding);

  // A dtype other than the source's.
  std::vector<Tensor> t;
  t.push_back(Tensor::zeros(Dims{2, 3}, DType::f64));
  t.push_back(Tensor::zeros(Dims{4, 3}, DType::f32));
  auto d = submit(*provider, program, package(std::move(t)));
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().cause.detail.find("f64"), std::string::npos) << d.error().cause.detail;

  // The provider refuses before its enqueue-capable call: nothing was admitted or enqueued.
  provider->inject({Fault::before_admission});
  ExecutionInputs ok = mlp_inputs();
  const auto slots = ok.bindings;
  auto p = submit(*provider, program, std::move(ok));
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().cause.kind, SubmitErrorKind::provider_refused);
  EXPECT_EQ(p.error().inputs.bindings, slots);
  EXPECT_EQ(provider->counters().admitted.load(), 0u);
  EXPECT_EQ(provider->counters().enqueues.load(), 0u);
  EXPECT_EQ(provider->counters().records_created.load(), 0u);
  EXPECT_EQ(provider->counters().rejected.load(), 4u);
}

// The CUDA execution provider without a device (this machine; tests/gpu runs it on one): every submission
// is refused before admission, saying why, and the exact package comes back.
TEST(Submission, TheCudaProviderRefusesWithoutADeviceAndReturnsTheInputs) {
  if (CudaDevice::get() != nullptr) GTEST_SKIP() << "this machine has a CUDA device (tests/gpu submits there)";
  auto provider = cuda_execution_provider();
  EXPECT_FALSE(provider->synchronous());
  EXPECT_EQ(provider->name(), "cuda");
  ExecutionInputs in = mlp_inputs();
  const auto slots = in.bindings;
  auto r = submit(*provider, mlp_program(), std::move(in));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().cause.kind, SubmitErrorKind::provider_refused);
  EXPECT_NE(r.error().cause.detail.find("no CUDA device"), std::string::npos) << r.error().cause.detail;
  EXPECT_EQ(r.error().inputs.bindings, slots);
  EXPECT_EQ(r.error().inputs.group.live_allocations(), 2u);
  EXPECT_EQ(provider->counters().admitted.load(), 0u);
  EXPECT_EQ(provider->counters().records_created.load(), 0u);
}

TEST(Submission, FaultInjectionEndsInTheSeedOutcome) {
  auto storage = make_fake_provider();
  auto program = mlp_program();
  auto provider = make_fake_execution_provider();
  const auto deallocated = [&] { return storage->counters().deallocations.load(); };

  // Failure after the enqueue-capable call: completion is proven, the exact inputs come back.
  provider->inject({Fault::after_enqueue, Fault::worker_panic});
  for (ExecutionErrorKind want : {ExecutionErrorKind::enqueue_failed, ExecutionErrorKind::worker_panic}) {
    ExecutionInputs in = counted_inputs(storage);
    const auto slots = in.bindings;
    auto h = submit(*provider, program, std::move(in));
    ASSERT_TRUE(h.has_value());  // admitted: a post-boundary failure never returns inputs immediately
    ExecutionOutcome o = std::move(h).value().wait();
    ASSERT_TRUE(std::holds_alternative<RetiredFailed>(o)) << execution_error_name(want);
    RetiredFailed& failed = std::get<RetiredFailed>(o);
    EXPECT_EQ(failed.cause.kind, want);
    EXPECT_EQ(failed.inputs.bindings, slots);
    EXPECT_EQ(failed.inputs.group.slot(0), slots[0]);
    EXPECT_EQ(failed.inputs.group.live_allocations(), 2u);
    const auto before = deallocated();
    failed.inputs = ExecutionInputs{std::move(failed.inputs.group), {}};
    { ExecutionInputs drop = std::move(failed.inputs); }
    EXPECT_EQ(deallocated() - before, 2u);  // the returned owners are ordinary owners again
  }
  EXPECT_EQ(provider->counters().records_created.load(), 2u);
  EXPECT_EQ(provider->counters().records_released.load(), 2u);
  EXPECT_EQ(provider->counters().retired_failed.load(), 2u);
  EXPECT_FALSE(provider->poisoned());

  // Unproven completion: no owner comes back, the record is retained permanently, the context is poisoned.
  provider->inject({Fault::unproven_completion});
  const auto before = deallocated();
  {
    auto h = submit(*provider, program, counted_inputs(storage));
    ASSERT_TRUE(h.has_value());
    ExecutionOutcome o = std::move(h).value().wait();
    ASSERT_TRUE(std::holds_alternative<CompletionUnproven>(o));
    const auto& u = std::get<CompletionUnproven>(o);
    EXPECT_EQ(u.cause.kind, CompletionErrorKind::event_unproven);
    EXPECT_NE(std::find(u.diagnostic_keys.begin(), u.diagnostic_keys.end(), "fault=unproven_completion"),
              u.diagnostic_keys.end());
  }
  EXPECT_EQ(provider->counters().records_retained.load(), 1u);
  EXPECT_EQ(provider->counters().records_released.load(), 2u);  // unchanged: nothing was released
  EXPECT_TRUE(provider->poisoned());
  // Later submissions are rejected, typed, with their inputs.
  ExecutionInputs later = counted_inputs(storage);
  const auto later_slots = later.bindings;
  auto refused = submit(*provider, program, std::move(later));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().cause.kind, SubmitErrorKind::poisoned);
  EXPECT_EQ(refused.error().inputs.bindings, later_slots);
  { SubmitRejected drop = std::move(refused).error(); }
  provider.reset();
  EXPECT_EQ(deallocated() - before, 2u);  // only the refused package; the unproven one is never released

  // A panic whose completion cannot be proven.
  auto second = make_fake_execution_provider();
  second->inject({Fault::panic_unproven});
  auto h = submit(*second, program, counted_inputs(storage));
  ASSERT_TRUE(h.has_value());
  ExecutionOutcome o = std::move(h).value().wait();
  ASSERT_TRUE(std::holds_alternative<CompletionUnproven>(o));
  EXPECT_EQ(std::get<CompletionUnproven>(o).cause.kind, CompletionErrorKind::panic_unproven);
  EXPECT_EQ(second->counters().records_retained.load(), 1u);
  EXPECT_EQ(second->counters().records_released.load(), 0u);
}

TEST(Submission, KernelFailureAfterAdmissionRetiresWithTheInputs) {
  ir::GraphBuilder b;
  b.input("logits", Dims{2, 3});
  b.input("target", Dims{2}, DType::i64);
  b.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
  b.output("loss");
  auto plan = plan::plan_graph(b.build(), contract::builtin_profile("cpu-checked"), contract::DefaultEvidenceResolver{},
                               contract::VjpMode::forward_only);
  ASSERT_TRUE(plan.has_value());
  std::vector<Tensor> t;
  t.push_back(Tensor::zeros(Dims{2, 3}, DType::f32));
  t.push_back(Tensor::from_values<std::int64_t>(Dims{2}, std::vector<std::int64_t>{0, 7}));  // class 7 of 3
  ExecutionInputs in = package(std::move(t));
  const auto slots = in.bindings;
  auto h = submit(*cpu_execution_provider(), Program::make(std::move(plan).value()), std::move(in));
  ASSERT_TRUE(h.has_value());
  ExecutionOutcome o = std::move(h).value().wait();
  ASSERT_TRUE(std::holds_alternative<RetiredFailed>(o));
  EXPECT_EQ(std::get<RetiredFailed>(o).cause.kind, ExecutionErrorKind::execution_failed);
  EXPECT_NE(std::get<RetiredFailed>(o).cause.detail.find("index_out_of_range"), std::string::npos);
  EXPECT_EQ(std::get<RetiredFailed>(o).inputs.bindings, slots);
}

TEST(Submission, DroppingTheHandleDetachesObservationOnly) {
  auto storage = make_fake_provider();
  auto provider = make_fake_execution_provider();
  const auto before = storage->counters().deallocations.load();
  {
    auto h = submit(*provider, mlp_program(), counted_inputs(storage));
    ASSERT_TRUE(h.has_value());
  }  // dropped before the outcome: the worker owns the work until it is terminal
  provider->drain();
  EXPECT_EQ(provider->counters().completed.load(), 1u);
  EXPECT_EQ(provider->counters().records_released.load(), 1u);
  EXPECT_EQ(storage->counters().deallocations.load() - before, 2u);  // the unobserved bundle was released
}

TEST(Submission, ScopedReadOnlyBorrowsIdentityOutputsAndOwnsFreshOnes) {
  const Tensor x = Tensor::from_values<float>(Dims{2, 3}, kX);
  const Tensor w = Tensor::from_values<float>(Dims{4, 3}, kW);
  auto program = mlp_program();
  AccountingRecorder ledger;
  auto r = execute_scoped_read_only(*cpu_execution_provider(), *program, ScopedReadInputs{{x.as_view(), w.as_view()}});
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(std::holds_alternative<ScopedCompleted>(r.value()));
  ScopedExecutionBundle bundle = std::move(std::get<ScopedCompleted>(r.value()).bundle);
  EXPECT_TRUE(ledger.copies().empty());  // nothing copied input storage
  ASSERT_TRUE(std::holds_alternative<ScopedOwned>(bundle.output_record(0)));
  ASSERT_TRUE(std::holds_alternative<ScopedBorrowed>(bundle.output_record(1)));
  EXPECT_EQ(std::get<ScopedOwned>(bundle.output_record(2)).slot, std::get<ScopedOwned>(bundle.output_record(0)).slot);
  EXPECT_TRUE(std::holds_alternative<OutputMetadata>(bundle.output_record(3)));
  EXPECT_EQ(std::get<TensorView>(bundle.output(1)).get(Dims{1, 2}).real, x.as_view().get(Dims{1, 2}).real);
  EXPECT_EQ(bundle.owned().live_allocations(), 1u);  // y once, although it is output twice

  auto borrowed = ScopedExecutionBundle::into_owned_output(std::move(bundle), 1);
  ASSERT_FALSE(borrowed.has_value());
  EXPECT_EQ(borrowed.error().second.kind, OutputExtractErrorKind::borrowed_output);
  bundle = std::move(borrowed.error().first);
  auto meta = ScopedExecutionBundle::into_owned_output(std::move(bundle), 3);
  ASSERT_FALSE(meta.has_value());
  EXPECT_EQ(meta.error().second.kind, OutputExtractErrorKind::metadata_output);
  bundle = std::move(meta.error().first);
  auto y = ScopedExecutionBundle::into_owned_output(std::move(bundle), 0);
  ASSERT_TRUE(y.has_value());
  EXPECT_FLOAT_EQ(static_cast<float>(y.value().as_view().get(Dims{0, 3}).real), expected_y(0, 3));

  // An asynchronous provider rejects scoped execution before admission and hands the views back.
  auto fake = make_fake_execution_provider();
  auto rejected = execute_scoped_read_only(*fake, *program, ScopedReadInputs{{x.as_view(), w.as_view()}});
  ASSERT_FALSE(rejected.has_value());
  EXPECT_EQ(rejected.error().cause.kind, SubmitErrorKind::unsupported);
  ASSERT_EQ(rejected.error().inputs.bindings.size(), 2u);
  EXPECT_EQ(rejected.error().inputs.bindings[1].shape(), (Dims{4, 3}));
  EXPECT_EQ(fake->counters().admitted.load(), 0u);
  // Wrong bindings are rejected with the views.
  auto bad =
      execute_scoped_read_only(*cpu_execution_provider(), *program, ScopedReadInputs{{w.as_view(), x.as_view()}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().cause.kind, SubmitErrorKind::invalid_binding);
}

TEST(Submission, GroupInsertAddsAFreshOwnerWithoutCopyOrRevalidation) {
  ExecutionInputs in = mlp_inputs();
  const auto validations = in.group.counters().descriptor_validations;
  auto slot = AllocationGroup::insert(in.group, Tensor::from_values<float>(Dims{2}, std::vector<float>{3, 4}));
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(in.group.view(slot.value()).get(Dims{1}).real, 4.0);
  EXPECT_EQ(in.group.counters().descriptor_validations, validations);
  EXPECT_EQ(in.group.live_allocations(), 3u);
  // A borrowed group refuses and hands the owner back.
  const TensorView held = in.group.view(in.bindings[0]);
  auto refused = AllocationGroup::insert(in.group, Tensor::from_values<float>(Dims{1}, std::vector<float>{9}));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().input.as_view().get(Dims{0}).real, 9.0);
  EXPECT_EQ(in.group.live_allocations(), 3u);
}

TEST(AdRetention, DuplicateIsTheOnlyCopyAndABorrowedRecordNeverBecomesAnOwner) {
  ValueRef v = retain(Tensor::from_values<float>(Dims{3}, std::vector<float>{1, 2, 3}));
  ValueRef sibling = v;  // cloning a handle copies no storage
  AccountingRecorder ledger;
  Tensor copy = duplicate_value(v);
  EXPECT_EQ(copy.as_view().get(Dims{2}).real, 3.0);
  ASSERT_EQ(ledger.copies().size(), 1u);
  EXPECT_EQ(ledger.copies()[0].reason, CopyReason::ExplicitDuplicate);
  auto refused = into_value(std::move(v));  // the sibling still retains it
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().first, IntoValueFailure::NotUnique);
  v = std::move(refused.error().second);
  sibling.reset();
  EXPECT_TRUE(into_value(std::move(v)).has_value());

  // A group failure: the record's allocation has a second descriptor, so extraction is refused (Extract)
  // and the handle comes back usable.
  {
    std::vector<Storage> owners;
    owners.push_back(Tensor::from_values<float>(Dims{4}, std::vector<float>{1, 2, 3, 4}).into_storage());
    const DescriptorSpec specs[] = {{AllocationSlot{0}, LayoutRequest{DType::f32, Dims{4}, Dims{1}, 0}},
                                    {AllocationSlot{0}, LayoutRequest{DType::f32, Dims{2}, Dims{2}, 0}}};
    auto group = AllocationGroup::make(std::move(owners), specs);
    ASSERT_TRUE(group.has_value());
    auto container = std::make_shared<RetentionContainer>(std::move(group).value());
    const DescriptorSlot slot = container->group().slot(0);
    ValueRef aliased = std::make_shared<const AdValueRecord>(std::move(container), slot);
    auto refused_extract = into_value(std::move(aliased));
    ASSERT_FALSE(refused_extract.has_value());
    EXPECT_EQ(refused_extract.error().first, IntoValueFailure::Extract);
    EXPECT_EQ(refused_extract.error().second->view().get(Dims{3}).real, 4.0);
  }

  const Tensor t = Tensor::from_values<float>(Dims{2}, std::vector<float>{5, 6});
  ValueRef b = AdValueRecord::borrowed(t.as_view());
  EXPECT_EQ(b->view().get(Dims{1}).real, 6.0);
  auto owner = into_value(std::move(b));
  ASSERT_FALSE(owner.has_value());
  EXPECT_EQ(owner.error().first, IntoValueFailure::Extract);
}

}  // namespace
}  // namespace pact::runtime
