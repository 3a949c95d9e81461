// Guard bands (Note [Guard bands], pact/core/provider.cpp): the kernel test binary turns them on for itself,
// before main and so before its first host allocation, however it is started (ctest, the sanitizer lanes, by
// hand), so every sweep here also checks that no kernel reads or writes outside its storage. These tests show
// the bands are on and that they catch what they are for.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "pact/core/provider.hpp"

namespace pact {
namespace {

// PACT_HOST_GUARD is read once, at the first host allocation, which comes after static initialisation.
const bool kGuardRequested = ::setenv("PACT_HOST_GUARD", "1", 1) == 0;

TEST(HostGuard, IsOnForTheKernelTests) {
  ASSERT_TRUE(kGuardRequested);
  ASSERT_TRUE(host_guard_bands()) << "a host block was allocated before PACT_HOST_GUARD=1 was set";
}

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

// Allocates `bytes` from the cpu provider, changes the float at byte `offset` from the block's start (to 1,
// or by adding 2 to what is there when `accumulate`), and releases the block.
void touch_and_release(std::uint64_t bytes, std::int64_t offset, bool accumulate) {
  auto provider = cpu_provider();
  const ProviderAllocation a = provider->allocate(bytes);
  auto* at = provider->map_host(a) + offset;
  float value = 1.0F;
  if (accumulate) {
    std::memcpy(&value, at, sizeof(value));
    volatile float x = 2.0F;
    value += x;
  }
  std::memcpy(at, &value, sizeof(value));
  provider->deallocate(a);
}

TEST(HostGuardDeathTest, AWriteOnePastTheEndAbortsAtRelease) {
  ASSERT_TRUE(host_guard_bands());
  EXPECT_DEATH(touch_and_release(37 * sizeof(float), 37 * sizeof(float), false),
               "a 148-byte host allocation was written outside its bounds \\(at offset 148, past its end\\)");
}

// An accumulation into the band (band += x), which a quiet-NaN band would not show: the sum is a quiet NaN.
TEST(HostGuardDeathTest, AnAccumulationPastTheEndAbortsAtRelease) {
  ASSERT_TRUE(host_guard_bands());
  EXPECT_DEATH(touch_and_release(8 * sizeof(float), 8 * sizeof(float), true),
               "a 32-byte host allocation was written outside its bounds \\(at offset 34, past its end\\)");
}

TEST(HostGuardDeathTest, AWriteBeforeTheStartAbortsAtRelease) {
  ASSERT_TRUE(host_guard_bands());
  EXPECT_DEATH(touch_and_release(16, -static_cast<std::int64_t>(sizeof(float)), false),
               "a 16-byte host allocation was written outside its bounds \\(at offset -4, before its start\\)");
}

}  // namespace
}  // namespace pact
