// cuDNN loaded at run time (pact/kernels/cudnn.hpp).

#include "pact/kernels/cudnn.hpp"

#include <fmt/format.h>

#include <memory>
#include <utility>

#include "pact/core/cuda_device.hpp"
#include "pact/core/error.hpp"
#include "pact/kernels/cuda/library.hpp"

namespace pact::kernels {

namespace {

using Loaded = cuda::LoadedLibrary<Cudnn>;
cuda::LibraryTable<Cudnn> g_cudnn;

Loaded load() {
  Loaded r;
  CudaDevice* device = CudaDevice::get();
  if (device == nullptr) {
    r.failure = fmt::format("no CUDA device: {}", CudaDevice::unavailable_reason());
    return r;
  }
  auto d = std::make_unique<Cudnn>();
  std::string tried;
  d->library = cuda::open_library({"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, tried);
  if (d->library == nullptr) {
    r.failure = fmt::format("cuDNN not found ({})", tried);
    return r;
  }
  using cuda::bind_symbol;
  void* l = d->library;
  for (auto [name, ok] :
       {std::pair{"cudnnCreate", bind_symbol(l, "cudnnCreate", d->create)},
        std::pair{"cudnnDestroy", bind_symbol(l, "cudnnDestroy", d->destroy)},
        std::pair{"cudnnSetStream", bind_symbol(l, "cudnnSetStream", d->set_stream)},
        std::pair{"cudnnCreateTensorDescriptor", bind_symbol(l, "cudnnCreateTensorDescriptor", d->create_tensor)},
        std::pair{"cudnnSetTensor4dDescriptor", bind_symbol(l, "cudnnSetTensor4dDescriptor", d->set_tensor_4d)},
        std::pair{"cudnnDestroyTensorDescriptor", bind_symbol(l, "cudnnDestroyTensorDescriptor", d->destroy_tensor)},
        std::pair{"cudnnCreateFilterDescriptor", bind_symbol(l, "cudnnCreateFilterDescriptor", d->create_filter)},
        std::pair{"cudnnSetFilter4dDescriptor", bind_symbol(l, "cudnnSetFilter4dDescriptor", d->set_filter_4d)},
        std::pair{"cudnnDestroyFilterDescriptor", bind_symbol(l, "cudnnDestroyFilterDescriptor", d->destroy_filter)},
        std::pair{"cudnnCreateConvolutionDescriptor",
                  bind_symbol(l, "cudnnCreateConvolutionDescriptor", d->create_convolution)},
        std::pair{"cudnnSetConvolution2dDescriptor",
                  bind_symbol(l, "cudnnSetConvolution2dDescriptor", d->set_convolution_2d)},
        std::pair{"cudnnSetConvolutionGroupCount", bind_symbol(l, "cudnnSetConvolutionGroupCount", d->set_group_count)},
        std::pair{"cudnnSetConvolutionMathType", bind_symbol(l, "cudnnSetConvolutionMathType", d->set_math_type)},
        std::pair{"cudnnDestroyConvolutionDescriptor",
                  bind_symbol(l, "cudnnDestroyConvolutionDescriptor", d->destroy_convolution)},
        std::pair{"cudnnGetConvolutionForwardAlgorithm_v7",
                  bind_symbol(l, "cudnnGetConvolutionForwardAlgorithm_v7", d->forward_algorithms)},
        std::pair{"cudnnConvolutionForward", bind_symbol(l, "cudnnConvolutionForward", d->forward)},
        std::pair{"cudnnGetConvolutionBackwardDataAlgorithm_v7",
                  bind_symbol(l, "cudnnGetConvolutionBackwardDataAlgorithm_v7", d->backward_data_algorithms)},
        std::pair{"cudnnConvolutionBackwardData", bind_symbol(l, "cudnnConvolutionBackwardData", d->backward_data)},
        std::pair{"cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                  bind_symbol(l, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", d->backward_filter_algorithms)},
        std::pair{"cudnnConvolutionBackwardFilter",
                  bind_symbol(l, "cudnnConvolutionBackwardFilter", d->backward_filter)}}) {
    if (!ok) {
      r.failure = fmt::format("cuDNN lacks {}", name);
      return r;
    }
  }
  device->make_current();
  if (const int rc = d->create(&d->handle); rc != 0) {
    r.failure = fmt::format("cudnnCreate failed (status {}) on {}", rc, device->description());
    return r;
  }
  if (const int rc = d->set_stream(d->handle, device->stream()); rc != 0) {
    r.failure = fmt::format("cudnnSetStream failed (status {})", rc);
    return r;
  }
  r.owned = std::move(d);
  r.table = r.owned.get();
  return r;
}

}  // namespace

void use_cudnn(const Cudnn& table) { g_cudnn.use(table, "cudnn"); }

const Cudnn* cudnn() { return g_cudnn.get(&load).table; }

std::string cudnn_unavailable_reason() { return g_cudnn.get(&load).failure; }

}  // namespace pact::kernels
