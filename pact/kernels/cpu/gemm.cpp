#include "pact/kernels/cpu/gemm.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

namespace pact::kernels::cpu {

namespace {

// Cache blocking: an MR x KC panel of A and a KC x NR panel of B stay in L1, an MC x KC block of A in L2,
// a KC x NC block of B in L3.
constexpr std::int64_t kKC = 256;
constexpr std::int64_t kMC = 192;
constexpr std::int64_t kNC = 3072;

struct Variant {
  std::string_view name;
  int mr, nr;
  // Multiplies a packed MR x kc panel by a packed kc x NR panel into the tile t (row stride NR), overwriting it.
  void (*kernel)(std::int64_t kc, const float* a, const float* b, float* t);
};

__attribute__((target("avx512f"))) void kernel_avx512(std::int64_t kc, const float* a, const float* b, float* t) {
  constexpr int MR = 12;
  __m512 c0[MR], c1[MR];
  for (int i = 0; i < MR; ++i) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
  }
  for (std::int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_load_ps(b);
    const __m512 b1 = _mm512_load_ps(b + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    a += MR;
    b += 32;
  }
  for (int i = 0; i < MR; ++i) {
    _mm512_store_ps(t + i * 32, c0[i]);
    _mm512_store_ps(t + i * 32 + 16, c1[i]);
  }
}

__attribute__((target("avx2,fma"))) void kernel_avx2(std::int64_t kc, const float* a, const float* b, float* t) {
  constexpr int MR = 6;
  __m256 c0[MR], c1[MR];
  for (int i = 0; i < MR; ++i) {
    c0[i] = _mm256_setzero_ps();
    c1[i] = _mm256_setzero_ps();
  }
  for (std::int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
    a += MR;
    b += 16;
  }
  for (int i = 0; i < MR; ++i) {
    _mm256_store_ps(t + i * 16, c0[i]);
    _mm256_store_ps(t + i * 16 + 8, c1[i]);
  }
}

void kernel_portable(std::int64_t kc, const float* a, const float* b, float* t) {
  constexpr int MR = 4, NR = 16;
  float acc[MR][NR] = {};
  for (std::int64_t p = 0; p < kc; ++p) {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] += a[i] * b[j];
    a += MR;
    b += NR;
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) t[i * NR + j] = acc[i][j];
}

constexpr Variant kAvx512{"avx512", 12, 32, &kernel_avx512};
constexpr Variant kAvx2{"avx2", 6, 16, &kernel_avx2};
constexpr Variant kPortable{"portable", 4, 16, &kernel_portable};

bool cpu_has(std::string_view name) {
  if (name == "avx512") return __builtin_cpu_supports("avx512f");
  if (name == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return name == "portable";
}

const Variant* detect() {
  if (cpu_has("avx512")) return &kAvx512;
  if (cpu_has("avx2")) return &kAvx2;
  return &kPortable;
}

const Variant*& current() {
  static const Variant* v = detect();  // chosen once
  return v;
}

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;
Buffer aligned(std::size_t n) { return Buffer(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64}))); }

// Packs rows [i0, i0 + mc) x cols [p0, p0 + kc) of A into MR-row panels (k-major), zero-padding the last.
void pack_a(const Variant& v, std::int64_t mc, std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac, float* dst) {
  for (std::int64_t i = 0; i < mc; i += v.mr) {
    const std::int64_t rows = std::min<std::int64_t>(v.mr, mc - i);
    for (std::int64_t p = 0; p < kc; ++p) {
      for (std::int64_t r = 0; r < rows; ++r) dst[r] = a[(i + r) * ar + p * ac];
      for (std::int64_t r = rows; r < v.mr; ++r) dst[r] = 0.0f;
      dst += v.mr;
    }
  }
}

// Packs rows [p0, p0 + kc) x cols [j0, j0 + nc) of B into NR-column panels, zero-padding the last.
void pack_b(const Variant& v, std::int64_t kc, std::int64_t nc, const float* b, std::int64_t br, std::int64_t bc, float* dst) {
  const std::int64_t panels = (nc + v.nr - 1) / v.nr;
#pragma omp parallel for schedule(static) if (panels > 4 && omp_get_level() == 0)
  for (std::int64_t q = 0; q < panels; ++q) {
    const std::int64_t j = q * v.nr;
    const std::int64_t cols = std::min<std::int64_t>(v.nr, nc - j);
    float* d = dst + q * v.nr * kc;
    for (std::int64_t p = 0; p < kc; ++p) {
      const float* row = b + p * br + j * bc;
      if (bc == 1) {
        std::memcpy(d, row, static_cast<std::size_t>(cols) * sizeof(float));
      } else {
        for (std::int64_t c = 0; c < cols; ++c) d[c] = row[c * bc];
      }
      for (std::int64_t c = cols; c < v.nr; ++c) d[c] = 0.0f;
      d += v.nr;
    }
  }
}

}  // namespace

std::string_view sgemm_variant() noexcept { return current()->name; }

bool set_sgemm_variant(std::string_view variant) noexcept {
  if (variant == "auto") {
    current() = detect();
    return true;
  }
  for (const Variant* v : {&kAvx512, &kAvx2, &kPortable}) {
    if (v->name == variant) {
      if (!cpu_has(variant)) return false;
      current() = v;
      return true;
    }
  }
  return false;
}

void sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row, std::int64_t a_col,
           const float* b, std::int64_t b_row, std::int64_t b_col, float* c, std::int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate) {
      for (std::int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    }
    return;
  }
  const Variant& v = *current();
  const std::int64_t nc_max = std::min(kNC, ((n + v.nr - 1) / v.nr) * v.nr);
  const std::int64_t kc_max = std::min(kKC, k);
  Buffer bpack = aligned(static_cast<std::size_t>(nc_max * kc_max));
  const std::int64_t m_blocks = (m + kMC - 1) / kMC;
  for (std::int64_t j0 = 0; j0 < n; j0 += kNC) {
    const std::int64_t nc = std::min(kNC, n - j0);
    for (std::int64_t p0 = 0; p0 < k; p0 += kKC) {
      const std::int64_t kc = std::min(kKC, k - p0);
      const bool add = accumulate || p0 > 0;
      pack_b(v, kc, nc, b + p0 * b_row + j0 * b_col, b_row, b_col, bpack.get());
#pragma omp parallel if (m_blocks > 1 && omp_get_level() == 0)
      {
        Buffer apack = aligned(static_cast<std::size_t>(((kMC + v.mr - 1) / v.mr) * v.mr * kc));
        alignas(64) float tile[12 * 32];
#pragma omp for schedule(dynamic)
        for (std::int64_t blk = 0; blk < m_blocks; ++blk) {
          const std::int64_t i0 = blk * kMC;
          const std::int64_t mc = std::min(kMC, m - i0);
          pack_a(v, mc, kc, a + i0 * a_row + p0 * a_col, a_row, a_col, apack.get());
          for (std::int64_t j = 0; j < nc; j += v.nr) {
            const std::int64_t cols = std::min<std::int64_t>(v.nr, nc - j);
            const float* bp = bpack.get() + (j / v.nr) * v.nr * kc;
            for (std::int64_t i = 0; i < mc; i += v.mr) {
              const std::int64_t rows = std::min<std::int64_t>(v.mr, mc - i);
              v.kernel(kc, apack.get() + (i / v.mr) * v.mr * kc, bp, tile);
              float* cij = c + (i0 + i) * ldc + j0 + j;
              for (std::int64_t r = 0; r < rows; ++r) {
                float* crow = cij + r * ldc;
                const float* trow = tile + r * v.nr;
                if (add) {
                  for (std::int64_t q = 0; q < cols; ++q) crow[q] += trow[q];
                } else {
                  for (std::int64_t q = 0; q < cols; ++q) crow[q] = trow[q];
                }
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace pact::kernels::cpu
