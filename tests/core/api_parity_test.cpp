// Ownership in the types and API parity (seed 001 G4). Compile-time facts are static_asserts: if a
// family drifts from the canonical method lists, or an owner becomes copyable, this file stops
// compiling and the suite fails.

#include <gtest/gtest.h>

#include <type_traits>

#include "test_util.hpp"

namespace pact {
namespace {

// Owners and claims are move-only.
static_assert(!std::is_copy_constructible_v<Storage> && !std::is_copy_assignable_v<Storage>);
static_assert(!std::is_copy_constructible_v<Tensor> && !std::is_copy_assignable_v<Tensor>);
static_assert(!std::is_copy_constructible_v<TensorViewMut>);
static_assert(!std::is_copy_constructible_v<RootResource>);
static_assert(!std::is_copy_constructible_v<AllocationGroup>);
static_assert(!std::is_copy_constructible_v<TypedTensor<float, 2>>);
static_assert(!std::is_copy_constructible_v<TypedViewMut<float, 2>>);
static_assert(std::is_nothrow_move_constructible_v<Tensor> && std::is_nothrow_move_constructible_v<Storage>);
// Shared views copy (each copy is one more shared borrow).
static_assert(std::is_copy_constructible_v<TensorView>);

// Write preparation cannot be reached from a read view.
template <class V>
concept HasWritePreparation = requires(V v) {
  std::move(v).template prepare_host_mut<float>();
};
template <class V>
concept HasTypedWritePreparation = requires(V v) {
  std::move(v).prepare_host_mut();
};
template <class V>
concept HasMutation = requires(V v) {
  v.set(Dims{}, 1.0);
}
|| requires(V v) { v.fill(1.0); };
static_assert(!HasWritePreparation<TensorView>);
static_assert(!HasTypedWritePreparation<TypedView<float, 2>>);
static_assert(!HasMutation<TensorView> && !HasMutation<TypedView<float>>);
static_assert(HasWritePreparation<TensorViewMut> && HasWritePreparation<Tensor>);
static_assert(HasTypedWritePreparation<TypedViewMut<float, 2>>);
// No owner projection from a view: nothing hands back a Storage or Tensor except consuming owners.
template <class V>
concept HasIntoStorage = requires(V v) {
  std::move(v).into_storage();
};
static_assert(HasIntoStorage<Tensor> && !HasIntoStorage<TensorView> && !HasIntoStorage<TensorViewMut>);

// Rank is preserved by views and slices of the typed family.
static_assert(std::is_same_v<decltype(std::declval<TypedTensor<float, 3>>().as_view()), TypedView<float, 3>>);
static_assert(std::is_same_v<decltype(std::declval<TypedView<float, 3>>().slice(0, 0, 1)), TypedView<float, 3>>);
static_assert(std::is_same_v<decltype(std::declval<TypedViewMut<float, 3>>().as_view()), TypedView<float, 3>>);
static_assert(
    std::is_same_v<decltype(std::declval<TypedViewMut<float, 3>>().slice_mut(0, 0, 1)), TypedViewMut<float, 3>>);
static_assert(std::is_same_v<decltype(std::declval<TypedView<double>>().transpose(0, 1)), TypedView<double>>);

// One canonical method list per capability (PACT_READ_METHODS / PACT_WRITE_METHODS in tensor.hpp).
// Each method is probed by name with a member-pointer-free check: the family must expose a member of
// that name callable with the canonical arguments.
template <class V>
concept ReadFamily = requires(const V& v, const Dims& i) {
  v.dtype();
  v.shape();
  v.strides();
  v.byte_offset();
  v.rank();
  v.numel();
  v.nbytes();
  v.is_contiguous();
  v.device();
  v.provider_name();
  v.span_identity();
  v.get(i);
  v.slice(0, 0, 1);
  v.transpose(0, 1);
  v.flip(0);
  v.reshape(Dims{-1});
  v.duplicate();
  v.transfer_to(cpu_provider());
  v.to_host();
  v.to_string();
};
template <class V>
concept ErasedReadFamily = ReadFamily<V> && requires(const V& v, V&& r) {
  std::move(r).template prepare_host<float>();
  std::move(r).prepare_device();
  v.reinterpret_view(DType::i32);
  v.convert(DType::f64);
};
template <class V>
concept TypedReadFamily = ReadFamily<V> && requires(const V& v, V&& r) {
  std::move(r).prepare_host();
  std::move(r).prepare_device();
  v.template reinterpret_view<std::int32_t>();
  v.template convert<double>();
};
template <class V>
concept WriteFamily = requires(V& v, const Dims& i) {
  v.set(i, 1.0);
  v.fill(1.0);
  std::move(v).slice_mut(0, 0, 1);
};
static_assert(ErasedReadFamily<Tensor> && ErasedReadFamily<TensorView> && ErasedReadFamily<TensorViewMut>);
static_assert(TypedReadFamily<TypedTensor<float, 2>> && TypedReadFamily<TypedView<float, 2>> &&
              TypedReadFamily<TypedViewMut<float, 2>>);
static_assert(WriteFamily<Tensor> && WriteFamily<TensorViewMut>);
static_assert(WriteFamily<TypedTensor<float, 2>> && WriteFamily<TypedViewMut<float, 2>>);

// The concepts above must name every entry of the canonical lists: count them against the macros.
#define PACT_COUNT(name) +1
constexpr int kReadMethods = 0 PACT_READ_METHODS(PACT_COUNT);
constexpr int kWriteMethods = 0 PACT_WRITE_METHODS(PACT_COUNT);
#undef PACT_COUNT
// ReadFamily probes 19 names; the Erased/TypedReadFamily concepts 4 more (prepare_host, prepare_device,
// reinterpret_view, convert).
static_assert(kReadMethods == 24, "PACT_READ_METHODS changed: update the ReadFamily concepts above");
// WriteFamily probes set, fill, slice_mut; copy_from, prepare_host_mut and prepare_device_mut are probed below.
static_assert(kWriteMethods == 6, "PACT_WRITE_METHODS changed: update the WriteFamily concepts above");
template <class V, class Src>
concept CopyAndPrepareWrite = requires(V& v, const Src& s) {
  v.copy_from(s);
  std::move(v).prepare_device_mut();
};
static_assert(CopyAndPrepareWrite<Tensor, TensorView> && CopyAndPrepareWrite<TensorViewMut, TensorView>);
static_assert(CopyAndPrepareWrite<TypedTensor<float, 2>, TypedView<float, 2>> &&
              CopyAndPrepareWrite<TypedViewMut<float, 2>, TypedView<float, 2>>);

// Runtime parity: the same values through every family.
TEST(ApiParity, FamiliesObserveTheSameValues) {
  Tensor owner = test::iota_tensor(Dims{3, 4});
  const float expected = 6.0f;  // element [1, 2]
  EXPECT_EQ(owner.get(Dims{1, 2}).real, expected);
  EXPECT_EQ(owner.as_view().get(Dims{1, 2}).real, expected);
  EXPECT_EQ(owner.as_view_mut().get(Dims{1, 2}).real, expected);
  auto typed = TypedTensor<float, 2>::from(std::move(owner));
  ASSERT_TRUE(typed.has_value());
  EXPECT_EQ(typed->get(Dims{1, 2}), expected);
  EXPECT_EQ(typed->as_view().get(Dims{1, 2}), expected);
  EXPECT_EQ(typed->as_view_mut().get(Dims{1, 2}), expected);
  EXPECT_EQ(typed->transpose(0, 1).get(Dims{2, 1}), expected);
  // reshape on every family: element [1, 2] of [3, 4] is element 6 of [12] and [3, 2] of [6, 2].
  EXPECT_EQ(typed->reshape(Dims{12}).get(Dims{6}), expected);
  EXPECT_EQ(typed->as_view().reshape(Dims{6, 2}).get(Dims{3, 0}), expected);
  EXPECT_EQ(typed->as_view_mut().reshape(Dims{2, 6}).get(Dims{1, 0}), expected);
  Tensor erased = test::iota_tensor(Dims{3, 4});
  EXPECT_EQ(erased.reshape(Dims{12}).get(Dims{6}).real, expected);
  EXPECT_EQ(erased.as_view().reshape(Dims{4, 3}).get(Dims{2, 0}).real, expected);
  EXPECT_EQ(erased.as_view_mut().reshape(Dims{12}).get(Dims{6}).real, expected);
  EXPECT_EQ(typed->as_view().erased().to_string(), typed->to_string());
}

TEST(ApiParity, TypedConstructionChecksDtypeAndStaticRank) {
  auto wrong_rank = TypedTensor<float, 3>::from(test::iota_tensor(Dims{2, 2}));
  ASSERT_FALSE(wrong_rank.has_value());
  EXPECT_EQ(wrong_rank.error().error.code(), ErrorCode::invalid_argument);
  EXPECT_EQ(wrong_rank.error().input.shape(), (Dims{2, 2}));  // the owner comes back
  auto wrong_dtype = TypedTensor<double>::from(test::iota_tensor(Dims{2}));
  ASSERT_FALSE(wrong_dtype.has_value());
  EXPECT_EQ(wrong_dtype.error().error.code(), ErrorCode::dtype_mismatch);
  auto dyn = TypedTensor<float>::from(test::iota_tensor(Dims{2, 2, 2}));
  EXPECT_TRUE(dyn.has_value());
}

}  // namespace
}  // namespace pact
