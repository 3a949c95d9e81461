// The half provider's own code (pact/kernels/cpu/half.hpp) at every ISA level this CPU runs: the 16-bit
// conversions agree with the storage core's (to_bf16, to_f16: round to nearest even, subnormals, overflow,
// NaN), and the 16-bit weight GEMV with a float64 loop. Its kernels' values are the op oracle's
// (OpOracle.HalfMatchesPyTorchFloat64).

#include "pact/kernels/cpu/half.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "pact/core/cpu.hpp"

namespace pact {
namespace {

// Values that exercise the rounding: ties in both directions, subnormals of both formats, the largest
// finite values and past them, zeros, infinities and NaN; then random normals over a wide range.
std::vector<float> probe_values() {
  std::vector<float> v{0.0f,
                       -0.0f,
                       1.0f,
                       -1.0f,
                       std::bit_cast<float>(0x3f808000u),  // 1 + 2^-8: a bf16 tie, rounds to even (down)
                       std::bit_cast<float>(0x3f818000u),  // 1 + 3 * 2^-8: a tie that rounds up
                       std::bit_cast<float>(0x3f800001u),  // just above 1
                       1.0f + 0x1p-11f,                    // an f16 tie
                       1.0f + 3 * 0x1p-11f,
                       65504.0f,  // f16's largest finite
                       65520.0f,  // rounds to f16 infinity
                       1e6f,
                       -1e6f,
                       0x1p-14f,   // f16's smallest normal
                       0x1p-20f,   // an f16 subnormal
                       0x1p-25f,   // below half of f16's smallest subnormal: zero
                       0x1p-130f,  // an f32 subnormal
                       std::numeric_limits<float>::max(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int i = 0; i < 200; ++i) v.push_back(std::ldexp(nd(rng), exponent(rng)));
  return v;
}

bool f32_subnormal(float x) { return x != 0.0f && std::abs(x) < std::numeric_limits<float>::min(); }

TEST(Half, ConversionsAgreeWithTheStorageCoreAtEveryLevel) {
  const std::vector<float> x = probe_values();
  const auto n = static_cast<std::int64_t>(x.size());
  int levels = 0;
  for (Isa level : kIsaLevels) {
    ScopedIsa forced(level);
    if (!forced.active()) continue;
    ++levels;
    SCOPED_TRACE(std::string(isa_name(level)));
    // Every length up to 40 crosses the vector widths and leaves each tail length.
    for (std::int64_t len : {n, std::int64_t{1}, std::int64_t{7}, std::int64_t{17}, std::int64_t{33}}) {
      std::vector<BFloat16> b(static_cast<std::size_t>(len));
      std::vector<Half> h(static_cast<std::size_t>(len));
      kernels::cpu::narrow_bf16(x.data(), b.data(), len);
      kernels::cpu::narrow_f16(x.data(), h.data(), len);
      for (std::int64_t i = 0; i < len; ++i) {
        const float xi = x[static_cast<std::size_t>(i)];
        const BFloat16 want_b = to_bf16(xi);
        const Half want_h = to_f16(xi);
        const BFloat16 got_b = b[static_cast<std::size_t>(i)];
        const Half got_h = h[static_cast<std::size_t>(i)];
        if (std::isnan(xi)) {
          EXPECT_TRUE(std::isnan(from_bf16(got_b)));
          EXPECT_TRUE(std::isnan(from_f16(got_h)));
          continue;
        }
        if (level == Isa::avx512_bf16 && f32_subnormal(xi)) {
          EXPECT_EQ(from_bf16(got_b), 0.0f) << xi;  // vcvtneps2bf16 flushes subnormal inputs
        } else {
          EXPECT_EQ(got_b.bits, want_b.bits) << "bf16 of " << xi << " at " << i;
        }
        EXPECT_EQ(got_h.bits, want_h.bits) << "f16 of " << xi << " at " << i;
      }
      // Widening is exact: it gives back the storage core's value of each 16-bit number.
      std::vector<float> wb(static_cast<std::size_t>(len)), wh(static_cast<std::size_t>(len));
      kernels::cpu::widen_bf16(b.data(), wb.data(), len);
      kernels::cpu::widen_f16(h.data(), wh.data(), len);
      for (std::int64_t i = 0; i < len; ++i) {
        const auto k = static_cast<std::size_t>(i);
        if (std::isnan(x[k])) continue;
        EXPECT_EQ(std::bit_cast<std::uint32_t>(wb[k]), std::bit_cast<std::uint32_t>(from_bf16(b[k])));
        EXPECT_EQ(std::bit_cast<std::uint32_t>(wh[k]), std::bit_cast<std::uint32_t>(from_f16(h[k])));
      }
    }
  }
  EXPECT_GE(levels, 1);
}

// y = x W^T + b against a float64 loop, for depths that leave every tail of every level's vectors
// (16, 32, 64 elements) and a weight large enough to be shared among threads.
TEST(Half, GemvMatchesAFloat64LoopAtEveryLevel) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  for (Isa level : kIsaLevels) {
    ScopedIsa forced(level);
    if (!forced.active()) continue;
    SCOPED_TRACE(std::string(isa_name(level)));
    for (const auto& [out_f, in_f] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 1}, {3, 15}, {5, 31}, {7, 33}, {9, 64}, {4, 65}, {11, 97}, {300, 700}}) {
      SCOPED_TRACE(std::to_string(out_f) + "x" + std::to_string(in_f));
      // x is a bf16 value (a bf16 graph's activation), so every variant multiplies the same numbers.
      std::vector<float> x(static_cast<std::size_t>(in_f)), bias(static_cast<std::size_t>(out_f));
      for (auto& v : x) v = from_bf16(to_bf16(nd(rng)));
      for (auto& v : bias) v = nd(rng);
      std::vector<BFloat16> wb(static_cast<std::size_t>(out_f * in_f));
      std::vector<Half> wh(wb.size());
      for (std::size_t i = 0; i < wb.size(); ++i) {
        const float w = nd(rng);
        wb[i] = to_bf16(w);
        wh[i] = to_f16(w);
      }
      std::vector<float> yb(static_cast<std::size_t>(out_f)), yh(yb.size());
      kernels::cpu::gemv_bf16(x.data(), wb.data(), bias.data(), out_f, in_f, yb.data());
      kernels::cpu::gemv_f16(x.data(), wh.data(), nullptr, out_f, in_f, yh.data());
      for (std::int64_t j = 0; j < out_f; ++j) {
        double want_b = bias[static_cast<std::size_t>(j)], want_h = 0, magnitude = 1;
        for (std::int64_t k = 0; k < in_f; ++k) {
          const auto e = static_cast<std::size_t>(j * in_f + k);
          const double xk = x[static_cast<std::size_t>(k)];
          want_b += xk * from_bf16(wb[e]);
          want_h += xk * from_f16(wh[e]);
          magnitude += std::abs(xk * from_f16(wh[e]));
        }
        // f32 accumulation of exact products: a few f32 ulps of the sum of magnitudes.
        const double tol = 1e-6 * magnitude;
        EXPECT_NEAR(yb[static_cast<std::size_t>(j)], want_b, tol) << "bf16 row " << j;
        EXPECT_NEAR(yh[static_cast<std::size_t>(j)], want_h, tol) << "f16 row " << j;
      }
    }
  }
}

}  // namespace
}  // namespace pact
