// The half provider (issue 22 item 2): bf16 and f16 as compute dtypes. Values are stored in 16 bits and
// computed in f32: each kernel widens its 16-bit operands to f32 (exactly), runs the native provider's f32
// kernel, and rounds the result to the node's dtype once (Note [Half provider]).

#include "pact/kernels/cpu/half.hpp"

#include <immintrin.h>

#include <optional>
#include <vector>

#include "pact/core/simd_dispatch.hpp"
#include "pact/core/storage.hpp"
#include "pact/kernels/cpu/common.hpp"
#include "pact/kernels/cpu/fast_math.hpp"
#include "pact/kernels/cpu/handler_table.hpp"
#include "pact/kernels/cpu/vector_ops.hpp"
#include "pact/kernels/kernel.hpp"

namespace pact::kernels::cpu {

namespace {

// ---- conversions ----------------------------------------------------------------------------------------

void widen_bf16_portable(const BFloat16* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = from_bf16(x[i]);
}
PACT_TARGET_AVX2 void widen_bf16_avx2(const BFloat16* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
  for (; i < n; ++i) y[i] = from_bf16(x[i]);
}
PACT_TARGET_AVX512 void widen_bf16_avx512(const BFloat16* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
  }
  for (; i < n; ++i) y[i] = from_bf16(x[i]);
}
const simd::Table<void (*)(const BFloat16*, float*, std::int64_t)> kWidenBf16{
    "widen_bf16", PACT_SIMD_FN(widen_bf16_portable), PACT_SIMD_FN(widen_bf16_avx2), PACT_SIMD_FN(widen_bf16_avx512)};

void narrow_bf16_portable(const float* x, BFloat16* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = to_bf16(x[i]);
}
// Round to nearest even on the bit pattern, as to_bf16 does: add 0x7fff plus the kept part's lowest bit,
// keep the upper half; a NaN keeps its upper half with the quiet bit set.
PACT_TARGET_AVX2 void narrow_bf16_avx2(const float* x, BFloat16* y, std::int64_t n) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256i u = _mm256_castps_si256(v), high = _mm256_srli_epi32(u, 16);
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(high, one))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);  // lanes 0..7 low
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) y[i] = to_bf16(x[i]);
}
PACT_TARGET_AVX512 void narrow_bf16_avx512(const float* x, BFloat16* y, std::int64_t n) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512i u = _mm512_castps_si512(v), high = _mm512_srli_epi32(u, 16);
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(high, one))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i r = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(high, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtepi32_epi16(r));
  }
  for (; i < n; ++i) y[i] = to_bf16(x[i]);
}
PACT_TARGET_AVX512_BF16 void narrow_bf16_avx512_bf16(const float* x, BFloat16* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), reinterpret_cast<const __m256i&>(h));
  }
  if (i < n) {  // the tail through a masked load: the same instruction, so subnormals flush here too
    const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, x + i));
    _mm256_mask_storeu_epi16(y + i, mask, reinterpret_cast<const __m256i&>(h));
  }
}
const simd::Table<void (*)(const float*, BFloat16*, std::int64_t)> kNarrowBf16{
    "narrow_bf16", PACT_SIMD_FN(narrow_bf16_portable), PACT_SIMD_FN(narrow_bf16_avx2), PACT_SIMD_FN(narrow_bf16_avx512),
    PACT_SIMD_FN(narrow_bf16_avx512_bf16)};

void widen_f16_portable(const Half* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = from_f16(x[i]);
}
PACT_TARGET_AVX2 void widen_f16_avx2(const Half* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = from_f16(x[i]);
}
PACT_TARGET_AVX512 void widen_f16_avx512(const Half* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  for (; i < n; ++i) y[i] = from_f16(x[i]);
}
const simd::Table<void (*)(const Half*, float*, std::int64_t)> kWidenF16{
    "widen_f16", PACT_SIMD_FN(widen_f16_portable), PACT_SIMD_FN(widen_f16_avx2), PACT_SIMD_FN(widen_f16_avx512)};

void narrow_f16_portable(const float* x, Half* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = to_f16(x[i]);
}
PACT_TARGET_AVX2 void narrow_f16_avx2(const float* x, Half* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) y[i] = to_f16(x[i]);
}
PACT_TARGET_AVX512 void narrow_f16_avx512(const float* x, Half* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) y[i] = to_f16(x[i]);
}
const simd::Table<void (*)(const float*, Half*, std::int64_t)> kNarrowF16{
    "narrow_f16", PACT_SIMD_FN(narrow_f16_portable), PACT_SIMD_FN(narrow_f16_avx2), PACT_SIMD_FN(narrow_f16_avx512)};

// ---- 16-bit weight GEMV: rows [j0, j1) of y = x W^T + b ---------------------------------------------------

template <class W>
void gemv16_portable(const float* x, const W* w, const float* bias, std::int64_t j0, std::int64_t j1, std::int64_t in_f,
                     float* y) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const W* row = w + j * in_f;
    y[j] = lanes_sum(in_f,
                     [&](std::int64_t k) {
                       if constexpr (std::is_same_v<W, BFloat16>)
                         return x[k] * from_bf16(row[k]);
                       else
                         return x[k] * from_f16(row[k]);
                     }) +
           (bias != nullptr ? bias[j] : 0.0f);
  }
}

PACT_TARGET_AVX2 PACT_SIMD_INLINE float hsum_avx2(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}
PACT_TARGET_AVX2 PACT_SIMD_INLINE __m256 load8_bf16(const BFloat16* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
PACT_TARGET_AVX2 PACT_SIMD_INLINE __m256 load8_f16(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
template <class W>
PACT_TARGET_AVX2 void gemv16_avx2(const float* x, const W* w, const float* bias, std::int64_t j0, std::int64_t j1,
                                  std::int64_t in_f, float* y) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const W* row = w + j * in_f;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    std::int64_t k = 0;
    for (; k + 16 <= in_f; k += 16) {
      if (k % 32 == 0) prefetch_weight_stream(row + k);  // one 64-byte line per two steps
      if constexpr (std::is_same_v<W, BFloat16>) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), load8_bf16(row + k), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), load8_bf16(row + k + 8), a1);
      } else {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), load8_f16(row + k), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), load8_f16(row + k + 8), a1);
      }
    }
    float s = hsum_avx2(_mm256_add_ps(a0, a1));
    for (; k < in_f; ++k) {
      if constexpr (std::is_same_v<W, BFloat16>)
        s += x[k] * from_bf16(row[k]);
      else
        s += x[k] * from_f16(row[k]);
    }
    y[j] = s + (bias != nullptr ? bias[j] : 0.0f);
  }
}
template <class W>
PACT_TARGET_AVX512 PACT_SIMD_INLINE __m512 load16_masked(const W* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  if constexpr (std::is_same_v<W, BFloat16>)
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  else
    return _mm512_cvtph_ps(h);
}
template <class W>
PACT_TARGET_AVX512 void gemv16_avx512(const float* x, const W* w, const float* bias, std::int64_t j0, std::int64_t j1,
                                      std::int64_t in_f, float* y) {
  for (std::int64_t j = j0; j < j1; ++j) {
    const W* row = w + j * in_f;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    std::int64_t k = 0;
    for (; k + 32 <= in_f; k += 32) {
      prefetch_weight_stream(row + k);
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), load16_masked(row + k, 0xffff), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16), load16_masked(row + k + 16, 0xffff), a1);
    }
    for (; k < in_f; k += 16) {
      const auto m = static_cast<__mmask16>(in_f - k >= 16 ? 0xffffu : (1u << (in_f - k)) - 1u);
      a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, x + k), load16_masked(row + k, m), a0);
    }
    y[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + (bias != nullptr ? bias[j] : 0.0f);
  }
}
using GemvBf16 = void (*)(const float*, const BFloat16*, const float*, std::int64_t, std::int64_t, std::int64_t,
                          float*);
using GemvF16 = void (*)(const float*, const Half*, const float*, std::int64_t, std::int64_t, std::int64_t, float*);
const simd::Table<GemvBf16> kGemvBf16{"gemv_bf16",
                                      {&gemv16_portable<BFloat16>, "gemv16_portable"},
                                      {&gemv16_avx2<BFloat16>, "gemv16_avx2"},
                                      {&gemv16_avx512<BFloat16>, "gemv16_avx512"}};
const simd::Table<GemvF16> kGemvF16{"gemv_f16",
                                    {&gemv16_portable<Half>, "gemv16_portable"},
                                    {&gemv16_avx2<Half>, "gemv16_avx2"},
                                    {&gemv16_avx512<Half>, "gemv16_avx512"}};

// Conversions share work among threads from this many elements.
constexpr std::int64_t kShareElements = std::int64_t{1} << 16;

template <class F, class S, class D>
void shared(const F& table, const S* x, D* y, std::int64_t n) {
  const auto f = table.get();
  parallel_ranges(n, n >= kShareElements, [&](std::int64_t b, std::int64_t e) { f(x + b, y + b, e - b); });
}

}  // namespace

void widen_bf16(const BFloat16* x, float* y, std::int64_t n) { shared(kWidenBf16, x, y, n); }
void widen_f16(const Half* x, float* y, std::int64_t n) { shared(kWidenF16, x, y, n); }
void narrow_bf16(const float* x, BFloat16* y, std::int64_t n) { shared(kNarrowBf16, x, y, n); }
void narrow_f16(const float* x, Half* y, std::int64_t n) { shared(kNarrowF16, x, y, n); }

void gemv_bf16(const float* x, const BFloat16* w, const float* bias, std::int64_t out_f, std::int64_t in_f, float* y) {
  count_macs(out_f * in_f);
  const auto f = kGemvBf16.get();
  parallel_ranges(out_f, out_f * in_f >= (std::int64_t{1} << 17),
                  [&](std::int64_t j0, std::int64_t j1) { f(x, w, bias, j0, j1, in_f, y); });
}
void gemv_f16(const float* x, const Half* w, const float* bias, std::int64_t out_f, std::int64_t in_f, float* y) {
  count_macs(out_f * in_f);
  const auto f = kGemvF16.get();
  parallel_ranges(out_f, out_f * in_f >= (std::int64_t{1} << 17),
                  [&](std::int64_t j0, std::int64_t j1) { f(x, w, bias, j0, j1, in_f, y); });
}

}  // namespace pact::kernels::cpu

// ---- the provider's handlers --------------------------------------------------------------------------------

namespace pact::kernels::cpu::half {

// Note [Half provider]
// The half provider serves bf16 and f16 nodes (its provider-table row's dtypes) for the ops a language or
// vision model spends its time in (kHalfOps). Each kernel is the native provider's f32 kernel between two
// conversions: 16-bit float operands are widened to f32 exactly, the native kernel computes (f32
// accumulation throughout), and each float result is rounded once to the node's dtype (round to nearest
// even). Index, mask and other non-float operands pass through unchanged. The results therefore differ
// from an f32 run by that one rounding plus the rounding of the inputs, which the op table's 16-bit
// tolerances bound (ops::OpInfo::tolerance(DType)). Two kernels avoid the widened copy where it would
// cost more than the work: linear on a few rows (the decode step of a language model) reads its 16-bit
// weight in place through the gemv_bf16 / gemv_f16 families, and embedding and index_copy (a KV cache's
// update), like the view ops, move 16-bit rows without converting them. The VJPs are the native VJPs between the same
// conversions; an operand the op does not save reaches them as an f32 geometry-only placeholder, as the tape's own.

using ops::Attributes;
using ops::OpTag;
using GradList = std::vector<std::optional<Tensor>>;

namespace {

bool sixteen(DType d) noexcept { return d == DType::bf16 || d == DType::f16; }

const Handler& native(OpTag op) {
  const Handler* h = find_handler(native_handlers(), op);
  if (h == nullptr) throw_error(ErrorCode::unsupported, "half", fmt::format("no native {}", ops::op_kind(op)));
  return *h;
}

// The node's compute dtype: that of its first 16-bit float operand (the shape rules make the others agree).
DType compute_dtype(std::span<const TensorView> in, OpTag op) {
  for (const auto& v : in)
    if (sixteen(v.dtype())) return v.dtype();
  throw_error(ErrorCode::dtype_mismatch, std::string(ops::op_kind(op)),
              "the half provider computes bf16 and f16 nodes; no operand is either");
}

// A 16-bit float view as a fresh f32 tensor, exactly.
Tensor widen(const TensorView& v, std::string_view op, std::string_view operand) {
  Out<float> out(v.shape());
  if (v.dtype() == DType::bf16) {
    Dense<BFloat16> x(v, op, operand);
    widen_bf16(x.data(), out.data(), x.size());
  } else {
    Dense<Half> x(v, op, operand);
    widen_f16(x.data(), out.data(), x.size());
  }
  return std::move(out).finish();
}

// An f32 result rounded to `dtype` (a result of another dtype, an index, is returned as it is).
Tensor narrow(Tensor y, DType dtype, std::string_view op) {
  if (y.dtype() != DType::f32) return y;
  Dense<float> x(y.as_view(), op, "result");
  if (dtype == DType::bf16) {
    Out<BFloat16> out(y.shape());
    narrow_bf16(x.data(), out.data(), x.size());
    return std::move(out).finish();
  }
  Out<Half> out(y.shape());
  narrow_f16(x.data(), out.data(), x.size());
  return std::move(out).finish();
}

// The operands of a widened call: 16-bit float views widened (or, where the VJP does not read them, an f32
// geometry-only placeholder), everything else as it is. `read(k)`: whether operand k is read.
class Widened {
 public:
  template <class Read>
  Widened(std::span<const TensorView> in, OpTag op, const Read& read) : wide_(in.size()) {
    for (std::size_t k = 0; k < in.size(); ++k) {
      if (!sixteen(in[k].dtype())) continue;
      wide_[k] = read(k) ? widen(in[k], ops::op_kind(op), fmt::format("input {}", k))
                         : Tensor::empty(in[k].shape(), DType::f32, meta_provider());
    }
    for (std::size_t k = 0; k < in.size(); ++k) views_.push_back(wide_[k] ? wide_[k]->as_view() : in[k]);
  }
  std::span<const TensorView> views() const noexcept { return views_; }

 private:
  std::vector<std::optional<Tensor>> wide_;
  std::vector<TensorView> views_;
};

Tensor widened_forward(OpTag op, std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  const DType dtype = compute_dtype(in, op);
  const Widened w(in, op, [](std::size_t) { return true; });
  return narrow(native(op).forward(w.views(), a, c), dtype, ops::op_kind(op));
}

GradList widened_vjp(OpTag op, std::span<const TensorView> in, const TensorView& y, const TensorView& g,
                     const Attributes& a, const KernelContext& c) {
  const ops::OpInfo& info = ops::op_info(op);
  const Widened w(in, op, [&](std::size_t k) { return info.saves_input(k); });
  const TensorView outs[] = {y, g};  // the output, read when saved, and the cotangent, always read
  const Widened wy(outs, op, [&](std::size_t k) { return k == 1 || info.saves_output(); });
  GradList grads = native(op).vjp(w.views(), wy.views()[0], wy.views()[1], a, c);
  // A gradient per operand (the VJP's contract), in its operand's dtype: only float operands, all of the
  // node's 16-bit dtype (compute_dtype), have one.
  for (std::size_t k = 0; k < grads.size(); ++k)
    if (grads[k]) grads[k] = narrow(std::move(*grads[k]), in[k].dtype(), ops::op_kind(op));
  return grads;
}

// linear on at most this many rows reads its 16-bit weight in place (a GEMV per row); more rows amortise
// the widened weight over a packed GEMM.
constexpr std::int64_t kGemvRows = 4;

}  // namespace

// The handlers: widened native kernels (Note [Half provider]); views, embedding and index_copy move 16-bit
// elements.
#define PACT_HALF_WIDENED(opname)                                                                                      \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {               \
    return widened_forward(OpTag::opname, in, a, c);                                                                   \
  }                                                                                                                    \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a, \
                        const KernelContext& c) {                                                                      \
    return widened_vjp(OpTag::opname, in, y, g, a, c);                                                                 \
  }
#define PACT_HALF_MOVED(opname)                                                                                        \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {               \
    (void)compute_dtype(in, OpTag::opname);                                                                            \
    return native(OpTag::opname).forward(in, a, c);                                                                    \
  }                                                                                                                    \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a, \
                        const KernelContext& c) {                                                                      \
    return widened_vjp(OpTag::opname, in, y, g, a, c);                                                                 \
  }
PACT_HALF_WIDENED(add)
PACT_HALF_WIDENED(sub)
PACT_HALF_WIDENED(mul)
PACT_HALF_WIDENED(div)
PACT_HALF_WIDENED(neg)
PACT_HALF_WIDENED(matmul)
PACT_HALF_WIDENED(relu)
PACT_HALF_WIDENED(gelu)
PACT_HALF_WIDENED(silu)
PACT_HALF_WIDENED(tanh)
PACT_HALF_WIDENED(sigmoid)
PACT_HALF_WIDENED(exp)
PACT_HALF_WIDENED(sqrt)
PACT_HALF_WIDENED(sin)
PACT_HALF_WIDENED(cos)
PACT_HALF_WIDENED(where)
PACT_HALF_WIDENED(softmax)
PACT_HALF_WIDENED(log_softmax)
PACT_HALF_WIDENED(layer_norm)
PACT_HALF_WIDENED(rms_norm)
PACT_HALF_WIDENED(rotary_embedding)
PACT_HALF_WIDENED(concat)
PACT_HALF_WIDENED(sum)
PACT_HALF_WIDENED(mean)
// Inference only (the op table's VJP column: false).
Tensor linear_int8_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  return widened_forward(OpTag::linear_int8, in, a, c);
}
PACT_HALF_MOVED(embedding)
PACT_HALF_MOVED(index_copy)
PACT_HALF_MOVED(reshape)
PACT_HALF_MOVED(flatten)
PACT_HALF_MOVED(transpose)
PACT_HALF_MOVED(permute)
PACT_HALF_MOVED(slice)

// Attention under a boolean mask widens only the key columns some row attends to (Note [Live attention
// columns] in common.hpp): a KV cache is widened up to its filled part, not whole.
Tensor scaled_dot_product_attention_forward(std::span<const TensorView> in, const Attributes& a,
                                            const KernelContext& c) {
  constexpr OpTag op = OpTag::scaled_dot_product_attention;
  if (auto cut = attention_live_cut(in)) return widened_forward(op, *cut, a, c);
  return widened_forward(op, in, a, c);
}
GradList scaled_dot_product_attention_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g,
                                          const Attributes& a, const KernelContext& c) {
  return widened_vjp(OpTag::scaled_dot_product_attention, in, y, g, a, c);
}

// index_copy in place moves 16-bit rows as they are, as its forward does: the native kernel.
void index_copy_in_place(std::span<Tensor* const> state, std::span<const TensorView> read, const Attributes& a) {
  (void)compute_dtype(read.subspan(1), OpTag::index_copy);
  native(OpTag::index_copy).in_place(state, read, a);
}
constexpr UpdateFn in_place_kernel(OpTag op) noexcept {
  return op == OpTag::index_copy ? &index_copy_in_place : nullptr;
}
#undef PACT_HALF_MOVED
#undef PACT_HALF_WIDENED

// linear: a few rows against a contiguous 16-bit weight run the in-place GEMV; the rest is widened.
template <class W>
Tensor linear_rows(std::span<const TensorView> in, const ops::TensorType& type, std::int64_t rows) {
  const std::int64_t out_f = in[1].shape()[0], in_f = in[1].shape()[1];
  const Tensor xw = widen(in[0], "linear", "x");
  const Dense<float> x(xw.as_view(), "linear", "x");
  const Dense<W> w(in[1], "linear", "weight");
  std::optional<Tensor> bw;
  std::optional<Dense<float>> b;
  if (in.size() > 2) {
    bw = widen(in[2], "linear", "bias");
    b.emplace(bw->as_view(), "linear", "bias");
  }
  Out<float> y(type.shape);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* bias = b ? b->data() : nullptr;
    if constexpr (std::is_same_v<W, BFloat16>)
      gemv_bf16(x.data() + r * in_f, w.data(), bias, out_f, in_f, y.data() + r * out_f);
    else
      gemv_f16(x.data() + r * in_f, w.data(), bias, out_f, in_f, y.data() + r * out_f);
  }
  return narrow(std::move(y).finish(), type.dtype, "linear");
}

Tensor linear_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  const DType dtype = compute_dtype(in, OpTag::linear);
  std::vector<ops::TensorType> types;
  for (const auto& v : in) types.push_back({v.dtype(), v.shape()});
  const ops::TensorType type = ops::infer_type(OpTag::linear, types, a);
  const std::int64_t in_f = in[1].shape()[1], rows = in_f > 0 ? in[0].numel() / in_f : 0;
  bool gemv = rows > 0 && rows <= kGemvRows && in[1].is_contiguous();
  for (const auto& v : in) gemv = gemv && v.dtype() == dtype;
  if (!gemv) return widened_forward(OpTag::linear, in, a, c);
  return dtype == DType::bf16 ? linear_rows<BFloat16>(in, type, rows) : linear_rows<Half>(in, type, rows);
}
GradList linear_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                    const KernelContext& c) {
  return widened_vjp(OpTag::linear, in, y, g, a, c);
}

}  // namespace pact::kernels::cpu::half

namespace pact::kernels {

// The ops the half provider serves (Note [Half provider]), each with its VJP; and linear_int8, which has none.
// clang-format off
#define PACT_HALF_OPS(X)                                                                                      \
  X(add) X(sub) X(mul) X(div) X(neg) X(matmul) X(linear) X(relu) X(gelu) X(silu) X(tanh) X(sigmoid) X(exp)   \
  X(sqrt) X(sin) X(cos) X(where) X(index_copy) X(softmax) X(log_softmax) X(layer_norm) X(rms_norm)            \
  X(rotary_embedding)                                                                                         \
  X(scaled_dot_product_attention) X(concat) X(sum) X(mean) X(embedding) X(reshape) X(flatten) X(transpose)    \
  X(permute) X(slice)

std::span<const Handler> half_handlers() {
#define PACT_HALF_ROW(opname) PACT_CPU_HANDLER(half, "pact/kernels/cpu/half.cpp", opname, true)
  static const Handler table[] = {
      PACT_HALF_OPS(PACT_HALF_ROW)
      PACT_CPU_HANDLER(half, "pact/kernels/cpu/half.cpp", linear_int8, false)};
#undef PACT_HALF_ROW
  return table;
}
// clang-format on
#undef PACT_HALF_OPS

bool half_dispatches_simd(ops::OpTag op) noexcept { return find_handler(half_handlers(), op) != nullptr; }

}  // namespace pact::kernels
