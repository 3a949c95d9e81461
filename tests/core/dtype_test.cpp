// Dtypes and conversions.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "test_util.hpp"

namespace pact {
namespace {

TEST(DType, NamesRoundTripAndUnknownIsTyped) {
  for (int i = 0; i < kDTypeCount; ++i) {
    auto d = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
    EXPECT_GT(dtype_size(d), 0u);
    EXPECT_EQ(dtype_size(d) % dtype_alignment(d), 0u);
  }
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
  EXPECT_EQ(test::code_of([] { parse_dtype("float32"); }), ErrorCode::parse_error);
}

TEST(DType, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(from_bf16(to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(from_bf16(to_bf16(-2.5f)), -2.5f);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(from_bf16(to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST(DType, HalfCoversNormalsSubnormalsOverflowAndNaN) {
  EXPECT_EQ(to_f16(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_f16(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_f16(65504.0f).bits, 0x7bff);                      // largest finite
  EXPECT_EQ(to_f16(65520.0f).bits, 0x7c00);                      // rounds to infinity
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -24)).bits, 0x0001);         // smallest subnormal
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -25)).bits, 0x0000);         // halfway to zero: ties to even
  EXPECT_EQ(to_f16(std::ldexp(3.0f, -25)).bits, 0x0002);         // 1.5 ulp -> 2 (even)
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -14)).bits, 0x0400);         // smallest normal
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);  // tie to even
  EXPECT_EQ(to_f16(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);
  EXPECT_TRUE(std::isnan(from_f16(to_f16(std::numeric_limits<float>::quiet_NaN()))));
  // Every half value converts to float and back unchanged.
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    Half h{static_cast<std::uint16_t>(b)};
    float f = from_f16(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_f16(f).bits, h.bits) << std::hex << b;
  }
}

TEST(DType, ConvertElementSaturatesAndRejectsComplexToReal) {
  auto conv = [](DType from, auto in, DType to, auto out) {
    convert_element(from, reinterpret_cast<const std::byte*>(&in), to, reinterpret_cast<std::byte*>(&out));
    return out;
  };
  EXPECT_EQ(conv(DType::f32, 3.9f, DType::i32, std::int32_t{0}), 3);
  EXPECT_EQ(conv(DType::f32, -3.9f, DType::i32, std::int32_t{0}), -3);
  EXPECT_EQ(conv(DType::f64, 1e20, DType::i32, std::int32_t{0}), std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(conv(DType::f32, -5.0f, DType::u8, std::uint8_t{0}), 0);
  EXPECT_EQ(conv(DType::f32, -5.9f, DType::i8, std::int8_t{0}), -5);
  EXPECT_EQ(conv(DType::f32, 300.0f, DType::i8, std::int8_t{0}), 127);
  EXPECT_EQ(conv(DType::f32, -300.0f, DType::i8, std::int8_t{0}), -128);
  EXPECT_EQ(conv(DType::i8, std::int8_t{-7}, DType::f32, 0.0f), -7.0f);
  EXPECT_EQ(conv(DType::f32, std::numeric_limits<float>::quiet_NaN(), DType::i64, std::int64_t{1}), 0);
  EXPECT_EQ(conv(DType::i64, std::int64_t{(1LL << 53) + 1}, DType::i64, std::int64_t{0}), (1LL << 53) + 1);
  EXPECT_EQ(conv(DType::f32, 0.5f, DType::boolean, std::uint8_t{0}), 1);
  EXPECT_EQ(conv(DType::i32, std::int32_t{7}, DType::f16, Half{}).bits, to_f16(7.0f).bits);
  EXPECT_EQ(test::code_of([&] { conv(DType::c64, std::complex<float>(1, 2), DType::f32, 0.0f); }),
            ErrorCode::unsupported);
}

TEST(DType, TensorConvertFollowsElementRulesAndTheLedger) {
  Tensor t = test::iota_tensor(Dims{2, 3});
  AccountingRecorder ledger;
  Tensor h = t.transpose(0, 1).convert(DType::f16);  // strided source, contiguous result
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_TRUE(h.is_contiguous());
  EXPECT_EQ(h.shape(), (Dims{3, 2}));
  EXPECT_EQ(h.get(Dims{2, 1}).real, 5.0);  // element [1, 2] of the source
  Tensor i = h.convert(DType::i32);
  EXPECT_EQ(i.get(Dims{1, 0}).integer, 1);
  EXPECT_EQ(ledger.allocation_multiset(), (std::map<AllocationReason, int>{{AllocationReason::OperationOutput, 2}}));
  EXPECT_TRUE(ledger.copies().empty());  // conversions compute new values: not copies
  TypedTensor<double, 2> d = TypedTensor<float, 2>::from(std::move(t)).value().convert<double>();
  EXPECT_EQ(d.get(Dims{1, 1}), 4.0);
  EXPECT_EQ(test::code_of([&] { d.as_view().erased().convert(DType::c64); }), ErrorCode::unsupported);
  Tensor m = Tensor::empty(Dims{2}, DType::f32, meta_provider());
  EXPECT_EQ(test::code_of([&] { m.convert(DType::f64); }), ErrorCode::no_host_bytes);
}

// TensorView::convert runs one typed loop per floating pair over a contiguous source and convert_element
// per element otherwise: both routes give every value the element rule gives (rounding ties, NaN, infinities,
// signed zeros, f16 subnormals and overflow).
TEST(DType, ContiguousFloatConversionsMatchTheElementRule) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values{0.0f,
                                  -0.0f,
                                  1.0f,
                                  -2.5f,
                                  1.00390625f,
                                  1.01171875f,
                                  3.0e38f,
                                  -3.0e38f,
                                  inf,
                                  -inf,
                                  std::numeric_limits<float>::quiet_NaN(),
                                  65504.0f,
                                  65520.0f,
                                  70000.0f,
                                  6.0e-8f,
                                  3.0e-8f,
                                  1.0e-45f,
                                  0.1f,
                                  1.0f / 3.0f,
                                  -1.0e-5f};
  const DType floats[] = {DType::f32, DType::f64, DType::bf16, DType::f16};
  for (DType from : floats) {
    const Tensor src = Tensor::from_values<float>(Dims{static_cast<std::int64_t>(values.size())}, values).convert(from);
    for (DType to : floats) {
      if (to == from) continue;
      const Tensor fast = src.convert(to);  // contiguous: the typed loop
      const Tensor strided = Tensor::from_values<float>(Dims{2, static_cast<std::int64_t>(values.size())},
                                                        [&] {
                                                          std::vector<float> two(values);
                                                          two.insert(two.end(), values.begin(), values.end());
                                                          return two;
                                                        }())
                                 .convert(from);
      const Tensor slow = strided.as_view().transpose(0, 1).convert(to);  // strided: element by element
      for (std::int64_t i = 0; i < static_cast<std::int64_t>(values.size()); ++i) {
        std::byte want[8] = {}, got[8] = {};
        const double x = src.get(Dims{i}).real;
        convert_element(DType::f64, reinterpret_cast<const std::byte*>(&x), to, want);
        const double f = fast.get(Dims{i}).real, e = slow.get(Dims{i, 0}).real;
        convert_element(DType::f64, reinterpret_cast<const std::byte*>(&f), to, got);
        const auto same = [](double a, double b) {
          return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
        };
        EXPECT_TRUE(same(f, e)) << dtype_name(from) << " -> " << dtype_name(to) << " element " << i << ": " << f
                                << " vs " << e;
        EXPECT_EQ(std::memcmp(want, got, dtype_size(to)), 0) << dtype_name(from) << " -> " << dtype_name(to);
      }
    }
  }
}

}  // namespace
}  // namespace pact
