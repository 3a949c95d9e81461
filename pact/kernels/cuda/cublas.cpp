// cuBLAS loaded at run time (pact/kernels/cublas.hpp).

#include "pact/kernels/cublas.hpp"

#include <fmt/format.h>

#include <memory>

#include "pact/core/cuda_device.hpp"
#include "pact/core/error.hpp"
#include "pact/kernels/cuda/library.hpp"

namespace pact::kernels {

namespace {

using Loaded = cuda::LoadedLibrary<Cublas>;
cuda::LibraryTable<Cublas> g_cublas;

Loaded load() {
  Loaded r;
  CudaDevice* device = CudaDevice::get();
  if (device == nullptr) {
    r.failure = fmt::format("no CUDA device: {}", CudaDevice::unavailable_reason());
    return r;
  }
  auto c = std::make_unique<Cublas>();
  std::string tried;
  c->library = cuda::open_library({"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, tried);
  if (c->library == nullptr) {
    r.failure = fmt::format("cuBLAS not found ({})", tried);
    return r;
  }
  for (auto [name, ok] :
       {std::pair{"cublasCreate_v2", cuda::bind_symbol(c->library, "cublasCreate_v2", c->create)},
        std::pair{"cublasDestroy_v2", cuda::bind_symbol(c->library, "cublasDestroy_v2", c->destroy)},
        std::pair{"cublasSetStream_v2", cuda::bind_symbol(c->library, "cublasSetStream_v2", c->set_stream)},
        std::pair{"cublasSgemm_v2", cuda::bind_symbol(c->library, "cublasSgemm_v2", c->sgemm)},
        std::pair{"cublasSgemmStridedBatched",
                  cuda::bind_symbol(c->library, "cublasSgemmStridedBatched", c->sgemm_strided_batched)}}) {
    if (!ok) {
      r.failure = fmt::format("cuBLAS lacks {}", name);
      return r;
    }
  }
  device->make_current();
  if (const int rc = c->create(&c->handle); rc != 0) {
    r.failure = fmt::format("cublasCreate failed (status {}) on {}", rc, device->description());
    return r;
  }
  if (const int rc = c->set_stream(c->handle, device->stream()); rc != 0) {
    r.failure = fmt::format("cublasSetStream failed (status {})", rc);
    return r;
  }
  r.owned = std::move(c);
  r.table = r.owned.get();
  return r;
}

}  // namespace

void use_cublas(const Cublas& table) { g_cublas.use(table, "cublas"); }

const Cublas* cublas() { return g_cublas.get(&load).table; }

std::string cublas_unavailable_reason() { return g_cublas.get(&load).failure; }

}  // namespace pact::kernels
