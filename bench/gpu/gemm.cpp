// Pact's own f32 GEMM (the cuda provider's matmul) against cuBLAS SGEMM (the cublas provider's matmul: the
// same handler code, its product through cublasSgemm) on the same device, same stream, same operands, in one
// run (issue 26 goal: >= 0.7x cuBLAS at 4096). cuBLAS is loaded at run time (pact/kernels/cublas.hpp), so the
// benchmark builds without linking the toolkit.
// Prints one JSON line per size: {"n": N, "pact_tflops": ..., "cublas_tflops": ..., "ratio": ...,
// "max_rel_diff": ...}. Not a test: scripts/gpu-check.sh runs it on a GPU machine.
//
// usage: pact_bench_gpu_gemm [N ...]   (default 1024 2048 4096)

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/kernels/cublas.hpp"
#include "pact/kernels/kernel.hpp"
#include "timing.hpp"

namespace {

using namespace pact;

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::stoll(argv[i]));
  if (sizes.empty()) sizes = {1024, 2048, 4096};
  CudaDevice* dev = bench::device_or_skip();
  if (dev == nullptr) return 0;
  if (kernels::cublas() == nullptr) {
    std::printf("{\"skipped\": \"%s\"}\n", kernels::cublas_unavailable_reason().c_str());
    return 0;
  }
  const kernels::Handler* matmul = kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::matmul);
  const kernels::Handler* cublas_matmul = kernels::find_handler(kernels::cublas_handlers(), ops::OpTag::matmul);
  std::mt19937 rng(1);
  std::fprintf(stderr, "device: %s\n", dev->description().c_str());
  for (const std::int64_t n : sizes) {
    const Tensor a = bench::device_normal(Dims{n, n}, rng), b = bench::device_normal(Dims{n, n}, rng);
    std::vector<TensorView> in{a.as_view(), b.as_view()};
    std::optional<Tensor> ours;
    const int reps = n >= 4096 ? 10 : 20;
    // Each GEMM variant (PACT_CUDA_GEMM), the default last: its time is the one reported as Pact's.
    std::string variants;
    for (const char* v : {"pact_gemm_f32", "pact_gemm_f32_vec8", "pact_gemm_f32_vec8_b1", "pact_gemm_f32_vec16_b1"}) {
      ::setenv("PACT_CUDA_GEMM", v, 1);
      const double ms = bench::median_ms(*dev, reps, [&] { ours.emplace(matmul->forward(in, {}, {})); });
      variants += fmt::format("{}\"{}\": {:.4f}", variants.empty() ? "" : ", ", v, ms);
    }
    ::unsetenv("PACT_CUDA_GEMM");
    const double pact_ms = bench::median_ms(*dev, reps, [&] { ours.emplace(matmul->forward(in, {}, {})); });
    std::optional<Tensor> theirs;
    const double cublas_ms = bench::median_ms(*dev, reps, [&] { theirs.emplace(cublas_matmul->forward(in, {}, {})); });
    const auto got = ours->transfer_to(cpu_provider()).to_doubles();
    const auto want = theirs->transfer_to(cpu_provider()).to_doubles();
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::abs(got[i] - want[i]));
      scale = std::max(scale, std::abs(want[i]));
    }
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    std::printf(
        "{\"n\": %lld, \"pact_ms\": %.4f, \"cublas_ms\": %.4f, \"pact_tflops\": %.2f, \"cublas_tflops\": %.2f, "
        "\"ratio\": %.3f, \"max_abs_diff_over_max\": %.2e, \"variants_ms\": {%s}}\n",
        static_cast<long long>(n), pact_ms, cublas_ms, flops / pact_ms / 1e9, flops / cublas_ms / 1e9,
        cublas_ms / pact_ms, worst / std::max(scale, 1e-30), variants.c_str());
    std::fflush(stdout);
  }
  return 0;
}
