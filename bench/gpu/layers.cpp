// Layers on the device, forward and backward, by each provider that serves them, timed with CUDA events on
// the device's stream: conv2d by the cuda provider (Pact's own: im2col into its GEMM, direct kernels for
// depthwise) and, where cuDNN loads, the cudnn provider; linear with a bias by the cuda provider, the cublas
// provider (cuBLAS SGEMM, the bias and its gradient by Pact's kernels) and, where cuBLASLt loads, the
// cublaslt provider (the bias and its gradient in the products' epilogues). scripts/gpu-check.sh times
// PyTorch's conv2d and linear on the same shapes in the same run. Prints one JSON line per case and provider:
// {"case": ..., "provider": ..., "forward_ms": ..., "backward_ms": ...}. Not a test.
//
// usage: pact_bench_gpu_layers

#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/kernels/cublas.hpp"
#include "pact/kernels/cublaslt.hpp"
#include "pact/kernels/cudnn.hpp"
#include "pact/kernels/kernel.hpp"
#include "timing.hpp"

namespace {

using namespace pact;
using bench::device_normal;

struct Case {
  const char* name;
  ops::OpTag op;
  std::vector<Dims> inputs;
  ops::Attributes attrs;
};

ops::Attributes conv_attrs(std::int64_t groups, std::int64_t padding) {
  ops::Attributes a;
  a.set("groups", groups);
  a.set("padding", std::vector<std::int64_t>{padding, padding});
  return a;
}

// The op's handler in each provider that serves it here, with a skip line for each that cannot load.
std::vector<const kernels::Handler*> providers_of(ops::OpTag op) {
  std::vector<const kernels::Handler*> r{kernels::find_handler(kernels::cuda_handlers(), op)};
  auto add = [&](std::span<const kernels::Handler> handlers, bool loaded, const char* provider,
                 const std::string& why) {
    const kernels::Handler* h = kernels::find_handler(handlers, op);
    if (h == nullptr) return;
    if (loaded)
      r.push_back(h);
    else
      std::printf("{\"skipped\": \"%s provider: %s\"}\n", provider, why.c_str());
  };
  add(kernels::cublas_handlers(), kernels::cublas() != nullptr, "cublas", kernels::cublas_unavailable_reason());
  add(kernels::cublaslt_handlers(), kernels::cublaslt() != nullptr, "cublaslt", kernels::cublaslt_unavailable_reason());
  add(kernels::cudnn_handlers(), kernels::cudnn() != nullptr, "cudnn", kernels::cudnn_unavailable_reason());
  return r;
}

}  // namespace

int main() {
  CudaDevice* dev = bench::device_or_skip();
  if (dev == nullptr) return 0;
  // The shapes of gpu-check.sh's PyTorch peers: a ResNet 3 x 3 layer, a MobileNet depthwise layer and a
  // pointwise one, batch 32; a transformer MLP's two linear layers (8192 tokens, width 1024, hidden 4096).
  const std::vector<Case> cases{
      {"resnet 3x3 n32 c64 56x56", ops::OpTag::conv2d, {Dims{32, 64, 56, 56}, Dims{64, 64, 3, 3}}, conv_attrs(1, 1)},
      {"depthwise 3x3 n32 c128 56x56",
       ops::OpTag::conv2d,
       {Dims{32, 128, 56, 56}, Dims{128, 1, 3, 3}},
       conv_attrs(128, 1)},
      {"pointwise 1x1 n32 c128-256 28x28",
       ops::OpTag::conv2d,
       {Dims{32, 128, 28, 28}, Dims{256, 128, 1, 1}},
       conv_attrs(1, 0)},
      {"linear 8192x1024 to 4096 bias", ops::OpTag::linear, {Dims{8192, 1024}, Dims{4096, 1024}, Dims{4096}}, {}},
      {"linear 8192x4096 to 1024 bias", ops::OpTag::linear, {Dims{8192, 4096}, Dims{1024, 4096}, Dims{1024}}, {}},
  };
  std::mt19937 rng(5);
  const std::vector<const kernels::Handler*> conv = providers_of(ops::OpTag::conv2d),
                                             linear = providers_of(ops::OpTag::linear);
  for (const Case& c : cases) {
    std::vector<Tensor> owned;
    for (const Dims& shape : c.inputs) owned.push_back(device_normal(shape, rng));
    std::vector<TensorView> in;
    for (const Tensor& t : owned) in.push_back(t.as_view());
    for (const kernels::Handler* h : c.op == ops::OpTag::conv2d ? conv : linear) {
      std::optional<Tensor> y;
      const double forward = bench::median_ms(*dev, 10, [&] { y.emplace(h->forward(in, c.attrs, {})); });
      const Tensor g = device_normal(y->shape(), rng);
      const kernels::KernelContext ctx{true, 0};
      std::optional<std::vector<std::optional<Tensor>>> grads;
      const double backward =
          bench::median_ms(*dev, 10, [&] { grads.emplace(h->vjp(in, y->as_view(), g.as_view(), c.attrs, ctx)); });
      std::printf("{\"case\": \"%s\", \"provider\": \"%s\", \"forward_ms\": %.4f, \"backward_ms\": %.4f}\n", c.name,
                  std::string(h->provider).c_str(), forward, backward);
      std::fflush(stdout);
    }
  }
  return 0;
}
