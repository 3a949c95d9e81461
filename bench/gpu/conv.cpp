// conv2d on the device, forward and backward (the input's and the weight's gradients), by the cuda provider
// (Pact's own: im2col into its GEMM, direct kernels for depthwise) and, where cuDNN loads, by the cudnn
// provider, timed with CUDA events on the device's stream. scripts/gpu-check.sh times PyTorch's conv2d on
// the same shapes in the same run. Prints one JSON line per case and provider:
// {"case": ..., "provider": ..., "forward_ms": ..., "backward_ms": ...}. Not a test.
//
// usage: pact_bench_gpu_conv

#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/kernels/cudnn.hpp"
#include "pact/kernels/kernel.hpp"
#include "timing.hpp"

namespace {

using namespace pact;
using bench::device_normal;

struct Case {
  const char* name;
  Dims input, weight;
  std::int64_t groups, padding;
};

}  // namespace

int main() {
  CudaDevice* dev = bench::device_or_skip();
  if (dev == nullptr) return 0;
  // The shapes of gpu-check.sh's PyTorch peers: a ResNet 3 x 3 layer, a MobileNet depthwise layer and a
  // pointwise one, batch 32.
  const std::vector<Case> cases{
      {"resnet 3x3 n32 c64 56x56", Dims{32, 64, 56, 56}, Dims{64, 64, 3, 3}, 1, 1},
      {"depthwise 3x3 n32 c128 56x56", Dims{32, 128, 56, 56}, Dims{128, 1, 3, 3}, 128, 1},
      {"pointwise 1x1 n32 c128-256 28x28", Dims{32, 128, 28, 28}, Dims{256, 128, 1, 1}, 1, 0},
  };
  std::vector<const kernels::Handler*> providers{kernels::find_handler(kernels::cuda_handlers(), ops::OpTag::conv2d)};
  if (kernels::cudnn() != nullptr) {
    providers.push_back(kernels::find_handler(kernels::cudnn_handlers(), ops::OpTag::conv2d));
  } else {
    std::printf("{\"skipped\": \"cudnn provider: %s\"}\n", kernels::cudnn_unavailable_reason().c_str());
  }
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    const Tensor x = device_normal(c.input, rng), w = device_normal(c.weight, rng);
    std::vector<TensorView> in{x.as_view(), w.as_view()};
    ops::Attributes attrs;
    attrs.set("groups", c.groups);
    attrs.set("padding", std::vector<std::int64_t>{c.padding, c.padding});
    for (const kernels::Handler* h : providers) {
      std::optional<Tensor> y;
      const double forward = bench::median_ms(*dev, 10, [&] { y.emplace(h->forward(in, attrs, {})); });
      const Tensor g = device_normal(y->shape(), rng);
      const kernels::KernelContext ctx{true, 0};
      std::optional<std::vector<std::optional<Tensor>>> grads;
      const double backward =
          bench::median_ms(*dev, 10, [&] { grads.emplace(h->vjp(in, y->as_view(), g.as_view(), attrs, ctx)); });
      std::printf("{\"case\": \"%s\", \"provider\": \"%s\", \"forward_ms\": %.4f, \"backward_ms\": %.4f}\n", c.name,
                  std::string(h->provider).c_str(), forward, backward);
      std::fflush(stdout);
    }
  }
  return 0;
}
