// Pact's fused attention forward (the cuda provider's scaled_dot_product_attention, f32) at sequence 2048,
// timed with CUDA events on the device's stream (issue 26 goal: at least as fast as PyTorch's
// scaled_dot_product_attention; scripts/gpu-check.sh times PyTorch's on the same shapes in the same run).
// Prints one JSON line per case: {"case": ..., "pact_ms": ...}. Not a test.
//
// usage: pact_bench_gpu_attention

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/kernels/kernel.hpp"
#include "timing.hpp"

namespace {

using namespace pact;
using bench::device_normal;

}  // namespace

int main() {
  CudaDevice* dev = bench::device_or_skip();
  if (dev == nullptr) return 0;
  const kernels::Handler* sdpa =
      kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::scaled_dot_product_attention);
  std::mt19937 rng(3);
  // batch 4, 16 heads, sequence 2048, head width 64
  const Dims shape{4, 16, 2048, 64};
  const Tensor q = device_normal(shape, rng), k = device_normal(shape, rng), v = device_normal(shape, rng);
  std::vector<TensorView> in{q.as_view(), k.as_view(), v.as_view()};
  for (const bool causal : {false, true}) {
    ops::Attributes attrs;
    attrs.set("is_causal", causal);
    std::optional<Tensor> out;
    const double ms = bench::median_ms(*dev, 10, [&] { out.emplace(sdpa->forward(in, attrs, {})); });
    const double flops = 4.0 * 4 * 16 * 2048.0 * 2048.0 * 64 * (causal ? 0.5 : 1.0);
    std::printf("{\"case\": \"b4 h16 s2048 d64 %s\", \"pact_ms\": %.4f, \"pact_tflops\": %.2f}\n",
                causal ? "causal" : "full", ms, flops / ms / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
