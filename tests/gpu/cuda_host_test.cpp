// The CUDA path's GPU-free parts (label unit; issue 26): the core's staged device copies over a fake device
// provider (every transfer and duplicate a CUDA tensor makes, without a GPU), the cuda capsules binding
// to the cuda handlers, and, on a machine without a device, each cuda handler refusing typed and saying why.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <vector>

#include "pact/contract/provider_table.hpp"
#include "pact/core/accounting.hpp"
#include "pact/core/cuda_device.hpp"
#include "pact/kernels/cublas.hpp"
#include "pact/kernels/cublaslt.hpp"
#include "pact/kernels/cudnn.hpp"
#include "pact/kernels/kernel.hpp"

namespace pact {
namespace {

Tensor counting(const Dims& shape) {
  std::vector<float> v;
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<float>(i) - 7.5f);
  return Tensor::from_values<float>(shape, std::span<const float>(v));
}

TEST(DeviceCopies, TransfersThroughADeviceCopyEngineKeepLogicalOrder) {
  const auto dev = make_fake_device_provider();
  const Tensor h = counting(Dims{4, 6, 5});
  AccountingRecorder rec;
  const Tensor d = h.transfer_to(dev);
  auto mapped = d.prepare_host<float>();
  ASSERT_FALSE(mapped);
  EXPECT_EQ(std::move(mapped).error().error.code(), ErrorCode::not_host_accessible);
  EXPECT_EQ(d.transfer_to(cpu_provider()).to_doubles(), h.to_doubles());
  // Strided device sources: a transposition, a negative-stride flip, a slice with a step.
  const TensorView p = d.transpose(0, 2);
  EXPECT_EQ(p.transfer_to(cpu_provider()).to_doubles(), h.transpose(0, 2).duplicate().to_doubles());
  const TensorView f = d.flip(1);
  EXPECT_EQ(f.transfer_to(cpu_provider()).to_doubles(), h.flip(1).duplicate().to_doubles());
  const TensorView sl = d.slice(1, 1, 6, 2);
  EXPECT_EQ(sl.transfer_to(cpu_provider()).to_doubles(), h.slice(1, 1, 6, 2).duplicate().to_doubles());
  // Device to device: contiguous (one device copy) and strided (staged).
  EXPECT_EQ(d.duplicate().transfer_to(cpu_provider()).to_doubles(), h.to_doubles());
  EXPECT_EQ(p.duplicate().transfer_to(cpu_provider()).to_doubles(), h.transpose(0, 2).duplicate().to_doubles());
  // A strided host source to the device.
  EXPECT_EQ(h.transpose(1, 2).transfer_to(dev).transfer_to(cpu_provider()).to_doubles(),
            h.transpose(1, 2).duplicate().to_doubles());
  // zeros through the device's clear.
  for (double v : Tensor::zeros(Dims{33}, DType::f32, dev).transfer_to(cpu_provider()).to_doubles()) ASSERT_EQ(v, 0.0);
  // Every duplicate and transfer above is one copy event: 17 of them.
  for (const auto& c : rec.copies()) EXPECT_GT(c.bytes, 0u);
  EXPECT_EQ(rec.copies().size(), 17u);
}

TEST(DeviceCopies, ToHostAndPlacementCopyOnlyWhatIsElsewhere) {
  const auto dev = make_fake_device_provider();
  const Tensor h = counting(Dims{3, 4});
  const Tensor d = h.transfer_to(dev);
  const auto transposed = h.transpose(0, 1).duplicate().to_doubles();
  const auto flipped = h.flip(1).duplicate().to_doubles();
  AccountingRecorder rec;
  // to_host: a device view through one transfer, a strided host view through one duplicate.
  const Tensor back = d.transpose(0, 1).to_host();
  EXPECT_EQ(back.device(), DeviceKind::cpu);
  EXPECT_TRUE(back.as_view().is_contiguous());
  EXPECT_EQ(back.to_doubles(), transposed);
  const Tensor host = h.flip(1).to_host();
  EXPECT_NE(host.as_view().span_identity(), h.as_view().span_identity());
  EXPECT_EQ(host.to_doubles(), flipped);
  ASSERT_EQ(rec.copies().size(), 2u);
  EXPECT_EQ(rec.copies()[0].reason, CopyReason::Transfer);
  EXPECT_EQ(rec.copies()[1].reason, CopyReason::ExplicitDuplicate);
  // placed_on: a tensor already on the device kind is the same owner, no copy; one elsewhere moves once.
  Tensor here = counting(Dims{2});
  const auto identity = here.as_view().span_identity();
  const Tensor same = placed_on(std::move(here), DeviceKind::cpu);
  EXPECT_EQ(same.as_view().span_identity(), identity);
  EXPECT_EQ(rec.copies().size(), 2u);
  const Tensor moved = placed_on(h.duplicate(), DeviceKind::cuda);
  EXPECT_EQ(moved.device(), DeviceKind::cuda);
  EXPECT_EQ(moved.to_host().to_doubles(), h.to_doubles());
  EXPECT_EQ(rec.copies()[3].reason, CopyReason::Transfer);
  EXPECT_EQ(provider_for(DeviceKind::cuda), cuda_provider());
  EXPECT_EQ(provider_for(DeviceKind::cpu), cpu_provider());
  EXPECT_EQ(provider_for(DeviceKind::meta), meta_provider());
}

TEST(DeviceCopies, AStridedDeviceDestinationKeepsTheBytesBetweenItsElements) {
  const auto dev = make_fake_device_provider();
  Tensor d = counting(Dims{6, 4}).transfer_to(dev);
  const Tensor src = Tensor::full(Dims{6, 2}, DType::f32, 100.0);
  // Columns 0 and 2 (a strided write): the other columns must survive the staged copy.
  d.slice_mut(1, 0, 4, 2).copy_from(src.as_view());
  const auto got = d.transfer_to(cpu_provider()).to_doubles();
  const auto orig = counting(Dims{6, 4}).to_doubles();
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::size_t col = i % 4;
    EXPECT_EQ(got[i], col == 0 || col == 2 ? 100.0 : orig[i]) << "element " << i;
  }
}

TEST(CudaCapsules, BindToTheCudaHandlers) {
  for (const char* provider : {"cuda", "cublas", "cublaslt", "cudnn"}) {
    const auto& module = contract::capsule_module(provider);
    ASSERT_FALSE(module.capsules.empty()) << provider;
    for (const auto& c : module.capsules) {
      const kernels::Handler* h = contract::find_capsule_handler(c);
      ASSERT_NE(h, nullptr) << c.name;
      EXPECT_EQ(h->provider, provider);
      EXPECT_EQ(h->device, DeviceKind::cuda);
      // kernel ops have a VJP exactly when the op table gives them one (conv2d_activation, an inference
      // fusion, has none), update ops (accumulate_grad, sgd, adam, batch_norm_stats) an in-place function
      if (h->update != nullptr)
        EXPECT_EQ(h->forward, nullptr) << c.name;
      else
        EXPECT_EQ(h->vjp != nullptr, ops::op_info(h->op).has_vjp) << c.name;
    }
  }
  EXPECT_EQ(kernels::cuda_kernels_built(), PACT_WITH_CUDA_KERNELS != 0);
}

TEST(CudaCapsules, WithoutADeviceEachHandlerRefusesTypedAndSaysWhy) {
  if (cuda_provider()->name() == "cuda") GTEST_SKIP() << "this machine has a CUDA device (the gpu label tests it)";
  EXPECT_EQ(CudaDevice::get(), nullptr);
  EXPECT_FALSE(CudaDevice::unavailable_reason().empty());
  // The stub's tensors reach the handlers (device cuda) and are refused: no kernel runs on host memory.
  const Tensor x = counting(Dims{2, 3}).transfer_to(cuda_provider());
  std::vector<kernels::Handler> handlers(kernels::cuda_handlers().begin(), kernels::cuda_handlers().end());
  handlers.insert(handlers.end(), kernels::cublas_handlers().begin(), kernels::cublas_handlers().end());
  handlers.insert(handlers.end(), kernels::cublaslt_handlers().begin(), kernels::cublaslt_handlers().end());
  handlers.insert(handlers.end(), kernels::cudnn_handlers().begin(), kernels::cudnn_handlers().end());
  for (const auto& h : handlers) {
    std::vector<TensorView> in{x.as_view(), x.as_view()};
    Tensor state = counting(Dims{2, 3}).transfer_to(cuda_provider());
    Tensor* states[] = {&state, &state, &state};
    try {
      if (h.update != nullptr)
        h.update(std::span<Tensor* const>(states), std::span<const TensorView>(in.data(), 1), {});
      else
        (void)h.forward(in, {}, {});
      ADD_FAILURE() << ops::op_kind(h.op) << " ran without a device";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::no_device) << e.what();
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
  }
}

// cuBLAS, cuBLASLt and cuDNN are looked for only once a device exists: without one they are never opened (a
// process that plans for a GPU on a CPU machine does not map the libraries), and say why.
TEST(CudaCapsules, TheCudaLibrariesAreNeverOpenedWithoutADevice) {
  if (cuda_provider()->name() == "cuda") GTEST_SKIP() << "this machine has a CUDA device (the gpu label tests it)";
  EXPECT_EQ(kernels::cublas(), nullptr);
  EXPECT_NE(kernels::cublas_unavailable_reason().find("no CUDA device"), std::string::npos)
      << kernels::cublas_unavailable_reason();
  EXPECT_EQ(kernels::cublaslt(), nullptr);
  EXPECT_NE(kernels::cublaslt_unavailable_reason().find("no CUDA device"), std::string::npos)
      << kernels::cublaslt_unavailable_reason();
  EXPECT_EQ(kernels::cudnn(), nullptr);
  EXPECT_NE(kernels::cudnn_unavailable_reason().find("no CUDA device"), std::string::npos)
      << kernels::cudnn_unavailable_reason();
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so", "libcublasLt.so.13",
                           "libcublasLt.so.12", "libcublasLt.so", "libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"})
    EXPECT_EQ(::dlopen(name, RTLD_NOW | RTLD_NOLOAD), nullptr) << name << " is loaded";
}

}  // namespace
}  // namespace pact
