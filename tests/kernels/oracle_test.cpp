// The op oracle (issue 20 item 1): every provider's kernels against PyTorch's float64 values, which
// tools/op_oracle.py computed with torch.nn.functional and torch.optim and stored in
// tests/fixtures/oracle. Nothing here computes an expected value with Pact's code, so a kernel that is
// deterministic and wrong fails (OpOracle.RefutesAWrongKernel shows it). The capsules cite these tests for
// their forward-value and VJP claims (pact/contract/provider_table.cpp); determinism has its own test.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "pact/core/cpu.hpp"
#include "pact/core/file.hpp"
#include "pact/core/json.hpp"
#include "pact/ir/graph.hpp"
#include "pact/ir/safetensors.hpp"
#include "sweep_util.hpp"

namespace pact {
namespace {

using namespace pact::test;
using kernels::KernelContext;

const std::string kFixture = std::string(PACT_SOURCE_DIR) + "/tests/fixtures/oracle";

// One case of the fixture: the op, its attributes and mode, the inputs, and what PyTorch computed.
struct OracleCase {
  std::string id, label;
  ops::OpTag op{};
  ops::Attributes attrs;
  bool training = false;
  bool half = false;                     // a half provider case: float inputs and cotangent are bf16 values
  std::vector<Tensor> inputs;            // float inputs in f32 (their values are float32 numbers), others as stored
  std::optional<Tensor> out, cot;        // forward and the VJP's cotangent (kernel ops)
  std::map<std::size_t, Tensor> grads;   // per differentiable input: PyTorch's gradient (f64)
  std::map<std::size_t, Tensor> states;  // update ops: each state operand's new value (f64)
  std::string describe() const {
    return std::string(ops::op_kind(op)) + " " + id + (label.empty() ? "" : " [" + label + "]");
  }
};

const std::vector<OracleCase>& oracle_cases() {
  static const std::vector<OracleCase> cases = [] {
    const Json doc = parse_json(read_file(kFixture + "/ops.json", "oracle"), "ops.json");
    const ir::SafetensorsFile st = ir::read_safetensors(kFixture + "/ops.safetensors");
    auto take = [&](const std::string& name) -> Tensor {
      const Tensor* t = st.find(name);
      if (t == nullptr) throw_error(ErrorCode::parse_error, "oracle", "ops.safetensors has no tensor '" + name + "'");
      return t->as_view().duplicate();
    };
    std::vector<OracleCase> out;
    for (const Json& j : doc.at("cases")) {
      OracleCase c;
      c.id = j.at("id").get<std::string>();
      c.label = j.at("label").get<std::string>();
      c.op = ops::parse_op_kind(j.at("op").get<std::string>());
      c.attrs = ir::attributes_from_json(j.at("attrs"), "ops.json", c.id + ".attrs");
      c.training = j.at("training").get<bool>();
      c.half = j.contains("half") && j.at("half").get<bool>();
      for (std::int64_t k = 0; k < j.at("inputs").get<std::int64_t>(); ++k)
        c.inputs.push_back(take(c.id + ".in" + std::to_string(k)));
      const bool update = ops::op_info(c.op).role == ops::OpRole::update;
      if (!update) c.out = take(c.id + ".out");
      for (const Json& k : j.at("grads"))
        c.grads.emplace(k.get<std::size_t>(), take(c.id + ".grad" + std::to_string(k.get<std::size_t>())));
      if (!c.grads.empty()) c.cot = take(c.id + ".cot");
      for (const Json& k : j.at("states"))
        c.states.emplace(k.get<std::size_t>(), take(c.id + ".state" + std::to_string(k.get<std::size_t>())));
      out.push_back(std::move(c));
    }
    return out;
  }();
  return cases;
}

// A float tensor in dtype `d`; indices and masks as they are.
Tensor as_dtype(const Tensor& t, DType d) {
  return is_floating(t.dtype()) && t.dtype() != d ? t.as_view().convert(d) : t.as_view().duplicate();
}

// Oracle tolerances. In f64 a kernel agrees with PyTorch's f64 to rounding. In f32 the op table's
// tolerance (which bounds implementation-defined against fixed-left f32 results) with a floor of a few
// float32 ulps, since the truth here is f64 and an "exact" f32 op still rounds its result once.
ops::Tolerance f64_tolerance() { return {1e-10, 1e-9}; }
ops::Tolerance widen(ops::Tolerance t) { return {std::max(t.abs, 1e-6), std::max(t.rel, 1e-6)}; }

// Every disagreement of handler `h` with the oracle on case `c`, run in dtype `d`; empty when it agrees.
std::vector<std::string> problems(const kernels::Handler& h, const OracleCase& c, DType d) {
  const ops::OpInfo& info = ops::op_info(c.op);
  const ops::Tolerance fwd = d == DType::f64 ? f64_tolerance() : widen(info.tolerance(d));
  const ops::Tolerance vjp = d == DType::f64 ? f64_tolerance() : widen(info.vjp_tolerance(d));
  std::vector<std::string> found;
  auto check = [&](const std::string& what, const std::vector<double>& got, const Tensor& want, ops::Tolerance t) {
    const auto r = close(got, values_of(want.as_view()), t);
    if (!r) found.push_back(what + ": " + r.message());
  };
  std::vector<Tensor> ins;
  for (const auto& t : c.inputs) ins.push_back(as_dtype(t, d));
  if (info.role == ops::OpRole::update) {
    const auto got = updated_state(h, ins, c.attrs);
    std::vector<double> want;
    for (const auto& [k, t] : c.states) {
      const auto v = values_of(t.as_view());
      want.insert(want.end(), v.begin(), v.end());
    }
    const auto r = close(got, want, fwd);
    if (!r) found.push_back("updated state: " + std::string(r.message()));
    return found;
  }
  const KernelContext ctx{c.training, 7};
  Tensor y = kernels::run_forward(h, views_of(ins), c.attrs, ctx);
  if (y.shape() != c.out->shape()) {
    found.push_back("forward shape " + y.shape().to_string() + ", PyTorch's " + c.out->shape().to_string());
    return found;
  }
  check("forward", values_of(y.as_view()), *c.out, fwd);
  if (!c.cot || h.vjp == nullptr) {
    if (c.cot) found.push_back("no VJP, but PyTorch differentiates the op");
    return found;
  }
  const Tensor g = as_dtype(*c.cot, y.dtype());  // the output's dtype (a cast's output need not be d)
  const auto grads = kernels::run_vjp(h, views_of(ins), y.as_view(), g.as_view(), c.attrs, ctx);
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
    check("VJP input " + std::to_string(k), values_of(grads[k]->as_view()), want->second, vjp);
  }
  return found;
}

// Runs every case that `handlers` covers (only the half cases when `half_only`) and reports each
// disagreement; returns how many cases ran.
int expect_oracle(std::span<const kernels::Handler> handlers, DType d, const std::string& name,
                  bool half_only = false) {
  int ran = 0;
  for (const auto& c : oracle_cases()) {
    if (half_only && !c.half) continue;
    const kernels::Handler* h = kernels::find_handler(handlers, c.op);
    if (h == nullptr) continue;
    for (const auto& p : problems(*h, c, d)) ADD_FAILURE() << name << " " << c.describe() << ": " << p;
    ++ran;
  }
  return ran;
}

TEST(OpOracle, CoversEveryOpWithAKernel) {
  std::set<ops::OpTag> covered;
  for (const auto& c : oracle_cases()) covered.insert(c.op);
  for (const auto& h : kernels::reference_handlers())
    EXPECT_TRUE(covered.count(h.op)) << "no oracle case for " << ops::op_kind(h.op)
                                     << ": add one to tools/op_oracle.py";
  // Every differentiable op's cases include one that checks its VJP.
  for (const auto& op : ops::op_table()) {
    if (!op.has_vjp || !covered.count(op.tag)) continue;
    bool vjp = false;
    for (const auto& c : oracle_cases()) vjp = vjp || (c.op == op.tag && c.cot.has_value());
    EXPECT_TRUE(vjp) << "no oracle case checks the VJP of " << op.kind;
  }
  // Every op of the half provider has a case with 16-bit inputs, and one that checks its VJP.
  for (const auto& h : kernels::half_handlers()) {
    bool forward = false, vjp = false;
    for (const auto& c : oracle_cases()) {
      forward = forward || (c.half && c.op == h.op);
      vjp = vjp || (c.half && c.op == h.op && c.cot.has_value());
    }
    EXPECT_TRUE(forward && (vjp || h.vjp == nullptr))
        << "no half case (with a VJP) for " << ops::op_kind(h.op) << ": add one to tools/op_oracle.py";
  }
}

TEST(OpOracle, ReferenceMatchesPyTorchFloat64) {
  EXPECT_EQ(expect_oracle(kernels::reference_handlers(), DType::f64, "reference f64"),
            static_cast<int>(oracle_cases().size()));
  EXPECT_EQ(expect_oracle(kernels::reference_handlers(), DType::f32, "reference f32"),
            static_cast<int>(oracle_cases().size()));
}

// Calls f(level) at every ISA level this CPU runs, the active level forced to it; says which it skips.
template <class F>
void at_every_level(const char* provider, F&& f) {
  for (Isa level : kIsaLevels) {
    ScopedIsa forced(level);
    if (!forced.active()) {
      std::printf("[ skipped  ] %s at %s: this CPU (%s) runs at most %s\n", provider,
                  std::string(isa_name(level)).c_str(), cpu_facts().model.c_str(),
                  std::string(isa_name(cpu_facts().best)).c_str());
      continue;
    }
    f(level);
  }
}

// The native provider at every ISA level this CPU runs (each variant of its SIMD kernels), on cases that
// cross the vector widths and blocking boundaries (rows of 37, a 17 x 33 x 19 product, a 2304-long patch).
TEST(OpOracle, NativeMatchesPyTorchFloat64) {
  EXPECT_EQ(expect_oracle(kernels::native_handlers(), DType::f32, "native"), static_cast<int>(oracle_cases().size()));
  at_every_level("native", [](Isa level) {
    expect_oracle(kernels::native_handlers(), DType::f32, "native " + std::string(isa_name(level)));
  });
}

// The half provider in bf16 and f16 at every ISA level this CPU runs, on the cases whose inputs are 16-bit
// values, within the op table's 16-bit tolerances (Note [16-bit tolerances]).
TEST(OpOracle, HalfMatchesPyTorchFloat64) {
  const int half_cases = static_cast<int>(
      std::count_if(oracle_cases().begin(), oracle_cases().end(), [](const OracleCase& c) { return c.half; }));
  ASSERT_GE(half_cases, static_cast<int>(kernels::half_handlers().size()));
  at_every_level("half", [&](Isa level) {
    for (DType d : {DType::bf16, DType::f16}) {
      const std::string name = "half " + std::string(dtype_name(d)) + " " + std::string(isa_name(level));
      EXPECT_EQ(expect_oracle(kernels::half_handlers(), d, name, true), half_cases) << name;
    }
  });
}

TEST(OpOracle, BlasMatchesPyTorchFloat64) {
  EXPECT_GT(expect_oracle(kernels::blas_handlers(), DType::f32, "blas"), 20);
}

// Training-mode dropout draws its mask from the seed, so no PyTorch value can be its oracle; its definition
// is checked instead: each element is 0 or x / (1 - p), and the VJP scales the cotangent by the same mask.
TEST(OpOracle, DropoutTrainingKeepsOrZeroesEachElement) {
  const double p = 0.3;
  const ops::Attributes attrs{{"p", p}};
  std::mt19937 rng(3);
  const Tensor x = make_input(N({64, 33}), DType::f32, rng);
  const Tensor g = make_input(N({64, 33}), DType::f32, rng);
  for (auto handlers : {kernels::reference_handlers(), kernels::native_handlers()}) {
    const kernels::Handler& h = *kernels::find_handler(handlers, ops::OpTag::dropout);
    SCOPED_TRACE(std::string(h.provider));
    const KernelContext ctx{true, 11};
    const Tensor y = kernels::run_forward(h, std::vector<TensorView>{x.as_view()}, attrs, ctx);
    const auto gx = kernels::run_vjp(h, std::vector<TensorView>{x.as_view()}, y.as_view(), g.as_view(), attrs, ctx);
    const auto xv = values_of(x.as_view()), yv = values_of(y.as_view()), gv = values_of(g.as_view());
    const auto dv = values_of(gx[0]->as_view());
    std::size_t dropped = 0;
    for (std::size_t i = 0; i < xv.size(); ++i) {
      const bool kept = yv[i] != 0.0;
      dropped += kept ? 0 : 1;
      const double scale = kept ? 1.0 / (1.0 - p) : 0.0;
      ASSERT_NEAR(yv[i], xv[i] * scale, 1e-6 * std::abs(xv[i] * scale)) << i;
      ASSERT_NEAR(dv[i], gv[i] * scale, 1e-6 * std::abs(gv[i] * scale)) << i;
    }
    const double rate = static_cast<double>(dropped) / static_cast<double>(xv.size());
    EXPECT_NEAR(rate, p, 0.05) << "dropped " << dropped << " of " << xv.size();
  }
}

// A wrong kernel that is deterministic (which the determinism test accepts) is refuted: GELU's tanh
// approximation served for the exact GELU, and a sigmoid whose VJP is 0.1% too large. The correct
// kernels pass the same check.
Tensor gelu_tanh_forward(std::span<const TensorView> in, const ops::Attributes&, const KernelContext& ctx) {
  const kernels::Handler& gelu = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::gelu);
  return gelu.forward(in, ops::Attributes{{"approximate", std::string("tanh")}}, ctx);
}
std::vector<std::optional<Tensor>> sigmoid_vjp_too_large(std::span<const TensorView> in, const TensorView& y,
                                                         const TensorView& g, const ops::Attributes& a,
                                                         const KernelContext& ctx) {
  const kernels::Handler& sig = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::sigmoid);
  const Tensor g2 = g.convert(DType::f64);
  std::vector<double> v = values_of(g2.as_view());
  for (auto& e : v) e *= 1.001;
  const Tensor scaled = Tensor::from_values<double>(g.shape(), std::span<const double>(v)).convert(g.dtype());
  return sig.vjp(in, y, scaled.as_view(), a, ctx);
}

TEST(OpOracle, RefutesAWrongKernel) {
  const kernels::Handler& gelu = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::gelu);
  const kernels::Handler& sigmoid = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::sigmoid);
  kernels::Handler wrong_gelu = gelu;
  wrong_gelu.forward = &gelu_tanh_forward;
  kernels::Handler wrong_sigmoid = sigmoid;
  wrong_sigmoid.vjp = &sigmoid_vjp_too_large;
  int refuted_gelu = 0, refuted_sigmoid = 0;
  for (const auto& c : oracle_cases()) {
    SCOPED_TRACE(c.describe());
    if (c.op == ops::OpTag::gelu) {
      EXPECT_TRUE(problems(gelu, c, DType::f32).empty());
      const auto found = problems(wrong_gelu, c, DType::f32);
      const bool exact = c.attrs.get_string("gelu", "approximate", std::string("none")) == "none";
      EXPECT_EQ(!found.empty(), exact);  // on the tanh case the substitute is the right kernel
      if (exact) {
        ASSERT_FALSE(found.empty());
        EXPECT_NE(found.front().find("forward"), std::string::npos) << found.front();
        // Deterministic: two runs agree bit for bit, which is all a determinism test can see.
        const std::vector<TensorView> in{c.inputs[0].as_view()};
        EXPECT_EQ(values_of(wrong_gelu.forward(in, c.attrs, {}).as_view()),
                  values_of(wrong_gelu.forward(in, c.attrs, {}).as_view()));
      }
      refuted_gelu += exact ? 1 : 0;
    }
    if (c.op == ops::OpTag::sigmoid) {
      EXPECT_TRUE(problems(sigmoid, c, DType::f64).empty());
      const auto found = problems(wrong_sigmoid, c, DType::f64);
      ASSERT_EQ(found.size(), 1u);
      EXPECT_NE(found.front().find("VJP input 0"), std::string::npos) << found.front();
      ++refuted_sigmoid;
    }
  }
  EXPECT_GT(refuted_gelu, 0);
  EXPECT_GT(refuted_sigmoid, 0);
}

// The fixture is the generator's output: every case names a known op, has its inputs and the values the
// test compares, and each gradient's shape is its input's.
TEST(OpOracle, FixtureIsWellFormed) {
  ASSERT_GT(oracle_cases().size(), 100u);
  std::set<std::string> ids;
  for (const auto& c : oracle_cases()) {
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(ids.insert(c.id).second) << "duplicate id";
    const auto& info = ops::op_info(c.op);
    EXPECT_GE(static_cast<int>(c.inputs.size()), info.min_arity);
    for (const auto& [k, g] : c.grads) {
      ASSERT_LT(k, c.inputs.size());
      EXPECT_EQ(g.shape(), c.inputs[k].shape());
      EXPECT_EQ(g.dtype(), DType::f64);
    }
    if (info.role == ops::OpRole::update) {
      EXPECT_FALSE(c.states.empty());
    } else if (is_floating(c.out->dtype()) && !c.attrs.has("dtype") && !c.inputs.empty()) {
      EXPECT_EQ(c.out->dtype(), DType::f64);  // an op that makes or names its dtype (arange, cast) keeps it
    }
  }
}

}  // namespace
}  // namespace pact
