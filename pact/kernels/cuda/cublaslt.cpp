// cuBLASLt loaded at run time (pact/kernels/cublaslt.hpp).

#include "pact/kernels/cublaslt.hpp"

#include <utility>

#include "pact/kernels/cuda/library.hpp"

namespace pact::kernels {

namespace {

using Loaded = cuda::LoadedLibrary<CublasLt>;
cuda::LibraryTable<CublasLt> g_cublaslt;

Loaded load() {
  return cuda::load_library<CublasLt>(
      "cuBLASLt", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
      [](CublasLt& t, void* l) -> const char* {
        using cuda::bind_symbol;
        for (auto [name, ok] :
             {std::pair{"cublasLtCreate", bind_symbol(l, "cublasLtCreate", t.create)},
              std::pair{"cublasLtDestroy", bind_symbol(l, "cublasLtDestroy", t.destroy)},
              std::pair{"cublasLtMatmulDescCreate", bind_symbol(l, "cublasLtMatmulDescCreate", t.create_matmul)},
              std::pair{"cublasLtMatmulDescSetAttribute",
                        bind_symbol(l, "cublasLtMatmulDescSetAttribute", t.set_matmul_attribute)},
              std::pair{"cublasLtMatmulDescDestroy", bind_symbol(l, "cublasLtMatmulDescDestroy", t.destroy_matmul)},
              std::pair{"cublasLtMatrixLayoutCreate", bind_symbol(l, "cublasLtMatrixLayoutCreate", t.create_layout)},
              std::pair{"cublasLtMatrixLayoutDestroy", bind_symbol(l, "cublasLtMatrixLayoutDestroy", t.destroy_layout)},
              std::pair{"cublasLtMatmulPreferenceCreate",
                        bind_symbol(l, "cublasLtMatmulPreferenceCreate", t.create_preference)},
              std::pair{"cublasLtMatmulPreferenceSetAttribute",
                        bind_symbol(l, "cublasLtMatmulPreferenceSetAttribute", t.set_preference_attribute)},
              std::pair{"cublasLtMatmulPreferenceDestroy",
                        bind_symbol(l, "cublasLtMatmulPreferenceDestroy", t.destroy_preference)},
              std::pair{"cublasLtMatmulAlgoGetHeuristic",
                        bind_symbol(l, "cublasLtMatmulAlgoGetHeuristic", t.heuristics)},
              std::pair{"cublasLtMatmul", bind_symbol(l, "cublasLtMatmul", t.matmul)}})
          if (!ok) return name;
        return nullptr;
      });
}

}  // namespace

void use_cublaslt(const CublasLt& table) { g_cublaslt.use(table, "cublaslt"); }

const CublasLt* cublaslt() { return g_cublaslt.get(&load).table; }

std::string cublaslt_unavailable_reason() { return g_cublaslt.get(&load).failure; }

}  // namespace pact::kernels
