// Sealed artifacts on a real CUDA device (label gpu; issue 8 item 9): the driver is loaded with dlopen,
// the committed publication is admitted through the driver API (inventory, parameter widths, ABI digest)
// and its vector-add kernel runs with cuLaunchKernelEx; the result is checked element by element.
// Without a driver or device the test says so and skips; under PACT_REQUIRE_GPU=1 that is a failure.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "pact/core/file.hpp"
#include "pact/seal/admission.hpp"

namespace pact::seal {
namespace {

// The checkout, or where scripts/gpu-check.sh's bundle keeps the fixtures (PACT_SOURCE_DIR on a GPU machine).
const std::string kSource =
    std::getenv("PACT_SOURCE_DIR") != nullptr ? std::getenv("PACT_SOURCE_DIR") : PACT_SOURCE_DIR;

bool gpu_required() {
  const char* v = std::getenv("PACT_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

#define PACT_GPU_OR_SKIP(why)                                       \
  do {                                                              \
    if (gpu_required()) FAIL() << "PACT_REQUIRE_GPU=1 but " << why; \
    GTEST_SKIP() << why;                                            \
  } while (false)

TEST(SealGpu, TheSealedVectorAddRunsOnTheDevice) {
  const CudaDriver* driver = nullptr;
  try {
    driver = &load_cuda_driver();
  } catch (const Error& e) {
    PACT_GPU_OR_SKIP(std::string("no CUDA driver on this machine: ") + e.what());
  }
  std::unique_ptr<SealedRuntime> rt;
  try {
    rt = std::make_unique<SealedRuntime>(*driver);
  } catch (const Error& e) {
    PACT_GPU_OR_SKIP(std::string("no CUDA device: ") + e.what());
  }
  const Manifest m =
      parse_manifest(read_file(kSource + "/examples/seal/vector_add/manifest.toml", "test"), "manifest.toml");
  const CompileProfile profile =
      parse_compile_profile(read_file(kSource + "/examples/seal/profiles/h100-sm90a.json", "test"), "profile");
  rt->admit(kSource + "/tests/fixtures/seal/vector_add", m, profile);
  EXPECT_EQ(rt->inventory("vadd_run").names, std::vector<std::string>{"vadd"});

  constexpr std::int64_t n = 100003;  // not a multiple of the block
  std::vector<float> a(n), b(n), out(n, -1.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i) * 0.5f;
    b[i] = 3.0f - static_cast<float>(i % 17);
  }
  std::uint64_t da = 0, db = 0, dout = 0;
  const std::size_t bytes = sizeof(float) * n;
  ASSERT_EQ(driver->mem_alloc(&da, bytes), kCudaSuccess);
  ASSERT_EQ(driver->mem_alloc(&db, bytes), kCudaSuccess);
  ASSERT_EQ(driver->mem_alloc(&dout, bytes), kCudaSuccess);
  ASSERT_EQ(driver->memcpy_htod(da, a.data(), bytes), kCudaSuccess);
  ASSERT_EQ(driver->memcpy_htod(db, b.data(), bytes), kCudaSuccess);
  CallData call;
  for (const char* t : {"a", "b", "out"}) call.tensors[t] = {Dims{n}, Dims{1}};
  EXPECT_EQ(rt->launch("add", call, {{"a", da}, {"b", db}, {"out", dout}}), "vadd_run");
  rt->synchronize();
  ASSERT_EQ(driver->memcpy_dtoh(out.data(), dout, bytes), kCudaSuccess);
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]) << "element " << i;
  EXPECT_TRUE(rt->evidence().gate({rt->artifact_key("vadd_run")}).passed);
  EXPECT_FALSE(rt->poisoned());
  for (auto p : {da, db, dout}) EXPECT_EQ(driver->mem_free(p), kCudaSuccess);
}

}  // namespace
}  // namespace pact::seal
