// Prepared access (seed 001 G1/G4): one traversal selected once; the strided cursor visits elements in
// logical order; refusals return the view unchanged; provider work is per preparation, not per element.

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "test_util.hpp"

namespace pact {
namespace {

using test::code_of;
using test::iota_tensor;
using test::read_all;

TEST(Access, ContiguousSelectsSpan) {
  Tensor t = iota_tensor(Dims{3, 4});
  auto p = t.prepare_host<float>();
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE(std::holds_alternative<PreparedContiguousRead<float>>(p.value()));
  auto span = std::get<PreparedContiguousRead<float>>(p.value()).as_span();
  ASSERT_EQ(span.size(), 12u);
  for (std::size_t i = 0; i < span.size(); ++i) EXPECT_EQ(span[i], static_cast<float>(i));
}

TEST(Access, TransposeSelectsStridedCursorInLogicalOrder) {
  Tensor t = iota_tensor(Dims{3, 4});
  TensorView v = t.transpose(0, 1);
  auto p = std::move(v).prepare_host<float>();
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE(std::holds_alternative<PreparedStridedRead<float>>(p.value()));
  auto& strided = std::get<PreparedStridedRead<float>>(p.value());
  std::vector<float> got;
  auto c = strided.cursor();
  while (const float* x = c.next()) got.push_back(*x);
  EXPECT_EQ(c.next(), nullptr);  // exhaustion is sticky
  std::vector<float> want;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) want.push_back(static_cast<float>(i * 4 + j));
  EXPECT_EQ(got, want);
  std::vector<float> via_for_each;
  strided.for_each([&](const float& x) { via_for_each.push_back(x); });
  EXPECT_EQ(via_for_each, want);
}

TEST(Access, FlipAndStepSlicesMatchCheckedGet) {
  Tensor t = iota_tensor(Dims{4, 5, 3});
  TensorView v = t.flip(1).slice(2, 0, 3, 2).slice(0, 1, 4, 2);
  EXPECT_EQ(v.shape(), (Dims{2, 5, 2}));
  std::vector<float> got = read_all(v);
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 2; ++k) want.push_back(static_cast<float>(v.get(Dims{i, j, k}).real));
  EXPECT_EQ(got, want);
  EXPECT_EQ(want.front(), static_cast<float>((1 * 5 + 4) * 3 + 0));
}

// reshape is a zero-copy re-description of a contiguous view (an offset slice included) in row-major
// order; a strided view, a count mismatch or a negative extent is refused typed.
TEST(Access, ReshapeRedescribesAContiguousViewOnly) {
  Tensor t = iota_tensor(Dims{4, 6});
  TensorView rows = t.slice(0, 1, 3);  // rows 1 and 2: contiguous at an offset
  TensorView r = rows.reshape(Dims{3, 2, 2});
  EXPECT_EQ(r.shape(), (Dims{3, 2, 2}));
  EXPECT_EQ(r.span_identity(), rows.span_identity());
  std::vector<float> want(12);
  for (int i = 0; i < 12; ++i) want[static_cast<std::size_t>(i)] = static_cast<float>(6 + i);
  EXPECT_EQ(read_all(r), want);
  EXPECT_EQ(read_all(t.as_view().reshape(Dims{24})).back(), 23.0f);
  EXPECT_EQ(code_of([&] { (void)t.as_view().reshape(Dims{5, 5}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { (void)t.as_view().reshape(Dims{-4, -6}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { (void)t.transpose(0, 1).reshape(Dims{24}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { (void)t.slice(1, 0, 3).reshape(Dims{12}); }), ErrorCode::invalid_argument);
  Tensor empty = iota_tensor(Dims{0, 3});
  EXPECT_EQ(empty.as_view().reshape(Dims{3, 0}).shape(), (Dims{3, 0}));
}

TEST(Access, RandomViewsAgreeWithCheckedGet) {
  std::mt19937 rng(7);
  Tensor t = iota_tensor(Dims{5, 4, 6});
  for (int trial = 0; trial < 200; ++trial) {
    TensorView v = t.as_view();
    if (rng() % 2) v = v.transpose(static_cast<int>(rng() % 3), static_cast<int>(rng() % 3));
    if (rng() % 2) v = v.flip(static_cast<int>(rng() % 3));
    int dim = static_cast<int>(rng() % 3);
    std::int64_t n = v.shape()[dim];
    std::int64_t start = static_cast<std::int64_t>(rng() % static_cast<unsigned>(n));
    v = v.slice(dim, start, n, 1 + static_cast<std::int64_t>(rng() % 3));
    std::vector<float> got = read_all(v);
    std::vector<float> want;
    Dims s = v.shape();
    for (std::int64_t i = 0; i < s[0]; ++i)
      for (std::int64_t j = 0; j < s[1]; ++j)
        for (std::int64_t k = 0; k < s[2]; ++k) want.push_back(static_cast<float>(v.get(Dims{i, j, k}).real));
    ASSERT_EQ(got, want) << "trial " << trial;
  }
}

// gather() of a permuted view copies in tiles (gather_transposed) where the innermost dimension is strided
// and an outer one unit-stride: every element lands at its logical position, for extents that are not
// multiples of the tile, with the other dimensions (before, between and after the pair) carried, and with
// slices and flips that leave no unit-stride dimension (the row-by-row copy) mixed in.
TEST(Access, GatherOfPermutedViewsMatchesCheckedGet) {
  std::mt19937 rng(11);
  Tensor t = iota_tensor(Dims{3, 37, 5, 19});
  int tiled = 0;
  for (int trial = 0; trial < 300; ++trial) {
    TensorView v = t.as_view();
    for (int k = 0; k < 3; ++k) v = v.transpose(static_cast<int>(rng() % 4), static_cast<int>(rng() % 4));
    if (rng() % 4 == 0) v = v.flip(static_cast<int>(rng() % 4));
    if (rng() % 4 == 0) {
      const int dim = static_cast<int>(rng() % 4);
      v = v.slice(dim, static_cast<std::int64_t>(rng() % 2), v.shape()[dim], 1 + static_cast<std::int64_t>(rng() % 2));
    }
    const Dims s = v.shape(), st = v.strides();
    tiled += st[3] != 1 && (st[0] == 1 || st[1] == 1 || st[2] == 1) ? 1 : 0;
    std::vector<float> want;
    for (std::int64_t i = 0; i < s[0]; ++i)
      for (std::int64_t j = 0; j < s[1]; ++j)
        for (std::int64_t k = 0; k < s[2]; ++k)
          for (std::int64_t l = 0; l < s[3]; ++l) want.push_back(static_cast<float>(v.get(Dims{i, j, k, l}).real));
    auto prepared = std::move(v).prepare_host<float>();
    ASSERT_TRUE(prepared.has_value());
    std::vector<float> got(want.size() + 1, -1.0f);
    if (auto* strided = std::get_if<PreparedStridedRead<float>>(&prepared.value())) {
      strided->gather(got.data());
    } else {
      const auto span = std::get<PreparedContiguousRead<float>>(prepared.value()).as_span();
      std::copy(span.begin(), span.end(), got.begin());
    }
    EXPECT_EQ(got.back(), -1.0f) << "trial " << trial << " wrote past the end";
    got.pop_back();
    ASSERT_EQ(got, want) << "trial " << trial;
  }
  EXPECT_GT(tiled, 50);  // the tiled case was exercised, not only the row copies
}

TEST(Access, WritesThroughStridedCursorLandOnce) {
  Tensor t = Tensor::zeros(Dims{3, 4}, DType::f32);
  {
    TensorViewMut m = t.as_view_mut();
    auto p = std::move(m).prepare_host_mut<float>();
    ASSERT_TRUE(p.has_value());
    std::get<PreparedContiguousWrite<float>>(p.value()).as_span()[5] = 9.0f;
  }
  EXPECT_EQ(t.get(Dims{1, 1}).real, 9.0);
  // Column 2 through a strided mutable slice.
  {
    TensorViewMut col = t.slice_mut(1, 2, 3);
    auto p = std::move(col).prepare_host_mut<float>();
    ASSERT_TRUE(p.has_value());
    auto& w = std::get<PreparedStridedWrite<float>>(p.value());
    w.for_each([](float& x) { x += 1.0f; });
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.get(Dims{i, 2}).real, 1.0);
  EXPECT_EQ(t.get(Dims{0, 1}).real, 0.0);
}

TEST(Access, CheckedGetAndSetValidateIndices) {
  Tensor t = iota_tensor(Dims{2, 3});
  EXPECT_EQ(code_of([&] { t.get(Dims{2, 0}); }), ErrorCode::index_out_of_range);
  EXPECT_EQ(code_of([&] { t.get(Dims{0}); }), ErrorCode::index_out_of_range);
  EXPECT_EQ(code_of([&] { t.set(Dims{0, -1}, 1.0); }), ErrorCode::index_out_of_range);
  t.set(Dims{1, 2}, 42.5);
  EXPECT_EQ(t.get(Dims{1, 2}).real, 42.5);
}

TEST(Access, MetaStorageRefusesHostAccessTyped) {
  Tensor m = Tensor::empty(Dims{1024, 1024}, DType::f32, meta_provider());
  EXPECT_EQ(m.nbytes(), 4u * 1024 * 1024);
  {
    auto r = m.prepare_host<float>();
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().error.code(), ErrorCode::no_host_bytes);
    EXPECT_EQ(r.error().input.shape(), (Dims{1024, 1024}));
  }  // the returned view holds its shared borrow until here
  EXPECT_EQ(code_of([&] { m.get(Dims{0, 0}); }), ErrorCode::no_host_bytes);
  EXPECT_EQ(code_of([&] { m.fill(1.0); }), ErrorCode::no_host_bytes);
  // Geometry still works on meta: views, slices, transposes.
  EXPECT_EQ(m.transpose(0, 1).slice(0, 0, 10).shape(), (Dims{10, 1024}));
}

// Note [One region for the blocks a run passes along] (provider.cpp): blocks of a page or more come from the
// lowest free range of one region, and released ranges join their neighbours, so a request larger than
// either of two released neighbours lands where they were. A fresh provider has a region of its own.
TEST(HostProvider, CarvesBlocksFromOneRegionAndJoinsReleasedNeighbours) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "under a sanitizer every host block is an allocation of its own (no region)";
#endif
  auto host = make_fake_provider();
  auto at = [&](const ProviderAllocation& a) { return host->unsafe_copy_base(a); };
  const ProviderAllocation a = host->allocate(100'000), b = host->allocate(200'010), c = host->allocate(300'000);
  EXPECT_EQ(a.capacity, 100'032u);  // whole cache lines
  EXPECT_EQ(at(b), at(a) + a.capacity);
  EXPECT_EQ(at(c), at(b) + b.capacity);
  host->deallocate(a);
  host->deallocate(b);
  // Larger than a and than b: only the two joined hold it, below c.
  const ProviderAllocation x = host->allocate(250'000);
  EXPECT_EQ(at(x), at(a));
  EXPECT_EQ(x.bytes, 250'000u);
  const ProviderAllocation y = host->allocate(40'000);  // the rest of the joined range
  EXPECT_EQ(at(y), at(x) + x.capacity);
  // Released in the middle, then its two neighbours: one range again, from a's start on.
  host->deallocate(c);
  host->deallocate(x);
  host->deallocate(y);
  const ProviderAllocation z = host->allocate(600'000);
  EXPECT_EQ(at(z), at(a));
  // A block under a page is an allocation of its own.
  const ProviderAllocation small = host->allocate(1'000);
  EXPECT_FALSE(at(small) >= at(z) && at(small) < at(z) + 16 * 1'048'576);
  for (const auto* held : {&z, &small}) host->deallocate(*held);
}

TEST(Access, CudaStubIsDeviceOnly) {
  Tensor host = iota_tensor(Dims{4});
  Tensor dev = host.transfer_to(cuda_provider());
  EXPECT_EQ(dev.provider_name(), "cuda-stub");
  EXPECT_EQ(dev.device(), DeviceKind::cuda);
  auto refused = dev.prepare_host<float>();
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().error.code(), ErrorCode::not_host_accessible);
  auto bound = dev.prepare_device();
  ASSERT_TRUE(bound.has_value());
  EXPECT_EQ(bound->layout().numel(), 4);
  EXPECT_FALSE(bound->writable());
  EXPECT_EQ(test::read_all(dev.transfer_to(cpu_provider()).as_view()), (std::vector<float>{0, 1, 2, 3}));
  // The cpu provider has no device binding: typed unsupported, view handed back.
  auto cpu_bind = host.prepare_device();
  ASSERT_FALSE(cpu_bind.has_value());
  EXPECT_EQ(cpu_bind.error().error.code(), ErrorCode::unsupported);
}

// seed 001 G5: bind takes only the prepared access (no replacement descriptor, range or provider),
// does binding-time provider work once, and a refusal returns the exact prepared access.
TEST(Access, BindConsumesOnlyAPreparedAccessAndFailureReturnsIt) {
  auto fake = make_fake_provider();
  Tensor dev = iota_tensor(Dims{2, 3}).transfer_to(fake);
  auto prepared = dev.as_view().prepare_device();
  ASSERT_TRUE(prepared.has_value());
  const std::uint64_t token = prepared->binding();
  const auto validations = fake->counters().validations.load();
  fake->fail_next_attachments(1);
  auto refused = DeviceBinding::bind(std::move(prepared).value());
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().error.code(), ErrorCode::unsupported);
  EXPECT_EQ(refused.error().input.binding(), token);  // the exact prepared access
  EXPECT_EQ(refused.error().input.layout().shape(), (Dims{2, 3}));
  EXPECT_EQ(fake->counters().attachments.load(), 0u);
  auto bound = DeviceBinding::bind(std::move(refused.error().input));
  ASSERT_TRUE(bound.has_value());
  EXPECT_EQ(bound->token(), token);
  EXPECT_FALSE(bound->writable());
  EXPECT_EQ(fake->counters().attachments.load(), 1u);
  EXPECT_EQ(fake->counters().validations.load(), validations);  // no check repeated
  bound->dispatch();
  EXPECT_EQ(fake->counters().dispatches.load(), 1u);
  // Only the fake provider takes injected failures.
  EXPECT_EQ(code_of([] { cpu_provider()->fail_next_attachments(1); }), ErrorCode::unsupported);
}

TEST(Access, NonInjectiveWriteIsRefusedAndViewReturned) {
  Storage s = Storage::allocate(cpu_provider(), 16, AllocationReason::OperationOutput);
  auto t = Tensor::from_storage(std::move(s), LayoutRequest{DType::f32, Dims{4, 4}, Dims{0, 1}, 0});
  ASSERT_TRUE(t.has_value());
  {
    auto r = t->prepare_host_mut<float>();
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().error.code(), ErrorCode::not_injective);
    EXPECT_EQ(r.error().input.shape(), (Dims{4, 4}));
  }                                               // the returned mutable view holds the exclusive borrow until here
  EXPECT_EQ(read_all(t->as_view()).size(), 16u);  // reading a broadcast layout is fine
}

TEST(Access, FromStorageFailureReturnsTheOwner) {
  Storage s = Storage::allocate(cpu_provider(), 16, AllocationReason::OperationOutput);
  const SpanIdentity id = s.span_identity();
  auto r = Tensor::from_storage(std::move(s), LayoutRequest::contiguous(DType::f32, Dims{5}));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().error.code(), ErrorCode::out_of_span);
  EXPECT_EQ(r.error().input.span_identity(), id);
  EXPECT_EQ(r.error().error.span()->allocation_id, id.allocation_id);
}

// Seed 001 G1: validation, mapping, synchronization and dispatch counts do not depend on element count.
TEST(Access, FakeProviderCountsDoNotGrowWithElements) {
  auto counts_for = [](std::int64_t n) {
    auto fake = make_fake_provider();
    Tensor t = Tensor::empty(Dims{n, 8}, DType::f32, fake);
    const auto v0 = fake->counters().validations.load();
    const auto m0 = fake->counters().mappings.load();
    const auto s0 = fake->counters().synchronizations.load();
    double sum = 0;
    {
      auto w = t.prepare_host_mut<float>();
      for (float& x : std::get<PreparedContiguousWrite<float>>(w.value())) x = 1.0f;
    }
    {
      auto r = t.transpose(0, 1).prepare_host<float>();
      std::get<PreparedStridedRead<float>>(r.value()).for_each([&](float x) { sum += x; });
      auto c = std::get<PreparedStridedRead<float>>(r.value()).cursor();
      while (const float* x = c.next()) sum += *x;
    }
    {
      auto d = t.prepare_device();
      d->dispatch();
    }
    EXPECT_EQ(sum, 2.0 * static_cast<double>(n * 8));
    return std::array<std::uint64_t, 4>{fake->counters().validations.load() - v0, fake->counters().mappings.load() - m0,
                                        fake->counters().synchronizations.load() - s0,
                                        fake->counters().dispatches.load()};
  };
  auto small = counts_for(2);
  auto large = counts_for(4096);
  EXPECT_EQ(small, large);
  EXPECT_EQ(small[0], 1u);  // one validation: the transpose's new descriptor
  EXPECT_EQ(small[1], 3u);  // write map, read map, device binding
  EXPECT_EQ(small[2], 2u);  // one synchronization per host preparation
  EXPECT_EQ(small[3], 1u);  // one dispatch
}

TEST(BorrowTracker, SharedAndExclusiveConflictsAreTyped) {
  if (!core::kBorrowTrackerEnabled) GTEST_SKIP() << "borrow tracker not compiled into this build";
  Tensor t = iota_tensor(Dims{4});
  {
    TensorView v = t.as_view();
    EXPECT_EQ(code_of([&] { t.as_view_mut(); }), ErrorCode::borrow_conflict);
    TensorView copy = v;  // more shared borrows are fine
    EXPECT_EQ(copy.numel(), 4);
  }
  {
    TensorViewMut m = t.as_view_mut();
    EXPECT_EQ(code_of([&] { t.as_view(); }), ErrorCode::borrow_conflict);
    EXPECT_EQ(code_of([&] { t.as_view_mut(); }), ErrorCode::borrow_conflict);
    {
      TensorView reborrow = m.as_view();  // a read reborrow freezes the mutable view
      EXPECT_EQ(code_of([&] { m.fill(1.0); }), ErrorCode::borrow_conflict);
      EXPECT_EQ(reborrow.get(Dims{1}).real, 1.0);
    }
    m.fill(2.0);
  }
  {
    auto prepared = t.prepare_host<float>();  // the prepared access keeps the shared borrow alive
    EXPECT_EQ(code_of([&] { t.as_view_mut(); }), ErrorCode::borrow_conflict);
  }
  EXPECT_NO_THROW(t.as_view_mut().fill(3.0));
  EXPECT_EQ(t.get(Dims{3}).real, 3.0);
}

TEST(BorrowTracker, SplitNeedsAnOwnerWithoutLiveViews) {
  if (!core::kBorrowTrackerEnabled) GTEST_SKIP() << "borrow tracker not compiled into this build";
  Tensor t = iota_tensor(Dims{4});
  {
    TensorView v = t.as_view();
    // The hand-off to a bare storage owner is refused while the view lives, so no Storage that split
    // could shrink under a view is reachable (ownership_test.cpp covers every hand-off).
    EXPECT_EQ(code_of([&] { (void)std::move(t).into_storage(); }), ErrorCode::borrow_conflict);
    EXPECT_EQ(v.get(Dims{3}).real, 3.0);
  }
  auto parts = Storage::split(std::move(t).into_storage(), 8);  // no live view now
  EXPECT_TRUE(parts.has_value());
}

TEST(Storage, SplitMakesDisjointClaimsOnOneRoot) {
  Storage s = Storage::allocate(cpu_provider(), 64, AllocationReason::OperationOutput);
  const auto id = s.span_identity().allocation_id;
  auto bad = Storage::split(std::move(s), 65);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().error.code(), ErrorCode::invalid_argument);
  auto parts = Storage::split(std::move(bad.error().input), 24);
  ASSERT_TRUE(parts.has_value());
  auto& [head, tail] = parts.value();
  EXPECT_EQ(head.span_identity(), (SpanIdentity{id, 0, 24}));
  EXPECT_EQ(tail.span_identity(), (SpanIdentity{id, 24, 64}));
  EXPECT_EQ(head.root_use_count(), 2);
}

}  // namespace
}  // namespace pact

namespace pact {
namespace {
// Regressions for signed-overflow paths reported by the UB sanitizer.
TEST(Access, HugeSliceStepIsNotAnOverflow) {
  Tensor t = test::iota_tensor(Dims{4});
  TensorView v = t.slice(0, 0, 4, std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(v.shape(), (Dims{1}));
  EXPECT_EQ(v.get(Dims{0}).real, 0.0);
  EXPECT_EQ(t.slice(0, 1, 4, 2).shape(), (Dims{2}));
  EXPECT_EQ(t.slice(0, 1, 4, 2).get(Dims{1}).real, 3.0);
}

TEST(Access, ComplexToRealWithHugeUnitExtentStride) {
  Storage s = Storage::allocate(cpu_provider(), 16, AllocationReason::OperationOutput);
  auto t = Tensor::from_storage(std::move(s), LayoutRequest{DType::c64, Dims{1, 2}, Dims{1LL << 62, 1}, 0});
  ASSERT_TRUE(t.has_value());
  TensorView real = t->reinterpret_view(DType::f32);
  EXPECT_EQ(real.shape(), (Dims{1, 2, 2}));
}

TEST(Access, MetaDuplicateRefusesBeforeAllocating) {
  Tensor m = Tensor::empty(Dims{3}, DType::f32, meta_provider());
  AccountingRecorder ledger;
  EXPECT_EQ(test::code_of([&] { m.duplicate(); }), ErrorCode::no_host_bytes);
  EXPECT_EQ(test::code_of([&] { m.transfer_to(cpu_provider()); }), ErrorCode::no_host_bytes);
  EXPECT_TRUE(ledger.allocations().empty());
}
}  // namespace
}  // namespace pact
