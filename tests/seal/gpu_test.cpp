// Sealed artifacts on a real CUDA device (label gpu; issue 8 item 9): the driver is loaded with dlopen,
// the committed publication is admitted through the driver API (inventory, parameter widths, ABI digest)
// and its vector-add kernel runs with cuLaunchKernelEx; the result is checked element by element.
// Without a driver or device the test says so and skips; under PACT_REQUIRE_GPU=1 that is a failure.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/core/file.hpp"
#include "pact/ir/graph.hpp"
#include "pact/plan/planner.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/seal/admission.hpp"
#include "pact/seal/sealed_kernels.hpp"

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

// Issue 26 item 5: the same kernel over Pact tensors in the CUDA provider's memory. The call data is the
// tensors' own, Pact's stream is drained before the launch, and the launch returns completed, so the output
// is read back through Pact's copy engine with no wait of the caller's.
TEST(SealGpu, TheSealedVectorAddRunsOverPactDeviceTensors) {
  if (CudaDevice::get() == nullptr) PACT_GPU_OR_SKIP("no CUDA device: " + CudaDevice::unavailable_reason());
  SealedRuntime rt(CudaDevice::get()->driver());
  const Manifest m =
      parse_manifest(read_file(kSource + "/examples/seal/vector_add/manifest.toml", "test"), "manifest.toml");
  const CompileProfile profile =
      parse_compile_profile(read_file(kSource + "/examples/seal/profiles/h100-sm90a.json", "test"), "profile");
  rt.admit(kSource + "/tests/fixtures/seal/vector_add", m, profile);
  constexpr std::int64_t n = 70001;
  std::vector<float> a(n), b(n);
  for (std::int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 101) - 7.25f;
    b[i] = static_cast<float>(i) * 0.125f;
  }
  const Tensor da = Tensor::from_values<float>(Dims{n}, a).transfer_to(cuda_provider());
  const Tensor db = Tensor::from_values<float>(Dims{n}, b).transfer_to(cuda_provider());
  Tensor out = Tensor::zeros(Dims{n}, DType::f32, cuda_provider());
  const ops::TensorType type{DType::f32, Dims{n}};
  SealedCall call;
  call.reads.emplace("a", SealedRead{da.as_view(), type});
  call.reads.emplace("b", SealedRead{db.as_view(), type});
  call.writes.emplace("out", SealedWrite{out.as_view_mut(), type});
  EXPECT_EQ(rt.launch("add", std::move(call)), "vadd_run");
  EXPECT_TRUE(rt.evidence().gate({rt.artifact_key("vadd_run")}).passed);
  const Tensor host = out.transfer_to(cpu_provider());
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(host.get(Dims{i}).real, a[i] + b[i]) << "element " << i;
  EXPECT_FALSE(rt.poisoned());
  EXPECT_FALSE(CudaDevice::get()->poisoned());
}

// `pact run --sealed`: the example binding file's publication admitted on the device, and a plan of x + y
// under cuda-external selecting its kernel for the add; the result, read back, is the sum.
TEST(SealGpu, APlanRunsTheSealedAddOverDeviceTensors) {
  if (CudaDevice::get() == nullptr) PACT_GPU_OR_SKIP("no CUDA device: " + CudaDevice::unavailable_reason());
  const auto kernels = load_sealed_kernels(kSource + "/examples/seal/vector_add/bindings.toml", cuda_provider());
  const InstalledSealedKernels installed(kernels);
  constexpr std::int64_t n = 4099;
  ir::GraphBuilder b;
  b.input("x", Dims{n});
  b.input("y", Dims{n});
  b.op("sum", ops::OpTag::add, {"x", "y"});
  b.output("sum");
  const contract::DefaultEvidenceResolver base;
  const SealedEvidenceResolver resolver = kernels->resolver(base);
  auto planned = plan::plan_graph(b.build(), kernels->profile(contract::builtin_profile("cuda-external")), resolver);
  ASSERT_TRUE(planned.has_value()) << plan::render_audit_table(planned.error().audit);
  EXPECT_EQ(planned->audit().kernels[0].capsule->name, "sealed.vadd_run");
  std::vector<float> x(n), y(n);
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = 0.75f * static_cast<float>(i);
    y[i] = static_cast<float>(i % 13) - 6.0f;
  }
  std::map<std::string, runtime::EagerTensor> bindings;
  bindings.emplace("x", runtime::EagerTensor{
                            runtime::retain(Tensor::from_values<float>(Dims{n}, x).transfer_to(cuda_provider())), -1});
  bindings.emplace("y", runtime::EagerTensor{
                            runtime::retain(Tensor::from_values<float>(Dims{n}, y).transfer_to(cuda_provider())), -1});
  const runtime::ExecutionResult result = runtime::execute(*planned, bindings);
  const Tensor sum = result.outputs.at("sum").view().transfer_to(cpu_provider());
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(sum.get(Dims{i}).real, x[i] + y[i]) << "element " << i;
  EXPECT_TRUE(kernels->runtime().evidence().gate({kernels->runtime().artifact_key("vadd_run")}).passed);
}

}  // namespace
}  // namespace pact::seal
