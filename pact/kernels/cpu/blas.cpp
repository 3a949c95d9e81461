// The BLAS provider (trust: trustedExternal; evidence: a trusted boundary): matmul, linear and the GEMM
// inside conv2d through OpenBLAS cblas_sgemm. It runs the same op code as the native provider
// (gemm_ops.inc) with OpenBLAS as the GEMM. f32 only: other dtypes are refused with a typed error.

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "pact/core/cpu.hpp"
#include "pact/kernels/cpu/common.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/cpu/handler_table.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/kernels/ranks.hpp"

namespace pact::kernels::cpu::blas {

namespace generic {
#include "pact/kernels/cpu/generic_kernels.inc"
}  // namespace generic

using generic::GradList;
using generic::in_place_kernel;
using ops::Attributes;

}  // namespace pact::kernels::cpu::blas

namespace pact::kernels::cpu {

// The cblas (transpose, leading dimension) of a rows x cols row-major operand addressed by strides:
// unit column stride is NoTrans with ld = row stride; unit row stride is Trans with ld = column stride.
// A degenerate extent makes its stride irrelevant, so the leading dimension is raised to the minimum
// cblas requires.
std::pair<CBLAS_TRANSPOSE, int> cblas_layout(std::int64_t rows, std::int64_t cols, std::int64_t rs, std::int64_t cs) {
  if (cs == 1 && (rs >= cols || rows <= 1))
    return {CblasNoTrans, static_cast<int>(std::max<std::int64_t>({rs, cols, 1}))};
  return {CblasTrans, static_cast<int>(std::max<std::int64_t>({cs, rows, 1}))};
}

// unsafe boundary: OpenBLAS reads and writes through these pointers for the duration of the call only.
void openblas_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t ar, std::int64_t ac,
                    const float* b, std::int64_t br, std::int64_t bc, float* c, std::int64_t ldc, bool accumulate,
                    GemmEpilogue store) {
  if (m <= 0 || n <= 0) return;
  count_macs(m * n * k);
  if (store.bias != nullptr) {  // cblas has no bias: write it into C first and accumulate onto it
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0.0f) + store.bias_at(i, j);
    accumulate = true;
  }
  const auto [ta, lda] = cblas_layout(m, k, ar, ac);
  const auto [tb, ldb] = cblas_layout(k, n, br, bc);
  cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a, lda, b,
              ldb, accumulate ? 1.0f : 0.0f, c, static_cast<int>(std::max<std::int64_t>(ldc, n)));
  if (store.clamp)  // nor a clamp: one pass over C after it
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = store.clamped(c[i * ldc + j]);
  if (store.mapped) map_tile_inplace_f32(store.op, c, ldc, m, n, store.lo, store.hi);  // nor a map
}

std::string_view openblas_corename() noexcept { return openblas_get_corename(); }

// Note [OpenBLAS's idle threads]
// OpenBLAS (the pthread build Debian installs) starts its worker threads when it is loaded, and a worker with
// nothing to do spins, calling sched_yield, for 2^28 cycles (about 0.1 s) before it sleeps; it spins so again
// after each threaded call and after openblas_set_num_threads. Pact links OpenBLAS (the blas provider, and
// the baseline of `pact bench`) but its own kernels run on OpenMP's threads, so that spin only takes CPU from
// them and from the rest of the machine: `perf` of a one-thread `pact run` of efficientnet_b0 found a second
// thread, OpenBLAS's, in sched_yield for 9% of the run's samples (its warm median did not move measurably:
// the spin ends before most warm passes). blas_thread_shutdown_ (exported by OpenBLAS, not in cblas.h:
// declared weak here, so a BLAS without it links and is left alone) joins the workers; OpenBLAS starts them
// again at its next threaded call. Called as Pact's kernels are loaded (below), after OpenBLAS's own
// initialisation, and after each change of OpenBLAS's thread count (`pact run --threads`, `pact bench`),
// which starts them.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

void park_openblas_threads() noexcept {
  if (blas_thread_shutdown_ != nullptr) blas_thread_shutdown_();
}

// Setting the count starts the workers again where they were parked (and they spin): parked once more.
void openblas_threads(int threads) noexcept {
  openblas_set_num_threads(threads);
  park_openblas_threads();
}

namespace {
[[maybe_unused]] const bool kOpenblasParked = (park_openblas_threads(), true);
}  // namespace

}  // namespace pact::kernels::cpu

namespace pact::kernels::cpu::blas {

struct Refused {
  template <class R>
  operator R() const {
    __builtin_unreachable();
  }
};
template <class... Rest>
[[noreturn]] Refused refuse(const char* op, std::span<const TensorView> in, const Rest&...) {
  throw_error(ErrorCode::dtype_mismatch, op,
              fmt::format("the blas provider computes f32 only; operand 0 is {}", dtype_name(in[0].dtype())));
}

#define PACT_GEMM_OPS_SGEMM ::pact::kernels::cpu::openblas_sgemm
#define PACT_GEMM_FALLBACK(fn, ...) refuse(#fn, __VA_ARGS__)
#include "pact/kernels/cpu/gemm_ops.inc"
#undef PACT_GEMM_FALLBACK
#undef PACT_GEMM_OPS_SGEMM

}  // namespace pact::kernels::cpu::blas

namespace pact::kernels {

std::span<const Handler> blas_handlers() {
  static const Handler table[] = {PACT_CPU_HANDLER(blas, "pact/kernels/cpu/blas.cpp", matmul, true)
                                      PACT_CPU_HANDLER(blas, "pact/kernels/cpu/blas.cpp", linear, true)
                                          PACT_CPU_HANDLER(blas, "pact/kernels/cpu/blas.cpp", conv2d, true)};
  return table;
}

}  // namespace pact::kernels
