// Layout property tests (seed 001 G1 acceptance): empty, singleton, reverse-stride, noncontiguous,
// overflow, out-of-span, misaligned, wrong-dtype and non-injective layouts.

#include "pact/core/layout.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <set>

#include "test_util.hpp"

namespace pact {
namespace {

using test::code_of;

SpanBounds bounds(std::uint64_t bytes, std::uint64_t begin = 0) { return SpanBounds{7, begin, bytes, 64}; }

LayoutRequest request(DType dtype, Dims shape, Dims strides, std::int64_t byte_offset) {
  return LayoutRequest{dtype, shape, strides, byte_offset};
}

TEST(Layout, ContiguousRequestIsContiguousAndInjective) {
  auto l = check_layout("t", LayoutRequest::contiguous(DType::f32, Dims{2, 3, 4}), bounds(96));
  EXPECT_TRUE(l.is_contiguous());
  EXPECT_TRUE(l.is_injective());
  EXPECT_EQ(l.numel(), 24);
  EXPECT_EQ(l.envelope_begin(), 0u);
  EXPECT_EQ(l.envelope_end(), 96u);
  EXPECT_EQ(l.plan().rank, 1);  // merged into one run
  EXPECT_EQ(l.plan().extent[0], 24);
}

TEST(Layout, EmptyShapeHasNoElementsAndEmptyEnvelope) {
  auto l = check_layout("t", request(DType::f32, Dims{3, 0, 5}, Dims{0, 0, 0}, 8), bounds(16));
  EXPECT_EQ(l.numel(), 0);
  EXPECT_TRUE(l.is_injective());
  EXPECT_EQ(l.envelope_begin(), l.envelope_end());
  EXPECT_EQ(l.plan().count, 0);
  // An empty layout may sit at the very end of the span but not past it.
  EXPECT_NO_THROW(check_layout("t", request(DType::f32, Dims{0}, Dims{1}, 16), bounds(16)));
  EXPECT_EQ(code_of([] { check_layout("t", request(DType::f32, Dims{0}, Dims{1}, 20), bounds(16)); }),
            ErrorCode::out_of_span);
}

TEST(Layout, SingletonAndScalar) {
  auto scalar = check_layout("t", request(DType::f64, Dims{}, Dims{}, 8), bounds(16));
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.envelope_begin(), 8u);
  EXPECT_EQ(scalar.envelope_end(), 16u);
  auto single = check_layout("t", request(DType::f32, Dims{1, 1}, Dims{99, -5}, 0), bounds(4));
  EXPECT_EQ(single.numel(), 1);
  EXPECT_TRUE(single.is_contiguous());  // extent-1 strides do not matter
  EXPECT_TRUE(single.is_injective());
}

TEST(Layout, ReverseStrideStaysInsideTheSpan) {
  // Elements 3, 2, 1, 0 of a 4-float buffer: element [0] at byte 12, stride -1.
  auto l = check_layout("t", request(DType::f32, Dims{4}, Dims{-1}, 12), bounds(16));
  EXPECT_FALSE(l.is_contiguous());
  EXPECT_TRUE(l.is_injective());
  EXPECT_EQ(l.envelope_begin(), 0u);
  EXPECT_EQ(l.envelope_end(), 16u);
  // One element further would reach byte -4.
  EXPECT_EQ(code_of([] { check_layout("t", request(DType::f32, Dims{5}, Dims{-1}, 12), bounds(16)); }),
            ErrorCode::out_of_span);
}

TEST(Layout, NoncontiguousTransposeIsInjectiveNotContiguous) {
  auto l = check_layout("t", request(DType::f32, Dims{4, 3}, Dims{1, 4}, 0), bounds(48));
  EXPECT_FALSE(l.is_contiguous());
  EXPECT_TRUE(l.is_injective());
  EXPECT_EQ(l.plan().rank, 2);
}

TEST(Layout, OverflowIsTypedNeverWrapped) {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max() / 2;
  EXPECT_EQ(code_of([&] {
              check_layout("t", request(DType::f32, Dims{big, 4}, Dims{4, 1}, 0), bounds(1 << 20));
            }),
            ErrorCode::layout_overflow);
  EXPECT_EQ(code_of([&] { check_layout("t", request(DType::f32, Dims{3}, Dims{big}, 0), bounds(1 << 20)); }),
            ErrorCode::layout_overflow);
  EXPECT_EQ(code_of([&] {
              check_layout("t", request(DType::f64, Dims{2}, Dims{std::numeric_limits<std::int64_t>::max() / 8}, 0),
                           bounds(1 << 20));
            }),
            ErrorCode::layout_overflow);
  EXPECT_EQ(code_of([&] { check_layout("t", request(DType::f32, Dims{-1}, Dims{1}, 0), bounds(16)); }),
            ErrorCode::invalid_argument);
}

TEST(Layout, OutOfSpanNamesTheSpan) {
  try {
    check_layout("descriptor.check", LayoutRequest::contiguous(DType::f32, Dims{5}), bounds(16, 32));
    FAIL() << "accepted a layout past its span";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::out_of_span);
    EXPECT_EQ(e.operation(), "descriptor.check");
    ASSERT_TRUE(e.span().has_value());
    EXPECT_EQ(e.span()->allocation_id, 7u);
    EXPECT_EQ(e.span()->byte_begin, 32u);
    EXPECT_EQ(e.span()->byte_end, 48u);
    EXPECT_NE(std::string(e.what()).find("f32[5]"), std::string::npos);
  }
}

TEST(Layout, MisalignedFirstElement) {
  EXPECT_EQ(code_of([] { check_layout("t", LayoutRequest::contiguous(DType::f32, Dims{2}, 2), bounds(16)); }),
            ErrorCode::misaligned);
  // A claim that starts at an odd byte misaligns even offset 0.
  EXPECT_EQ(code_of([] { check_layout("t", LayoutRequest::contiguous(DType::f64, Dims{1}), bounds(16, 4)); }),
            ErrorCode::misaligned);
  EXPECT_NO_THROW(check_layout("t", LayoutRequest::contiguous(DType::u8, Dims{3}, 1), bounds(16)));
}

TEST(Layout, WrongArityAndRank) {
  EXPECT_EQ(code_of([] {
              check_layout("t", request(DType::f32, Dims{2, 2}, Dims{1}, 0), bounds(16));
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] {
              Dims d{1, 1, 1, 1, 1, 1, 1, 1};
              d.push_back(1);
            }),
            ErrorCode::rank_exceeded);
}

TEST(Layout, WrongDtypeAccessIsRefused) {
  Tensor t = test::iota_tensor(Dims{4});
  auto r = t.as_view().prepare_host<double>();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().error.code(), ErrorCode::dtype_mismatch);
  EXPECT_EQ(r.error().input.dtype(), DType::f32);  // the view comes back unchanged
}

TEST(Layout, NonInjectiveLayoutsAreDetected) {
  auto broadcast = check_layout("t", request(DType::f32, Dims{4, 3}, Dims{0, 1}, 0), bounds(12));
  EXPECT_FALSE(broadcast.is_injective());
  auto overlapping = check_layout("t", request(DType::f32, Dims{3, 3}, Dims{1, 1}, 0), bounds(64));
  EXPECT_FALSE(overlapping.is_injective());
  auto interleaved = check_layout("t", request(DType::f32, Dims{2, 3}, Dims{3, 1}, 0), bounds(64));
  EXPECT_TRUE(interleaved.is_injective());
}

// Property: for random small layouts, the envelope contains every element's bytes, and provable
// injectivity never claims injective when two indices collide.
TEST(Layout, RandomLayoutsEnvelopeAndInjectivityAreSound) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> rank_d(0, 3), extent_d(0, 4), stride_d(-6, 6), offset_d(0, 40);
  int accepted = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    LayoutRequest r;
    r.dtype = DType::f32;
    int rank = rank_d(rng);
    for (int d = 0; d < rank; ++d) {
      r.shape.push_back(extent_d(rng));
      r.strides.push_back(stride_d(rng));
    }
    r.byte_offset = 4 * offset_d(rng);
    CheckedLayout l;
    try {
      l = check_layout("t", r, bounds(4 * 48));
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::out_of_span) << describe(r);
      continue;
    }
    ++accepted;
    std::multiset<std::int64_t> offsets;
    std::array<std::int64_t, kMaxRank> idx{};
    for (std::int64_t n = 0; n < l.numel(); ++n) {
      std::int64_t off = r.byte_offset;
      for (int d = 0; d < rank; ++d) off += idx[static_cast<std::size_t>(d)] * r.strides[d] * 4;
      EXPECT_GE(off, static_cast<std::int64_t>(l.envelope_begin()));
      EXPECT_LE(off + 4, static_cast<std::int64_t>(l.envelope_end()));
      offsets.insert(off);
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[static_cast<std::size_t>(d)] < r.shape[d]) break;
        idx[static_cast<std::size_t>(d)] = 0;
      }
    }
    const bool truly_injective = std::set<std::int64_t>(offsets.begin(), offsets.end()).size() == offsets.size();
    if (l.is_injective()) {
      EXPECT_TRUE(truly_injective) << describe(r);
    }
  }
  EXPECT_GT(accepted, 1000);
}

}  // namespace
}  // namespace pact

namespace pact {
namespace {
// Regression (UBSan, found by the layout fuzzer): contiguous strides of an empty shape whose other
// extents multiply past int64 saturate instead of overflowing.
TEST(Layout, EmptyShapeWithHugeExtentsDoesNotOverflow) {
  const std::int64_t huge = std::int64_t{1} << 62;
  const Dims s = contiguous_strides(Dims{huge, huge, huge, 0});
  EXPECT_EQ(s[3], 1);
  EXPECT_EQ(s[1], huge);
  EXPECT_EQ(s[0], std::numeric_limits<std::int64_t>::max());  // saturated, never wrapped
  auto l =
      check_layout("t", LayoutRequest{DType::f32, Dims{huge, 0, huge}, Dims{1, 1, 1}, 0}, SpanBounds{1, 0, 16, 64});
  EXPECT_EQ(l.numel(), 0);
  EXPECT_EQ(
      check_layout("t", LayoutRequest{DType::f32, Dims{huge, huge, 0}, Dims{huge, 3, 1}, 0}, SpanBounds{1, 0, 16, 64})
          .numel(),
      0);
  Tensor t = Tensor::empty(Dims{huge, 0, huge}, DType::f32);
  EXPECT_EQ(t.numel(), 0);
}
}  // namespace
}  // namespace pact
