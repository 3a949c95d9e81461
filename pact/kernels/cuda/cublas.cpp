// cuBLAS loaded at run time (pact/kernels/cublas.hpp).

#include "pact/kernels/cublas.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <memory>

#include "pact/core/cuda_device.hpp"
#include "pact/core/error.hpp"

namespace pact::kernels {

namespace {

struct Loaded {
  std::unique_ptr<Cublas> owned;
  const Cublas* cublas = nullptr;  // null when unavailable
  std::string failure;
};
std::atomic<const Cublas*> g_table{nullptr};
std::atomic<bool> g_looked_up{false};

template <class F>
bool bind(void* library, const char* name, F& f) {
  f = reinterpret_cast<F>(::dlsym(library, name));  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  return f != nullptr;
}

Loaded load() {
  Loaded r;
  CudaDevice* device = CudaDevice::get();
  if (device == nullptr) {
    r.failure = fmt::format("no CUDA device: {}", CudaDevice::unavailable_reason());
    return r;
  }
  auto c = std::make_unique<Cublas>();
  std::string tried;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    // unsafe boundary: cuBLAS is a C library reached through dlsym'd entry points (cublas_api.h's).
    c->library = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (c->library != nullptr) break;
    const char* why = ::dlerror();
    tried += fmt::format("{}dlopen({}): {}", tried.empty() ? "" : "; ", name, why != nullptr ? why : "unknown");
  }
  if (c->library == nullptr) {
    r.failure = fmt::format("cuBLAS not found ({})", tried);
    return r;
  }
  for (auto [name, ok] : {std::pair{"cublasCreate_v2", bind(c->library, "cublasCreate_v2", c->create)},
                          std::pair{"cublasDestroy_v2", bind(c->library, "cublasDestroy_v2", c->destroy)},
                          std::pair{"cublasSetStream_v2", bind(c->library, "cublasSetStream_v2", c->set_stream)},
                          std::pair{"cublasSgemm_v2", bind(c->library, "cublasSgemm_v2", c->sgemm)},
                          std::pair{"cublasSgemmStridedBatched",
                                    bind(c->library, "cublasSgemmStridedBatched", c->sgemm_strided_batched)}}) {
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
  r.cublas = r.owned.get();
  return r;
}

// Loaded once, kept for the process (the handle lives as long as the device's primary context).
const Loaded& loaded() {
  static const Loaded l = [] {
    g_looked_up.store(true);
    if (const Cublas* table = g_table.load()) {
      Loaded r;
      r.cublas = table;
      return r;
    }
    return load();
  }();
  return l;
}

}  // namespace

void use_cublas(const Cublas& table) {
  if (g_looked_up.load()) throw_error(ErrorCode::internal, "cublas", "use_cublas after cuBLAS was looked for");
  g_table.store(&table);
}

const Cublas* cublas() { return loaded().cublas; }

std::string cublas_unavailable_reason() { return loaded().failure; }

}  // namespace pact::kernels
