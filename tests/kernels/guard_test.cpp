// Guard bands (Note [Guard bands], pact/core/provider.cpp): the kernel tests run with PACT_HOST_GUARD=1
// (tests/kernels/CMakeLists.txt), so every sweep here also checks that no kernel reads or writes outside its
// storage. These tests show the bands are on and that they catch what they are for.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "pact/core/provider.hpp"

namespace pact {
namespace {

TEST(HostGuard, IsOnForTheKernelTests) { ASSERT_TRUE(host_guard_bands()) << "PACT_HOST_GUARD=1 is not set"; }

TEST(HostGuard, BytesOutsideABlockReadAsSignallingNans) {
  ASSERT_TRUE(host_guard_bands());
  auto provider = cpu_provider();
  const ProviderAllocation a = provider->allocate(37 * sizeof(float));
  auto* bytes = provider->map_host(a);
  float past = 0, before = 0;
  std::memcpy(&past, bytes + 37 * sizeof(float), sizeof(float));
  std::memcpy(&before, bytes - sizeof(float), sizeof(float));
  EXPECT_TRUE(std::isnan(past));
  EXPECT_TRUE(std::isnan(before));
  std::uint32_t word = 0;
  std::memcpy(&word, bytes + 37 * sizeof(float), sizeof(word));
  EXPECT_EQ(word, 0x7FA5A5A5U);  // a signalling NaN: arithmetic on it gives a quiet NaN, other bytes
  provider->deallocate(a);       // untouched bands: released quietly
}

TEST(HostGuardDeathTest, AWriteOnePastTheEndAbortsAtRelease) {
  ASSERT_TRUE(host_guard_bands());
  EXPECT_DEATH(
      {
        auto provider = cpu_provider();
        const ProviderAllocation a = provider->allocate(37 * sizeof(float));
        auto* bytes = provider->map_host(a);
        const float one = 1.0F;
        std::memcpy(bytes + 37 * sizeof(float), &one, sizeof(one));  // the element after the last
        provider->deallocate(a);
      },
      "a 148-byte host allocation was written outside its bounds \\(at offset 148, past its end\\)");
}

// An accumulation into the band (band += x), which a quiet-NaN band would not show: the sum is a quiet NaN.
TEST(HostGuardDeathTest, AnAccumulationPastTheEndAbortsAtRelease) {
  ASSERT_TRUE(host_guard_bands());
  EXPECT_DEATH(
      {
        auto provider = cpu_provider();
        const ProviderAllocation a = provider->allocate(8 * sizeof(float));
        auto* bytes = provider->map_host(a);
        float past = 0;
        std::memcpy(&past, bytes + 8 * sizeof(float), sizeof(past));
        volatile float x = 2.0F;
        past += x;
        std::memcpy(bytes + 8 * sizeof(float), &past, sizeof(past));
        provider->deallocate(a);
      },
      "a 32-byte host allocation was written outside its bounds \\(at offset 34, past its end\\)");
}

TEST(HostGuardDeathTest, AWriteBeforeTheStartAbortsAtRelease) {
  ASSERT_TRUE(host_guard_bands());
  EXPECT_DEATH(
      {
        auto provider = cpu_provider();
        const ProviderAllocation a = provider->allocate(16);
        auto* bytes = provider->map_host(a);
        const float one = 1.0F;
        std::memcpy(bytes - sizeof(float), &one, sizeof(one));
        provider->deallocate(a);
      },
      "a 16-byte host allocation was written outside its bounds \\(at offset -4, before its start\\)");
}

}  // namespace
}  // namespace pact
