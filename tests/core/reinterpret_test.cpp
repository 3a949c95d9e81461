// Reinterpretation tests (seed 001 G4 "Reinterpretation and aliases", SPEC §4): the sealed scalar pairs
// f32<->i32, f64<->i64 and c64<->f32; the rank policy (c64 -> f32 appends a dimension of 2, f32 -> c64
// removes a trailing (2, stride 1) dimension); zero copy over the same root; consuming and mutable
// forms hand their input back on failure; the typed family's static rank policy.

#include <gtest/gtest.h>

#include <bit>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "pact/core/core.hpp"
#include "test_util.hpp"

namespace pact {
namespace {

using test::code_of;
using test::read_all;
using c64 = std::complex<float>;

template <class T>
Tensor tensor_of(const Dims& shape, const std::vector<T>& values) {
  return Tensor::from_values<T>(shape, std::span<const T>(values));
}

std::int64_t bits(float f) { return std::bit_cast<std::int32_t>(f); }

// ---- static rank policy ----------------------------------------------------------------------------

static_assert(
    std::is_same_v<decltype(std::declval<const TypedView<c64, 2>&>().reinterpret_view<float>()), TypedView<float, 3>>);
static_assert(
    std::is_same_v<decltype(std::declval<const TypedView<float, 3>&>().reinterpret_view<c64>()), TypedView<c64, 2>>);
static_assert(std::is_same_v<decltype(std::declval<const TypedView<c64>&>().reinterpret_view<float>()),
                             TypedView<float, kDynRank>>);
static_assert(std::is_same_v<decltype(std::declval<const TypedView<float>&>().reinterpret_view<c64>()),
                             TypedView<c64, kDynRank>>);
static_assert(std::is_same_v<decltype(std::declval<const TypedView<float, 2>&>().reinterpret_view<std::int32_t>()),
                             TypedView<std::int32_t, 2>>);
static_assert(std::is_same_v<decltype(std::declval<const TypedView<std::int64_t, 1>&>().reinterpret_view<double>()),
                             TypedView<double, 1>>);
static_assert(std::is_same_v<decltype(std::declval<const TypedTensor<c64, 1>&>().reinterpret_view<float>()),
                             TypedView<float, 2>>);
static_assert(
    std::is_same_v<decltype(std::declval<const TypedViewMut<float, 2>&>().reinterpret_view<c64>()), TypedView<c64, 1>>);
static_assert(reinterpret_rank<c64, float>(kDynRank) == kDynRank);
static_assert(reinterpret_rank<float, c64>(kDynRank) == kDynRank);

// ---- same-size pairs -------------------------------------------------------------------------------

TEST(Reinterpret, F32ToI32ViewPreservesBitPatterns) {
  const std::vector<float> values{1.0f, -2.0f, 0.5f, 0.0f, -0.0f, std::numeric_limits<float>::infinity()};
  Tensor t = tensor_of<float>(Dims{2, 3}, values);
  TensorView v = t.reinterpret_view(DType::i32);
  EXPECT_EQ(v.dtype(), DType::i32);
  EXPECT_EQ(v.shape(), (Dims{2, 3}));
  EXPECT_EQ(v.strides(), (Dims{3, 1}));
  EXPECT_EQ(v.get(Dims{0, 0}).integer, 0x3f800000);
  for (std::int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(v.get(Dims{i / 3, i % 3}).integer, bits(values[static_cast<std::size_t>(i)])) << i;
  }
  EXPECT_EQ(v.span_identity(), t.span_identity());
}

TEST(Reinterpret, I32ToF32ViewPreservesBitPatterns) {
  Tensor t = tensor_of<std::int32_t>(Dims{3}, {0x3f800000, static_cast<std::int32_t>(0xc0000000), 0x7f800000});
  TensorView v = t.as_view().reinterpret_view(DType::f32);
  EXPECT_EQ(v.dtype(), DType::f32);
  EXPECT_EQ(read_all(v), (std::vector<float>{1.0f, -2.0f, std::numeric_limits<float>::infinity()}));
}

TEST(Reinterpret, F64AndI64PreserveBitPatterns) {
  Tensor d = tensor_of<double>(Dims{2}, {1.0, -0.5});
  TensorView as_int = d.reinterpret_view(DType::i64);
  EXPECT_EQ(as_int.get(Dims{0}).integer, 0x3ff0000000000000LL);
  EXPECT_EQ(as_int.get(Dims{1}).integer, std::bit_cast<std::int64_t>(-0.5));

  Tensor i = tensor_of<std::int64_t>(Dims{1}, {0x4000000000000000LL});
  EXPECT_EQ(i.reinterpret_view(DType::f64).get(Dims{0}).real, 2.0);
  EXPECT_EQ(i.reinterpret_view(DType::f64).span_identity(), i.span_identity());
}

TEST(Reinterpret, SameSizePairsKeepAStridedLayout) {
  Tensor t = test::iota_tensor(Dims{2, 3});
  TensorView tr = t.transpose(0, 1);
  TensorView v = tr.reinterpret_view(DType::i32);
  EXPECT_EQ(v.shape(), (Dims{3, 2}));
  EXPECT_EQ(v.strides(), (Dims{1, 3}));
  EXPECT_EQ(v.get(Dims{2, 1}).integer, bits(5.0f));
  TensorView flipped = t.flip(1).reinterpret_view(DType::i32);
  EXPECT_EQ(flipped.byte_offset(), t.flip(1).byte_offset());
  EXPECT_EQ(flipped.get(Dims{0, 0}).integer, bits(2.0f));
  // A reinterpreted view reinterprets back to the identical layout.
  TensorView back = v.reinterpret_view(DType::f32);
  EXPECT_EQ(back.shape(), tr.shape());
  EXPECT_EQ(back.strides(), tr.strides());
  EXPECT_EQ(back.byte_offset(), tr.byte_offset());
  EXPECT_EQ(read_all(back), read_all(tr));
}

TEST(Reinterpret, SameDtypeIsTheIdentity) {
  Tensor t = test::iota_tensor(Dims{4});
  TensorView v = t.reinterpret_view(DType::f32);
  EXPECT_EQ(read_all(v), (std::vector<float>{0, 1, 2, 3}));
}

// ---- c64 <-> f32 -----------------------------------------------------------------------------------

TEST(Reinterpret, C64ToF32AppendsADimensionOfTwo) {
  Tensor z = tensor_of<c64>(Dims{2, 3}, {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}});
  TensorView f = z.reinterpret_view(DType::f32);
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_EQ(f.rank(), 3);
  EXPECT_EQ(f.shape(), (Dims{2, 3, 2}));
  EXPECT_EQ(f.strides(), (Dims{6, 2, 1}));
  EXPECT_TRUE(f.is_contiguous());
  EXPECT_EQ(read_all(f), (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_EQ(f.get(Dims{1, 2, 0}).real, 11.0);  // real
  EXPECT_EQ(f.get(Dims{1, 2, 1}).real, 12.0);  // imag
  EXPECT_EQ(f.span_identity(), z.span_identity());
}

TEST(Reinterpret, C64ToF32OfAStridedViewDoublesTheStrides) {
  Tensor z = tensor_of<c64>(Dims{2, 3}, {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}});
  TensorView f = z.transpose(0, 1).reinterpret_view(DType::f32);
  EXPECT_EQ(f.shape(), (Dims{3, 2, 2}));
  EXPECT_EQ(f.strides(), (Dims{2, 6, 1}));
  EXPECT_EQ(read_all(f), (std::vector<float>{1, 2, 7, 8, 3, 4, 9, 10, 5, 6, 11, 12}));
  // Reverse stride.
  TensorView r = z.flip(1).reinterpret_view(DType::f32);
  EXPECT_EQ(r.strides(), (Dims{6, -2, 1}));
  EXPECT_EQ(read_all(r), (std::vector<float>{5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8}));
  // And back: the f32 pair view turns into the same c64 layout.
  TensorView back = r.reinterpret_view(DType::c64);
  EXPECT_EQ(back.shape(), z.flip(1).shape());
  EXPECT_EQ(back.strides(), z.flip(1).strides());
  EXPECT_EQ(back.byte_offset(), z.flip(1).byte_offset());
  EXPECT_EQ(back.get(Dims{0, 0}).real, 5.0);
  EXPECT_EQ(back.get(Dims{0, 0}).imag, 6.0);
}

TEST(Reinterpret, F32ToC64RemovesATrailingPair) {
  Tensor t = tensor_of<float>(Dims{3, 2}, {1, 2, 3, 4, 5, 6});
  TensorView z = t.reinterpret_view(DType::c64);
  EXPECT_EQ(z.dtype(), DType::c64);
  EXPECT_EQ(z.rank(), 1);
  EXPECT_EQ(z.shape(), Dims{3});
  EXPECT_EQ(z.strides(), Dims{1});
  EXPECT_EQ(z.get(Dims{2}).real, 5.0);
  EXPECT_EQ(z.get(Dims{2}).imag, 6.0);
  EXPECT_EQ(z.span_identity(), t.span_identity());
  // A rank-1 pair becomes a scalar.
  Tensor pair = tensor_of<float>(Dims{2}, {7, 8});
  TensorView scalar = pair.reinterpret_view(DType::c64);
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.get(Dims{}).imag, 8.0);
  // A strided outer dimension with an even stride is fine: every other row of a 4x2.
  Tensor m = tensor_of<float>(Dims{4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  TensorView rows = m.slice(0, 0, 4, 2).reinterpret_view(DType::c64);
  EXPECT_EQ(rows.shape(), Dims{2});
  EXPECT_EQ(rows.strides(), Dims{2});
  EXPECT_EQ(rows.get(Dims{1}).real, 4.0);
  EXPECT_EQ(rows.get(Dims{1}).imag, 5.0);
  // Starting at an odd element (byte offset 8 = one f32 pair) is fine as well.
  TensorView tail = m.slice(0, 1, 4).reinterpret_view(DType::c64);
  EXPECT_EQ(tail.byte_offset(), 8);
  EXPECT_EQ(tail.get(Dims{0}).real, 2.0);
}

TEST(Reinterpret, F32ToC64WithoutATrailingUnitStridePairFailsTyped) {
  Tensor a = test::iota_tensor(Dims{3, 4});  // trailing extent 4
  EXPECT_EQ(code_of([&] { (void)a.reinterpret_view(DType::c64); }), ErrorCode::reinterpret_invalid);
  Tensor b = test::iota_tensor(Dims{3});  // trailing extent 3
  EXPECT_EQ(code_of([&] { (void)b.reinterpret_view(DType::c64); }), ErrorCode::reinterpret_invalid);
  Tensor c = test::iota_tensor(Dims{2, 3});  // transpose: trailing extent 2 but stride 3
  EXPECT_EQ(c.transpose(0, 1).shape(), (Dims{3, 2}));
  EXPECT_EQ(code_of([&] { (void)c.transpose(0, 1).reinterpret_view(DType::c64); }), ErrorCode::reinterpret_invalid);
  Tensor d = test::iota_tensor(Dims{2});  // trailing pair reversed: stride -1
  EXPECT_EQ(code_of([&] { (void)d.flip(0).reinterpret_view(DType::c64); }), ErrorCode::reinterpret_invalid);
  Tensor e = test::iota_tensor(Dims{3, 3});  // columns [0, 2): trailing pair ok, odd row stride 3
  EXPECT_EQ(code_of([&] { (void)e.slice(1, 0, 2).reinterpret_view(DType::c64); }), ErrorCode::reinterpret_invalid);
  Tensor s = tensor_of<float>(Dims{}, {1.0f});  // rank 0: no trailing dimension
  EXPECT_EQ(code_of([&] { (void)s.reinterpret_view(DType::c64); }), ErrorCode::reinterpret_invalid);
  Tensor f = test::iota_tensor(Dims{4});  // step 2: extent 2 but stride 2
  EXPECT_EQ(code_of([&] { (void)f.slice(0, 0, 4, 2).reinterpret_view(DType::c64); }), ErrorCode::reinterpret_invalid);
}

TEST(Reinterpret, C64ToF32AtMaximumRankFailsTyped) {
  Tensor z = tensor_of<c64>(Dims{1, 1, 1, 1, 1, 1, 1, 1}, {{1, 2}});
  EXPECT_EQ(z.rank(), kMaxRank);
  EXPECT_EQ(code_of([&] { (void)z.reinterpret_view(DType::f32); }), ErrorCode::reinterpret_invalid);
}

TEST(Reinterpret, UnsupportedPairsFailTyped) {
  Tensor f = test::iota_tensor(Dims{4});
  Tensor u = tensor_of<std::uint8_t>(Dims{8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor z = tensor_of<c64>(Dims{2}, {{1, 2}, {3, 4}});
  Tensor i64 = tensor_of<std::int64_t>(Dims{2}, {1, 2});
  struct Case {
    const Tensor* from;
    DType to;
  };
  const std::vector<Case> cases{{&f, DType::f64},     {&f, DType::u8},    {&f, DType::bf16},    {&f, DType::i64},
                                {&f, DType::boolean}, {&u, DType::f32},   {&u, DType::boolean}, {&z, DType::f64},
                                {&z, DType::i64},     {&i64, DType::c64}, {&i64, DType::i32},   {&i64, DType::f32}};
  for (std::size_t k = 0; k < cases.size(); ++k) {
    ErrorCode code = code_of([&] { (void)cases[k].from->reinterpret_view(cases[k].to); });
    EXPECT_EQ(code, ErrorCode::reinterpret_invalid) << "case " << k << " -> " << dtype_name(cases[k].to);
  }
}

// ---- zero copy, same root --------------------------------------------------------------------------

TEST(Reinterpret, EveryFormIsZeroCopyOverTheSameRoot) {
  Tensor f = test::iota_tensor(Dims{3, 2});
  Tensor z = tensor_of<c64>(Dims{2}, {{1, 2}, {3, 4}});
  const std::uint64_t fid = f.span_identity().allocation_id;
  const std::uint64_t zid = z.span_identity().allocation_id;
  const std::uint64_t allocations = total_allocation_events();
  const std::uint64_t copies = total_copy_events();
  {
    AccountingRecorder ledger;
    EXPECT_EQ(f.reinterpret_view(DType::i32).span_identity(), f.span_identity());
    EXPECT_EQ(f.reinterpret_view(DType::c64).span_identity(), f.span_identity());
    EXPECT_EQ(z.reinterpret_view(DType::f32).span_identity(), z.span_identity());
    {
      auto m = TensorViewMut::reinterpret(f.as_view_mut(), DType::i32);
      ASSERT_TRUE(m.has_value());
      EXPECT_EQ(m.value().span_identity().allocation_id, fid);
    }
    {
      TypedView<c64, 1> typed(z.as_view());
      auto floats = typed.reinterpret_view<float>();
      EXPECT_EQ(floats.span_identity(), z.span_identity());
    }
    auto r = Tensor::reinterpret(std::move(z), DType::f32);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r.value().span_identity().allocation_id, zid);
    EXPECT_EQ(r.value().root_use_count(), 1);
    auto back = Tensor::reinterpret(std::move(r).value(), DType::c64);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back.value().span_identity().allocation_id, zid);
    EXPECT_TRUE(ledger.allocations().empty());
    EXPECT_TRUE(ledger.copies().empty());
  }
  EXPECT_EQ(total_allocation_events(), allocations);
  EXPECT_EQ(total_copy_events(), copies);
}

TEST(Reinterpret, WritesThroughOneInterpretationAreVisibleThroughTheOther) {
  Tensor f = test::iota_tensor(Dims{2});
  {
    auto m = TensorViewMut::reinterpret(f.as_view_mut(), DType::i32);
    ASSERT_TRUE(m.has_value());
    m.value().set(Dims{1}, 0x40400000);  // 3.0f
  }
  EXPECT_EQ(read_all(f.as_view()), (std::vector<float>{0.0f, 3.0f}));
}

// ---- the consuming form ----------------------------------------------------------------------------

TEST(Reinterpret, ConsumingReinterpretKeepsTheOwnerAndBytes) {
  Tensor f = tensor_of<float>(Dims{2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  const SpanIdentity span = f.span_identity();
  auto r = Tensor::reinterpret(std::move(f), DType::c64);
  ASSERT_TRUE(r.has_value());
  Tensor z = std::move(r).value();
  EXPECT_EQ(z.dtype(), DType::c64);
  EXPECT_EQ(z.shape(), Dims{2});
  EXPECT_EQ(z.span_identity(), span);
  EXPECT_EQ(z.get(Dims{1}).real, 3.0);
  EXPECT_EQ(z.get(Dims{1}).imag, 4.0);
  // The reinterpreted owner is a full owner: writes land in the same bytes.
  z.set(Dims{0}, 9.0);  // (9, 0)
  auto back = Tensor::reinterpret(std::move(z), DType::f32);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back.value().shape(), (Dims{2, 2}));
  EXPECT_EQ(read_all(back.value().as_view()), (std::vector<float>{9.0f, 0.0f, 3.0f, 4.0f}));
}

TEST(Reinterpret, ConsumingFailureReturnsTheOriginalOwnerUnchanged) {
  struct Case {
    Dims shape;
    DType to;
  };
  const std::vector<Case> cases{
      {Dims{2, 3}, DType::c64}, {Dims{4}, DType::f64}, {Dims{4}, DType::u8}, {Dims{3}, DType::c64}};
  for (const auto& c : cases) {
    Tensor t = test::iota_tensor(c.shape);
    const SpanIdentity span = t.span_identity();
    const std::vector<float> values = read_all(t.as_view());
    auto r = Tensor::reinterpret(std::move(t), c.to);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().error.code(), ErrorCode::reinterpret_invalid);
    Tensor& back = r.error().input;
    EXPECT_EQ(back.dtype(), DType::f32);
    EXPECT_EQ(back.shape(), c.shape);
    EXPECT_EQ(back.span_identity(), span);
    EXPECT_EQ(read_all(back.as_view()), values);
    Dims origin;
    for (int d = 0; d < c.shape.size(); ++d) origin.push_back(0);
    back.set(origin, -1.0);  // still a writable owner
    EXPECT_EQ(back.get(origin).real, -1.0);
  }
}

/// A 2-element claim read as four f32 through a broadcast (stride 0) outer dimension: readable, never a
/// write layout.
Tensor broadcast_owner() {
  Storage s = std::move(test::iota_tensor(Dims{2})).into_storage();
  auto t = Tensor::from_storage(std::move(s), LayoutRequest{DType::f32, Dims{2, 2}, Dims{0, 1}, 0});
  EXPECT_TRUE(t.has_value());
  return std::move(t).value();
}

TEST(Reinterpret, ConsumingReinterpretNeedsAnInjectiveResult) {
  Tensor b = broadcast_owner();
  EXPECT_FALSE(b.layout().is_injective());
  // Reading through a reinterpreted view is fine...
  EXPECT_EQ(b.reinterpret_view(DType::c64).get(Dims{1}).imag, 1.0);
  // ...but the consuming form makes a write layout: refused, owner returned.
  const SpanIdentity span = b.span_identity();
  auto r = Tensor::reinterpret(std::move(b), DType::i32);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().error.code(), ErrorCode::not_injective);
  EXPECT_EQ(r.error().input.span_identity(), span);
  EXPECT_EQ(r.error().input.dtype(), DType::f32);
  EXPECT_EQ(r.error().input.strides(), (Dims{0, 1}));
  auto z = Tensor::reinterpret(std::move(r.error().input), DType::c64);
  ASSERT_FALSE(z.has_value());
  EXPECT_EQ(z.error().error.code(), ErrorCode::not_injective);
  EXPECT_EQ(read_all(z.error().input.as_view()), (std::vector<float>{0, 1, 0, 1}));
}

// ---- the mutable form ------------------------------------------------------------------------------

TEST(Reinterpret, MutableReinterpretationWritesThroughTheNewDtype) {
  Tensor z = tensor_of<c64>(Dims{2}, {{1, 2}, {3, 4}});
  {
    auto m = TensorViewMut::reinterpret(z.as_view_mut(), DType::f32);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m.value().shape(), (Dims{2, 2}));
    auto prepared = std::move(m.value()).prepare_host_mut<float>();
    ASSERT_TRUE(prepared.has_value());
    auto& span = std::get<PreparedContiguousWrite<float>>(prepared.value());
    span.as_span()[3] = -4.0f;  // imag of element 1
    span.as_span()[0] = 10.0f;  // real of element 0
  }
  EXPECT_EQ(z.get(Dims{0}).real, 10.0);
  EXPECT_EQ(z.get(Dims{1}).imag, -4.0);
}

TEST(Reinterpret, MutableFailureReturnsTheViewStillWritable) {
  Tensor t = test::iota_tensor(Dims{3});
  auto r = TensorViewMut::reinterpret(t.as_view_mut(), DType::c64);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().error.code(), ErrorCode::reinterpret_invalid);
  TensorViewMut back = std::move(r.error().input);
  EXPECT_EQ(back.dtype(), DType::f32);
  EXPECT_EQ(back.shape(), Dims{3});
  back.set(Dims{2}, 30.0);
  auto again = TensorViewMut::reinterpret(std::move(back), DType::f64);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().error.code(), ErrorCode::reinterpret_invalid);
  again.error().input.set(Dims{0}, -1.0);
  { TensorViewMut done = std::move(again.error().input); }
  EXPECT_EQ(read_all(t.as_view()), (std::vector<float>{-1, 1, 30}));
}

TEST(Reinterpret, MutableReinterpretationNeedsAnInjectiveResult) {
  Tensor b = broadcast_owner();
  auto r = TensorViewMut::reinterpret(b.as_view_mut(), DType::i32);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().error.code(), ErrorCode::not_injective);
  EXPECT_EQ(r.error().input.strides(), (Dims{0, 1}));
  EXPECT_EQ(r.error().input.dtype(), DType::f32);
}

TEST(Reinterpret, MutableReinterpretationRefusedWhileAReadReborrowLives) {
  if (!core::kBorrowTrackerEnabled) GTEST_SKIP() << "borrow tracker not compiled in";
  Tensor t = test::iota_tensor(Dims{2});
  TensorViewMut m = t.as_view_mut();
  {
    TensorView reading = m.as_view();
    auto r = TensorViewMut::reinterpret(std::move(m), DType::i32);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().error.code(), ErrorCode::borrow_conflict);
    m = std::move(r.error().input);
  }
  auto ok = TensorViewMut::reinterpret(std::move(m), DType::i32);
  EXPECT_TRUE(ok.has_value());
}

TEST(Reinterpret, GroupViewsReinterpretOverTheGroupAllocation) {
  std::vector<Storage> owners;
  owners.push_back(std::move(test::iota_tensor(Dims{4})).into_storage());
  const std::vector<DescriptorSpec> specs{{AllocationSlot{0}, LayoutRequest::contiguous(DType::f32, Dims{2, 2})}};
  auto made = AllocationGroup::make(std::move(owners), specs);
  ASSERT_TRUE(made.has_value());
  AllocationGroup& g = made.value();
  TensorView z = g.view(g.slot(0)).reinterpret_view(DType::c64);
  EXPECT_EQ(z.span_identity(), g.view(g.slot(0)).span_identity());
  EXPECT_EQ(z.get(Dims{1}).real, 2.0);
  EXPECT_EQ(z.get(Dims{1}).imag, 3.0);
}

// ---- the typed family ------------------------------------------------------------------------------

TEST(Reinterpret, TypedRankPolicyAtRunTime) {
  auto z = TypedTensor<c64, 2>::from_values(Dims{1, 2}, std::vector<c64>{{1, 2}, {3, 4}});
  TypedView<float, 3> f = z.as_view().reinterpret_view<float>();
  EXPECT_EQ(f.shape(), (Dims{1, 2, 2}));
  EXPECT_EQ(f.get(Dims{0, 1, 1}), 4.0f);
  TypedView<c64, 2> back = f.reinterpret_view<c64>();
  EXPECT_EQ(back.shape(), (Dims{1, 2}));
  EXPECT_EQ(back.get(Dims{0, 1}), c64(3, 4));
  TypedView<std::int32_t, 3> ints = f.reinterpret_view<std::int32_t>();
  EXPECT_EQ(ints.get(Dims{0, 0, 0}), 0x3f800000);

  TypedView<c64> dyn(z.as_view().erased());
  TypedView<float> dyn_f = dyn.reinterpret_view<float>();
  EXPECT_EQ(dyn_f.rank(), 3);
  EXPECT_EQ(decltype(dyn_f)::static_rank, kDynRank);
}

TEST(Reinterpret, TypedFailuresAreTyped) {
  auto f = TypedTensor<float, 2>::from_values(Dims{2, 3}, std::vector<float>{0, 1, 2, 3, 4, 5});
  EXPECT_EQ(code_of([&] { (void)f.as_view().reinterpret_view<c64>(); }), ErrorCode::reinterpret_invalid);
  EXPECT_EQ(code_of([&] { (void)f.as_view().reinterpret_view<double>(); }), ErrorCode::reinterpret_invalid);
  EXPECT_EQ(code_of([&] { (void)f.as_view().reinterpret_view<std::uint8_t>(); }), ErrorCode::reinterpret_invalid);
}

}  // namespace
}  // namespace pact
