#include "pact/verify/oracle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>

#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/ir/graph.hpp"
#include "pact/ir/safetensors.hpp"

namespace pact::verify {

// Note [Generic checks]
// ~~~~~~~~~~~~~~~~~~~~~
// A contract for a new op needs no C++: its obligations name one of five checks. Three take their cases
// from the op oracle, whose expected values PyTorch computed in float64 (tools/op_oracle.py); the fourth
// from the op sweep's samples (pact/verify/samples.cpp); the fifth, for random masks, draws its own.
//
// - matches_oracle: the capsule's forward result, every gradient its VJP returns and an update op's new
//   state agree with PyTorch's, in every dtype the capsule computes (16-bit capsules on the cases whose
//   inputs are 16-bit values), within the op table's tolerance for that dtype.
// - shape_rule: the op table's shape rule, given the case's input types, infers PyTorch's output shape,
//   and the kernel's result has the inferred shape and dtype. The rule is what plans are made from, so this
//   is the shape descriptor's evidence; the runtime guard only holds kernels to the rule.
// - fd_vjp: the VJP against the kernel's own forward, differenced along a seeded random direction. It needs
//   no expected values at all, so it also holds where PyTorch and Pact could share a mistake in the VJP's
//   definition. It runs in the widest float dtype the capsule computes: f64 for the reference provider
//   (step 1e-6, margin 1e-5), f32 for the native and BLAS providers (step 1e-3, margin 3e-2: float32
//   rounding of two forwards and kinks of relu-like ops crossed by the step); a capsule that computes only
//   16-bit dtypes is not finite-differenced (its VJP is held to PyTorch by matches_oracle), nor is a case
//   the oracle marks `kinks` (inputs placed exactly on an op's kinks, where the VJP is a convention that
//   matches_oracle holds to PyTorch's and a difference would straddle the kink).
// - matches_reference_on_samples: every capsule but the reference against the reference provider on the
//   op sweep's samples (verify::sweep_problems: forward, forward on strided inputs, every gradient, an
//   update's new state), at the ISA level the process runs. The samples cross the native kernels' vector
//   tails, blocking and threading boundaries, which the oracle's few small cases do not; it is the same
//   comparison tests/kernels runs at every level, so a native capsule's contract runs its evidence. A
//   capsule that computes only 16-bit floats (the half provider's) meets the samples in each of its dtypes:
//   the float32 inputs and the cotangent rounded to it, the reference run on exactly those values in
//   float32, the op's tolerance for that dtype (a sample whose values f16 cannot hold is not counted).
// - random_mask: a dropout-like op, whose masks no two runtimes draw alike, so the oracle holds only its
//   evaluation mode. The check draws its own inputs and holds training to what every mask satisfies: each
//   result 0 or x / (1 - p), the kept count within 5 standard deviations of n (1 - p), the same seed the
//   same mask and another seed another, the VJP the forward's mask and scale (random_mask_problems).
//
// Each check returns what it found; an empty list is agreement. A generic mutant (ResultTamper) alters
// the results after the kernel ran, which is how the gates show each check able to fail on every op.

namespace {

// Oracle tolerances: a float64 run agrees with PyTorch's float64 to rounding; in f32 the op table's
// tolerance with a floor of a few float32 ulps, since the truth is f64 and an "exact" f32 op still
// rounds its result once.
ops::Tolerance f64_tolerance() { return {1e-10, 1e-9}; }
ops::Tolerance widen(ops::Tolerance t) { return {std::max(t.abs, 1e-6), std::max(t.rel, 1e-6)}; }

// `whose` names where the wanted values come from (PyTorch, or a rule such as random_mask's).
std::optional<std::string> disagreement(const std::string& what, const std::vector<double>& got,
                                        const std::vector<double>& want, ops::Tolerance t,
                                        std::string_view whose = "PyTorch's") {
  if (got.size() != want.size()) return fmt::format("{}: {} elements, {} {}", what, got.size(), whose, want.size());
  const ops::Agreement r = ops::compare(got, want, t);  // the one comparison
  if (r.within) return std::nullopt;
  return fmt::format("{}: element {} is {}, {} {} (tolerance {} + {} * {})", what, r.worst, got[r.worst], whose,
                     want[r.worst], t.abs, t.rel, r.scale);
}

// Every element as an int64, exactly (doubles hold integers only up to 2^53).
std::vector<std::int64_t> exact_integers(const Tensor& t) {
  const Tensor wide = t.as_view().convert(DType::i64);
  auto prepared = wide.prepare_host<std::int64_t>();
  if (!prepared) throw std::move(prepared).error().error;
  const auto v = std::get<PreparedContiguousRead<std::int64_t>>(prepared.value()).as_span();
  return {v.begin(), v.end()};
}

Tensor as_dtype(const Tensor& t, DType d) {
  return is_floating(t.dtype()) && t.dtype() != d ? t.as_view().convert(d) : t.as_view().duplicate();
}

kernels::KernelContext context_of(const OracleCase& c) { return kernels::KernelContext{c.training, 7}; }

Tensor forward(const kernels::Handler& h, const OracleCase& c, const std::vector<Tensor>& ins,
               const ResultTamper* tamper) {
  Tensor y = kernels::run_forward(h, views_of(ins), c.attrs, context_of(c));
  if (tamper != nullptr && tamper->forward) tamper->forward(y);
  return y;
}

std::vector<std::optional<Tensor>> vjp(const kernels::Handler& h, const OracleCase& c, const std::vector<Tensor>& ins,
                                       const Tensor& y, const Tensor& g, const ResultTamper* tamper) {
  auto grads = kernels::run_vjp(h, views_of(ins), y.as_view(), g.as_view(), c.attrs, context_of(c));
  if (tamper != nullptr && tamper->vjp) tamper->vjp(grads);
  return grads;
}

}  // namespace

std::string OracleCase::describe() const {
  return std::string(ops::op_kind(op)) + " " + id + (label.empty() ? "" : " [" + label + "]");
}

std::string oracle_dir_of(const std::string& contracts_dir) { return contracts_dir + "/oracle"; }

std::vector<OracleCase> parse_oracle_cases(const Json& doc, const ir::SafetensorsFile& st, std::string_view where) {
  auto take = [&](const std::string& name) -> Tensor {
    const Tensor* t = st.find(name);
    if (t == nullptr) throw_error(ErrorCode::parse_error, "oracle", fmt::format("{}: no tensor '{}'", where, name));
    return t->as_view().duplicate();
  };
  std::vector<OracleCase> out;
  try {
    for (const Json& j : doc.at("cases")) {
      OracleCase c;
      c.id = j.at("id").get<std::string>();
      c.label = j.at("label").get<std::string>();
      c.op = ops::parse_op_kind(j.at("op").get<std::string>());
      c.attrs = ir::attributes_from_json(j.at("attrs"), where, c.id + ".attrs");
      c.training = j.at("training").get<bool>();
      c.half = j.contains("half") && j.at("half").get<bool>();
      c.kinks = j.contains("kinks") && j.at("kinks").get<bool>();
      const auto inputs = j.at("inputs").get<std::int64_t>();
      if (inputs < 0 || inputs > 16)
        throw_error(ErrorCode::parse_error, "oracle", fmt::format("{}: {}: {} inputs", where, c.id, inputs));
      for (std::int64_t k = 0; k < inputs; ++k) c.inputs.push_back(take(c.id + ".in" + std::to_string(k)));
      if (ops::op_info(c.op).role != ops::OpRole::update) c.out = take(c.id + ".out");
      for (const Json& k : j.at("grads"))
        c.grads.emplace(k.get<std::size_t>(), take(c.id + ".grad" + std::to_string(k.get<std::size_t>())));
      if (!c.grads.empty()) c.cot = take(c.id + ".cot");
      for (const Json& k : j.at("states"))
        c.states.emplace(k.get<std::size_t>(), take(c.id + ".state" + std::to_string(k.get<std::size_t>())));
      out.push_back(std::move(c));
    }
  } catch (const Json::exception& e) {
    throw_error(ErrorCode::parse_error, "oracle", fmt::format("{}: {}", where, e.what()));
  }
  return out;
}

const std::vector<OracleCase>& oracle_cases(const std::string& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<OracleCase>> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(dir); it != loaded.end()) return it->second;
  const std::string json_path = dir + "/ops.json", tensors_path = dir + "/ops.safetensors";
  const Json doc = parse_json(read_file(json_path, "oracle"), json_path);
  return loaded.emplace(dir, parse_oracle_cases(doc, ir::read_safetensors(tensors_path), json_path)).first->second;
}

// The case's inputs in dtype d; an operand of role c (any dtype) that the fixture stores in another dtype
// than f32 keeps it (linear_bf16's bf16 weight), as float inputs are stored as f32 values otherwise.
std::vector<TensorView> views_of(const std::vector<Tensor>& ts) {
  std::vector<TensorView> v;
  v.reserve(ts.size());
  for (const auto& t : ts) v.push_back(t.as_view());
  return v;
}

std::vector<Tensor> inputs_in(const OracleCase& c, DType d) {
  const ops::OpInfo& info = ops::op_info(c.op);
  std::vector<Tensor> ins;
  ins.reserve(c.inputs.size());
  for (std::size_t k = 0; k < c.inputs.size(); ++k) {
    const Tensor& t = c.inputs[k];
    const bool as_stored = info.input_role(k) == ops::InputRole::any && t.dtype() != DType::f32;
    ins.push_back(as_stored ? t.as_view().duplicate() : as_dtype(t, d));
  }
  return ins;
}

std::vector<Tensor> updated_state(const kernels::Handler& h, const std::vector<Tensor>& ins,
                                  const ops::Attributes& attrs) {
  const ops::OpInfo& info = ops::op_info(h.op);
  std::vector<Tensor> state;
  std::vector<TensorView> read;
  state.reserve(ins.size());
  for (std::size_t k = 0; k < ins.size(); ++k) {
    if (info.input_role(k) == ops::InputRole::state) {
      state.push_back(ins[k].as_view().duplicate());
    } else {
      read.push_back(ins[k].as_view());
    }
  }
  std::vector<Tensor*> ptrs;
  ptrs.reserve(state.size());
  for (auto& t : state) ptrs.push_back(&t);
  kernels::run_update(h, ptrs, read, attrs);
  return state;
}

std::vector<std::string> oracle_problems(const kernels::Handler& h, const OracleCase& c, DType d,
                                         const ResultTamper* tamper) {
  const ops::OpInfo& info = ops::op_info(c.op);
  const ops::Tolerance fwd = d == DType::f64 ? f64_tolerance() : widen(info.tolerance(d));
  const ops::Tolerance vjp_tol = d == DType::f64 ? f64_tolerance() : widen(info.vjp_tolerance(d));
  std::vector<std::string> found;
  auto check = [&](const std::string& what, const std::vector<double>& got, const Tensor& want, ops::Tolerance t) {
    if (auto p = disagreement(what, got, want.to_doubles(), t)) found.push_back(*p);
  };
  const std::vector<Tensor> ins = inputs_in(c, d);
  if (info.role == ops::OpRole::update) {
    std::vector<Tensor> state = updated_state(h, ins, c.attrs);
    if (tamper != nullptr && tamper->state) tamper->state(state);
    std::vector<double> got, want;
    for (const auto& t : state) {
      const auto v = t.to_doubles();
      got.insert(got.end(), v.begin(), v.end());
    }
    for (const auto& [k, t] : c.states) {
      const auto v = t.to_doubles();
      want.insert(want.end(), v.begin(), v.end());
    }
    if (auto p = disagreement("updated state", got, want, fwd)) found.push_back(*p);
    return found;
  }
  const Tensor y = forward(h, c, ins, tamper);
  if (y.shape() != c.out->shape()) {
    found.push_back("forward shape " + y.shape().to_string() + ", PyTorch's " + c.out->shape().to_string());
    return found;
  }
  if (!is_floating(y.dtype()) && !is_floating(c.out->dtype()) && y.dtype() != DType::boolean) {
    // Integer results compare exactly, as integers (an index or an arange past 2^53 included).
    const auto got = exact_integers(y), want = exact_integers(*c.out);
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i]) {
        found.push_back(fmt::format("forward: element {} is {}, PyTorch's {}", i, got[i], want[i]));
        break;
      }
    }
  } else {
    check("forward", y.to_doubles(), *c.out, fwd);
    // A 16-bit case of a correctly rounded op (Note [16-bit tolerances]): PyTorch's float64 result on the
    // case's 16-bit values, rounded to the dtype, bit for bit (bar an f32 subnormal flushed to zero).
    if (c.half && (d == DType::bf16 || d == DType::f16) && info.correctly_rounded())
      check("forward, correctly rounded", y.to_doubles(), as_dtype(*c.out, d),
            {std::numeric_limits<float>::min(), 0.0});
  }
  if (!c.cot || h.vjp == nullptr) {
    if (c.cot) found.push_back("no VJP, but PyTorch differentiates the op");
    return found;
  }
  const Tensor g = as_dtype(*c.cot, y.dtype());  // the output's dtype (a cast's output need not be d)
  const auto grads = vjp(h, c, ins, y, g, tamper);
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const auto want = c.grads.find(k);
    if (want == c.grads.end()) {
      if (grads[k]) found.push_back("a gradient for input " + std::to_string(k) + ", which is not differentiable");
      continue;
    }
    if (!grads[k]) {
      found.push_back("no gradient for input " + std::to_string(k));
      continue;
    }
    check("VJP input " + std::to_string(k), grads[k]->to_doubles(), want->second, vjp_tol);
  }
  for (const auto& [k, t] : c.grads) {
    if (k >= grads.size()) found.push_back("no gradient for input " + std::to_string(k));
  }
  return found;
}

std::vector<std::string> shape_problems(const kernels::Handler& h, const OracleCase& c, DType d,
                                        const ResultTamper* tamper) {
  std::vector<std::string> found;
  const std::vector<Tensor> ins = inputs_in(c, d);
  std::vector<ops::TensorType> types;
  types.reserve(ins.size());
  for (const auto& t : ins) types.push_back({t.dtype(), t.shape()});
  const ops::TensorType rule = ops::infer_type(c.op, types, c.attrs);
  if (ops::op_info(c.op).role == ops::OpRole::update) {
    // An update op's result is its first state operand, updated in place: the rule names its type.
    std::vector<Tensor> state = updated_state(h, ins, c.attrs);
    if (tamper != nullptr && tamper->state) tamper->state(state);
    const auto& first = c.states.begin()->second;
    if (rule.shape != first.shape())
      found.push_back(fmt::format("the shape rule infers {}, PyTorch's new state is {}", rule.shape.to_string(),
                                  first.shape().to_string()));
    std::size_t k = 0;
    for (const auto& [operand, want] : c.states) {
      if (k >= state.size()) break;
      const Tensor& before = ins[operand];
      if (state[k].shape() != before.shape() || state[k].dtype() != before.dtype())
        found.push_back(fmt::format("state {} changed type: {} {} -> {} {}", k, dtype_name(before.dtype()),
                                    before.shape().to_string(), dtype_name(state[k].dtype()),
                                    state[k].shape().to_string()));
      ++k;
    }
    if (k != c.states.size() || k != state.size())
      found.push_back(fmt::format("{} state operands updated, PyTorch updates {}", state.size(), c.states.size()));
    return found;
  }
  if (rule.shape != c.out->shape())
    found.push_back(fmt::format("the shape rule infers {}, PyTorch's result is {}", rule.shape.to_string(),
                                c.out->shape().to_string()));
  if (is_floating(rule.dtype) != is_floating(c.out->dtype()) ||
      (rule.dtype == DType::boolean) != (c.out->dtype() == DType::boolean))
    found.push_back(fmt::format("the shape rule infers {}, PyTorch's result is {}", dtype_name(rule.dtype),
                                dtype_name(c.out->dtype())));
  const Tensor y = forward(h, c, ins, tamper);
  if (y.shape() != rule.shape || y.dtype() != rule.dtype)
    found.push_back(fmt::format("the kernel returned {} {}, the shape rule infers {} {}", dtype_name(y.dtype()),
                                y.shape().to_string(), dtype_name(rule.dtype), rule.shape.to_string()));
  return found;
}

std::optional<std::vector<std::string>> fd_vjp_problems(const kernels::Handler& h, const OracleCase& c, DType d,
                                                        std::uint64_t seed, const ResultTamper* tamper) {
  if (!c.cot || c.grads.empty() || h.vjp == nullptr || c.kinks) return std::nullopt;
  PACT_CHECK(d == DType::f64 || d == DType::f32, invalid_argument, "oracle.fd_vjp",
             fmt::format("finite differences run in f64 or f32, not {}", dtype_name(d)));
  const double step = d == DType::f64 ? 1e-6 : 1e-3;
  const double margin = d == DType::f64 ? 1e-5 : 3e-2;
  const double eps = d == DType::f64 ? std::numeric_limits<double>::epsilon() : 6e-8;
  std::vector<std::string> found;
  const std::vector<Tensor> ins = inputs_in(c, d);
  const Tensor y = forward(h, c, ins, tamper);
  const Tensor g = as_dtype(*c.cot, y.dtype());
  const auto grads = vjp(h, c, ins, y, g, tamper);
  // x+ and x-: each differentiable input moved along a random direction by `step` relative to its size.
  std::mt19937_64 rng(seed ^ std::hash<std::string>{}(c.id));
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<Tensor> plus = inputs_in(c, d), minus = inputs_in(c, d);
  double predicted = 0, predicted_size = 0;
  for (const auto& [k, want] : c.grads) {
    if (k >= grads.size() || !grads[k]) {
      found.push_back("no gradient for input " + std::to_string(k));
      continue;
    }
    auto x = ins[k].to_doubles(), xp = x, xm = x;
    const auto truth = want.to_doubles();
    for (std::size_t i = 0; i < x.size(); ++i) {
      // An element whose derivative PyTorch finds undefined (a negative base's exponent) is not moved.
      const double delta = std::isfinite(truth[i]) ? step * unit(rng) * std::max(1.0, std::abs(x[i])) : 0.0;
      xp[i] += delta;
      xm[i] -= delta;
    }
    plus[k] = Tensor::from_values<double>(ins[k].shape(), xp).convert(d);
    minus[k] = Tensor::from_values<double>(ins[k].shape(), xm).convert(d);
    // The step as stored in d: what the forward differences actually see.
    const auto sp = plus[k].to_doubles(), sm = minus[k].to_doubles();
    std::vector<double> moved(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) moved[i] = sp[i] - sm[i];
    const auto gk = grads[k]->to_doubles();
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (moved[i] == 0.0) continue;  // unmoved: its gradient (perhaps NaN) takes no part
      predicted += gk[i] * moved[i];
      predicted_size += std::abs(gk[i] * moved[i]);
    }
  }
  if (!found.empty()) return found;
  const auto gv = g.to_doubles(), truth = c.out->to_doubles();
  const auto fp = forward(h, c, plus, tamper).to_doubles(), fm = forward(h, c, minus, tamper).to_doubles();
  if (fp.size() != gv.size() || fm.size() != gv.size() || truth.size() != gv.size()) {
    found.push_back(fmt::format("the perturbed forwards have {} and {} elements, the cotangent {}", fp.size(),
                                fm.size(), gv.size()));
    return found;
  }
  double measured = 0, rounding = 0;
  for (std::size_t i = 0; i < fp.size(); ++i) {
    if (!std::isfinite(truth[i])) continue;  // PyTorch's value is not finite either: no difference to take
    measured += gv[i] * (fp[i] - fm[i]);
    rounding += std::abs(gv[i]) * (std::abs(fp[i]) + std::abs(fm[i])) * eps * 8;
  }
  const double tolerance = margin * predicted_size + rounding + 1e-300;
  if (!(std::abs(measured - predicted) <= tolerance)) {
    found.push_back(
        fmt::format("<g, f(x+) - f(x-)> is {:.9g}, the VJP predicts {:.9g} (difference {:.3g}, margin {:.3g}, step {})",
                    measured, predicted, std::abs(measured - predicted), tolerance, step));
  }
  return found;
}

std::vector<std::string> random_mask_problems(const kernels::Handler& h, DType d, std::uint64_t seed,
                                              const ResultTamper* tamper) {
  const ops::OpInfo& info = ops::op_info(h.op);
  const ops::Tolerance fwd = d == DType::f64 ? f64_tolerance() : widen(info.tolerance(d));
  const ops::Tolerance back = d == DType::f64 ? f64_tolerance() : widen(info.vjp_tolerance(d));
  std::vector<std::string> found;
  // 37 rows of 111 (odd, so every vector tail is crossed), nonzero values of either sign, so a dropped
  // element is the only 0.
  constexpr std::int64_t rows = 37, cols = 111, n = rows * cols;
  std::mt19937_64 rng(seed ^ 0x6d61736bULL);
  std::uniform_real_distribution<double> size(0.5, 2.0), unit(-1.0, 1.0);
  std::vector<double> xv(n), gv(n);
  for (std::int64_t i = 0; i < n; ++i) {
    xv[i] = (rng() & 1u ? -1.0 : 1.0) * size(rng);
    gv[i] = unit(rng);
  }
  const Tensor x = Tensor::from_values<double>(Dims{rows, cols}, xv).convert(d);
  const Tensor g = Tensor::from_values<double>(Dims{rows, cols}, gv).convert(d);
  const auto xs = x.to_doubles(), gs = g.to_doubles();  // as stored in d
  const std::vector<TensorView> ins{x.as_view()};
  auto run = [&](const ops::Attributes& attrs, const kernels::KernelContext& ctx) {
    Tensor y = kernels::run_forward(h, ins, attrs, ctx);
    if (tamper != nullptr && tamper->forward) tamper->forward(y);
    auto grads = kernels::run_vjp(h, ins, y.as_view(), g.as_view(), attrs, ctx);
    if (tamper != nullptr && tamper->vjp) tamper->vjp(grads);
    return std::pair{std::move(y), std::move(grads)};
  };
  auto agree = [&](const std::string& what, const std::vector<double>& got, const std::vector<double>& want,
                   ops::Tolerance t) {
    if (auto p = disagreement(what, got, want, t, "the rule's")) found.push_back(*p);
  };
  // p unset (nullopt): PyTorch's default, 0.5.
  for (const std::optional<double> given : {std::optional<double>{}, {0.0}, {0.2}, {0.5}, {0.9}, {1.0}}) {
    const double p = given.value_or(0.5);
    ops::Attributes attrs;
    if (given) attrs.set("p", p);
    const std::string at = given ? fmt::format("p = {}", p) : std::string("p unset (0.5)");
    // Evaluation: the identity, forward and back.
    {
      auto [y, grads] = run(attrs, kernels::KernelContext{false, seed});
      agree(at + ", evaluation: the result", y.to_doubles(), xs, fwd);
      if (grads.empty() || !grads[0]) {
        found.push_back(at + ", evaluation: no gradient for x");
      } else {
        agree(at + ", evaluation: the gradient", grads[0]->to_doubles(), gs, back);
      }
    }
    // Training: each result 0 or x / (1 - p); the mask's statistics; the VJP through the same mask.
    const kernels::KernelContext ctx{true, seed};
    auto [y, grads] = run(attrs, ctx);
    if (y.shape() != x.shape() || y.dtype() != d) {
      found.push_back(fmt::format("{}, training: the result is {} {}, x is {} {}", at, dtype_name(y.dtype()),
                                  y.shape().to_string(), dtype_name(d), x.shape().to_string()));
      continue;
    }
    const auto ys = y.to_doubles();
    const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
    std::vector<double> want_y(n), want_g(n);
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const bool keep = ys[i] != 0.0;
      kept += keep ? 1 : 0;
      want_y[i] = keep ? xs[i] * scale : 0.0;
      want_g[i] = keep ? gs[i] * scale : 0.0;
    }
    agree(at + ", training: a kept value", ys, want_y, fwd);
    const double mean = static_cast<double>(n) * (1.0 - p), sd = std::sqrt(static_cast<double>(n) * p * (1.0 - p));
    if (std::abs(static_cast<double>(kept) - mean) > 5.0 * sd)
      found.push_back(fmt::format("{}, training: {} of {} values kept, {} expected (5 standard deviations: {:.1f})", at,
                                  kept, n, mean, 5.0 * sd));
    if (grads.empty() || !grads[0]) {
      found.push_back(at + ", training: no gradient for x");
    } else {
      agree(at + ", training: the gradient through the forward's mask", grads[0]->to_doubles(), want_g, back);
    }
    const auto again = run(attrs, ctx).first.to_doubles();
    if (again != ys) found.push_back(at + ", training: the same seed gave another result");
    if (p > 0.0 && p < 1.0) {
      const auto other = run(attrs, kernels::KernelContext{true, seed + 1}).first.to_doubles();
      std::int64_t moved = 0;
      for (std::int64_t i = 0; i < n && i < static_cast<std::int64_t>(other.size()); ++i)
        moved += (other[i] != 0.0) != (ys[i] != 0.0) ? 1 : 0;
      if (moved == 0) found.push_back(at + ", training: another seed gave the same mask");
    }
  }
  return found;
}

}  // namespace pact::verify
