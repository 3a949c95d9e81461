// Copy and allocation accounting tests (seed 001, "Copy and allocation accounting"): every physical
// allocation emits exactly one allocation event with its reason, every byte-preserving duplicate or
// transfer exactly one copy event; kernel-like outputs are allocations, never copies; aliasing
// (views, slices, reinterpretation, group construction and extraction) emits nothing.

#include <gtest/gtest.h>

#include <bit>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "pact/core/core.hpp"
#include "test_util.hpp"

namespace pact {
namespace {

using test::code_of;
using test::read_all;

using AllocationSet = std::map<AllocationReason, int>;
using CopySet = std::map<CopyReason, int>;

TEST(Ledger, KernelLikeOutputIsOneOperationOutputAndNoCopy) {
  AccountingRecorder ledger;
  Tensor t = Tensor::empty(Dims{2, 3}, DType::f32);
  EXPECT_EQ(ledger.allocation_multiset(), (AllocationSet{{AllocationReason::OperationOutput, 1}}));
  EXPECT_TRUE(ledger.copy_multiset().empty());
  ASSERT_EQ(ledger.allocations().size(), 1u);
  const AllocationEvent& e = ledger.allocations()[0];
  EXPECT_EQ(e.allocation_id, t.span_identity().allocation_id);
  EXPECT_EQ(e.bytes, 24u);
  EXPECT_EQ(e.provider, "cpu");
}

TEST(Ledger, FactoriesAreOperationOutputsAndInitialisationIsNotACopy) {
  AccountingRecorder ledger;
  Tensor z = Tensor::zeros(Dims{4}, DType::f64);
  Tensor v = test::iota_tensor(Dims{3});
  Tensor e = Tensor::empty(Dims{0, 5}, DType::f32);  // zero bytes is still one physical allocation
  Tensor r = Tensor::empty(Dims{2}, DType::f32, cpu_provider(), AllocationReason::CheckpointRecomputeOutput);
  EXPECT_EQ(ledger.allocation_multiset(),
            (AllocationSet{{AllocationReason::OperationOutput, 3}, {AllocationReason::CheckpointRecomputeOutput, 1}}));
  EXPECT_TRUE(ledger.copies().empty());
  ASSERT_EQ(ledger.allocations().size(), 4u);
  EXPECT_EQ(ledger.allocations()[0].bytes, 32u);
  EXPECT_EQ(ledger.allocations()[2].bytes, 0u);
}

TEST(Ledger, KernelWritesAreNotCopies) {
  Tensor t = test::iota_tensor(Dims{2, 3});
  AccountingRecorder ledger;
  t.fill(1.0);
  t.set(Dims{1, 2}, 5.0);
  {
    auto prepared = t.prepare_host_mut<float>();
    ASSERT_TRUE(prepared.has_value());
    for (float& x : std::get<PreparedContiguousWrite<float>>(prepared.value()).as_span()) x *= 2.0f;
  }
  t.slice_mut(1, 0, 2).fill(0.0);
  EXPECT_TRUE(ledger.allocations().empty());
  EXPECT_TRUE(ledger.copies().empty());
  EXPECT_EQ(read_all(t.as_view()), (std::vector<float>{0, 0, 2, 0, 0, 10}));
}

TEST(Ledger, ConvertIsAFreshOutputNotACopy) {
  Tensor src = test::iota_tensor(Dims{2, 3});
  AccountingRecorder ledger;
  Tensor wide = src.transpose(0, 1).convert(DType::f64);  // a computed result: allocation only
  EXPECT_EQ(ledger.allocation_multiset(), (AllocationSet{{AllocationReason::OperationOutput, 1}}));
  EXPECT_TRUE(ledger.copies().empty());
  EXPECT_EQ(wide.dtype(), DType::f64);
  EXPECT_EQ(wide.shape(), (Dims{3, 2}));
  EXPECT_EQ(wide.get(Dims{2, 1}).real, 5.0);
  Tensor same = src.convert(DType::f32);  // same dtype: documented as duplicate()
  EXPECT_EQ(ledger.allocation_multiset(), (AllocationSet{{AllocationReason::OperationOutput, 1},
                                                         {AllocationReason::ExplicitDuplicateDestination, 1}}));
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}}));
}

TEST(Ledger, DuplicateIsOneExplicitCopyIntoOneNewDestination) {
  Tensor src = test::iota_tensor(Dims{2, 3});
  AccountingRecorder ledger;
  Tensor dup = src.duplicate();
  EXPECT_EQ(ledger.allocation_multiset(), (AllocationSet{{AllocationReason::ExplicitDuplicateDestination, 1}}));
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}}));
  ASSERT_EQ(ledger.copies().size(), 1u);
  const CopyEvent& c = ledger.copies()[0];
  EXPECT_EQ(c.source_allocation, src.span_identity().allocation_id);
  EXPECT_EQ(c.destination_allocation, dup.span_identity().allocation_id);
  EXPECT_EQ(ledger.allocations()[0].allocation_id, dup.span_identity().allocation_id);
  EXPECT_NE(c.source_allocation, c.destination_allocation);
  EXPECT_EQ(c.bytes, 24u);
  EXPECT_EQ(read_all(dup.as_view()), read_all(src.as_view()));
  // Independent bytes: writing the duplicate leaves the source alone.
  dup.fill(-1.0);
  EXPECT_EQ(read_all(src.as_view()), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(Ledger, DuplicateOfAStridedViewIsContiguousWithTheLogicalValues) {
  Tensor src = test::iota_tensor(Dims{2, 3});
  AccountingRecorder ledger;
  Tensor dup = src.transpose(0, 1).duplicate();
  EXPECT_EQ(dup.shape(), (Dims{3, 2}));
  EXPECT_EQ(dup.strides(), (Dims{2, 1}));
  EXPECT_TRUE(dup.is_contiguous());
  EXPECT_EQ(dup.byte_offset(), 0);
  EXPECT_EQ(read_all(dup.as_view()), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(ledger.allocation_multiset(), (AllocationSet{{AllocationReason::ExplicitDuplicateDestination, 1}}));
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}}));
  EXPECT_EQ(ledger.copies()[0].bytes, 24u);
  EXPECT_EQ(ledger.allocations()[0].bytes, 24u);

  // A flipped, stepped slice: also contiguous, only its own elements.
  Tensor m = test::iota_tensor(Dims{4, 5});
  Tensor part = m.slice(1, 1, 5, 2).flip(0).duplicate();  // columns 1 and 3, rows reversed
  EXPECT_EQ(part.shape(), (Dims{4, 2}));
  EXPECT_TRUE(part.is_contiguous());
  EXPECT_EQ(read_all(part.as_view()), (std::vector<float>{16, 18, 11, 13, 6, 8, 1, 3}));
  EXPECT_EQ(part.nbytes(), 32u);
  EXPECT_EQ(ledger.copies().back().bytes, 32u);
}

TEST(Ledger, TransferToCudaAndBack) {
  Tensor src = test::iota_tensor(Dims{2, 3});
  AccountingRecorder ledger;
  Tensor dev = src.transfer_to(cuda_provider());
  EXPECT_EQ(ledger.allocation_multiset(), (AllocationSet{{AllocationReason::TransferDestination, 1}}));
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::Transfer, 1}}));
  EXPECT_EQ(dev.provider_name(), "cuda-stub");
  EXPECT_EQ(dev.device(), DeviceKind::cuda);
  EXPECT_EQ(ledger.allocations()[0].provider, "cuda-stub");
  EXPECT_EQ(ledger.copies()[0].source_allocation, src.span_identity().allocation_id);
  EXPECT_EQ(ledger.copies()[0].destination_allocation, dev.span_identity().allocation_id);
  auto host = dev.prepare_host<float>();
  ASSERT_FALSE(host.has_value());
  EXPECT_EQ(host.error().error.code(), ErrorCode::not_host_accessible);

  Tensor back = dev.transfer_to(cpu_provider());
  EXPECT_EQ(ledger.allocation_multiset(), (AllocationSet{{AllocationReason::TransferDestination, 2}}));
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::Transfer, 2}}));
  EXPECT_EQ(back.provider_name(), "cpu");
  EXPECT_EQ(read_all(back.as_view()), read_all(src.as_view()));
  EXPECT_NE(back.span_identity().allocation_id, src.span_identity().allocation_id);
}

TEST(Ledger, TransferOfAStridedViewIsContiguousOnTheDestination) {
  Tensor src = test::iota_tensor(Dims{2, 3});
  AccountingRecorder ledger;
  Tensor dev = src.transpose(0, 1).transfer_to(cuda_provider());
  EXPECT_TRUE(dev.is_contiguous());
  Tensor back = dev.transfer_to(cpu_provider());
  EXPECT_EQ(read_all(back.as_view()), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(ledger.allocation_multiset(), (AllocationSet{{AllocationReason::TransferDestination, 2}}));
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::Transfer, 2}}));
}

TEST(Ledger, CopyFromIsOneCopyAndNoAllocation) {
  Tensor src = test::iota_tensor(Dims{2, 3});
  Tensor dst = Tensor::zeros(Dims{2, 3}, DType::f32);
  Tensor dev = src.transfer_to(cuda_provider());
  Tensor from_dev = Tensor::zeros(Dims{2, 3}, DType::f32);
  AccountingRecorder ledger;
  dst.copy_from(src.as_view());
  EXPECT_TRUE(ledger.allocations().empty());
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}}));
  ASSERT_EQ(ledger.copies().size(), 1u);
  EXPECT_EQ(ledger.copies()[0].source_allocation, src.span_identity().allocation_id);
  EXPECT_EQ(ledger.copies()[0].destination_allocation, dst.span_identity().allocation_id);
  EXPECT_EQ(ledger.copies()[0].bytes, 24u);
  EXPECT_EQ(read_all(dst.as_view()), read_all(src.as_view()));

  // From another provider: one Transfer copy, still no allocation.
  from_dev.as_view_mut().copy_from(dev.as_view());
  EXPECT_TRUE(ledger.allocations().empty());
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}, {CopyReason::Transfer, 1}}));
  EXPECT_EQ(read_all(from_dev.as_view()), read_all(src.as_view()));
}

TEST(Ledger, CopyFromIntoAStridedSliceWritesOnlyThatSlice) {
  Tensor dst = Tensor::zeros(Dims{3, 4}, DType::f32);
  Tensor src = test::iota_tensor(Dims{3, 2});
  AccountingRecorder ledger;
  dst.slice_mut(1, 1, 4, 2).copy_from(src.as_view());  // columns 1 and 3
  EXPECT_EQ(read_all(dst.as_view()), (std::vector<float>{0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5}));
  EXPECT_TRUE(ledger.allocations().empty());
  EXPECT_EQ(ledger.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}}));
  EXPECT_EQ(ledger.copies()[0].bytes, 24u);
}

TEST(Ledger, FailedCopyFromEmitsNothing) {
  Tensor dst = Tensor::zeros(Dims{2, 3}, DType::f32);
  Tensor wrong_shape = test::iota_tensor(Dims{3, 2});
  Tensor wrong_dtype = Tensor::zeros(Dims{2, 3}, DType::f64);
  AccountingRecorder ledger;
  EXPECT_EQ(code_of([&] { dst.copy_from(wrong_shape.as_view()); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { dst.copy_from(wrong_dtype.as_view()); }), ErrorCode::invalid_argument);
  EXPECT_TRUE(ledger.allocations().empty());
  EXPECT_TRUE(ledger.copies().empty());
}

TEST(Ledger, AliasingOperationsEmitNothing) {
  Tensor t = test::iota_tensor(Dims{4, 2});
  Tensor z = Tensor::zeros(Dims{3}, DType::c64);
  Storage s1 = std::move(test::iota_tensor(Dims{8})).into_storage();
  Storage s2 = std::move(test::iota_tensor(Dims{4})).into_storage();
  const std::uint64_t allocations = total_allocation_events();
  const std::uint64_t copies = total_copy_events();
  {
    AccountingRecorder ledger;
    // Views, slices, reborrows, reinterpretation.
    {
      TensorView v = t.as_view();
      TensorView s = v.slice(0, 1, 3).transpose(0, 1).flip(1);
      TensorView r = s.reinterpret_view(DType::i32);
      TensorView c = t.reinterpret_view(DType::c64);
      EXPECT_EQ(c.shape(), Dims{4});
      EXPECT_EQ(r.get(Dims{0, 0}).integer, std::bit_cast<std::int32_t>(4.0f));
      auto host = TensorView(s).prepare_host<float>();
      EXPECT_TRUE(host.has_value());
    }
    {
      TensorViewMut m = t.as_view_mut();
      TensorView reborrow = m.as_view();
      EXPECT_EQ(reborrow.numel(), 8);
    }
    {
      TensorViewMut part = t.slice_mut(0, 0, 2);
      auto as_int = TensorViewMut::reinterpret(std::move(part), DType::i32);
      EXPECT_TRUE(as_int.has_value());
    }
    {
      TypedView<std::complex<float>, 1> typed(z.as_view());
      EXPECT_EQ(typed.reinterpret_view<float>().shape(), (Dims{3, 2}));
    }
    // Consuming reinterpretation and storage moves.
    auto zf = Tensor::reinterpret(std::move(z), DType::f32);
    ASSERT_TRUE(zf.has_value());
    Storage back = std::move(zf).value().into_storage();
    auto wrapped = Tensor::from_storage(std::move(back), LayoutRequest::contiguous(DType::f32, Dims{6}));
    ASSERT_TRUE(wrapped.has_value());
    // Storage split, group construction, views, split_mut, extraction.
    auto halves = Storage::split(std::move(s1), 16);
    ASSERT_TRUE(halves.has_value());
    std::vector<Storage> owners;
    owners.push_back(std::move(halves.value().first));
    owners.push_back(std::move(halves.value().second));
    owners.push_back(std::move(s2));
    const std::vector<DescriptorSpec> specs{{AllocationSlot{0}, LayoutRequest::contiguous(DType::f32, Dims{4})},
                                            {AllocationSlot{1}, LayoutRequest::contiguous(DType::f32, Dims{4})},
                                            {AllocationSlot{1}, LayoutRequest::contiguous(DType::f32, Dims{2, 2})},
                                            {AllocationSlot{2}, LayoutRequest::contiguous(DType::f32, Dims{4})}};
    auto made = AllocationGroup::make(std::move(owners), specs);
    ASSERT_TRUE(made.has_value());
    AllocationGroup g = std::move(made).value();
    EXPECT_EQ(g.view(g.slot(2)).reinterpret_view(DType::c64).numel(), 2);
    { (void)g.view_mut(g.slot(0)); }
    { auto views = g.split_mut(std::vector<DescriptorSlot>{g.slot(0), g.slot(1), g.slot(3)}); }
    (void)g.add_descriptor(DescriptorSpec{AllocationSlot{0}, LayoutRequest::contiguous(DType::f32, Dims{2})});
    Tensor extracted = g.try_extract(g.slot(3));
    EXPECT_EQ(code_of([&] { (void)g.try_extract(g.slot(1)); }), ErrorCode::aliased_allocation);
    const DescriptorSlot keep = g.slot(1);
    auto owned = AllocationGroup::into_tensor(std::move(g), keep);
    ASSERT_TRUE(owned.has_value());
    // A failed group construction hands owners back without events either.
    std::vector<Storage> again;
    again.push_back(std::move(extracted).into_storage());
    const std::vector<DescriptorSpec> bad{{AllocationSlot{0}, LayoutRequest::contiguous(DType::f32, Dims{5})}};
    auto failed = AllocationGroup::make(std::move(again), bad);
    EXPECT_FALSE(failed.has_value());

    EXPECT_TRUE(ledger.allocations().empty());
    EXPECT_TRUE(ledger.copies().empty());
    EXPECT_TRUE(ledger.allocation_multiset().empty());
    EXPECT_TRUE(ledger.copy_multiset().empty());
  }
  EXPECT_EQ(total_allocation_events(), allocations);
  EXPECT_EQ(total_copy_events(), copies);
}

TEST(Ledger, NestedRecordersBothSeeEvents) {
  Tensor src = test::iota_tensor(Dims{4});
  AccountingRecorder outer;
  Tensor a = Tensor::empty(Dims{2}, DType::f32);
  {
    AccountingRecorder inner;
    Tensor dup = src.duplicate();
    EXPECT_EQ(inner.allocation_multiset(), (AllocationSet{{AllocationReason::ExplicitDuplicateDestination, 1}}));
    EXPECT_EQ(inner.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}}));
    {
      AccountingRecorder innermost;
      Tensor dev = src.transfer_to(cuda_provider());
      EXPECT_EQ(innermost.allocation_multiset(), (AllocationSet{{AllocationReason::TransferDestination, 1}}));
      EXPECT_EQ(innermost.copy_multiset(), (CopySet{{CopyReason::Transfer, 1}}));
    }
    EXPECT_EQ(inner.allocation_multiset(), (AllocationSet{{AllocationReason::ExplicitDuplicateDestination, 1},
                                                          {AllocationReason::TransferDestination, 1}}));
    EXPECT_EQ(inner.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}, {CopyReason::Transfer, 1}}));
  }
  // After the inner recorder ends, events go only to the outer one, which saw everything.
  Tensor b = Tensor::empty(Dims{2}, DType::f32);
  EXPECT_EQ(outer.allocation_multiset(), (AllocationSet{{AllocationReason::OperationOutput, 2},
                                                        {AllocationReason::ExplicitDuplicateDestination, 1},
                                                        {AllocationReason::TransferDestination, 1}}));
  EXPECT_EQ(outer.copy_multiset(), (CopySet{{CopyReason::ExplicitDuplicate, 1}, {CopyReason::Transfer, 1}}));
  EXPECT_EQ(outer.allocations().size(), 4u);
  EXPECT_EQ(outer.copies().size(), 2u);
}

TEST(Ledger, RecordersSeeEveryThread) {
  // A worker thread's allocation (a submission worker, a thread pool) reaches the recorder of the thread
  // accounting for the work, and a recorder made on the worker sees it too.
  AccountingRecorder here;
  std::thread worker([] {
    AccountingRecorder there;
    Tensor t = Tensor::empty(Dims{3}, DType::f32);
    EXPECT_EQ(there.allocations().size(), 1u);
  });
  worker.join();
  ASSERT_EQ(here.allocations().size(), 1u);
  EXPECT_EQ(here.allocations()[0].reason, AllocationReason::OperationOutput);
  EXPECT_EQ(here.allocations()[0].bytes, 12u);
}

TEST(Ledger, ProcessTotalsCountEveryEvent) {
  Tensor src = test::iota_tensor(Dims{4});
  const std::uint64_t allocations = total_allocation_events();
  const std::uint64_t copies = total_copy_events();
  Tensor dup = src.duplicate();
  Tensor dev = src.transfer_to(cuda_provider());
  dup.copy_from(src.as_view());
  EXPECT_EQ(total_allocation_events(), allocations + 2);
  EXPECT_EQ(total_copy_events(), copies + 3);
}

TEST(Ledger, ReasonNamesAreStable) {
  EXPECT_EQ(copy_reason_name(CopyReason::ExplicitDuplicate), "ExplicitDuplicate");
  EXPECT_EQ(copy_reason_name(CopyReason::Transfer), "Transfer");
  EXPECT_EQ(allocation_reason_name(AllocationReason::OperationOutput), "OperationOutput");
  EXPECT_EQ(allocation_reason_name(AllocationReason::CheckpointRecomputeOutput), "CheckpointRecomputeOutput");
  EXPECT_EQ(allocation_reason_name(AllocationReason::ExplicitDuplicateDestination), "ExplicitDuplicateDestination");
  EXPECT_EQ(allocation_reason_name(AllocationReason::TransferDestination), "TransferDestination");
}

// Regression (bug fixed in 8db80c7): recorders used to form an intrusive stack that was only correct when
// they ended in reverse order of creation. When an outer recorder (held in a std::unique_ptr) ended
// before an inner one, the still-alive inner recorder silently stopped seeing events, and when the inner
// one then ended it re-installed the destroyed outer recorder as the thread's current recorder (the next
// event would write into freed memory). The test runs on its own thread so that a regression of that
// dangling pointer can never touch another test.
TEST(Ledger, RecorderEndedOutOfOrderLeavesTheOtherRecording) {
  std::size_t seen = 0;
  std::thread worker([&] {
    auto outer = std::make_unique<AccountingRecorder>();
    auto inner = std::make_unique<AccountingRecorder>();
    outer.reset();  // ends first
    Tensor t = Tensor::empty(Dims{2}, DType::f32);
    seen = inner->allocations().size();
    inner.reset();  // must not re-install the destroyed recorder; no event follows on this thread
  });
  worker.join();
  EXPECT_EQ(seen, 1u) << "a live recorder missed an allocation after another recorder ended out of order";
}

}  // namespace
}  // namespace pact
