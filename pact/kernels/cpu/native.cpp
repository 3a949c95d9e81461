// The native provider (numerical policy implementationDefined): the packed SIMD GEMM behind matmul,
// linear, conv2d (im2col) and attention; fused softmax / log_softmax / cross_entropy and layer / rms norm
// with OpenMP over rows. f64 and the remaining ops run the generic kernels compiled in this translation
// unit (Note [Generic kernels compiled per provider]).

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "pact/kernels/cpu/common.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/cpu/handler_table.hpp"
#include "pact/kernels/kernel.hpp"

namespace pact::kernels::cpu::native {

namespace generic {
#include "pact/kernels/cpu/generic_kernels.inc"
}  // namespace generic

using generic::GradList;
using ops::Attributes;

// ---- matmul, linear, conv2d: the shared GEMM-based implementations over this provider's sgemm -------

#define PACT_GEMM_OPS_SGEMM ::pact::kernels::cpu::sgemm
#define PACT_GEMM_FALLBACK(fn, ...) generic::fn(__VA_ARGS__)
#include "pact/kernels/cpu/gemm_ops.inc"
#undef PACT_GEMM_FALLBACK
#undef PACT_GEMM_OPS_SGEMM

// ---- softmax family and cross-entropy (fused: one pass for the max, one for the sum, one to write) ---

// exp(x) for float, branch-free so the loops below vectorise: range reduction by ln 2 (Cody-Waite
// split), a degree-6 polynomial on [-ln2/2, ln2/2], and the power of two assembled in the exponent
// bits. Relative error below 2 ulp on [-87, 88]; underflows to 0 below -87.3, overflows to +inf above
// 88.7; NaN propagates.
inline float fast_exp(float x) {
  const float t = std::min(std::max(x, -87.3f), 88.7f);
  const float n = std::floor(t * 1.44269504088896341f + 0.5f);
  const float r = (t - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
  const float y = p * scale;
  return x < -87.3f ? 0.0f : (x > 88.7f ? std::numeric_limits<float>::infinity() : (x != x ? x : y));
}

// y[k] = exp(x[k] - shift); returns the sum of y. SIMD variant chosen at load time (target_clones). The
// sum runs in 16 independent lanes (an implementationDefined order), so the loops vectorise.
__attribute__((target_clones("avx512f", "avx2", "default")))
float exp_shifted(const float* x, float* y, std::int64_t n, float shift) {
  for (std::int64_t k = 0; k < n; ++k) y[k] = fast_exp(x[k] - shift);
  float lanes[16] = {};
  std::int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int l = 0; l < 16; ++l) lanes[l] += y[k + l];
  float sum = 0.0f;
  for (; k < n; ++k) sum += y[k];
  for (float l : lanes) sum += l;
  return sum;
}

// The maximum of x[0..n) (NaN if any element is NaN, as the softmax of such a row is NaN anyway).
__attribute__((target_clones("avx512f", "avx2", "default")))
float row_max(const float* x, std::int64_t n) {
  float lanes[16];
  for (float& l : lanes) l = -std::numeric_limits<float>::infinity();
  std::int64_t k = 0;
  for (; k + 16 <= n; k += 16)
    for (int l = 0; l < 16; ++l) lanes[l] = std::max(lanes[l], x[k + l]);
  float mx = -std::numeric_limits<float>::infinity();
  for (; k < n; ++k) mx = std::max(mx, x[k]);
  for (float l : lanes) mx = std::max(mx, l);
  return mx;
}

void softmax_rows(const float* x, float* y, std::int64_t rows, std::int64_t n, bool log) {
#pragma omp parallel for schedule(static) if (rows * n > 65536)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float mx = row_max(xr, n);
    const float sum = exp_shifted(xr, yr, n, mx);  // log: yr is scratch, overwritten below
    if (log) {
      const float lse = mx + std::log(sum);
      for (std::int64_t k = 0; k < n; ++k) yr[k] = xr[k] - lse;
    } else {
      const float inv = 1.0f / sum;
      for (std::int64_t k = 0; k < n; ++k) yr[k] *= inv;
    }
  }
}

bool last_dim(const TensorView& x, const Attributes& a, const char* op) {
  return ops::normalize_dim(op, a.get_int(op, "dim", -1), x.rank()) == x.rank() - 1;
}

Tensor softmax_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  if (in[0].dtype() != DType::f32 || in[0].rank() == 0 || !last_dim(in[0], a, "softmax")) return generic::softmax_forward(in, a, c);
  Dense<float> x(in[0], "softmax", "x");
  const std::int64_t n = x.shape()[x.shape().size() - 1];
  Out<float> out(x.shape());
  if (n > 0) softmax_rows(x.data(), out.data(), x.size() / n, n, false);
  return std::move(out).finish();
}
Tensor log_softmax_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  if (in[0].dtype() != DType::f32 || in[0].rank() == 0 || !last_dim(in[0], a, "log_softmax")) return generic::log_softmax_forward(in, a, c);
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
#pragma omp parallel for schedule(static) if (rows * n > 32768)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* yr = yv.data() + r * n;
    const float* gr = g.data() + r * n;
    float* out = gx.data() + r * n;
    float dot = 0.0f;
    for (std::int64_t k = 0; k < n; ++k) dot += log ? gr[k] : gr[k] * yr[k];
    for (std::int64_t k = 0; k < n; ++k) out[k] = log ? gr[k] - std::exp(yr[k]) * dot : yr[k] * (gr[k] - dot);
  }
  GradList res;
  res.emplace_back(std::move(gx).finish());
  return res;
}
GradList softmax_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                     const KernelContext& c) {
  if (in[0].dtype() != DType::f32 || in[0].rank() == 0 || !last_dim(in[0], a, "softmax")) return generic::softmax_vjp(in, y, g, a, c);
  return softmax_family_vjp(y, g, false);
}
GradList log_softmax_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                         const KernelContext& c) {
  if (in[0].dtype() != DType::f32 || in[0].rank() == 0 || !last_dim(in[0], a, "log_softmax")) return generic::log_softmax_vjp(in, y, g, a, c);
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
#pragma omp parallel if (rows * classes > 65536)
  {
    std::vector<float> scratch(static_cast<std::size_t>(classes));
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < rows; ++i) {
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
  }
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
#pragma omp parallel for schedule(static) if (rows * classes > 65536)
  for (std::int64_t i = 0; i < rows; ++i) {
    float* out = gx.data() + i * classes;
    const std::int64_t cls = t[i];
    if (cls == ignore) {
      std::fill(out, out + classes, 0.0f);
      continue;
    }
    const float gi = red.kind == generic::LossReduction::none ? g[i]
                     : red.kind == generic::LossReduction::sum ? g[0] : g[0] / static_cast<float>(counted);
    const float* row = x.data() + i * classes;
    const float mx = row_max(row, classes);
    const float sum = exp_shifted(row, out, classes, mx);
    const float scale = gi / sum;
    for (std::int64_t k = 0; k < classes; ++k) out[k] *= scale;
    out[cls] -= gi;
  }
  GradList r;
  r.emplace_back(std::move(gx).finish());
  r.emplace_back(std::nullopt);
  return r;
}

// ---- layer / rms norm ------------------------------------------------------------------------------

// A sum over k in [0, n) with eight independent accumulators: vectorisable without -ffast-math (the
// summation order is fixed, so results are reproducible run to run).
template <class F>
inline float lanes_sum(std::int64_t n, F&& f) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += f(k + l);
  }
  float tail = 0.0f;
  for (; k < n; ++k) tail += f(k);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

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
#pragma omp parallel for schedule(static) if (rows * width > 32768)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * width;
    float* o = out.data() + r * width;
    const float mean = rms ? 0.0f : lanes_sum(width, [row](std::int64_t k) { return row[k]; }) / static_cast<float>(width);
    const float var = lanes_sum(width, [row, mean](std::int64_t k) { return (row[k] - mean) * (row[k] - mean); });
    const float inv = 1.0f / std::sqrt(var / static_cast<float>(width) + eps);
    if (wp != nullptr && bp != nullptr) {
      for (std::int64_t k = 0; k < width; ++k) o[k] = (row[k] - mean) * inv * wp[k] + bp[k];
    } else if (wp != nullptr) {
      for (std::int64_t k = 0; k < width; ++k) o[k] = (row[k] - mean) * inv * wp[k];
    } else {
      for (std::int64_t k = 0; k < width; ++k) o[k] = (row[k] - mean) * inv;
    }
  }
  return std::move(out).finish();
}
Tensor layer_norm_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  return in[0].dtype() == DType::f32 ? norm_forward(in, a, false) : generic::layer_norm_forward(in, a, c);
}
Tensor rms_norm_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  return in[0].dtype() == DType::f32 ? norm_forward(in, a, true) : generic::rms_norm_forward(in, a, c);
}
GradList layer_norm_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                        const KernelContext& c) {
  return generic::layer_norm_vjp(in, y, g, a, c);
}
GradList rms_norm_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                      const KernelContext& c) {
  return generic::rms_norm_vjp(in, y, g, a, c);
}

// ---- add, sub, mul, div: same-shape f32 operands in flat loops; broadcasting goes to the generic kernel

bool same_shape_f32(std::span<const TensorView> in) {
  return in[0].dtype() == DType::f32 && in[1].dtype() == DType::f32 && in[0].shape() == in[1].shape();
}

#define PACT_NATIVE_BINARY(opname, forward_expr, ga_expr, gb_expr)                                                  \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {            \
    if (!same_shape_f32(in)) return generic::opname##_forward(in, a, c);                                           \
    Dense<float> xa(in[0], #opname, "a"), xb(in[1], #opname, "b");                                                 \
    Out<float> out(xa.shape());                                                                                     \
    const float* __restrict x = xa.data();                                                                          \
    const float* __restrict y = xb.data();                                                                          \
    float* __restrict o = out.data();                                                                               \
    for (std::int64_t i = 0; i < out.size(); ++i) o[i] = (forward_expr);                                           \
    return std::move(out).finish();                                                                                 \
  }                                                                                                                 \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView& yv, const TensorView& g, const Attributes& a, \
                        const KernelContext& c) {                                                                   \
    if (!same_shape_f32(in) || g.dtype() != DType::f32) return generic::opname##_vjp(in, yv, g, a, c);             \
    Dense<float> xa(in[0], #opname, "a"), xb(in[1], #opname, "b"), gr(g, #opname, "grad_output");                 \
    const float* __restrict x = xa.data();                                                                          \
    const float* __restrict y = xb.data();                                                                          \
    const float* __restrict gi = gr.data();                                                                         \
    const std::int64_t n = gr.size();                                                                               \
    (void)x;                                                                                                        \
    (void)y;                                                                                                        \
    GradList r;                                                                                                     \
    if (c.wants_grad(0)) {                                                                                          \
      Out<float> ga(xa.shape());                                                                                    \
      float* __restrict d = ga.data();                                                                              \
      for (std::int64_t i = 0; i < n; ++i) d[i] = (ga_expr);                                                       \
      r.emplace_back(std::move(ga).finish());                                                                       \
    } else {                                                                                                        \
      r.emplace_back(std::nullopt);                                                                                 \
    }                                                                                                               \
    if (c.wants_grad(1)) {                                                                                          \
      Out<float> gb(xb.shape());                                                                                    \
      float* __restrict d = gb.data();                                                                              \
      for (std::int64_t i = 0; i < n; ++i) d[i] = (gb_expr);                                                       \
      r.emplace_back(std::move(gb).finish());                                                                       \
    } else {                                                                                                        \
      r.emplace_back(std::nullopt);                                                                                 \
    }                                                                                                               \
    return r;                                                                                                       \
  }
PACT_NATIVE_BINARY(add, x[i] + y[i], gi[i], gi[i])
PACT_NATIVE_BINARY(sub, x[i] - y[i], gi[i], -gi[i])
PACT_NATIVE_BINARY(mul, x[i] * y[i], gi[i] * y[i], gi[i] * x[i])
PACT_NATIVE_BINARY(div, x[i] / y[i], gi[i] / y[i], -(gi[i] * x[i] / (y[i] * y[i])))
#undef PACT_NATIVE_BINARY

// ---- gelu (exact): vectorised erfc -------------------------------------------------------------------

// erfc(z) for z >= 0 with relative error below about 3e-7: the Chebyshev-fitted form of Numerical
// Recipes (fractional error 1.2e-7) over fast_exp. Branch-free, so the loops below vectorise.
inline float erfc_nonnegative(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * fast_exp(p - z * z);
}

// Phi(x), the standard normal CDF, as 0.5 erfc(-x / sqrt 2): accurate in both tails.
inline float normal_cdf(float x) {
  const float e = 0.5f * erfc_nonnegative(std::fabs(x) * 0.70710678118654752f);
  return x >= 0.0f ? 1.0f - e : e;
}

__attribute__((target_clones("avx512f", "avx2", "default")))
void gelu_rows(const float* x, float* y, std::int64_t n) {
  for (std::int64_t k = 0; k < n; ++k) y[k] = x[k] * normal_cdf(x[k]);
}

// dx = g * (Phi(x) + x phi(x)).
__attribute__((target_clones("avx512f", "avx2", "default")))
void gelu_backward_rows(const float* x, const float* g, float* dx, std::int64_t n) {
  for (std::int64_t k = 0; k < n; ++k) {
    const float pdf = fast_exp(-0.5f * x[k] * x[k]) * 0.39894228040143267794f;
    dx[k] = g[k] * (normal_cdf(x[k]) + x[k] * pdf);
  }
}

bool exact_gelu_f32(std::span<const TensorView> in, const Attributes& a) {
  return in[0].dtype() == DType::f32 && a.get_string("gelu", "approximate", std::string("none")) == "none";
}

Tensor gelu_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  if (!exact_gelu_f32(in, a)) return generic::gelu_forward(in, a, c);
  Dense<float> x(in[0], "gelu", "input");
  Out<float> y(x.shape());
  gelu_rows(x.data(), y.data(), y.size());
  return std::move(y).finish();
}
GradList gelu_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a, const KernelContext& c) {
  if (!exact_gelu_f32(in, a)) return generic::gelu_vjp(in, y, g, a, c);
  Dense<float> x(in[0], "gelu", "input"), gr(g, "gelu", "grad_output");
  Out<float> dx(x.shape());
  gelu_backward_rows(x.data(), gr.data(), dx.data(), dx.size());
  GradList r;
  r.emplace_back(std::move(dx).finish());
  return r;
}

// ---- attention: per batch, scores by GEMM, masked row softmax, values by GEMM ------------------------

// P = softmax(scale * Q K^T + causal mask) for one batch entry, into p (l x s), by GEMM and the fused row
// exponential. A fully masked row gives NaN, as PyTorch does.
void attention_probs_f32(const float* q, const float* k, const generic::AttentionShape& sh, bool causal, float scale, float* p) {
  sgemm(sh.l, sh.s, sh.e, q, sh.e, 1, k, 1, sh.e, p, sh.s, false);
  for (std::int64_t i = 0; i < sh.l; ++i) {
    float* row = p + i * sh.s;
    float mx = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < sh.s; ++j) {
      row[j] = (causal && j > i) ? -std::numeric_limits<float>::infinity() : row[j] * scale;
      mx = std::max(mx, row[j]);
    }
    const float inv = 1.0f / exp_shifted(row, row, sh.s, mx);
    for (std::int64_t j = 0; j < sh.s; ++j) row[j] *= inv;
  }
}

Tensor scaled_dot_product_attention_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  constexpr const char* op = "scaled_dot_product_attention";
  if (in[0].dtype() != DType::f32 || in.size() == 4) return generic::scaled_dot_product_attention_forward(in, a, c);
  Dense<float> q(in[0], op, "query"), k(in[1], op, "key"), v(in[2], op, "value");
  const auto sh = generic::attention_shape(in);
  const bool causal = a.get_bool(op, "is_causal", false);
  const float scale = static_cast<float>(a.get_float(op, "scale", 1.0 / std::sqrt(static_cast<double>(sh.e))));
  Dims out_shape = q.shape();
  out_shape[out_shape.size() - 1] = sh.ev;
  Out<float> out(out_shape);
  std::vector<float> p(static_cast<std::size_t>(std::max<std::int64_t>(sh.l * sh.s, 1)));
  for (std::int64_t b = 0; b < sh.batch; ++b) {
    attention_probs_f32(q.data() + b * sh.l * sh.e, k.data() + b * sh.s * sh.e, sh, causal, scale, p.data());
    sgemm(sh.l, sh.ev, sh.s, p.data(), sh.s, 1, v.data() + b * sh.s * sh.ev, sh.ev, 1, out.data() + b * sh.l * sh.ev, sh.ev, false);
  }
  return std::move(out).finish();
}

// Per batch entry, with P recomputed: dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dP * P)) * scale,
// dQ = dS K, dK = dS^T Q, each product a GEMM.
GradList scaled_dot_product_attention_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g,
                                          const Attributes& a, const KernelContext& c) {
  constexpr const char* op = "scaled_dot_product_attention";
  if (in[0].dtype() != DType::f32 || in.size() == 4) return generic::scaled_dot_product_attention_vjp(in, y, g, a, c);
  Dense<float> q(in[0], op, "query"), k(in[1], op, "key"), v(in[2], op, "value"), gr(g, op, "grad_output");
  const auto sh = generic::attention_shape(in);
  const bool causal = a.get_bool(op, "is_causal", false);
  const float scale = static_cast<float>(a.get_float(op, "scale", 1.0 / std::sqrt(static_cast<double>(sh.e))));
  Out<float> gq(q.shape()), gk(k.shape()), gv(v.shape());
  const auto scores = static_cast<std::size_t>(std::max<std::int64_t>(sh.l * sh.s, 1));
  std::vector<float> p(scores), ds(scores);
  for (std::int64_t b = 0; b < sh.batch; ++b) {
    const float* qb = q.data() + b * sh.l * sh.e;
    const float* kb = k.data() + b * sh.s * sh.e;
    const float* vb = v.data() + b * sh.s * sh.ev;
    const float* gb = gr.data() + b * sh.l * sh.ev;
    attention_probs_f32(qb, kb, sh, causal, scale, p.data());
    sgemm(sh.s, sh.ev, sh.l, p.data(), 1, sh.s, gb, sh.ev, 1, gv.data() + b * sh.s * sh.ev, sh.ev, false);
    sgemm(sh.l, sh.s, sh.ev, gb, sh.ev, 1, vb, 1, sh.ev, ds.data(), sh.s, false);
    for (std::int64_t i = 0; i < sh.l; ++i) {
      const float* prow = p.data() + i * sh.s;
      float* drow = ds.data() + i * sh.s;
      float dot = 0.0f;
      for (std::int64_t j = 0; j < sh.s; ++j) dot += drow[j] * prow[j];
      for (std::int64_t j = 0; j < sh.s; ++j) drow[j] = prow[j] * (drow[j] - dot) * scale;
    }
    sgemm(sh.l, sh.e, sh.s, ds.data(), sh.s, 1, kb, sh.e, 1, gq.data() + b * sh.l * sh.e, sh.e, false);
    sgemm(sh.s, sh.e, sh.l, ds.data(), 1, sh.s, qb, sh.e, 1, gk.data() + b * sh.s * sh.e, sh.e, false);
  }
  GradList r;
  r.emplace_back(std::move(gq).finish());
  r.emplace_back(std::move(gk).finish());
  r.emplace_back(std::move(gv).finish());
  return r;
}

// ---- ops served by the generic kernels in this translation unit -------------------------------------
// Real functions of this namespace (not using-declarations), so each handler's provenance symbol names
// a function that exists in native's own symbol table.

#define PACT_NATIVE_FROM_GENERIC(opname)                                                                   \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {   \
    return generic::opname##_forward(in, a, c);                                                            \
  }                                                                                                        \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g,          \
                        const Attributes& a, const KernelContext& c) {                                     \
    return generic::opname##_vjp(in, y, g, a, c);                                                          \
  }
PACT_NATIVE_FROM_GENERIC(neg)
PACT_NATIVE_FROM_GENERIC(relu)
PACT_NATIVE_FROM_GENERIC(silu)
PACT_NATIVE_FROM_GENERIC(tanh)
PACT_NATIVE_FROM_GENERIC(sigmoid)
PACT_NATIVE_FROM_GENERIC(clamp)
PACT_NATIVE_FROM_GENERIC(exp)
PACT_NATIVE_FROM_GENERIC(log)
PACT_NATIVE_FROM_GENERIC(sqrt)
PACT_NATIVE_FROM_GENERIC(mse_loss)
PACT_NATIVE_FROM_GENERIC(batch_norm)
PACT_NATIVE_FROM_GENERIC(dropout)
PACT_NATIVE_FROM_GENERIC(embedding)
PACT_NATIVE_FROM_GENERIC(max_pool2d)
PACT_NATIVE_FROM_GENERIC(avg_pool2d)
PACT_NATIVE_FROM_GENERIC(adaptive_avg_pool2d)
PACT_NATIVE_FROM_GENERIC(reshape)
PACT_NATIVE_FROM_GENERIC(permute)
PACT_NATIVE_FROM_GENERIC(transpose)
PACT_NATIVE_FROM_GENERIC(flatten)
PACT_NATIVE_FROM_GENERIC(concat)
PACT_NATIVE_FROM_GENERIC(slice)
PACT_NATIVE_FROM_GENERIC(sum)
PACT_NATIVE_FROM_GENERIC(mean)
PACT_NATIVE_FROM_GENERIC(max)
#undef PACT_NATIVE_FROM_GENERIC

}  // namespace pact::kernels::cpu::native

namespace pact::kernels {

std::span<const Handler> native_handlers() {
  static const Handler table[] = {PACT_CPU_HANDLERS(native, "pact/kernels/cpu/native.cpp")};
  return table;
}

}  // namespace pact::kernels
