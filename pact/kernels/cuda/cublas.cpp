// cuBLAS loaded at run time (pact/kernels/cublas.hpp).

#include "pact/kernels/cublas.hpp"

#include <utility>

#include "pact/kernels/cuda/library.hpp"

namespace pact::kernels {

namespace {

using Loaded = cuda::LoadedLibrary<Cublas>;
cuda::LibraryTable<Cublas> g_cublas;

Loaded load() {
  return cuda::load_library<Cublas>(
      "cuBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, [](Cublas& t, void* l) -> const char* {
        using cuda::bind_symbol;
        for (auto [name, ok] : {std::pair{"cublasCreate_v2", bind_symbol(l, "cublasCreate_v2", t.create)},
                                std::pair{"cublasDestroy_v2", bind_symbol(l, "cublasDestroy_v2", t.destroy)},
                                std::pair{"cublasSetStream_v2", bind_symbol(l, "cublasSetStream_v2", t.set_stream)},
                                std::pair{"cublasSgemm_v2", bind_symbol(l, "cublasSgemm_v2", t.sgemm)},
                                std::pair{"cublasSgemmStridedBatched",
                                          bind_symbol(l, "cublasSgemmStridedBatched", t.sgemm_strided_batched)}})
          if (!ok) return name;
        return nullptr;
      });
}

}  // namespace

void use_cublas(const Cublas& table) { g_cublas.use(table, "cublas"); }

const Cublas* cublas() { return g_cublas.get(&load).table; }

std::string cublas_unavailable_reason() { return g_cublas.get(&load).failure; }

}  // namespace pact::kernels
