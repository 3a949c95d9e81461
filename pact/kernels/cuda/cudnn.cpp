// cuDNN loaded at run time (pact/kernels/cudnn.hpp).

#include "pact/kernels/cudnn.hpp"

#include <utility>

#include "pact/kernels/cuda/library.hpp"

namespace pact::kernels {

namespace {

using Loaded = cuda::LoadedLibrary<Cudnn>;
cuda::LibraryTable<Cudnn> g_cudnn;

Loaded load() {
  return cuda::load_library<Cudnn>(
      "cuDNN", {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"}, [](Cudnn& t, void* l) -> const char* {
        using cuda::bind_symbol;
        for (auto [name, ok] :
             {std::pair{"cudnnCreate", bind_symbol(l, "cudnnCreate", t.create)},
              std::pair{"cudnnDestroy", bind_symbol(l, "cudnnDestroy", t.destroy)},
              std::pair{"cudnnSetStream", bind_symbol(l, "cudnnSetStream", t.set_stream)},
              std::pair{"cudnnCreateTensorDescriptor", bind_symbol(l, "cudnnCreateTensorDescriptor", t.create_tensor)},
              std::pair{"cudnnSetTensor4dDescriptor", bind_symbol(l, "cudnnSetTensor4dDescriptor", t.set_tensor_4d)},
              std::pair{"cudnnDestroyTensorDescriptor",
                        bind_symbol(l, "cudnnDestroyTensorDescriptor", t.destroy_tensor)},
              std::pair{"cudnnCreateFilterDescriptor", bind_symbol(l, "cudnnCreateFilterDescriptor", t.create_filter)},
              std::pair{"cudnnSetFilter4dDescriptor", bind_symbol(l, "cudnnSetFilter4dDescriptor", t.set_filter_4d)},
              std::pair{"cudnnDestroyFilterDescriptor",
                        bind_symbol(l, "cudnnDestroyFilterDescriptor", t.destroy_filter)},
              std::pair{"cudnnCreateConvolutionDescriptor",
                        bind_symbol(l, "cudnnCreateConvolutionDescriptor", t.create_convolution)},
              std::pair{"cudnnSetConvolution2dDescriptor",
                        bind_symbol(l, "cudnnSetConvolution2dDescriptor", t.set_convolution_2d)},
              std::pair{"cudnnSetConvolutionGroupCount",
                        bind_symbol(l, "cudnnSetConvolutionGroupCount", t.set_group_count)},
              std::pair{"cudnnSetConvolutionMathType", bind_symbol(l, "cudnnSetConvolutionMathType", t.set_math_type)},
              std::pair{"cudnnDestroyConvolutionDescriptor",
                        bind_symbol(l, "cudnnDestroyConvolutionDescriptor", t.destroy_convolution)},
              std::pair{"cudnnGetConvolutionForwardAlgorithm_v7",
                        bind_symbol(l, "cudnnGetConvolutionForwardAlgorithm_v7", t.forward_algorithms)},
              std::pair{"cudnnConvolutionForward", bind_symbol(l, "cudnnConvolutionForward", t.forward)},
              std::pair{"cudnnGetConvolutionBackwardDataAlgorithm_v7",
                        bind_symbol(l, "cudnnGetConvolutionBackwardDataAlgorithm_v7", t.backward_data_algorithms)},
              std::pair{"cudnnConvolutionBackwardData",
                        bind_symbol(l, "cudnnConvolutionBackwardData", t.backward_data)},
              std::pair{"cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                        bind_symbol(l, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", t.backward_filter_algorithms)},
              std::pair{"cudnnConvolutionBackwardFilter",
                        bind_symbol(l, "cudnnConvolutionBackwardFilter", t.backward_filter)}})
          if (!ok) return name;
        return nullptr;
      });
}

}  // namespace

void use_cudnn(const Cudnn& table) { g_cudnn.use(table, "cudnn"); }

const Cudnn* cudnn() { return g_cudnn.get(&load).table; }

std::string cudnn_unavailable_reason() { return g_cudnn.get(&load).failure; }

}  // namespace pact::kernels
