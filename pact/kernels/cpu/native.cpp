// The native provider (numerical policy implementationDefined): the packed SIMD GEMM behind matmul,
// linear, conv2d (im2col) and attention; fused softmax / log_softmax / cross_entropy and layer / rms norm
// with OpenMP over rows. f64 and the remaining ops run the generic kernels compiled in this translation
// unit (Note [Generic kernels compiled per provider]).

#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "pact/core/cpu.hpp"
#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/common.hpp"
#include "pact/kernels/cpu/conv_direct.hpp"
#include "pact/kernels/cpu/fast_math.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/cpu/half.hpp"
#include "pact/kernels/cpu/handler_table.hpp"
#include "pact/kernels/cpu/vector_ops.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/kernels/ranks.hpp"

namespace pact::kernels::cpu::native {

namespace generic {
#include "pact/kernels/cpu/generic_kernels.inc"
}  // namespace generic

using generic::GradList;
using generic::in_place_kernel;
using ops::Attributes;

// ---- matmul, linear, conv2d: the shared GEMM-based implementations over this provider's sgemm -------

#define PACT_GEMM_OPS_SGEMM ::pact::kernels::cpu::sgemm
#define PACT_GEMM_FALLBACK(fn, ...) generic::fn(__VA_ARGS__)
#define PACT_GEMM_OPS_NATIVE
#include "pact/kernels/cpu/gemm_ops.inc"
#undef PACT_GEMM_OPS_NATIVE
#undef PACT_GEMM_FALLBACK
#undef PACT_GEMM_OPS_SGEMM

// ---- weight-only linear: linear_int8 and linear_bf16 ----------------------------------------------------

// y = x W^T (+ in[bias_at]) against a weight stored narrower than x (i8 with per-row scales, or bf16). A
// few rows read the weight in place, row r through gemv(x_r, bias, y_r): a language model's decode step
// reads a quarter or half of the f32 bytes. More rows widen it once into an f32 [out, in] (widen(dst)) and
// run linear's GEMM.
template <class Widen, class Gemv>
Tensor weight_only_linear(std::span<const TensorView> in, std::size_t bias_at, const Dims& weight_shape,
                          const Attributes& a, const KernelContext& c, std::string_view op, const Widen& widen,
                          const Gemv& gemv) {
  const std::int64_t out_f = weight_shape[0], in_f = weight_shape[1];
  const std::int64_t rows = in_f > 0 ? in[0].numel() / in_f : generic::leading(in[0].shape());
  const bool has_bias = in.size() > bias_at;
  if (rows > 4) {
    Out<float> wide(weight_shape);
    widen(wide.data());
    const Tensor weight = std::move(wide).finish();
    std::vector<TensorView> lin{in[0], weight.as_view()};
    if (has_bias) lin.push_back(in[bias_at]);
    return linear_forward(lin, a, c);
  }
  Dense<float> x(in[0], op, "x");
  std::optional<Dense<float>> b;
  if (has_bias) b.emplace(in[bias_at], op, "bias");
  Dims out_shape = x.shape();
  out_shape[out_shape.size() - 1] = out_f;
  Out<float> out(out_shape);
  for (std::int64_t r = 0; r < rows; ++r) gemv(x.data() + r * in_f, b ? b->data() : nullptr, out.data() + r * out_f);
  return std::move(out).finish();
}

Tensor linear_int8_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  if (in[0].dtype() != DType::f32) return generic::linear_int8_forward(in, a, c);
  Dense<std::int8_t> w(in[1], "linear_int8", "weight");
  Dense<float> s(in[2], "linear_int8", "scale");
  const std::int64_t out_f = w.shape()[0], in_f = w.shape()[1];
  return weight_only_linear(
      in, 3, w.shape(), a, c, "linear_int8",
      [&](float* dst) { dequantize_i8_f32(w.data(), s.data(), out_f, in_f, dst); },
      [&](const float* x, const float* bias, float* y) { gemv_i8_f32(x, w.data(), s.data(), bias, out_f, in_f, y); });
}

Tensor linear_bf16_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  if (in[0].dtype() != DType::f32) return generic::linear_bf16_forward(in, a, c);
  Dense<BFloat16> w(in[1], "linear_bf16", "weight");
  const std::int64_t out_f = w.shape()[0], in_f = w.shape()[1];
  return weight_only_linear(
      in, 2, w.shape(), a, c, "linear_bf16", [&](float* dst) { widen_bf16(w.data(), dst, w.size()); },
      [&](const float* x, const float* bias, float* y) { gemv_bf16(x, w.data(), bias, out_f, in_f, y); });
}

// ---- softmax family and cross-entropy (fused: one pass for the max, one for the sum, one to write) ---

// y[k] = exp(x[k] - shift); returns the sum of y. `shift` is the row's maximum (row_max), so no argument
// is positive (fast_exp_no_overflow). Compiled per ISA level (the dispatch table). The sum runs in 16
// independent lanes folded pairwise (an implementationDefined order), so the loops vectorise and the fold
// is four dependent steps, not sixteen.
PACT_SIMD_INLINE float exp_shifted_body(const float* x, float* y, std::int64_t n, float shift) {
  for (std::int64_t k = 0; k < n; ++k) y[k] = fast_exp_no_overflow(x[k] - shift);
  float lanes[16] = {};
  std::int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += y[k + l];
  float sum = 0.0f;
  for (; k < n; ++k) sum += y[k];
  fold_lanes<16>(lanes);
  return sum + lanes[0];
}
PACT_SIMD_VARIANTS(exp_shifted, exp_shifted_body);

// The maximum of x[0..n) (NaN if any element is NaN, as the softmax of such a row is NaN anyway).
PACT_SIMD_INLINE float row_max_body(const float* x, std::int64_t n) {
  float lanes[16];
  for (float& l : lanes) l = -std::numeric_limits<float>::infinity();
  std::int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int l = 0; l < 16; ++l) lanes[l] = std::max(lanes[l], x[k + l]);
  float mx = -std::numeric_limits<float>::infinity();
  for (; k < n; ++k) mx = std::max(mx, x[k]);
  fold_lanes_max<16>(lanes);  // pairwise, as exp_shifted's sum
  return std::max(mx, lanes[0]);
}
PACT_SIMD_VARIANTS(row_max, row_max_body);

void softmax_rows(const float* x, float* y, std::int64_t rows, std::int64_t n, bool log) {
  parallel_ranges(rows, rows * n > 65536, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      const float mx = row_max(xr, n);
      const float sum = exp_shifted(xr, yr, n, mx);  // log: yr is scratch, overwritten below
      if (log) {
        const float lse = mx + std::log(sum);
#pragma GCC ivdep
        for (std::int64_t k = 0; k < n; ++k) yr[k] = xr[k] - lse;
      } else {
        const float inv = 1.0f / sum;
        for (std::int64_t k = 0; k < n; ++k) yr[k] *= inv;
      }
    }
  });
}

bool last_dim(const TensorView& x, const Attributes& a, const char* op) {
  return ops::normalize_dim(op, a.get_int(op, "dim", -1), x.rank()) == x.rank() - 1;
}

Tensor softmax_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  if (in[0].dtype() != DType::f32 || in[0].rank() == 0 || !last_dim(in[0], a, "softmax"))
    return generic::softmax_forward(in, a, c);
  Dense<float> x(in[0], "softmax", "x");
  const std::int64_t n = x.shape()[x.shape().size() - 1];
  Out<float> out(x.shape());
  if (n > 0) softmax_rows(x.data(), out.data(), x.size() / n, n, false);
  return std::move(out).finish();
}
Tensor log_softmax_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  if (in[0].dtype() != DType::f32 || in[0].rank() == 0 || !last_dim(in[0], a, "log_softmax"))
    return generic::log_softmax_forward(in, a, c);
  Dense<float> x(in[0], "log_softmax", "x");
  const std::int64_t n = x.shape()[x.shape().size() - 1];
  Out<float> out(x.shape());
  if (n > 0) softmax_rows(x.data(), out.data(), x.size() / n, n, true);
  return std::move(out).finish();
}

GradList softmax_family_vjp(const TensorView& y, const TensorView& grad, bool log) {
  Dense<float> yv(y, "softmax", "output"), g(grad, "softmax", "grad_output");
  const std::int64_t n = yv.shape()[yv.shape().size() - 1], rows = n == 0 ? 0 : yv.size() / n;
  Out<float> gx(yv.shape());
  parallel_ranges(rows, rows * n > 32768, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* yr = yv.data() + r * n;
      const float* gr = g.data() + r * n;
      float* out = gx.data() + r * n;
      float dot = 0.0f;
      for (std::int64_t k = 0; k < n; ++k) dot += log ? gr[k] : gr[k] * yr[k];
#pragma GCC ivdep
      for (std::int64_t k = 0; k < n; ++k) out[k] = log ? gr[k] - std::exp(yr[k]) * dot : yr[k] * (gr[k] - dot);
    }
  });
  GradList res;
  res.emplace_back(std::move(gx).finish());
  return res;
}
GradList softmax_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                     const KernelContext& c) {
  if (in[0].dtype() != DType::f32 || in[0].rank() == 0 || !last_dim(in[0], a, "softmax"))
    return generic::softmax_vjp(in, y, g, a, c);
  return softmax_family_vjp(y, g, false);
}
GradList log_softmax_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                         const KernelContext& c) {
  if (in[0].dtype() != DType::f32 || in[0].rank() == 0 || !last_dim(in[0], a, "log_softmax"))
    return generic::log_softmax_vjp(in, y, g, a, c);
  return softmax_family_vjp(y, g, true);
}

// Cross-entropy without materialising the log-softmax: per row, max, log-sum-exp, then the target term.
Tensor cross_entropy_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  if (in[0].dtype() != DType::f32) return generic::cross_entropy_forward(in, a, c);
  Dense<float> x(in[0], "cross_entropy", "logits");
  Dense<std::int64_t> t(in[1], "cross_entropy", "target");
  const auto red = generic::loss_reduction("cross_entropy", a);
  const std::int64_t ignore = a.get_int("cross_entropy", "ignore_index", -100);
  const std::int64_t classes = x.shape()[x.shape().size() - 1], rows = x.shape().size() == 2 ? x.shape()[0] : 1;
  std::vector<float> losses(static_cast<std::size_t>(rows));
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < rows; ++i) counted += generic::checked_class(t, i, classes, ignore) != ignore ? 1 : 0;
  parallel_ranges(rows, rows * classes > 65536, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> scratch(static_cast<std::size_t>(classes));
    for (std::int64_t i = r0; i < r1; ++i) {
      const std::int64_t cls = t[i];
      if (cls == ignore) {
        losses[static_cast<std::size_t>(i)] = 0.0f;
        continue;
      }
      const float* row = x.data() + i * classes;
      const float mx = row_max(row, classes);
      const float sum = exp_shifted(row, scratch.data(), classes, mx);
      losses[static_cast<std::size_t>(i)] = std::log(sum) + mx - row[cls];
    }
  });
  if (red.kind == generic::LossReduction::none) {
    Out<float> out(x.shape().size() == 2 ? Dims{rows} : Dims{});
    std::copy(losses.begin(), losses.end(), out.data());
    return std::move(out).finish();
  }
  double total = 0.0;
  for (float l : losses) total += l;
  Out<float> out(Dims{});
  out[0] = static_cast<float>(red.kind == generic::LossReduction::sum ? total : total / static_cast<double>(counted));
  return std::move(out).finish();
}

GradList cross_entropy_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& grad,
                           const Attributes& a, const KernelContext& c) {
  if (in[0].dtype() != DType::f32) return generic::cross_entropy_vjp(in, y, grad, a, c);
  Dense<float> x(in[0], "cross_entropy", "logits"), g(grad, "cross_entropy", "grad_output");
  Dense<std::int64_t> t(in[1], "cross_entropy", "target");
  const auto red = generic::loss_reduction("cross_entropy", a);
  const std::int64_t ignore = a.get_int("cross_entropy", "ignore_index", -100);
  const std::int64_t classes = x.shape()[x.shape().size() - 1], rows = x.shape().size() == 2 ? x.shape()[0] : 1;
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < rows; ++i) counted += generic::checked_class(t, i, classes, ignore) != ignore ? 1 : 0;
  Out<float> gx(x.shape());
  parallel_ranges(rows, rows * classes > 65536, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t i = r0; i < r1; ++i) {
      float* out = gx.data() + i * classes;
      const std::int64_t cls = t[i];
      if (cls == ignore) {
        std::fill(out, out + classes, 0.0f);
        continue;
      }
      const float gi = red.kind == generic::LossReduction::none  ? g[i]
                       : red.kind == generic::LossReduction::sum ? g[0]
                                                                 : g[0] / static_cast<float>(counted);
      const float* row = x.data() + i * classes;
      const float mx = row_max(row, classes);
      const float sum = exp_shifted(row, out, classes, mx);
      const float scale = gi / sum;
      for (std::int64_t k = 0; k < classes; ++k) out[k] *= scale;
      out[cls] -= gi;
    }
  });
  GradList r;
  r.emplace_back(std::move(gx).finish());
  r.emplace_back(std::nullopt);
  return r;
}

// ---- layer / rms norm ------------------------------------------------------------------------------

// Note [Norm row blocks]: layer and RMS norm run a block of rows' statistics (mean, variance, 1 / sqrt) in
// one loop before the rest of those rows. One row's statistics are a chain (a sum, its fold, a second sum,
// its fold, a square root and a division) whose latency, a row at a time, set the time of the short rows
// of a transformer; the block's chains are independent, so they overlap. The arithmetic of every row is
// unchanged, bit for bit. The char transformer's [1024, 128] layer norm backward at AVX2: 161 -> 129 us
// (bench/kernels_bench.cpp layer_norm_backward).
constexpr std::int64_t kNormBlock = 16;

// The statistics of rows [r0, r0 + block) of n (block <= kNormBlock): mean[i] (0 for rms) and
// inv[i] = 1 / sqrt(variance + eps), the variance (rms: the mean square) over n.
PACT_SIMD_INLINE void norm_row_stats(const float* __restrict x, std::int64_t r0, std::int64_t block, std::int64_t n,
                                     float eps, bool rms, float* __restrict mean, float* __restrict inv) {
  for (std::int64_t i = 0; i < block; ++i) {
    const float* __restrict xr = x + (r0 + i) * n;
    const float m = rms ? 0.0f : lanes_sum(n, [xr](std::int64_t k) { return xr[k]; }) / static_cast<float>(n);
    const float var = lanes_sum(n, [xr, m](std::int64_t k) { return (xr[k] - m) * (xr[k] - m); });
    mean[i] = m;
    inv[i] = 1.0f / std::sqrt(var / static_cast<float>(n) + eps);
  }
}

// Rows of n normalised (mean removed unless rms, scaled to unit variance), then weighted and biased where
// w and b are given.
PACT_SIMD_INLINE void norm_forward_rows_body(const float* __restrict x, const float* __restrict w,
                                             const float* __restrict b, std::int64_t rows, std::int64_t n, float eps,
                                             bool rms, float* __restrict out) {
  // The statistics of a block of rows first (Note [Norm row blocks]), then their outputs.
  float mean[kNormBlock], inv[kNormBlock];
  for (std::int64_t r0 = 0; r0 < rows; r0 += kNormBlock) {
    const std::int64_t block = std::min(kNormBlock, rows - r0);
    norm_row_stats(x, r0, block, n, eps, rms, mean, inv);
    for (std::int64_t i = 0; i < block; ++i) {
      const float* __restrict xr = x + (r0 + i) * n;
      float* __restrict o = out + (r0 + i) * n;
      const float m = mean[i], s = inv[i];
      if (w != nullptr && b != nullptr) {
        for (std::int64_t k = 0; k < n; ++k) o[k] = (xr[k] - m) * s * w[k] + b[k];
      } else if (w != nullptr) {
        for (std::int64_t k = 0; k < n; ++k) o[k] = (xr[k] - m) * s * w[k];
      } else {
        for (std::int64_t k = 0; k < n; ++k) o[k] = (xr[k] - m) * s;
      }
    }
  }
}
PACT_SIMD_VARIANTS(norm_forward_rows, norm_forward_rows_body);

Tensor norm_forward(std::span<const TensorView> in, const Attributes& a, bool rms) {
  const char* name = rms ? "rms_norm" : "layer_norm";
  Dense<float> x(in[0], name, "x");
  std::optional<Dense<float>> w, b;
  if (in.size() > 1) w.emplace(in[1], name, "weight");
  if (in.size() > 2) b.emplace(in[2], name, "bias");
  const float eps = static_cast<float>(a.get_float(name, "eps", rms ? 1e-6 : 1e-5));
  const std::int64_t width = generic::norm_width(name, a), rows = width == 0 ? 0 : x.size() / width;
  Out<float> out(x.shape());
  const float* wp = w ? w->data() : nullptr;
  const float* bp = b ? b->data() : nullptr;
  parallel_ranges(rows, rows * width > 32768, [&](std::int64_t r0, std::int64_t r1) {
    norm_forward_rows(x.data() + r0 * width, wp, bp, r1 - r0, width, eps, rms, out.data() + r0 * width);
  });
  return std::move(out).finish();
}
Tensor layer_norm_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  return in[0].dtype() == DType::f32 ? norm_forward(in, a, false) : generic::layer_norm_forward(in, a, c);
}
Tensor rms_norm_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  return in[0].dtype() == DType::f32 ? norm_forward(in, a, true) : generic::rms_norm_forward(in, a, c);
}
// The norm VJP over `rows` rows of n: with xhat = (x - mean) inv and gxhat = g w,
// dx = inv (gxhat - mean(gxhat) - xhat mean(gxhat xhat)) (rms: no mean(gxhat) term), and each row's
// contributions g xhat and g added to dw and db (either may be null), rows in order. xhat and gxhat are
// row scratch. One call for all rows, so the level is chosen once. No two pointers alias (__restrict):
// without that, GCC versions the loops on run-time overlap checks, and which version runs (vector with
// fused multiply-adds, or scalar) depended on where the buffers happened to lie, so dx could differ in its
// last bits between a call that wants dw and one that does not.
PACT_SIMD_INLINE void norm_backward_rows_body(const float* __restrict x, const float* __restrict g,
                                              const float* __restrict w, std::int64_t rows, std::int64_t n, float eps,
                                              bool rms, float* __restrict dx, float* __restrict dw,
                                              float* __restrict db, float* __restrict xhat, float* __restrict gxhat) {
  // The statistics of a block of rows first (Note [Norm row blocks]), then the rest of each row.
  float mean[kNormBlock], inv[kNormBlock];
  for (std::int64_t r0 = 0; r0 < rows; r0 += kNormBlock) {
    const std::int64_t block = std::min(kNormBlock, rows - r0);
    norm_row_stats(x, r0, block, n, eps, rms, mean, inv);
    for (std::int64_t i = 0; i < block; ++i) {
      const float* __restrict xr = x + (r0 + i) * n;
      const float* __restrict gr = g + (r0 + i) * n;
      float* __restrict dxr = dx + (r0 + i) * n;
      const float m = mean[i], s = inv[i];
      // One pass for x-hat, g * w and the parameters' gradients, one for both sums, one for dx.
      for (std::int64_t k = 0; k < n; ++k) {
        xhat[k] = (xr[k] - m) * s;
        gxhat[k] = w != nullptr ? gr[k] * w[k] : gr[k];
        if (dw != nullptr) dw[k] += gr[k] * xhat[k];
        if (db != nullptr) db[k] += gr[k];
      }
      const auto [sum_g, sum_gx] = lanes_sum2(
          n, [gxhat](std::int64_t k) { return gxhat[k]; },
          [gxhat, xhat](std::int64_t k) { return gxhat[k] * xhat[k]; });
      const float mean_g = rms ? 0.0f : sum_g / static_cast<float>(n);
      const float mean_gx = sum_gx / static_cast<float>(n);
      for (std::int64_t k = 0; k < n; ++k) dxr[k] = s * (gxhat[k] - mean_g - xhat[k] * mean_gx);
    }
  }
}
PACT_SIMD_VARIANTS(norm_backward_rows, norm_backward_rows_body);

GradList norm_vjp(std::span<const TensorView> in, const TensorView& grad, const Attributes& a, const KernelContext& c,
                  bool rms) {
  const char* name = rms ? "rms_norm" : "layer_norm";
  Dense<float> x(in[0], name, "x"), g(grad, name, "grad_output");
  std::optional<Dense<float>> w;
  if (in.size() > 1) w.emplace(in[1], name, "weight");
  const float eps = static_cast<float>(a.get_float(name, "eps", rms ? 1e-6 : 1e-5));
  const std::int64_t width = generic::norm_width(name, a), rows = width == 0 ? 0 : x.size() / width;
  const bool want_w = in.size() > 1 && c.wants_grad(1), want_b = in.size() > 2 && c.wants_grad(2);
  Out<float> gx(x.shape());
  Out<float> gw(want_w ? Dims{width} : Dims{0}, true), gb(want_b ? Dims{width} : Dims{0}, true);
  std::vector<float> scratch(static_cast<std::size_t>(2 * width));
  norm_backward_rows(x.data(), g.data(), w ? w->data() : nullptr, rows, width, eps, rms, gx.data(),
                     want_w ? gw.data() : nullptr, want_b ? gb.data() : nullptr, scratch.data(),
                     scratch.data() + width);
  GradList r;
  r.emplace_back(std::move(gx).finish());
  if (in.size() > 1) {
    if (want_w)
      r.emplace_back(std::move(gw).finish());
    else
      r.emplace_back(std::nullopt);
  }
  if (in.size() > 2) {
    if (want_b)
      r.emplace_back(std::move(gb).finish());
    else
      r.emplace_back(std::nullopt);
  }
  return r;
}
GradList layer_norm_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                        const KernelContext& c) {
  return in[0].dtype() == DType::f32 ? norm_vjp(in, g, a, c, false) : generic::layer_norm_vjp(in, y, g, a, c);
}
GradList rms_norm_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                      const KernelContext& c) {
  return in[0].dtype() == DType::f32 ? norm_vjp(in, g, a, c, true) : generic::rms_norm_vjp(in, y, g, a, c);
}

// ---- add, sub, mul, div: f32 operands of the same shape, or one repeating along the other's leading
// dimensions (a bias, a positional table), in flat loops; other broadcasts go to the generic kernel.

// How the operands of an elementwise f32 binary op line up: `rows` x `inner` elements in the output; an
// operand that is `repeated` has `inner` elements, reused for every row.
struct RowBroadcast {
  bool ok = false;
  bool a_repeated = false, b_repeated = false;
  std::int64_t rows = 0, inner = 0;
};

// A shape without its leading 1s.
Dims strip_leading_ones(const Dims& d) {
  Dims out;
  int i = 0;
  while (i < d.size() && d[i] == 1) ++i;
  for (; i < d.size(); ++i) out.push_back(d[i]);
  return out;
}

// True when `small` (leading 1s stripped) is a trailing block of `big`, and `big` has at least its rank.
bool trailing_block(const Dims& big, const Dims& small) {
  const Dims s = strip_leading_ones(small);
  if (s.size() > big.size() || small.size() > big.size()) return false;
  for (int i = 0; i < s.size(); ++i)
    if (s[s.size() - 1 - i] != big[big.size() - 1 - i]) return false;
  return true;
}

RowBroadcast row_broadcast(std::span<const TensorView> in) {
  RowBroadcast r;
  if (in[0].dtype() != DType::f32 || in[1].dtype() != DType::f32) return r;
  const Dims a = in[0].shape(), b = in[1].shape();
  const std::int64_t na = ops::numel(a), nb = ops::numel(b);
  if (a == b) {
    r = {true, false, false, 1, na};
  } else if (na >= nb && nb > 0 && trailing_block(a, b)) {
    r = {true, false, true, na / nb, nb};
  } else if (nb > na && na > 0 && trailing_block(b, a)) {
    r = {true, true, false, nb / na, na};
  }
  return r;
}

#include "pact/kernels/cpu/native_vector.inc"

// out = a op b over the row broadcast (vector_ops.hpp); the VJP gives ga / gb (when wanted), summed over the
// rows for a repeated operand (row by row, so each element's sum is a left fold over rows).
Tensor binary_rows_forward(std::span<const TensorView> in, const RowBroadcast& rb, const char* op, BinaryKind kind) {
  Dense<float> xa(in[0], op, "a"), xb(in[1], op, "b");
  Out<float> out(ops::broadcast_shapes(op, xa.shape(), xb.shape()));
  rows_f32(kind, xa.data(), xb.data(), rb.a_repeated, rb.b_repeated, rb.rows, rb.inner, out.data());
  return std::move(out).finish();
}

template <class GA, class GB>
GradList binary_rows_vjp(std::span<const TensorView> in, const TensorView& grad, const RowBroadcast& rb,
                         const KernelContext& c, const char* op, bool reads_operands, GA fa, GB fb) {
  // add and sub read only the operands' shapes (their saves column is empty); mul and div the values.
  std::optional<Dense<float>> xa, xb;
  if (reads_operands) {
    xa.emplace(in[0], op, "a");
    xb.emplace(in[1], op, "b");
  }
  Dense<float> gr(grad, op, "grad_output");
  GradList res;
  auto one = [&](bool wanted, bool repeated, const Dims& shape, auto f) {
    if (!wanted) {
      res.emplace_back(std::nullopt);
      return;
    }
    Out<float> d(shape, repeated);
    for (std::int64_t r = 0; r < rb.rows; ++r) {
      const float* __restrict g = gr.data() + r * rb.inner;
      float* __restrict o = d.data() + (repeated ? 0 : r * rb.inner);
      if (!reads_operands) {
        if (repeated) {
#pragma GCC ivdep
          for (std::int64_t k = 0; k < rb.inner; ++k) o[k] += f(g[k], 0.0f, 0.0f);
        } else {
#pragma GCC ivdep
          for (std::int64_t k = 0; k < rb.inner; ++k) o[k] = f(g[k], 0.0f, 0.0f);
        }
        continue;
      }
      const float* __restrict x = xa->data() + (rb.a_repeated ? 0 : r * rb.inner);
      const float* __restrict y = xb->data() + (rb.b_repeated ? 0 : r * rb.inner);
      if (repeated) {
#pragma GCC ivdep
        for (std::int64_t k = 0; k < rb.inner; ++k) o[k] += f(g[k], x[k], y[k]);
      } else {
#pragma GCC ivdep
        for (std::int64_t k = 0; k < rb.inner; ++k) o[k] = f(g[k], x[k], y[k]);
      }
    }
    res.emplace_back(std::move(d).finish());
  };
  one(c.wants_grad(0), rb.a_repeated, in[0].shape(), fa);
  one(c.wants_grad(1), rb.b_repeated, in[1].shape(), fb);
  return res;
}

#define PACT_NATIVE_BINARY(opname, reads_operands, ga_expr, gb_expr)                                                  \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {              \
    const RowBroadcast rb = row_broadcast(in);                                                                        \
    if (!rb.ok) {                                                                                                     \
      if (const RowScalar rs = row_scalar(in); rs.ok) return row_scalar_forward(in, rs, BinaryKind::opname, #opname); \
      return generic::opname##_forward(in, a, c);                                                                     \
    }                                                                                                                 \
    return binary_rows_forward(in, rb, #opname, BinaryKind::opname);                                                  \
  }                                                                                                                   \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView& yv, const TensorView& g,                    \
                        const Attributes& a, const KernelContext& c) {                                                \
    const RowBroadcast rb = row_broadcast(in);                                                                        \
    if (!rb.ok || g.dtype() != DType::f32) return generic::opname##_vjp(in, yv, g, a, c);                             \
    return binary_rows_vjp(                                                                                           \
        in, g, rb, c, #opname, reads_operands,                                                                        \
        [](float gi, float x, float y) {                                                                              \
          (void)x;                                                                                                    \
          (void)y;                                                                                                    \
          return (ga_expr);                                                                                           \
        },                                                                                                            \
        [](float gi, float x, float y) {                                                                              \
          (void)x;                                                                                                    \
          (void)y;                                                                                                    \
          return (gb_expr);                                                                                           \
        });                                                                                                           \
  }
PACT_NATIVE_BINARY(add, false, gi, gi)
PACT_NATIVE_BINARY(sub, false, gi, -gi)
PACT_NATIVE_BINARY(mul, true, gi* y, gi* x)
PACT_NATIVE_BINARY(div, true, gi / y, -(gi* x / (y * y)))
#undef PACT_NATIVE_BINARY

#include "pact/kernels/cpu/native_activations.inc"
#include "pact/kernels/cpu/native_attention.inc"

// ---- ops served by the generic kernels in this translation unit -------------------------------------
// ---- rotary_embedding: f32, cos and sin one block of rows repeated along x's leading dimensions (a table row
// per position, shared by the heads); other broadcasts go to the generic kernel.

// `rows` rows of `d` elements, row r against table row r % table_rows: the first half takes x1 c - x2 s, the
// second x2 c + x1 s (the generic kernel's products and sum, in the same order).
void rotary_rows(const float* __restrict x, const float* __restrict c, const float* __restrict s, std::int64_t rows,
                 std::int64_t table_rows, std::int64_t d, float* __restrict y) {
  const std::int64_t h = d / 2;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    const float* cr = c + (r % table_rows) * d;
    const float* sr = s + (r % table_rows) * d;
    float* yr = y + r * d;
    for (std::int64_t k = 0; k < h; ++k) yr[k] = xr[k] * cr[k] + -xr[k + h] * sr[k];
    for (std::int64_t k = h; k < d; ++k) yr[k] = xr[k] * cr[k] + xr[k - h] * sr[k];
  }
}

Tensor rotary_embedding_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  constexpr const char* op = "rotary_embedding";
  const Dims xs = in[0].shape();
  if (in[0].dtype() != DType::f32 || !trailing_block(xs, in[1].shape()) || xs.size() == 0)
    return generic::rotary_embedding_forward(in, a, c);
  Dense<float> x(in[0], op, "x"), cs(in[1], op, "cos"), sn(in[2], op, "sin");
  const std::int64_t d = xs[xs.size() - 1];
  Out<float> out(xs);
  if (x.size() > 0)
    rotary_rows(x.data(), cs.data(), sn.data(), x.size() / d, std::max<std::int64_t>(cs.size() / d, 1), d, out.data());
  return std::move(out).finish();
}
GradList rotary_embedding_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g,
                              const Attributes& a, const KernelContext& c) {
  return generic::rotary_embedding_vjp(in, y, g, a, c);
}

// Real functions of this namespace (not using-declarations), so each handler's provenance symbol names
// a function that exists in native's own symbol table.

#define PACT_NATIVE_FROM_GENERIC(opname)                                                                               \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {               \
    return generic::opname##_forward(in, a, c);                                                                        \
  }                                                                                                                    \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a, \
                        const KernelContext& c) {                                                                      \
    return generic::opname##_vjp(in, y, g, a, c);                                                                      \
  }
PACT_NATIVE_FROM_GENERIC(tanh)
PACT_NATIVE_FROM_GENERIC(log)
PACT_NATIVE_FROM_GENERIC(sqrt)
PACT_NATIVE_FROM_GENERIC(sin)
PACT_NATIVE_FROM_GENERIC(cos)
PACT_NATIVE_FROM_GENERIC(tan)
PACT_NATIVE_FROM_GENERIC(pow)
PACT_NATIVE_FROM_GENERIC(where)
PACT_NATIVE_FROM_GENERIC(triu)
PACT_NATIVE_FROM_GENERIC(tril)
PACT_NATIVE_FROM_GENERIC(cumsum)
PACT_NATIVE_FROM_GENERIC(topk)
PACT_NATIVE_FROM_GENERIC(cast)
PACT_NATIVE_FROM_GENERIC(gather)
PACT_NATIVE_FROM_GENERIC(index_select)
PACT_NATIVE_FROM_GENERIC(index_copy)
PACT_NATIVE_FROM_GENERIC(interpolate)
PACT_NATIVE_FROM_GENERIC(mse_loss)
PACT_NATIVE_FROM_GENERIC(dropout)
PACT_NATIVE_FROM_GENERIC(embedding)
PACT_NATIVE_FROM_GENERIC(adaptive_avg_pool2d)
PACT_NATIVE_FROM_GENERIC(reshape)
PACT_NATIVE_FROM_GENERIC(permute)
PACT_NATIVE_FROM_GENERIC(transpose)
PACT_NATIVE_FROM_GENERIC(flatten)
PACT_NATIVE_FROM_GENERIC(concat)
PACT_NATIVE_FROM_GENERIC(slice)
PACT_NATIVE_FROM_GENERIC(max)
#undef PACT_NATIVE_FROM_GENERIC

// Gradient-free ops (the op table's nograd): a forward only.
#define PACT_NATIVE_FORWARD_FROM_GENERIC(opname)                                                         \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) { \
    return generic::opname##_forward(in, a, c);                                                          \
  }
PACT_NATIVE_FORWARD_FROM_GENERIC(eq)
PACT_NATIVE_FORWARD_FROM_GENERIC(ne)
PACT_NATIVE_FORWARD_FROM_GENERIC(lt)
PACT_NATIVE_FORWARD_FROM_GENERIC(le)
PACT_NATIVE_FORWARD_FROM_GENERIC(gt)
PACT_NATIVE_FORWARD_FROM_GENERIC(ge)
PACT_NATIVE_FORWARD_FROM_GENERIC(argmax)
PACT_NATIVE_FORWARD_FROM_GENERIC(topk_indices)
PACT_NATIVE_FORWARD_FROM_GENERIC(full_like)
PACT_NATIVE_FORWARD_FROM_GENERIC(arange)
#undef PACT_NATIVE_FORWARD_FROM_GENERIC

// ---- update kernels (generic_updates.inc): Adam's f32 pass per ISA level, the rest generic ----------

// -fno-math-errno lets the square root vectorise. Each level is deterministic; levels may differ from one
// another in the last bit where one contracts a multiply-add the other does not.
PACT_SIMD_INLINE void adam_f32_body(float* __restrict w, float* __restrict m, float* __restrict v,
                                    const float* __restrict g, std::int64_t n, generic::AdamConstants<float> c) {
  generic::adam_loop(w, m, v, g, n, c);
}
PACT_SIMD_VARIANTS(adam_f32, adam_f32_body);

void adam_update(std::span<Tensor* const> state, std::span<const TensorView> read, const Attributes& a) {
  if (state[0]->dtype() != DType::f32) return generic::adam_update(state, read, a);
  Dense<float> g(read[0], "adam", "gradient");
  generic::State<float> w(*state[0], "adam", "param"), m(*state[1], "adam", "exp_avg"),
      v(*state[2], "adam", "exp_avg_sq");
  adam_f32(w.data(), m.data(), v.data(), g.data(), w.size(), generic::adam_constants<float>(a));
}

#define PACT_NATIVE_UPDATE_FROM_GENERIC(opname)                                                                 \
  void opname##_update(std::span<Tensor* const> state, std::span<const TensorView> read, const Attributes& a) { \
    generic::opname##_update(state, read, a);                                                                   \
  }
PACT_NATIVE_UPDATE_FROM_GENERIC(accumulate_grad)
PACT_NATIVE_UPDATE_FROM_GENERIC(batch_norm_stats)
PACT_NATIVE_UPDATE_FROM_GENERIC(sgd)
#undef PACT_NATIVE_UPDATE_FROM_GENERIC

}  // namespace pact::kernels::cpu::native

namespace pact::kernels {

std::span<const Handler> native_handlers() {
#define PACT_CPU_NS native
#define PACT_CPU_FILE "pact/kernels/cpu/native.cpp"
  static const Handler table[] = {PACT_CPU_HANDLERS()};
#undef PACT_CPU_FILE
#undef PACT_CPU_NS
  return table;
}

bool native_dispatches_simd(ops::OpTag op) noexcept {
  using ops::OpTag;
  switch (op) {
    case OpTag::softmax:
    case OpTag::log_softmax:
    case OpTag::cross_entropy:  // exp_shifted, row_max
    case OpTag::layer_norm:
    case OpTag::rms_norm:  // norm_forward_rows, norm_backward_rows
    case OpTag::gelu:
    case OpTag::relu:
    case OpTag::scaled_dot_product_attention:  // attention_softmax, attention_score_grad, sgemm
    case OpTag::matmul:
    case OpTag::linear:
    case OpTag::linear_int8:        // gemv_i8_rows, dequantize_i8_rows and sgemm
    case OpTag::linear_bf16:        // gemv_bf16, widen_bf16 and sgemm
    case OpTag::conv2d:             // sgemm, strided_copy, depthwise
    case OpTag::conv2d_activation:  // and map_rows, map_tile in place
    case OpTag::conv2d_nhwc:        // sgemm, depthwise_nhwc_row, map_rows
    case OpTag::max_pool2d:         // max_pool_plane
    case OpTag::avg_pool2d:         // depthwise (window sums)
    case OpTag::add:
    case OpTag::sub:
    case OpTag::mul:
    case OpTag::div:  // binary_rows, row_scalar_rows (other broadcasts: the generic loop)
    case OpTag::neg:
    case OpTag::clamp:
    case OpTag::silu:
    case OpTag::sigmoid:
    case OpTag::hardswish:
    case OpTag::hardsigmoid:
    case OpTag::exp:         // map_rows
    case OpTag::batch_norm:  // channel_affine_rows, at inference
    case OpTag::sum:
    case OpTag::mean:  // row_sums, column_sums: over one block of dimensions
    case OpTag::adam:  // adam_f32
      return true;
    default:
      return false;
  }
}

}  // namespace pact::kernels
