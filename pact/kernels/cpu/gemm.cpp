#include "pact/kernels/cpu/gemm.hpp"

#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/avx512_lanes.hpp"
#include "pact/kernels/kernel.hpp"

namespace pact::kernels::cpu {

namespace {

// Cache blocking, derived from the detected caches (pact/core/cpu.hpp) for a micro-kernel of MR x NR:
//  - KC: the packed MR x KC panel of A stays in half of the L1d while B's panels stream past it, at most
//    512 deep;
//  - MC: an MC x KC block of A takes three eighths of the L2 (the rest holds the B panel and C's rows);
//  - NC: where A is packed (1024 columns or more) and larger than one MC x KC block, a KC x NC block of B
//    takes three eighths of this core's share of the L3, so A is fetched and packed again few times; where
//    A is read in place or small (nothing to fetch again), the block takes three quarters of the L2, so B
//    stays there from its packing to its last use.
// On a Zen 4 (32 KiB L1d, 1 MiB L2, 16 MiB L3 per core) that gives the AVX-512 kernel the 512 / 192 / 3072
// this file used as constants when it was tuned there by hand. Measured on a Zen 5 VM (48 KiB L1d, 1 MiB
// L2, 32 MiB L3 for 2 cores), minimum per node over six interleaved runs: one NC from the L3 share for
// both cases made resnet18's 3 x 3 layers (A in place, about 900 columns) 11% slower than an L2-sized B
// block, and a KC of 768 (half of that L1d) 5% slower than 512; an L2-sized NC for a large packed A made the
// AVX2 kernel 0.87-0.89 of OpenBLAS at 1024 and 2048 (A repacked for every 304 columns) against 0.93-1.0,
// and an L3-sized one for efficientnet_b0's 144 -> 24 pointwise layer on a 56 x 56 plane 23% slower.
struct Blocking {
  std::int64_t kc, mc, nc, nc_in_place;
};

// A block width of `columns` in whole NR-wide panels, at least one and at most 8192 columns' worth (the
// packed block holds nc_max x kc_max floats; an NC of 8192 with 48-wide panels once wrote a 171st panel past it).
std::int64_t whole_panels(std::int64_t columns, std::int64_t nr) {
  return std::clamp<std::int64_t>(columns / nr * nr, nr, 8192 / nr * nr);
}

Blocking blocking_for(int mr, int nr) {
  const CpuFacts& f = cpu_facts();
  const auto floats = [](std::size_t bytes) { return static_cast<std::int64_t>(bytes / sizeof(float)); };
  const auto columns = [&](std::size_t bytes, std::int64_t kc) { return whole_panels(floats(bytes) / kc, nr); };
  const std::int64_t kc = std::clamp<std::int64_t>(floats(f.l1d / 2) / mr / 64 * 64, 128, 512);
  const std::int64_t mc = std::clamp<std::int64_t>(floats(f.l2 * 3 / 8) / kc / mr * mr, mr, 1024);
  const std::size_t l3_share = f.l3 == 0 ? f.l2 * 4 : f.l3 / static_cast<std::size_t>(f.l3_sharing);
  return {kc, mc, columns(l3_share * 3 / 8, kc), columns(f.l2 * 3 / 4, kc)};
}

struct Variant {
  std::string_view name;
  int mr, nr;
  // Multiplies a packed MR x kc panel by a packed kc x NR panel into the MR x NR block at c (row stride
  // ldc), adding to it when `add` is set.
  // A bias is added in the same store: rbias[i] to row i, cbias[j] to column j (either may be null); then,
  // where `clamp` is not null, the sum is clamped to [clamp[0], clamp[1]] (given on the last depth block):
  // max(lo, x) then min(hi, .) with the bound first, so a NaN sum stays NaN as in the generic clamp.
  void (*kernel)(std::int64_t kc, const float* a, const float* b, float* c, std::int64_t ldc, bool add,
                 const float* rbias, const float* cbias, const float* clamp);
  // The same product with A read in place (element (i, p) at a[i * ar + p * ac], ar == 1 or ac == 1;
  // a packed panel is ar = 1, ac = MR) and B's row p at b + p * bs (bs = NR for a packed panel, the
  // leading dimension for a row-major B read in place), or at b + boff[p] where boff is not null (a B
  // whose rows sit at arbitrary offsets: an implicit convolution's shifted input rows); null where the
  // variant always packs.
  void (*direct)(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac, const float* b, std::int64_t bs,
                 const std::int64_t* boff, float* c, std::int64_t ldc, bool add, const float* rbias, const float* cbias,
                 const float* clamp);
  // The product of a packed MR x kc panel of A, or MR rows read in place as for `direct`, by the first
  // `cols` (< NR) columns of a packed panel of B (row stride bs) into an MR x cols block of C: the edge of
  // a product whose width is no multiple of NR, in as few vectors as cover `cols`, stored masked straight
  // into C (no copy through a full tile); null where the variant has none.
  void (*edge)(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac, const float* b, std::int64_t bs,
               float* c, std::int64_t ldc, bool add, const float* rbias, const float* cbias, const float* clamp,
               std::int64_t cols);
};

// Row p of B for a direct kernel, with the row 8 depths ahead prefetched: b + boff[p] (Offsets), or b itself,
// which the kernel steps by bs after each depth.
template <bool Offsets>
PACT_SIMD_INLINE const float* b_row_at(const float* b, std::int64_t bs, const std::int64_t* boff, std::int64_t p,
                                       std::int64_t kc) {
  if constexpr (Offsets) {
    _mm_prefetch(reinterpret_cast<const char*>(b + boff[std::min(p + 8, kc - 1)]), _MM_HINT_T0);
    return b + boff[p];
  } else {
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * bs), _MM_HINT_T0);
    return b;
  }
}

// The cache lines of an MR x W block of C (row stride ldc), fetched as a micro-kernel starts: its store at
// the end reads them (to add to them, or to own them for the write), and a C that has left the cache (2048 x
// 2048: 16 MB) stalled each tile's store on MR misses (the AVX2 kernel at 0.89-0.94 of OpenBLAS's Haswell
// kernel at 2048, Zen 4 VM). Issued first, they arrive while the depth loop runs. A prefetch never faults.
template <int MR, int W>
PACT_SIMD_INLINE void prefetch_tile(const float* t, std::int64_t ldc) {
  for (int i = 0; i < MR; ++i) {
    const char* row = reinterpret_cast<const char*>(t + i * ldc);
    for (int x = 0; x < W * 4; x += 64) _mm_prefetch(row + x, _MM_HINT_T0);
    _mm_prefetch(row + W * 4 - 1, _MM_HINT_T0);  // the last line, where the row starts mid-line
  }
}

// The AVX-512 micro-kernel: an 8 x 16 NV block of C from 8 rows of A and a packed 16 NV-wide panel of B,
// 8 NV accumulators: 8 x 32 (NV = 2) for most products, 8 x 48 (NV = 3, 11 loads feeding 24 multiply-adds
// where 8 x 32 has 10 for 16) for wide ones. Element (i, p) of A is at a[i * ar + p * ac], read through
// eight row pointers (row-major A, ac == 1) or one pointer stepping a whole column (column-major A,
// ar == 1). A packed A panel is the column-major case with ar = 1, ac = 8; reading an unpacked A in place
// saves a full read and write of it, which for the short depths of a training step's GEMMs (k of 64 to
// 1024) costs as much as a large part of the arithmetic.
// With Edge set, the block is MR x (16 (NV - 1) + the set bits of `last`): C's last vector of each row, the
// addend read from it and the column bias are masked by `last` (B is a packed, zero-padded panel there).
template <bool RowMajor, int NV, bool Offsets = false, bool Edge = false>
PACT_TARGET_AVX512 void kernel_avx512_impl(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac,
                                           const float* b, std::int64_t bs, const std::int64_t* boff, float* t,
                                           std::int64_t ldc, bool add, const float* rbias, const float* cbias,
                                           const float* clamp, __mmask16 last = 0xFFFF) {
  constexpr int MR = 8;
  prefetch_tile<MR, 16 * NV>(t, ldc);
  __m512 c[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) c[i][v] = _mm512_setzero_ps();
  const float* r0 = a;
  const float* r1 = a + ar;
  const float* r2 = a + 2 * ar;
  const float* r3 = a + 3 * ar;
  const float* r4 = a + 4 * ar;
  const float* r5 = a + 5 * ar;
  const float* r6 = a + 6 * ar;
  const float* r7 = a + 7 * ar;
#pragma GCC unroll 4
  for (std::int64_t p = 0; p < kc; ++p) {
    const float* brow = b_row_at<Offsets>(b, bs, boff, p, kc);
    __m512 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(brow + 16 * v);
    const float* col = a + p * ac;
    const float av[MR] = {RowMajor ? r0[p] : col[0], RowMajor ? r1[p] : col[1], RowMajor ? r2[p] : col[2],
                          RowMajor ? r3[p] : col[3], RowMajor ? r4[p] : col[4], RowMajor ? r5[p] : col[5],
                          RowMajor ? r6[p] : col[6], RowMajor ? r7[p] : col[7]};
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(av[i]);
      for (int v = 0; v < NV; ++v) c[i][v] = _mm512_fmadd_ps(ai, bv[v], c[i][v]);
    }
    if constexpr (!Offsets) b += bs;
  }
  // The store, unrolled whole so the accumulators stay in registers (a loop over the rows spilled all of them
  // to the stack and read them back, a cost a shallow product's tile pays as often as its multiply-adds:
  // 12544 x 96 x 16, 16 depth steps a tile).
  __mmask16 mask[NV];
  __m512 cb[NV];
  for (int v = 0; v < NV; ++v) {
    mask[v] = Edge && v == NV - 1 ? last : static_cast<__mmask16>(0xFFFF);
    cb[v] = cbias != nullptr ? _mm512_maskz_loadu_ps(mask[v], cbias + 16 * v) : _mm512_setzero_ps();
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* row = t + i * ldc;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = mask[v];
      __m512 x = _mm512_add_ps(c[i][v], cb[v]);
      if (add) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, row + 16 * v));
      if (rbias != nullptr) x = _mm512_add_ps(x, _mm512_set1_ps(rbias[i]));
      if (clamp != nullptr) x = _mm512_min_ps(_mm512_set1_ps(clamp[1]), _mm512_max_ps(_mm512_set1_ps(clamp[0]), x));
      if constexpr (Edge)
        _mm512_mask_storeu_ps(row + 16 * v, m, x);
      else
        _mm512_storeu_ps(row + 16 * v, x);
    }
  }
}

void kernel_avx512_wide(std::int64_t kc, const float* a, const float* b, float* t, std::int64_t ldc, bool add,
                        const float* rbias, const float* cbias, const float* clamp) {
  kernel_avx512_impl<false, 3>(kc, a, 1, 8, b, 48, nullptr, t, ldc, add, rbias, cbias, clamp);
}

void kernel_avx512(std::int64_t kc, const float* a, const float* b, float* t, std::int64_t ldc, bool add,
                   const float* rbias, const float* cbias, const float* clamp) {
  kernel_avx512_impl<false, 2>(kc, a, 1, 8, b, 32, nullptr, t, ldc, add, rbias, cbias, clamp);
}

void kernel_avx512_direct(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac, const float* b,
                          std::int64_t bs, const std::int64_t* boff, float* t, std::int64_t ldc, bool add,
                          const float* rbias, const float* cbias, const float* clamp) {
  if (boff != nullptr) {
    if (ac == 1)
      kernel_avx512_impl<true, 2, true>(kc, a, ar, ac, b, bs, boff, t, ldc, add, rbias, cbias, clamp);
    else
      kernel_avx512_impl<false, 2, true>(kc, a, ar, ac, b, bs, boff, t, ldc, add, rbias, cbias, clamp);
  } else if (ac == 1) {
    kernel_avx512_impl<true, 2>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp);
  } else {
    kernel_avx512_impl<false, 2>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp);
  }
}

template <bool RowMajor>
void kernel_avx512_edge_as(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac, const float* b,
                           std::int64_t bs, float* t, std::int64_t ldc, bool add, const float* rbias,
                           const float* cbias, const float* clamp, std::int64_t cols) {
  const auto last = static_cast<__mmask16>(cols % 16 == 0 ? 0xFFFF : (1u << (cols % 16)) - 1);
  if (cols <= 16)
    kernel_avx512_impl<RowMajor, 1, false, true>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp, last);
  else if (cols <= 32)
    kernel_avx512_impl<RowMajor, 2, false, true>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp, last);
  else
    kernel_avx512_impl<RowMajor, 3, false, true>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp, last);
}

void kernel_avx512_edge(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac, const float* b,
                        std::int64_t bs, float* t, std::int64_t ldc, bool add, const float* rbias, const float* cbias,
                        const float* clamp, std::int64_t cols) {
  if (ac == 1)
    kernel_avx512_edge_as<true>(kc, a, ar, ac, b, bs, t, ldc, add, rbias, cbias, clamp, cols);
  else
    kernel_avx512_edge_as<false>(kc, a, ar, ac, b, bs, t, ldc, add, rbias, cbias, clamp, cols);
}

// The AVX2 + FMA micro-kernel: a 6 x 16 block of C in 12 accumulators (with the two B vectors and a
// broadcast, 15 of the 16 ymm registers), A read packed or in place exactly as the AVX-512 kernel above.
// The accumulators are never written back into an array (the store below reads them once): a kernel that
// updated them in place in its store loop kept them in memory, and paid a store per accumulator per depth
// step (0.45 of OpenBLAS's Haswell kernel before, on Zen 4 with PACT_ISA=avx2).
// With Edge set, the block is 6 x (8 (NV - 1) + `last`) as in the AVX-512 kernel's edge.
template <bool RowMajor, bool Offsets = false, int NV = 2, bool Edge = false>
PACT_TARGET_AVX2 void kernel_avx2_impl(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac,
                                       const float* b, std::int64_t bs, const std::int64_t* boff, float* t,
                                       std::int64_t ldc, bool add, const float* rbias, const float* cbias,
                                       const float* clamp, int last = 8) {
  constexpr int MR = 6;
  prefetch_tile<MR, 8 * NV>(t, ldc);
  __m256 c[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) c[i][v] = _mm256_setzero_ps();
  const float* r0 = a;
  const float* r1 = a + ar;
  const float* r2 = a + 2 * ar;
  const float* r3 = a + 3 * ar;
  const float* r4 = a + 4 * ar;
  const float* r5 = a + 5 * ar;
#pragma GCC unroll 4
  for (std::int64_t p = 0; p < kc; ++p) {
    const float* brow = b_row_at<Offsets>(b, bs, boff, p, kc);
    __m256 bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(brow + 8 * v);
    const float* col = a + p * ac;
    const float av[MR] = {RowMajor ? r0[p] : col[0], RowMajor ? r1[p] : col[1], RowMajor ? r2[p] : col[2],
                          RowMajor ? r3[p] : col[3], RowMajor ? r4[p] : col[4], RowMajor ? r5[p] : col[5]};
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_set1_ps(av[i]);
      for (int v = 0; v < NV; ++v) c[i][v] = _mm256_fmadd_ps(ai, bv[v], c[i][v]);
    }
    if constexpr (!Offsets) b += bs;
  }
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(last), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 6
  for (int i = 0; i < MR; ++i) {
    float* row = t + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const bool edge = Edge && v == NV - 1;
      __m256 x = c[i][v];
      if (add) x = _mm256_add_ps(x, edge ? _mm256_maskload_ps(row + 8 * v, tail) : _mm256_loadu_ps(row + 8 * v));
      if (cbias != nullptr)
        x = _mm256_add_ps(x, edge ? _mm256_maskload_ps(cbias + 8 * v, tail) : _mm256_loadu_ps(cbias + 8 * v));
      if (rbias != nullptr) x = _mm256_add_ps(x, _mm256_set1_ps(rbias[i]));
      if (clamp != nullptr) x = _mm256_min_ps(_mm256_set1_ps(clamp[1]), _mm256_max_ps(_mm256_set1_ps(clamp[0]), x));
      if (edge)
        _mm256_maskstore_ps(row + 8 * v, tail, x);
      else
        _mm256_storeu_ps(row + 8 * v, x);
    }
  }
}

void kernel_avx2(std::int64_t kc, const float* a, const float* b, float* t, std::int64_t ldc, bool add,
                 const float* rbias, const float* cbias, const float* clamp) {
  kernel_avx2_impl<false>(kc, a, 1, 6, b, 16, nullptr, t, ldc, add, rbias, cbias, clamp);
}

void kernel_avx2_direct(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac, const float* b,
                        std::int64_t bs, const std::int64_t* boff, float* t, std::int64_t ldc, bool add,
                        const float* rbias, const float* cbias, const float* clamp) {
  if (boff != nullptr) {
    if (ac == 1)
      kernel_avx2_impl<true, true>(kc, a, ar, ac, b, bs, boff, t, ldc, add, rbias, cbias, clamp);
    else
      kernel_avx2_impl<false, true>(kc, a, ar, ac, b, bs, boff, t, ldc, add, rbias, cbias, clamp);
  } else if (ac == 1) {
    kernel_avx2_impl<true>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp);
  } else {
    kernel_avx2_impl<false>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp);
  }
}

void kernel_avx2_edge(std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac, const float* b,
                      std::int64_t bs, float* t, std::int64_t ldc, bool add, const float* rbias, const float* cbias,
                      const float* clamp, std::int64_t cols) {
  const int last = static_cast<int>(cols % 8 == 0 ? 8 : cols % 8);
  if (ac == 1 && cols <= 8)
    kernel_avx2_impl<true, false, 1, true>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp, last);
  else if (ac == 1)
    kernel_avx2_impl<true, false, 2, true>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp, last);
  else if (cols <= 8)
    kernel_avx2_impl<false, false, 1, true>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp, last);
  else
    kernel_avx2_impl<false, false, 2, true>(kc, a, ar, ac, b, bs, nullptr, t, ldc, add, rbias, cbias, clamp, last);
}

void kernel_portable(std::int64_t kc, const float* a, const float* b, float* t, std::int64_t ldc, bool add,
                     const float* rbias, const float* cbias, const float* clamp) {
  constexpr int MR = 4, NR = 16;
  float acc[MR][NR] = {};
  for (std::int64_t p = 0; p < kc; ++p) {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) acc[i][j] += a[i] * b[j];
    a += MR;
    b += NR;
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      const float x = (add ? t[i * ldc + j] + acc[i][j] : acc[i][j]) + (rbias != nullptr ? rbias[i] : 0.0f) +
                      (cbias != nullptr ? cbias[j] : 0.0f);
      t[i * ldc + j] = clamp != nullptr ? std::min(std::max(x, clamp[0]), clamp[1]) : x;
    }
}

constexpr Variant kAvx512{"avx512", 8, 32, &kernel_avx512, &kernel_avx512_direct, &kernel_avx512_edge};
constexpr Variant kAvx512Wide{"avx512", 8, 48, &kernel_avx512_wide, nullptr, &kernel_avx512_edge};
constexpr Variant kAvx2{"avx2", 6, 16, &kernel_avx2, &kernel_avx2_direct, &kernel_avx2_edge};
constexpr Variant kPortable{"portable", 4, 16, &kernel_portable, nullptr, nullptr};

// The micro-kernels per ISA level (the dispatch table; pact/core/simd_dispatch.hpp). The AVX2 and AVX-512
// variants share the AVX packing routines.
const simd::Table<const Variant*> kSgemm{"sgemm",
                                         {&kPortable, "kernel_portable"},
                                         {&kAvx2, "kernel_avx2_impl pack_panel_transposed_avx pack_rows_avx"},
                                         {&kAvx512, "kernel_avx512_impl pack_panel_transposed_avx pack_rows_avx"}};

// Per-thread packing buffers, grown on demand and reused across calls, so a GEMM allocates nothing once
// warm (slot 0: packed B, slot 1: packed A). Buffers of 2 MiB and more are 2 MiB-aligned and advised as
// transparent huge pages: a 2048^2 product streams a 4 MiB packed B per depth block, and its TLB misses
// cost 5% (one thread, interleaved A/B: 0.89-0.93 of OpenBLAS before, 0.91-1.00 after).
struct AlignedFree {
  void operator()(float* p) const { std::free(p); }
};
float* scratch(int slot, std::size_t n) {
  thread_local std::unique_ptr<float[], AlignedFree> buffers[2];
  thread_local std::size_t sizes[2] = {0, 0};
  if (sizes[slot] < n) {
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    const std::size_t bytes = n * sizeof(float);
    const std::size_t align = bytes >= kHuge ? kHuge : 64;
    const std::size_t rounded = (bytes + align - 1) / align * align;
    auto* p = static_cast<float*>(std::aligned_alloc(align, rounded));
    if (p == nullptr) throw std::bad_alloc();
    if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);
    buffers[slot].reset(p);
    sizes[slot] = rounded / sizeof(float);
  }
  return buffers[slot].get();
}

// Transposes 8 rows of 8 floats (src rows at stride sr, unit column stride) into 8 rows of 8 at dst
// (row stride ds): dst[p * ds + i] = src[i * sr + p]. In registers: unpack, shuffle, 128-bit permute.
PACT_TARGET_AVX2 PACT_SIMD_INLINE void transpose_8x8(const float* src, std::int64_t sr, float* dst, std::int64_t ds) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * sr);
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
               s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
               s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)),
               s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)),
               s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(dst + 0 * ds, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(dst + 1 * ds, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(dst + 2 * ds, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(dst + 3 * ds, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(dst + 4 * ds, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(dst + 5 * ds, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(dst + 6 * ds, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_storeu_ps(dst + 7 * ds, _mm256_permute2f128_ps(s3, s7, 0x31));
}

// The packed layout of both operands is k-major panels: dst[p * width + r] holds element r of the panel
// at depth p. `lanes` source lines (rows of A, columns of B) of kc elements each are packed into a panel
// of width `width` (zero-padded). Source element (r, p) is at src[r * rs + p * ps]. The vectorised path
// (AVX, so only under the AVX-512 and AVX2 variants, whose CPUs have it) covers unit depth stride with
// 8 x 8 register transposes; unit line stride is packed in source order by pack_rows_avx below.
PACT_TARGET_AVX2 void pack_panel_transposed_avx(const float* src, std::int64_t rs, std::int64_t width, std::int64_t kc,
                                                float* dst) {
  std::int64_t p = 0;
  for (; p + 8 <= kc; p += 8)
    for (std::int64_t r = 0; r < width; r += 8) transpose_8x8(src + r * rs + p, rs, dst + p * width + r, width);
  for (; p < kc; ++p)
    for (std::int64_t r = 0; r < width; ++r) dst[p * width + r] = src[r * rs + p];
}

// Depth p at src + p * ps, or at src + offs[p] where offs is not null.
void pack_panel(const Variant& v, const float* src, std::int64_t rs, std::int64_t ps, std::int64_t lanes,
                std::int64_t width, std::int64_t kc, float* dst, const std::int64_t* offs = nullptr) {
  if (&v != &kPortable && lanes == width && ps == 1 && offs == nullptr && width % 8 == 0) {
    pack_panel_transposed_avx(src, rs, width, kc, dst);
    return;
  }
  for (std::int64_t p = 0; p < kc; ++p) {
    const float* at = src + (offs != nullptr ? offs[p] : p * ps);
    for (std::int64_t r = 0; r < lanes; ++r) dst[p * width + r] = at[r * rs];
    for (std::int64_t r = lanes; r < width; ++r) dst[p * width + r] = 0.0f;
  }
}

// The unit-line-stride layout packed in source order: for each depth p in [0, kc), the source row of `lanes`
// contiguous elements is read once, front to back, and dealt out to the panels (panel q, depth p at
// dst[(q * kc + p) * width]). Reading each source row sequentially keeps the hardware prefetcher ahead,
// where a panel-at-a-time walk would touch a new line of every row per panel. Row p is at src + p * ps, or at
// src + offs[p] where offs is not null.
PACT_TARGET_AVX2 void pack_rows_avx(const float* src, std::int64_t ps, std::int64_t lanes, std::int64_t width,
                                    std::int64_t kc, float* dst, const std::int64_t* offs = nullptr) {
  const std::int64_t full = lanes / width;
  for (std::int64_t p = 0; p < kc; ++p) {
    const float* s = src + (offs != nullptr ? offs[p] : p * ps);
    for (std::int64_t q = 0; q < full; ++q) {
      float* d = dst + (q * kc + p) * width;
      for (std::int64_t r = 0; r < width; r += 8) _mm256_storeu_ps(d + r, _mm256_loadu_ps(s + q * width + r));
    }
    if (full * width < lanes) {
      float* d = dst + (full * kc + p) * width;
      std::int64_t r = 0;
      for (; full * width + r < lanes; ++r) d[r] = s[full * width + r];
      for (; r < width; ++r) d[r] = 0.0f;
    }
  }
}

// Packs rows [i0, i0 + mc) x cols [p0, p0 + kc) of A into MR-row panels (k-major), zero-padding the last.
void pack_a(const Variant& v, std::int64_t mc, std::int64_t kc, const float* a, std::int64_t ar, std::int64_t ac,
            float* dst) {
  if (ar == 1 && &v != &kPortable && v.mr % 8 == 0) {
    pack_rows_avx(a, ac, mc, v.mr, kc, dst);
    return;
  }
  for (std::int64_t i = 0; i < mc; i += v.mr) {
    pack_panel(v, a + i * ar, ar, ac, std::min<std::int64_t>(v.mr, mc - i), v.mr, kc, dst);
    dst += v.mr * kc;
  }
}

// Packs rows [p0, p0 + kc) x cols [j0, j0 + nc) of B into NR-column panels, zero-padding the last (row p at
// b + offs[p] where offs is not null, with bc == 1).
void pack_b(const Variant& v, std::int64_t kc, std::int64_t nc, const float* b, std::int64_t br, std::int64_t bc,
            float* dst, const std::int64_t* offs) {
  if (bc == 1 && &v != &kPortable && v.nr % 8 == 0) {  // row order
    pack_rows_avx(b, br, nc, v.nr, kc, dst, offs);
    return;
  }
  for (std::int64_t j = 0; j < nc; j += v.nr)
    pack_panel(v, b + j * bc, bc, br, std::min<std::int64_t>(v.nr, nc - j), v.nr, kc, dst + j * kc, offs);
}

}  // namespace

namespace {

PACT_TARGET_AVX512 void stride2_copy_avx512(const float* src, float* dst, std::int64_t count) {
  for (std::int64_t z = 0; z < count; z += 16) {
    const std::int64_t n = std::min<std::int64_t>(16, count - z);
    _mm512_mask_storeu_ps(dst + z, first_lanes(n), even_floats(src + 2 * z, n));
  }
}

void strided_copy_portable(const float* src, std::int64_t stride, float* dst, std::int64_t count) {
  if (stride == 1) {
    std::copy(src, src + count, dst);
  } else {
    for (std::int64_t z = 0; z < count; ++z) dst[z] = src[z * stride];
  }
}

void strided_copy_avx512(const float* src, std::int64_t stride, float* dst, std::int64_t count) {
  if (stride == 2)
    stride2_copy_avx512(src, dst, count);
  else
    strided_copy_portable(src, stride, dst, count);
}

const simd::Table<void (*)(const float*, std::int64_t, float*, std::int64_t)> kStridedCopy{
    "strided_copy", PACT_SIMD_FN(strided_copy_portable), {}, {&strided_copy_avx512, "stride2_copy_avx512"}};

}  // namespace

void strided_copy(const float* src, std::int64_t stride, float* dst, std::int64_t count) noexcept {
  kStridedCopy(src, stride, dst, count);
}

std::string_view sgemm_variant() noexcept { return isa_name(kSgemm.level()); }

std::int64_t sgemm_panel_width() noexcept { return kSgemm.get()->nr; }

std::int64_t sgemm_tile_height() noexcept { return kSgemm.get()->mr; }

namespace {

// A row-major B is read in place, full panels only, when few row tiles (m up to 64 rows: 8 of the AVX-512
// kernel's, 11 of the AVX2 one's) reuse each panel: then packing it costs more than the strided rows do
// (conv2d's im2col columns against 64 filters, 6% on the ResNet stem; at AVX2, where the limit was 8 MR =
// 48 rows, resnet18's 64 -> 64 layers on 56 x 56 packed their 576 x 3248 implicit B on every call: 2.67-2.77
// -> 2.49-2.59 ms read in place, Zen 4 VM). With many row tiles the contiguous packed panel wins (5-15% at
// 512 x 512). From 1024 columns on, only for two row tiles or more and under 4096 columns: efficientnet_b0's
// 192 -> 1152 and 320 -> 1280 pointwise layers on a 7 x 7 plane (49 rows against a 0.9 or 1.6 MB weight,
// packed whole for 11 or 20 M multiply-adds) took 0.39 -> 0.36 and 0.71 -> 0.63 ms read in place (one
// thread, Zen 4 VM), but its one-row squeeze-and-excitation expansions (48 -> 1152) 0.034 -> 0.046 ms, and
// its 3 x 3 stem (32 filters against the 27 x 12544 im2col matrix, whose rows, 49 KiB apart, share few
// cache sets) 0.79 -> 0.97 ms.
bool b_in_place_pays(std::int64_t m, std::int64_t n, std::int64_t b_col, const Variant& v) {
  return v.direct != nullptr && b_col == 1 && m <= std::max<std::int64_t>(8 * v.mr, 64) &&
         (n < 1024 || (m > v.mr && n < 4096));
}

// Products with 1024 columns or more, which pack A anyway, take the wide AVX-512 kernel: fewer loads per
// multiply-add (2048^2 on one thread: 0.95-0.97 of OpenBLAS with 8 x 32, 1.02-1.03 with 8 x 48), unless B
// is read in place (the wide kernel has no such path). Narrower products keep 8 x 32, whose 32-wide panels
// fit the step's 32- to 512-wide operands.
const Variant& variant_for(std::int64_t m, std::int64_t n, std::int64_t b_col) {
  const Variant* chosen = kSgemm.get();
  return chosen == &kAvx512 && n >= 1024 && !b_in_place_pays(m, n, b_col, kAvx512) ? kAvx512Wide : *chosen;
}

// sgemm for m, n, k > 0 on the calling thread, its multiply-adds counted by the caller.
void blocked_sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row,
                   std::int64_t a_col, const float* b, std::int64_t b_row, std::int64_t b_col, float* c,
                   std::int64_t ldc, bool accumulate, GemmEpilogue store, const std::int64_t* b_rows) {
  const Variant& v = variant_for(m, n, b_col);
  static const Blocking blocking[] = {blocking_for(kPortable.mr, kPortable.nr), blocking_for(kAvx2.mr, kAvx2.nr),
                                      blocking_for(kAvx512.mr, kAvx512.nr),
                                      blocking_for(kAvx512Wide.mr, kAvx512Wide.nr)};
  const Blocking& sizes = blocking[&v == &kPortable ? 0 : &v == &kAvx2 ? 1 : &v == &kAvx512 ? 2 : 3];
  const std::int64_t kKC = sizes.kc, kMC = sizes.mc;
  // A is read in place when it is used against few B panels (n below 1024), where packing it would cost
  // a large share of the arithmetic; against many, packing pays for itself and its contiguous panels
  // avoid the cache-set conflicts of rows a large power of two apart (2048 x 2048 lost 5-10% in place).
  const bool direct = v.direct != nullptr && (a_col == 1 || a_row == 1) && n < 1024;
  const std::int64_t kc_max = std::min(kKC, k);
  // A KC x NC block of B fills its share of the cache whatever the depth: a shallow product (a pointwise
  // convolution's 16 to 144 input channels) takes that many more columns per block, not KC's worth.
  // B's block stays in the L2 where A is read in place or fits one packed A block (a pointwise convolution's
  // 24 x 144 weight): then a new column block repacks nothing, or only what is in cache.
  const std::int64_t block_nc = direct || m * k <= kMC * kKC ? sizes.nc_in_place : sizes.nc;
  const std::int64_t kNC = whole_panels(block_nc * kKC / kc_max, v.nr);
  const std::int64_t nc_max = std::min(kNC, ((n + v.nr - 1) / v.nr) * v.nr);
  const std::int64_t m_blocks = (m + kMC - 1) / kMC;
  const std::int64_t a_block = ((kMC + v.mr - 1) / v.mr) * v.mr * kc_max;  // floats per packed A block
  float* bpack = scratch(0, static_cast<std::size_t>(nc_max * kc_max));
  float* apack = scratch(1, static_cast<std::size_t>(a_block));
  const bool b_direct = b_in_place_pays(m, n, b_col, v);
  const float clamp_range[2] = {store.lo, store.hi};
  const auto map_block_floats = static_cast<std::int64_t>(cpu_facts().l2 / 4 / sizeof(float));
  for (std::int64_t j0 = 0; j0 < n; j0 += kNC) {
    const std::int64_t nc = std::min(kNC, n - j0);
    const std::int64_t panels = (nc + v.nr - 1) / v.nr;
    for (std::int64_t p0 = 0; p0 < k; p0 += kKC) {
      const std::int64_t kc = std::min(kKC, k - p0);
      const bool add = accumulate || p0 > 0;
      // This block of B: its depth p at bblock + p * b_row, or with b_rows at bblock + offsets[p].
      const std::int64_t* offsets = b_rows != nullptr ? b_rows + p0 : nullptr;
      const float* bblock = b_rows != nullptr ? b + j0 : b + p0 * b_row + j0 * b_col;
      // B packed once for every row block: all of its panels, or with B read in place only the short last
      // panel (zero-padded to NR).
      if (!b_direct) {
        pack_b(v, kc, nc, bblock, b_row, b_col, bpack, offsets);
      } else if (nc % v.nr != 0) {
        const std::int64_t j = nc / v.nr * v.nr;
        pack_panel(v, bblock + j, 1, b_row, nc - j, v.nr, kc, bpack + (panels - 1) * v.nr * kc, offsets);
      }
      for (std::int64_t blk = 0; blk < m_blocks; ++blk) {
        const std::int64_t i0 = blk * kMC, mc = std::min(kMC, m - i0);
        // The epilogue's map (last depth block): on the whole mc x nc block of C once its panels are done
        // where the block fits a quarter of the L2 (whole rows: no panel's tail computed as a full vector,
        // a 7 x 7 plane's 49 columns being 32 + 17), else on each tile as it is stored, while it is in L1.
        const bool last = p0 + kc >= k;
        const bool map_block = store.mapped && last && mc * nc <= map_block_floats;
        const bool map_tiles = store.mapped && last && !map_block;
        // Read in place, A needs packing only for the block's last micro-panel when it is short of MR rows.
        const std::int64_t skip = direct ? mc / v.mr * v.mr : 0;
        if (skip < mc) pack_a(v, mc - skip, kc, a + (i0 + skip) * a_row + p0 * a_col, a_row, a_col, apack + skip * kc);
        alignas(64) float tile[16 * 32];
        for (std::int64_t q = 0; q < panels; ++q) {
          const std::int64_t j = q * v.nr;
          const std::int64_t cols = std::min<std::int64_t>(v.nr, nc - j);
          const bool b_in_place = b_direct && cols == v.nr;
          const float* bp = b_in_place ? bblock + j : bpack + q * v.nr * kc;
          const std::int64_t bs = b_in_place ? b_row : v.nr;
          const std::int64_t* boff = b_in_place ? offsets : nullptr;
          for (std::int64_t i = 0; i < mc; i += v.mr) {
            const std::int64_t rows = std::min<std::int64_t>(v.mr, mc - i);
            const float* ap = apack + i * kc;  // i is a whole number of MR-row micro-panels (no division)
            const float* ad = a + (i0 + i) * a_row + p0 * a_col;
            const bool in_place = direct && rows == v.mr;
            float* cij = c + (i0 + i) * ldc + j0 + j;
            // The bias goes in with the first depth block (later blocks add to C, which holds it), the clamp
            // or the map with the last.
            const bool biased = store.bias != nullptr && p0 == 0;
            const float* clamp = store.clamp && p0 + kc >= k ? clamp_range : nullptr;
            // A full tile straight into C; one of full height short of columns masked into C where the
            // variant has an edge kernel.
            if (rows == v.mr && (cols == v.nr || v.edge != nullptr)) {
              const float* rb = biased && store.per_row ? store.bias + i0 + i : nullptr;
              const float* cb = biased && !store.per_row ? store.bias + j0 + j : nullptr;
              if (cols < v.nr && in_place)
                v.edge(kc, ad, a_row, a_col, bp, bs, cij, ldc, add, rb, cb, clamp, cols);
              else if (cols < v.nr)
                v.edge(kc, ap, 1, v.mr, bp, bs, cij, ldc, add, rb, cb, clamp, cols);
              else if (in_place)
                v.direct(kc, ad, a_row, a_col, bp, bs, boff, cij, ldc, add, rb, cb, clamp);
              else if (b_in_place)
                v.direct(kc, ap, 1, v.mr, bp, bs, boff, cij, ldc, add, rb, cb, clamp);
              else
                v.kernel(kc, ap, bp, cij, ldc, add, rb, cb, clamp);
              if (map_tiles) map_tile_inplace_f32(store.op, cij, ldc, rows, cols, store.lo, store.hi);
              continue;
            }
            if (in_place)
              v.direct(kc, ad, a_row, a_col, bp, bs, boff, tile, v.nr, false, nullptr, nullptr, nullptr);
            else if (b_in_place)
              v.direct(kc, ap, 1, v.mr, bp, bs, boff, tile, v.nr, false, nullptr, nullptr, nullptr);
            else
              v.kernel(kc, ap, bp, tile, v.nr, false, nullptr, nullptr, nullptr);
            // The edge tile's rows into C, each step a loop of its own so each vectorises (the tile is
            // this frame's, never C: __restrict lets the copies vectorise without overlap checks).
            for (std::int64_t r = 0; r < rows; ++r) {
              float* __restrict crow = cij + r * ldc;
              const float* __restrict trow = tile + r * v.nr;
              if (add) {
                for (std::int64_t x = 0; x < cols; ++x) crow[x] += trow[x];
              } else {
                for (std::int64_t x = 0; x < cols; ++x) crow[x] = trow[x];
              }
              if (biased && store.per_row) {
                const float rb = store.bias[i0 + i + r];
                for (std::int64_t x = 0; x < cols; ++x) crow[x] += rb;
              } else if (biased) {
                const float* cb = store.bias + j0 + j;
                for (std::int64_t x = 0; x < cols; ++x) crow[x] += cb[x];
              }
              if (clamp != nullptr) {
                const float lo = clamp[0], hi = clamp[1];
                for (std::int64_t x = 0; x < cols; ++x) crow[x] = std::min(std::max(crow[x], lo), hi);
              }
            }
            if (map_tiles) map_tile_inplace_f32(store.op, cij, ldc, rows, cols, store.lo, store.hi);
          }
        }
        if (map_block) map_tile_inplace_f32(store.op, c + i0 * ldc + j0, ldc, mc, nc, store.lo, store.hi);
      }
    }
  }
}

}  // namespace

void sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t a_row, std::int64_t a_col,
           const float* b, std::int64_t b_row, std::int64_t b_col, float* c, std::int64_t ldc, bool accumulate,
           GemmEpilogue store, const std::int64_t* b_rows) {
  if (m <= 0 || n <= 0) return;
  if (b_rows != nullptr && b_col != 1)
    throw_error(ErrorCode::invalid_argument, "sgemm", "B given by row offsets must have unit column stride");
  if (b_rows == nullptr) count_macs(m * n * k);  // with b_rows the caller counts the columns it keeps
  if (k <= 0) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = store.clamped((accumulate ? c[i * ldc + j] : 0.0f) + store.bias_at(i, j));
    if (store.mapped) map_tile_inplace_f32(store.op, c, ldc, m, n, store.lo, store.hi);
    return;
  }
  // Products below about a million multiply-adds run on one thread: a parallel region's start costs more
  // than it saves (at 128^3 on two threads, one region with no barrier inside is only level with one
  // thread; 192^3 gains 20%).
  constexpr std::int64_t kParallelMacs = std::int64_t{1} << 20;
  const int threads = omp_in_parallel() || m * n < kParallelMacs / k ? 1 : omp_get_max_threads();
  // Whole micro-tiles of the kernel each part will run (the wide one where a part keeps 1024 columns).
  const std::int64_t mr = kSgemm.get()->mr, nr = variant_for(m, n / threads, b_col).nr;
  const std::int64_t panels = (n + nr - 1) / nr, tiles = (m + mr - 1) / mr;
  if (threads == 1 || (panels < 2 && tiles < 2)) {
    blocked_sgemm(m, n, k, a, a_row, a_col, b, b_row, b_col, c, ldc, accumulate, store, b_rows);
    return;
  }
  // Note [Threads own their operands]: each thread computes a contiguous range of whole column panels
  // (or, when the product has fewer than two panels a thread, of whole row tiles) as a one-thread product
  // of its own, packing its own operands, in one parallel region with no barrier inside. Sharing a packed
  // B among threads that split the rows (one region per depth block, B packed by one thread and read by
  // all) kept two threads near one thread's speed on a 2-core Zen 5 VM: [256, 2304] x [2304, 196] took
  // 1.21 ms on one thread and 1.24 on two, [144, 24] x [24, 3136] (a pointwise convolution on a 56 x 56
  // plane) 0.135 and 0.166; with each thread's operands its own, 0.72 and 0.070 ms on two. The sums are
  // the same products in the same order either way, so the result does not depend on the thread count.
  // Columns unless that leaves the threads unevenly loaded where rows would not: a 14 x 14 plane's 7 panels
  // split 4 : 3 against 32 row tiles' 16 : 16 (every micro-tile costs the same, so a part's time is its
  // tiles). Rows where the column split's busiest thread has over a tenth more tiles ([256, 2304] x
  // [2304, 224] on two threads, minimum of nine: 326-354 GFLOP/s by columns, 375-397 by rows, Zen 5); near
  // a tie columns, whose threads each read a part of B and share A ([128, 1152] x [1152, 840], 27 panels
  // against 16 tiles: 390 by columns, 348 by rows).
  const std::int64_t column_load = (panels + threads - 1) / threads * tiles;
  const std::int64_t row_load = (tiles + threads - 1) / threads * panels;
  const bool by_columns = (panels >= 2 * threads || panels >= tiles) && row_load * 11 >= column_load * 10;
  const std::int64_t units = by_columns ? panels : tiles;
  const int team = static_cast<int>(std::min<std::int64_t>(threads, units));
#pragma omp parallel num_threads(team)
  {
    const std::int64_t t = omp_get_thread_num(), size = omp_get_num_threads();
    const std::int64_t u0 = units * t / size, u1 = units * (t + 1) / size;
    GemmEpilogue part = store;
    if (by_columns) {
      const std::int64_t j0 = std::min(n, u0 * nr), j1 = std::min(n, u1 * nr);
      if (part.bias != nullptr && !part.per_row) part.bias += j0;
      if (j1 > j0)
        blocked_sgemm(m, j1 - j0, k, a, a_row, a_col, b + j0 * b_col, b_row, b_col, c + j0, ldc, accumulate, part,
                      b_rows);
    } else {
      const std::int64_t i0 = std::min(m, u0 * mr), i1 = std::min(m, u1 * mr);
      if (part.bias != nullptr && part.per_row) part.bias += i0;
      if (i1 > i0)
        blocked_sgemm(i1 - i0, n, k, a + i0 * a_row, a_row, a_col, b, b_row, b_col, c + i0 * ldc, ldc, accumulate, part,
                      b_rows);
    }
  }
}

}  // namespace pact::kernels::cpu
