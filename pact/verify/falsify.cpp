#include "pact/verify/falsify.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "pact/contract/capsule.hpp"
#include "pact/contract/check.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/verify/oracle.hpp"
#include "pact/verify/samples.hpp"

namespace pact::verify {

namespace {

using ops::Attributes;

Tensor make(const Dims& shape, const std::vector<double>& v, DType dtype = DType::f32) {
  Tensor t = Tensor::from_values<double>(shape, v);
  if (dtype == DType::f64) return t;
  return t.convert(dtype);
}

struct Case {
  std::vector<Tensor> in;
  Attributes attrs;
  template <class... T>
  static Case of(Attributes a, T&&... tensors) {
    Case c;
    (c.in.push_back(std::forward<T>(tensors)), ...);
    c.attrs = std::move(a);
    return c;
  }
  Case clone() const {
    Case c;
    for (const auto& t : in) c.in.push_back(t.duplicate());
    c.attrs = attrs;
    return c;
  }
  std::vector<TensorView> views() const {
    std::vector<TensorView> v;
    for (const auto& t : in) v.push_back(t.as_view());
    return v;
  }
};

struct Rng {
  std::mt19937_64 gen;
  std::int64_t pick(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  }
  Tensor randn(const Dims& shape, double scale, double offset = 0) {
    std::normal_distribution<double> nd(offset, scale);
    std::vector<double> v(static_cast<std::size_t>(ops::numel(shape)));
    for (auto& x : v) x = nd(gen);
    return make(shape, v);
  }
};

// Cross-entropy's reductions over per-row losses `row_loss(n, target)`: rows whose target is the
// ignore_index (default -100) count as 0 under "none" and are left out of "sum" and "mean".
template <class RowLoss>
std::vector<double> reduce_losses(const std::vector<double>& targets, const Attributes& a, RowLoss row_loss) {
  const std::string reduction = a.get_string("cross_entropy", "reduction", std::string("mean"));
  const auto ignore = static_cast<double>(a.get_int("cross_entropy", "ignore_index", -100));
  std::vector<double> rows;
  double total = 0;
  std::size_t counted = 0;
  for (std::size_t n = 0; n < targets.size(); ++n) {
    const bool ignored = targets[n] == ignore;
    const double l = ignored ? 0.0 : row_loss(n, static_cast<std::size_t>(targets[n]));
    rows.push_back(l);
    total += l;
    counted += ignored ? 0 : 1;
  }
  if (reduction == "none") return rows;
  if (reduction == "sum") return {total};
  return {total / static_cast<double>(counted)};
}

// The case generators, keyed by the op table's tags: one branch per op that has a proof obligation.
Case make_case(ops::OpTag op, Rng& r, int trial) {
  using ops::OpTag;
  const double scale = trial % 4 == 3 ? 1e4 : 3.0;  // every fourth case: logits far beyond exp's range
  if (op == OpTag::softmax || op == OpTag::log_softmax) {
    return Case::of(Attributes{{"dim", std::int64_t{-1}}}, r.randn(Dims{r.pick(1, 5), r.pick(2, 17)}, scale));
  }
  if (op == OpTag::cross_entropy) {
    // Every reduction; every other case marks some rows (never the first) with the default ignore_index.
    const auto n = r.pick(1, 6), c = r.pick(2, 9);
    static constexpr const char* kReductions[] = {"mean", "sum", "none"};
    std::vector<double> t(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < t.size(); ++i) {
      t[i] = trial % 2 == 1 && i > 0 && r.pick(0, 2) == 0 ? -100.0 : static_cast<double>(r.pick(0, c - 1));
    }
    return Case::of(Attributes{{"reduction", std::string(kReductions[trial % 3])}}, r.randn(Dims{n, c}, scale),
                    make(Dims{n}, t, DType::i64));
  }
  if (op == OpTag::layer_norm || op == OpTag::rms_norm) {
    const auto rows = r.pick(1, 5), n = r.pick(2, 33);
    Case c = Case::of(Attributes{{"normalized_shape", std::vector<std::int64_t>{n}}, {"eps", 1e-5}},
                      r.randn(Dims{rows, n}, 3.0, op == OpTag::layer_norm ? 1.5 : 0.0), r.randn(Dims{n}, 0.5, 1.0));
    if (op == OpTag::layer_norm) c.in.push_back(r.randn(Dims{n}, 0.1));
    return c;
  }
  if (op == OpTag::matmul) {
    if (trial % 10 == 7) {  // large enough for full micro-kernel tiles, several K blocks and the threaded path
      const auto m = r.pick(33, 48), k = r.pick(1030, 1100), n = r.pick(90, 100);
      return Case::of({}, r.randn(Dims{m, k}, 1.0), r.randn(Dims{k, n}, 1.0));
    }
    const auto m = r.pick(1, 9), k = trial % 10 == 3 ? 0 : r.pick(2, 9), n = r.pick(1, 9);
    if (trial % 5 == 4) {  // batch dimensions that broadcast against each other
      return Case::of({}, r.randn(Dims{r.pick(1, 3), 1, m, k}, 1.0), r.randn(Dims{r.pick(2, 3), k, n}, 1.0));
    }
    return Case::of({}, r.randn(Dims{m, k}, 1.0), r.randn(Dims{k, n}, 1.0));
  }
  if (op == OpTag::scaled_dot_product_attention) {
    const auto b = r.pick(1, 2), l = r.pick(1, 5), s = r.pick(1, 6), e = r.pick(2, 8), ev = r.pick(1, 6);
    Case c = Case::of(Attributes{{"is_causal", trial % 2 == 1}}, r.randn(Dims{b, l, e}, 1.0),
                      r.randn(Dims{b, s, e}, 1.0), r.randn(Dims{b, s, ev}, 1.0));
    if (trial % 6 == 2) {  // a boolean mask (true attends) broadcast over the batch; key 0 always open
      std::vector<double> keep(static_cast<std::size_t>(l * s));
      for (std::size_t i = 0; i < keep.size(); ++i)
        keep[i] = i % static_cast<std::size_t>(s) == 0 ? 1.0 : static_cast<double>(r.pick(0, 1));
      c.in.push_back(make(Dims{l, s}, keep, DType::boolean));
    } else if (trial % 6 == 4) {  // an additive float mask, broadcast over the batch
      c.in.push_back(r.randn(Dims{1, l, s}, 2.0));
    }
    return c;
  }
  if (op == OpTag::gelu) return Case::of({}, r.randn(Dims{r.pick(1, 40)}, 4.0));
  if (op == OpTag::conv2d) {
    const auto groups = r.pick(1, 2), c = groups * r.pick(1, 3), o = groups * r.pick(1, 3), k = r.pick(1, 3);
    const auto h = r.pick(k, 7), w = r.pick(k, 7);
    Attributes attrs{{"stride", std::vector<std::int64_t>{r.pick(1, 2), r.pick(1, 2)}},
                     {"padding", std::vector<std::int64_t>{r.pick(0, 1), r.pick(0, 1)}},
                     {"groups", groups}};
    return Case::of(std::move(attrs), r.randn(Dims{r.pick(1, 2), c, h, w}, 1.0),
                    r.randn(Dims{o, c / groups, k, k}, 0.5), r.randn(Dims{o}, 0.5));
  }
  throw_error(ErrorCode::unsupported, "falsify", fmt::format("no case generator for op '{}'", ops::op_kind(op)));
}

const kernels::Handler& reference_of(ops::OpTag op) {
  const auto* h = kernels::find_handler(kernels::reference_handlers(), op);
  if (h == nullptr || h->forward == nullptr) {
    throw_error(ErrorCode::unsupported, "falsify", fmt::format("no reference kernel for '{}'", ops::op_kind(op)));
  }
  return *h;
}

Tensor reference(ops::OpTag op, std::span<const TensorView> in, const Attributes& a) {
  return kernels::run_forward(reference_of(op), in, a);
}

using Finding = std::optional<std::string>;
struct CheckArgs {
  ops::OpTag op;
  const KernelFn& kernel;
  Case& c;
  double tol;  // -1: the op's tolerance
  Rng& rng;
};
using Check = Finding (*)(CheckArgs&);

std::int64_t last_dim(const Tensor& t) { return t.shape()[t.shape().size() - 1]; }

Finding rows_sum(CheckArgs& a, bool exp_first) {
  const Tensor y = a.kernel(a.c.views(), a.c.attrs);
  const auto v = y.to_doubles();
  const auto n = last_dim(y);
  for (std::size_t r = 0; r * static_cast<std::size_t>(n) < v.size(); ++r) {
    double s = 0;
    for (std::int64_t j = 0; j < n; ++j) s += exp_first ? std::exp(v[r * n + j]) : v[r * n + j];
    if (!(std::abs(s - 1.0) <= std::max(a.tol, 0.0) + 1e-12)) return fmt::format("row {} sums to {}", r, s);
  }
  return std::nullopt;
}

Finding within(const std::vector<double>& got, const std::vector<double>& want, double abs, double rel,
               const char* what) {
  if (got.size() != want.size()) return fmt::format("{}: {} elements, expected {}", what, got.size(), want.size());
  const ops::Agreement r = ops::compare(got, want, ops::Tolerance{abs, rel});  // the one comparison
  if (r.within) return std::nullopt;
  return fmt::format("{}: element {} is {}, expected {} (tolerance {})", what, r.worst, got[r.worst], want[r.worst],
                     abs + rel * r.scale);
}

Tensor scaled(const Tensor& t, double mul, double add) {
  auto v = t.to_doubles();
  for (auto& x : v) x = x * mul + add;
  return make(t.shape(), v, t.dtype());
}

Tensor ones(const Dims& s, double value = 1.0) {
  return make(s, std::vector<double>(static_cast<std::size_t>(ops::numel(s)), value));
}

const std::map<std::string, Check>& checks() {
  static const std::map<std::string, Check> table = {
      {"rows_sum_to_one", [](CheckArgs& a) { return rows_sum(a, false); }},
      {"exp_rows_sum_to_one", [](CheckArgs& a) { return rows_sum(a, true); }},
      {"unit_interval",
       [](CheckArgs& a) -> Finding {
         for (double y : a.kernel(a.c.views(), a.c.attrs).to_doubles()) {
           if (!(y >= -a.tol && y <= 1.0 + std::max(a.tol, 0.0))) return fmt::format("output {} is outside [0, 1]", y);
         }
         return std::nullopt;
       }},
      {"nonpositive",
       [](CheckArgs& a) -> Finding {
         for (double y : a.kernel(a.c.views(), a.c.attrs).to_doubles()) {
           if (!(y <= std::max(a.tol, 0.0))) return fmt::format("output {} is positive", y);
         }
         return std::nullopt;
       }},
      {"nonnegative",
       [](CheckArgs& a) -> Finding {
         for (double y : a.kernel(a.c.views(), a.c.attrs).to_doubles()) {
           if (!(y >= -std::max(a.tol, 0.0))) return fmt::format("output {} is negative", y);
         }
         return std::nullopt;
       }},
      {"shift_invariance",
       [](CheckArgs& a) -> Finding {
         const auto y = a.kernel(a.c.views(), a.c.attrs).to_doubles();
         Case shifted = a.c.clone();
         shifted.in[0] = scaled(a.c.in[0], 1.0, 5.0);
         const auto z = a.kernel(shifted.views(), shifted.attrs).to_doubles();
         return within(z, y, std::max(a.tol, 0.0), 0.0, "softmax(x + 5) vs softmax(x)");
       }},
      {"scale_invariance",
       [](CheckArgs& a) -> Finding {
         const auto y = a.kernel(a.c.views(), a.c.attrs).to_doubles();
         Case s = a.c.clone();
         s.in[0] = scaled(a.c.in[0], 3.0, 0.0);
         return within(a.kernel(s.views(), s.attrs).to_doubles(), y, std::max(a.tol, 0.0), 0.0, "f(3x) vs f(x)");
       }},
      {"matches_reference",
       [](CheckArgs& a) -> Finding {
         const auto& info = ops::op_info(a.op);
         const auto tol = info.tolerance();
         const double abs = a.tol >= 0 ? a.tol : tol.abs, rel = a.tol >= 0 ? a.tol : tol.rel;
         return within(a.kernel(a.c.views(), a.c.attrs).to_doubles(),
                       reference(a.op, a.c.views(), a.c.attrs).to_doubles(), abs, rel, "kernel vs reference");
       }},
      {"matches_log_softmax_at_targets",
       [](CheckArgs& a) -> Finding {
         const auto ce = a.kernel(a.c.views(), a.c.attrs).to_doubles();
         const TensorView logits[] = {a.c.in[0].as_view()};
         const auto ls = reference(ops::OpTag::log_softmax, logits, Attributes{{"dim", std::int64_t{-1}}}).to_doubles();
         const auto c = static_cast<std::size_t>(last_dim(a.c.in[0]));
         const auto want = reduce_losses(a.c.in[1].to_doubles(), a.c.attrs,
                                         [&](std::size_t n, std::size_t t) { return -ls[n * c + t]; });
         if (ce.size() != want.size()) return fmt::format("{} losses, expected {}", ce.size(), want.size());
         for (std::size_t i = 0; i < ce.size(); ++i) {
           if (!(std::abs(ce[i] - want[i]) <= std::max(a.tol, 0.0) * std::max(1.0, std::abs(want[i])))) {
             return fmt::format("loss[{}] {} but -log_softmax at the targets gives {}", i, ce[i], want[i]);
           }
         }
         return std::nullopt;
       }},
      {"zero_mean_unit_variance",
       [](CheckArgs& a) -> Finding {
         const Dims ns{last_dim(a.c.in[0])};
         Case c = Case::of(a.c.attrs, a.c.in[0].duplicate(), ones(ns), ones(ns, 0.0));
         const auto y = a.kernel(c.views(), c.attrs).to_doubles();
         const auto n = static_cast<std::size_t>(ns[0]);
         for (std::size_t r = 0; r * n < y.size(); ++r) {
           double m = 0, v = 0;
           for (std::size_t j = 0; j < n; ++j) m += y[r * n + j];
           m /= static_cast<double>(n);
           for (std::size_t j = 0; j < n; ++j) v += (y[r * n + j] - m) * (y[r * n + j] - m);
           v /= static_cast<double>(n);
           if (!(std::abs(m) <= a.tol && std::abs(v - 1.0) <= a.tol))
             return fmt::format("row {}: mean {}, variance {}", r, m, v);
         }
         return std::nullopt;
       }},
      {"unit_rms",
       [](CheckArgs& a) -> Finding {
         const Dims ns{last_dim(a.c.in[0])};
         Case c = Case::of(a.c.attrs, a.c.in[0].duplicate(), ones(ns));
         const auto y = a.kernel(c.views(), c.attrs).to_doubles();
         const auto n = static_cast<std::size_t>(ns[0]);
         for (std::size_t r = 0; r * n < y.size(); ++r) {
           double s = 0;
           for (std::size_t j = 0; j < n; ++j) s += y[r * n + j] * y[r * n + j];
           const double rms = std::sqrt(s / static_cast<double>(n));
           if (!(std::abs(rms - 1.0) <= a.tol)) return fmt::format("row {}: rms {}", r, rms);
         }
         return std::nullopt;
       }},
      {"identity",
       [](CheckArgs& a) -> Finding {
         const auto k = last_dim(a.c.in[0]);
         std::vector<double> eye(static_cast<std::size_t>(k * k), 0.0);
         for (std::int64_t i = 0; i < k; ++i) eye[static_cast<std::size_t>(i * k + i)] = 1.0;
         Case c = Case::of({}, a.c.in[0].duplicate(), make(Dims{k, k}, eye));
         return within(a.kernel(c.views(), c.attrs).to_doubles(), a.c.in[0].to_doubles(), std::max(a.tol, 0.0), 0.0,
                       "A I vs A");
       }},
      {"convex_in_values",
       [](CheckArgs& a) -> Finding {
         const auto y = a.kernel(a.c.views(), a.c.attrs).to_doubles();
         const auto v = a.c.in[2].to_doubles();
         const Dims vs = a.c.in[2].shape();
         const auto b = vs[0], s = vs[1], ev = vs[2];
         const auto l = a.c.in[0].shape()[1];
         for (std::int64_t bi = 0; bi < b; ++bi)
           for (std::int64_t d = 0; d < ev; ++d) {
             double lo = std::numeric_limits<double>::infinity(), hi = -lo;
             for (std::int64_t j = 0; j < s; ++j) {
               lo = std::min(lo, v[static_cast<std::size_t>((bi * s + j) * ev + d)]);
               hi = std::max(hi, v[static_cast<std::size_t>((bi * s + j) * ev + d)]);
             }
             for (std::int64_t i = 0; i < l; ++i) {
               const double o = y[static_cast<std::size_t>((bi * l + i) * ev + d)];
               if (!(o >= lo - a.tol && o <= hi + a.tol)) return fmt::format("output {} outside [{}, {}]", o, lo, hi);
             }
           }
         return std::nullopt;
       }},
      {"gelu_envelope",
       [](CheckArgs& a) -> Finding {
         const auto x = a.c.in[0].to_doubles();
         const auto y = a.kernel(a.c.views(), a.c.attrs).to_doubles();
         for (std::size_t i = 0; i < x.size(); ++i) {
           if (!(y[i] <= std::max(0.0, x[i]) + a.tol && y[i] >= std::min(0.0, x[i]) - 0.17 - a.tol)) {
             return fmt::format("gelu({}) = {} is outside the envelope", x[i], y[i]);
           }
         }
         return std::nullopt;
       }},
      {"identity_kernel",
       [](CheckArgs& a) -> Finding {
         const Dims xs = a.c.in[0].shape();
         const auto c = xs[1];
         std::vector<double> w(static_cast<std::size_t>(c * c), 0.0);
         for (std::int64_t i = 0; i < c; ++i) w[static_cast<std::size_t>(i * c + i)] = 1.0;
         Case k = Case::of({}, a.c.in[0].duplicate(), make(Dims{c, c, 1, 1}, w));
         return within(a.kernel(k.views(), k.attrs).to_doubles(), a.c.in[0].to_doubles(), std::max(a.tol, 0.0), 0.0,
                       "conv2d(x, identity) vs x");
       }},
  };
  return table;
}

#include "pact/verify/falsify_mutants.inc"

// Note [Generic mutants]
// ~~~~~~~~~~~~~~~~~~~~~~
// A generic mutant is a bound capsule whose results are altered after its kernel ran: the last forward
// value (or an update's last new state value) moved by 1% of its size plus 0.01 (an integer moved by one, a
// boolean flipped), the result given an extra leading dimension, or the first gradient scaled by 1.05. They
// serve every op, so that each generic check of each contract is shown to refute a wrong result. They say
// nothing about which mistakes in a kernel's source the checks catch: mutants of the source are that.
constexpr const char* kGenericChecks[] = {"matches_oracle", "shape_rule", "fd_vjp", "matches_reference_on_samples",
                                          "random_mask"};

void shift_last(Tensor& t) {
  if (t.numel() == 0) return;
  auto v = t.to_doubles();
  double& last = v.back();
  if (t.dtype() == DType::boolean) {
    last = last != 0 ? 0 : 1;
  } else if (!is_floating(t.dtype())) {
    last += 1;
  } else {
    last += 0.01 + 0.01 * std::abs(last);
  }
  t = Tensor::from_values<double>(t.shape(), v).convert(t.dtype());
}

const std::map<std::string, ResultTamper>& generic_mutants() {
  static const std::map<std::string, ResultTamper> table = {
      {"last_value_shifted", ResultTamper{shift_last, nullptr,
                                          [](std::vector<Tensor>& state) {
                                            if (!state.empty()) shift_last(state.back());
                                          }}},
      {"result_unsqueezed", ResultTamper{[](Tensor& y) {
                                           Dims s{1};
                                           for (auto e : y.shape()) s.push_back(e);
                                           Tensor lifted =
                                               y.as_view().reshape(s).duplicate();  // no view of y outlives it
                                           y = std::move(lifted);
                                         },
                                         nullptr,
                                         [](std::vector<Tensor>& state) {
                                           if (state.empty()) return;
                                           Dims s{1};
                                           for (auto e : state.front().shape()) s.push_back(e);
                                           Tensor lifted = state.front().as_view().reshape(s).duplicate();
                                           state.front() = std::move(lifted);
                                         }}},
      {"first_gradient_scaled", ResultTamper{nullptr,
                                             [](std::vector<std::optional<Tensor>>& grads) {
                                               for (auto& g : grads) {
                                                 if (!g) continue;
                                                 auto v = g->to_doubles();
                                                 for (auto& x : v) x *= 1.05;
                                                 *g = Tensor::from_values<double>(g->shape(), v).convert(g->dtype());
                                                 return;
                                               }
                                             },
                                             nullptr}},
  };
  return table;
}

// The float dtypes the oracle holds a capsule to: those it computes, 16-bit ones only on the 16-bit cases.
std::vector<DType> oracle_dtypes(const contract::Capsule& cap) {
  std::vector<DType> out;
  for (DType d : {DType::f64, DType::f32, DType::bf16, DType::f16})
    if (cap.dtypes.contains(d)) out.push_back(d);
  return out;
}

// set_stop_at_first_failure's switch: the sweep and the oracle's cases stop at their first failing case.
bool stop_at_first_failure = false;

// keep_sample_baselines' memo: the reference's results for a sample, by (seed, dtype, index in
// provider_samples()), with the random stream as computing them leaves it.
struct KeptBaseline {
  SampleBaseline baseline;
  std::mt19937 after;
};
bool keeping_baselines = false;
std::map<std::tuple<std::uint64_t, DType, std::size_t>, KeptBaseline> kept_baselines;

// The reference's results for sample k (of `all`) in `dtype` of the stream `rng` seeded by `seed`: kept ones
// when keeping (the stream then moved on as computing them would have moved it), else computed into
// `scratch`.
const SampleBaseline& baseline_at(const kernels::Handler& reference, const std::vector<Sample>& all, std::size_t k,
                                  std::uint64_t seed, DType dtype, std::mt19937& rng, SampleBaseline& scratch) {
  if (!keeping_baselines) return scratch = sample_baseline(reference, all[k], rng, dtype);
  if (const auto it = kept_baselines.find({seed, dtype, k}); it != kept_baselines.end()) {
    rng = it->second.after;
    return it->second.baseline;
  }
  SampleBaseline b = sample_baseline(reference, all[k], rng, dtype);
  return kept_baselines.insert_or_assign({seed, dtype, k}, KeptBaseline{std::move(b), rng}).first->second.baseline;
}

// The dtypes a capsule's samples are drawn in: float32 when it computes float32, else each 16-bit float
// dtype it computes (the half provider's capsules).
std::vector<DType> sample_dtypes(const contract::Capsule& cap) {
  if (cap.dtypes.contains(DType::f32)) return {DType::f32};
  std::vector<DType> out;
  for (DType d : {DType::bf16, DType::f16})
    if (cap.dtypes.contains(d)) out.push_back(d);
  return out;
}

// matches_reference_on_samples (Note [Generic checks]): the capsule against the reference provider on the op
// sweep's samples, as tests/kernels' provider sweep runs it at every ISA level.
PropertyOutcome sweep_outcome(ops::OpTag op, const contract::Capsule& cap, std::uint64_t seed,
                              const ResultTamper* tamper) {
  PropertyOutcome out;
  if (cap.provider == "reference") {
    out.not_applicable = fmt::format("{} is the baseline the samples compare other providers with", cap.name);
    return out;
  }
  const std::vector<DType> dtypes = sample_dtypes(cap);
  if (dtypes.empty()) {
    out.not_applicable =
        fmt::format("the samples are float32, bf16 or f16; {} computes only {} (matches_oracle holds it)", cap.name,
                    cap.dtypes.to_string());
    return out;
  }
  const kernels::Handler& h = contract::handler_for(cap);
  const kernels::Handler* baseline = kernels::find_handler(kernels::reference_handlers(), op);
  if (baseline == nullptr) {
    out.failed = 1;
    out.first_failure = fmt::format("no reference handler for {} to compare {} with", ops::op_kind(op), cap.name);
    return out;
  }
  const std::vector<Sample> all = provider_samples();
  for (DType d : dtypes) {
    std::mt19937 rng(static_cast<std::mt19937::result_type>(seed + 99));
    for (std::size_t k = 0; k < all.size(); ++k) {
      const Sample& s = all[k];
      if (s.op != op) continue;
      std::vector<std::string> found;
      try {
        SampleBaseline scratch;
        const SampleBaseline& b = baseline_at(*baseline, all, k, seed, d, rng, scratch);
        if (!b.unrepresentable.empty()) continue;  // f16's range: not a trial
        ++out.trials;
        found = sweep_problems(h, s, b, tamper);
      } catch (const Error& e) {
        ++out.trials;
        found.push_back(fmt::format("the kernel failed: {}", e.what()));
      }
      if (!found.empty() && out.failed++ == 0)
        out.first_failure = fmt::format("{}{}: {}", describe(s),
                                        d == DType::f32 ? "" : fmt::format(" in {}", dtype_name(d)), found.front());
      if (out.failed > 0 && stop_at_first_failure) break;
    }
    if (out.failed > 0 && stop_at_first_failure) break;
  }
  if (out.trials == 0) {
    out.failed = 1;
    out.first_failure = fmt::format("no sample of {} (add one to pact/verify/samples.cpp)", ops::op_kind(op));
  }
  return out;
}

PropertyOutcome evaluate_generic(const ProofObligation& o, ops::OpTag op, const contract::Capsule& cap,
                                 std::uint64_t seed, const std::string& oracle_dir, const ResultTamper* tamper) {
  const kernels::Handler& h = contract::handler_for(cap);
  PropertyOutcome out;
  auto record = [&](const OracleCase& c, DType d, const std::vector<std::string>& found) {
    ++out.trials;
    if (found.empty()) return;
    if (out.failed++ == 0) out.first_failure = fmt::format("{} in {}: {}", c.describe(), dtype_name(d), found.front());
  };
  auto guarded = [&](const OracleCase& c, DType d, auto&& run) {
    try {
      run();
    } catch (const Error& e) {
      record(c, d, {fmt::format("the kernel failed: {}", e.what())});
    }
  };
  if (o.check == "matches_reference_on_samples") return sweep_outcome(op, cap, seed, tamper);
  std::vector<DType> dtypes = oracle_dtypes(cap);
  if (o.check == "random_mask") {  // its own inputs: the oracle cannot compare random masks
    for (DType d : dtypes) {
      ++out.trials;
      std::vector<std::string> found;
      try {
        found = random_mask_problems(h, d, seed, tamper);
      } catch (const Error& e) {
        found.push_back(fmt::format("the kernel failed: {}", e.what()));
      }
      if (!found.empty() && out.failed++ == 0)
        out.first_failure = fmt::format("in {}: {}", dtype_name(d), found.front());
    }
    if (out.trials == 0) {
      out.failed = 1;
      out.first_failure = fmt::format("{} computes no float dtype", cap.name);
    }
    return out;
  }
  if (o.check == "fd_vjp") {
    // Finite differences in the widest float dtype the capsule computes (Note [Generic checks]).
    std::erase_if(dtypes, [](DType d) { return d != DType::f64 && d != DType::f32; });
    if (dtypes.empty()) {
      out.not_applicable = fmt::format("{} computes only 16-bit dtypes, too coarse to difference", cap.name);
      return out;
    }
    dtypes.resize(1);
    if (!ops::op_info(op).has_vjp || h.vjp == nullptr) {
      out.failed = 1;
      out.first_failure = fmt::format("{} has no VJP to difference", cap.name);
      return out;
    }
  }
  for (const auto& c : oracle_cases(oracle_dir)) {
    if (out.failed > 0 && stop_at_first_failure) break;
    if (c.op != op) continue;
    if (std::any_of(o.unless_attributes.begin(), o.unless_attributes.end(),
                    [&](const std::string& a) { return c.attrs.has(a); }))
      continue;
    for (DType d : dtypes) {
      if (!c.half && (d == DType::bf16 || d == DType::f16)) continue;
      guarded(c, d, [&] {
        if (o.check == "matches_oracle") {
          record(c, d, oracle_problems(h, c, d, tamper));
        } else if (o.check == "shape_rule") {
          record(c, d, shape_problems(h, c, d, tamper));
        } else if (auto found = fd_vjp_problems(h, c, d, seed, tamper)) {
          record(c, d, *found);
        }
      });
    }
  }
  if (out.trials == 0) {
    out.failed = 1;
    out.first_failure =
        fmt::format("no oracle case of {} runs on {} (add one to tools/op_oracle.py)", ops::op_kind(op), cap.name);
  }
  return out;
}

std::uint64_t mix(std::uint64_t seed, std::string_view s) {
  std::uint64_t h = seed ^ 0xcbf29ce484222325ULL;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

const Equation* equation_of(const Contract& c, const std::string& name) {
  for (const auto& e : c.equations) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace

void set_stop_at_first_failure(bool stop) noexcept { stop_at_first_failure = stop; }

void keep_sample_baselines(std::uint64_t seed) {
  keeping_baselines = true;
  const std::vector<Sample> all = provider_samples();
  // The dtypes each sampled op's host capsules draw their samples in (sample_dtypes: float32, or bf16 and f16
  // for the half provider's).
  std::map<ops::OpTag, std::set<DType>> wanted;
  for (const Sample& s : all) wanted[s.op].insert(DType::f32);
  for (const contract::CapsuleModule* m : contract::maintained_modules()) {
    for (const contract::Capsule& cap : m->capsules) {
      if (cap.provider == "reference" || cap.device != DeviceKind::cpu || !wanted.contains(cap.op)) continue;
      for (DType d : sample_dtypes(cap)) wanted[cap.op].insert(d);
    }
  }
  for (const auto& [op, dtypes] : wanted) {
    const kernels::Handler* reference = kernels::find_handler(kernels::reference_handlers(), op);
    if (reference == nullptr) continue;  // sweep_outcome says so when a capsule of the op is evaluated
    for (DType d : dtypes) {
      std::mt19937 rng(static_cast<std::mt19937::result_type>(seed + 99));  // as sweep_outcome draws them
      for (std::size_t k = 0; k < all.size(); ++k) {
        if (all[k].op != op) continue;
        try {
          SampleBaseline scratch;
          (void)baseline_at(*reference, all, k, seed, d, rng, scratch);
        } catch (const Error&) {
          break;  // the evaluation meets the same failure and reports it; later samples are computed then
        }
      }
    }
  }
}

void drop_sample_baselines(bool release) noexcept {
  keeping_baselines = false;
  if (release) kept_baselines.clear();
}

std::vector<Evaluation> evaluations_of(const Contract& contract, const BindingFile& bindings) {
  std::vector<Evaluation> out;
  for (const auto& o : contract.obligations) {
    const Equation* eq = equation_of(contract, o.equation);
    if (eq == nullptr) continue;
    for (const auto& b : bindings.bindings) {
      if (b.contract != contract.id || b.equation != o.equation || b.status != BindingStatus::implemented) continue;
      out.push_back({&o, eq->op, b.capsule});
    }
  }
  return out;
}

std::vector<std::string> known_checks() {
  std::vector<std::string> out;
  for (const auto& [k, f] : checks()) out.push_back(k);
  out.insert(out.end(), std::begin(kGenericChecks), std::end(kGenericChecks));
  return out;
}

std::vector<std::string> known_mutants() {
  std::vector<std::string> out;
  for (const auto& [k, f] : mutants()) out.push_back(k);
  for (const auto& [k, f] : generic_mutants()) out.push_back(k);
  return out;
}

bool is_generic_check(const std::string& check) {
  return std::find(std::begin(kGenericChecks), std::end(kGenericChecks), check) != std::end(kGenericChecks);
}

bool is_generic_mutant(const std::string& name) { return generic_mutants().count(name) > 0; }

KernelFn mutant(const std::string& name) {
  auto it = mutants().find(name);
  if (it == mutants().end())
    throw_error(ErrorCode::invalid_argument, "falsify",
                is_generic_mutant(name)
                    ? fmt::format("mutant '{}' alters a capsule's results: evaluate_capsule runs it", name)
                    : fmt::format("unknown mutant '{}'", name));
  return it->second;
}

KernelFn capsule_kernel(const std::string& name) {
  const contract::Capsule* c = contract::find_maintained_capsule(name);
  if (c == nullptr)
    throw_error(ErrorCode::unsupported, "falsify", fmt::format("no capsule named '{}' in the registry", name));
  const kernels::Handler* h = &contract::handler_for(*c);
  return [h](std::span<const TensorView> in, const Attributes& a) { return kernels::run_forward(*h, in, a); };
}

PropertyOutcome evaluate(const ProofObligation& o, const std::string& op, const KernelFn& kernel, std::uint64_t seed,
                         int trials) {
  auto it = checks().find(o.check);
  if (it == checks().end())
    throw_error(ErrorCode::invalid_argument, "falsify",
                is_generic_check(o.check)
                    ? fmt::format("obligation {}: check '{}' runs on a capsule (evaluate_capsule)", o.id, o.check)
                    : fmt::format("obligation {}: unknown check '{}'", o.id, o.check));
  const ops::OpTag tag = ops::parse_op_kind(op);  // the contract names the op by its wire kind
  PropertyOutcome out;
  for (int t = 0; t < trials; ++t) {
    Rng rng{std::mt19937_64(mix(seed + static_cast<std::uint64_t>(t), o.id))};
    Case c = make_case(tag, rng, t);
    CheckArgs args{tag, kernel, c, o.tolerance, rng};
    Finding f;
    try {
      f = it->second(args);
    } catch (const Error& e) {
      f = fmt::format("the kernel failed: {}", e.what());
    }
    ++out.trials;
    if (f) {
      if (out.failed++ == 0) out.first_failure = fmt::format("case {}: {}", t, *f);
    }
  }
  return out;
}

PropertyOutcome evaluate_capsule(const ProofObligation& o, const std::string& op, const std::string& capsule,
                                 std::uint64_t seed, int trials, const std::string& oracle_dir,
                                 const std::string& mutant_name) {
  const contract::Capsule* cap = contract::find_maintained_capsule(capsule);
  if (cap == nullptr)
    throw_error(ErrorCode::unsupported, "falsify", fmt::format("no capsule named '{}' in the registry", capsule));
  const ops::OpTag tag = ops::parse_op_kind(op);
  const ResultTamper* tamper = nullptr;
  if (!mutant_name.empty() && is_generic_mutant(mutant_name)) tamper = &generic_mutants().at(mutant_name);
  if (is_generic_check(o.check)) {
    if (!mutant_name.empty() && tamper == nullptr)
      throw_error(ErrorCode::invalid_argument, "falsify",
                  fmt::format("obligation {}: the generic check '{}' runs against generic mutants only, not '{}'", o.id,
                              o.check, mutant_name));
    return evaluate_generic(o, tag, *cap, seed, oracle_dir, tamper);
  }
  if (!cap->dtypes.contains(DType::f32) && !cap->dtypes.contains(DType::f64)) {
    PropertyOutcome out;
    out.not_applicable = fmt::format("check '{}' draws float32 cases; {} computes only {} (matches_oracle holds it)",
                                     o.check, cap->name, cap->dtypes.to_string());
    return out;
  }
  if (!mutant_name.empty() && tamper == nullptr) return evaluate(o, op, mutant(mutant_name), seed, trials);
  const kernels::Handler* h = &contract::handler_for(*cap);
  KernelFn kernel = [h, tamper](std::span<const TensorView> in, const Attributes& a) {
    Tensor y = kernels::run_forward(*h, in, a);
    if (tamper != nullptr && tamper->forward) tamper->forward(y);
    return y;
  };
  return evaluate(o, op, kernel, seed, trials);
}

std::size_t FalsifyReport::evaluated() const noexcept {
  return static_cast<std::size_t>(std::count_if(obligations.begin(), obligations.end(),
                                                [](const auto& r) { return r.outcome.not_applicable.empty(); }));
}
std::size_t FalsifyReport::not_applicable() const noexcept { return obligations.size() - evaluated(); }
std::size_t FalsifyReport::failed() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(obligations.begin(), obligations.end(), [](const auto& r) { return r.outcome.failed > 0; }));
}
std::size_t FalsifyReport::caught() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(mutants.begin(), mutants.end(), [](const auto& m) { return m.caught; }));
}
bool FalsifyReport::ok() const noexcept { return evaluated() > 0 && failed() == 0 && caught() == mutants.size(); }

FalsifyReport falsify(const std::vector<Contract>& contracts, const BindingFile& bindings, const std::string& only,
                      std::uint64_t seed, int trials, bool run_mutants, const std::string& oracle_dir) {
  FalsifyReport report;
  bool matched = only.empty();
  for (const auto& c : contracts) {
    if (!only.empty() && c.id != only) continue;
    matched = true;
    report.declared += c.obligations.size();
    for (const Evaluation& e : evaluations_of(c, bindings)) {
      report.obligations.push_back({c.id, e.obligation->id, e.capsule,
                                    evaluate_capsule(*e.obligation, e.op, e.capsule, seed, trials, oracle_dir)});
    }
    if (!run_mutants) continue;
    for (const auto& t : c.falsification) {
      const auto& o = *std::find_if(c.obligations.begin(), c.obligations.end(),
                                    [&](const auto& x) { return x.id == t.obligation; });
      const std::string& op = equation_of(c, o.equation)->op;
      PropertyOutcome out;
      if (is_generic_mutant(t.mutant)) {
        // The mutant alters the first capsule bound to the equation that the obligation applies to (Note
        // [Generic mutants]).
        bool mutated = false;
        for (const auto& b : bindings.bindings) {
          if (b.contract != c.id || b.equation != o.equation || b.status != BindingStatus::implemented) continue;
          out = evaluate_capsule(o, op, b.capsule, seed, trials, oracle_dir, t.mutant);
          if (out.not_applicable.empty()) {
            mutated = true;
            break;
          }
        }
        if (!mutated) {
          out = PropertyOutcome{};
          out.first_failure =
              "no capsule the obligation applies to is bound to the equation, so there is nothing to mutate";
        }
      } else {
        out = evaluate(o, op, mutant(t.mutant), seed, trials);
      }
      report.mutants.push_back({c.id, t.id, t.mutant, o.id, out.failed > 0,
                                out.failed > 0 ? out.first_failure : fmt::format("{} cases, none failed", out.trials)});
    }
  }
  if (!matched) throw_error(ErrorCode::invalid_argument, "falsify", fmt::format("no contract '{}'", only));
  return report;
}

AuditReport audit(const std::vector<Contract>& contracts, const BindingFile& bindings) {
  AuditReport r;
  std::map<std::string, const Contract*> by_id;
  for (const auto& c : contracts) by_id[c.id] = &c;
  for (const auto& c : contracts) {
    AuditReport::Coverage cov{c.id, c.equations.size(), 0, {}};
    for (const auto& e : c.equations) {
      const bool bound = std::any_of(bindings.bindings.begin(), bindings.bindings.end(), [&](const Binding& b) {
        return b.contract == c.id && b.equation == e.name && b.status == BindingStatus::implemented;
      });
      if (bound)
        ++cov.bound;
      else
        cov.unbound.push_back(e.name);
      if (!bound && !bindings.admits(c.id, e.name)) {
        r.problems.push_back(fmt::format(
            "{}: equation '{}' has no implemented binding and is not an allowed gap (AllImplemented)", c.id, e.name));
      }
      for (const auto& o : c.obligations) {
        if (o.equation == e.name && !checks().count(o.check) && !is_generic_check(o.check))
          r.problems.push_back(fmt::format("{}: obligation {} names unknown check '{}'", c.id, o.id, o.check));
      }
    }
    for (const auto& t : c.falsification) {
      if (!mutants().count(t.mutant) && !is_generic_mutant(t.mutant))
        r.problems.push_back(fmt::format("{}: falsification test {} names unknown mutant '{}'", c.id, t.id, t.mutant));
      const auto o =
          std::find_if(c.obligations.begin(), c.obligations.end(), [&](const auto& x) { return x.id == t.obligation; });
      if (o != c.obligations.end() && mutants().count(t.mutant) && is_generic_check(o->check))
        r.problems.push_back(fmt::format(
            "{}: falsification test {} pairs the generic check '{}' with '{}', a mutant written as a forward "
            "function (generic checks need the capsule's VJP: use a generic mutant)",
            c.id, t.id, o->check, t.mutant));
    }
    r.coverage.push_back(std::move(cov));
  }
  for (const auto& b : bindings.bindings) {
    const std::string where = fmt::format("{}:{}", bindings.file, b.line);
    auto it = by_id.find(b.contract);
    if (it == by_id.end()) {
      r.problems.push_back(fmt::format("{}: binding names unknown contract '{}'", where, b.contract));
      continue;
    }
    const Equation* eq = equation_of(*it->second, b.equation);
    if (eq == nullptr) {
      r.problems.push_back(fmt::format("{}: contract {} has no equation '{}'", where, b.contract, b.equation));
      continue;
    }
    const contract::Capsule* cap = contract::find_maintained_capsule(b.capsule);
    if (cap == nullptr) {
      r.problems.push_back(fmt::format("{}: capsule '{}' is not in the registry", where, b.capsule));
      continue;
    }
    if (ops::op_kind(cap->op) != eq->op) {
      r.problems.push_back(fmt::format("{}: capsule {} computes {}, the equation describes {}", where, b.capsule,
                                       ops::op_kind(cap->op), eq->op));
    }
    if (cap->provenance.symbol != b.symbol) {
      r.problems.push_back(
          fmt::format("{}: symbol '{}' is not the capsule's ({})", where, b.symbol, cap->provenance.symbol));
    }
  }
  for (const auto* m : contract::maintained_modules()) {
    for (const auto& cap : m->capsules) {
      if (cap.descriptors.size() < 3 || cap.descriptors[2].evidence.kind != contract::EvidenceKind::testSuite) continue;
      const bool linked = std::any_of(bindings.bindings.begin(), bindings.bindings.end(),
                                      [&](const Binding& b) { return b.capsule == cap.name; });
      if (!linked) r.unlinked_capsules.push_back(cap.name);
    }
  }
  return r;
}

namespace {
/// A C++ identifier from free text: every character that is not a letter or digit becomes '_'.
std::string identifier(const std::string& text) {
  std::string out;
  for (char ch : text) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}
}  // namespace

std::string scaffold(const Contract& c, const BindingFile& bindings, const std::string& oracle_dir) {
  const std::string suite = identifier(c.id);
  std::string out = fmt::format(
      "// Generated by `pact contracts scaffold {}`: one test per obligation per bound capsule, one per\n"
      "// falsification test. Each evaluates the obligation through pact::verify (20 seeded cases).\n\n"
      "#include <gtest/gtest.h>\n\n#include \"pact/verify/falsify.hpp\"\n\nnamespace {{\n\n"
      "const pact::verify::Contract& contract() {{\n"
      "  static const auto c = pact::spec::parse_contract(pact::spec::read_text_file(\"{}\"), \"{}\");\n  return "
      "c;\n}}\n\n"
      "const pact::verify::ProofObligation& obligation(const std::string& id) {{\n"
      "  for (const auto& o : contract().obligations) {{\n    if (o.id == id) return o;\n  }}\n"
      "  throw std::runtime_error(\"no obligation \" + id);\n}}\n\n"
      "std::string op_of(const pact::verify::ProofObligation& o) {{\n"
      "  for (const auto& e : contract().equations) {{\n    if (e.name == o.equation) return e.op;\n  }}\n  return "
      "{{}};\n}}\n\n",
      c.file, c.file, c.file);
  for (const auto& o : c.obligations) {
    for (const auto& b : bindings.bindings) {
      if (b.contract != c.id || b.equation != o.equation || b.status != BindingStatus::implemented) continue;
      const std::string name = identifier(o.id + "_" + b.capsule);
      out += fmt::format(
          "// {}: {}\nTEST({}, {}) {{\n  const auto& o = obligation(\"{}\");\n"
          "  const auto r = pact::verify::evaluate_capsule(o, op_of(o), \"{}\", 0, 20, \"{}\");\n"
          "  EXPECT_EQ(r.failed, 0) << r.first_failure;\n}}\n\n",
          o.id, o.property, suite, name, o.id, b.capsule, oracle_dir);
    }
  }
  for (const auto& t : c.falsification) {
    const std::string name = identifier(t.id + "_catches_" + t.mutant);
    // A generic mutant alters the first capsule bound to the obligation's equation, as falsify does.
    std::string run = fmt::format("pact::verify::evaluate(o, op_of(o), pact::verify::mutant(\"{}\"), 0, 20)", t.mutant);
    if (is_generic_mutant(t.mutant)) {
      const auto& o = *std::find_if(c.obligations.begin(), c.obligations.end(),
                                    [&](const auto& x) { return x.id == t.obligation; });
      const auto b = std::find_if(bindings.bindings.begin(), bindings.bindings.end(), [&](const Binding& x) {
        return x.contract == c.id && x.equation == o.equation && x.status == BindingStatus::implemented;
      });
      if (b == bindings.bindings.end()) continue;  // nothing bound to mutate: the audit reports the gap
      run = fmt::format("pact::verify::evaluate_capsule(o, op_of(o), \"{}\", 0, 20, \"{}\", \"{}\")", b->capsule,
                        oracle_dir, t.mutant);
    }
    out += fmt::format(
        "// {}: {}\nTEST({}, {}) {{\n  const auto& o = obligation(\"{}\");\n"
        "  const auto r = {};\n"
        "  EXPECT_GT(r.failed, 0) << \"the gate did not catch {}\";\n}}\n\n",
        t.id, t.description, suite, name, t.obligation, run, t.mutant);
  }
  out += "}  // namespace\n";
  return out;
}

}  // namespace pact::verify
