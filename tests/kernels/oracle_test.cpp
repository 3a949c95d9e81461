// The op oracle (issue 20 item 1): every provider's kernels against PyTorch's float64 values, which
// tools/op_oracle.py computed with torch.nn.functional and torch.optim and stored in contracts/oracle (read
// and compared by pact/verify/oracle.hpp, which the generic contract checks share). Nothing here computes
// an expected value with Pact's code, so a kernel that is deterministic and wrong fails (OpOracle.RefutesAWrongKernel
// shows it). The capsules cite these tests for their forward-value and VJP claims (pact/contract/provider_table.cpp);
// determinism has its own test.

#include "pact/verify/oracle.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "pact/core/cpu.hpp"
#include "sweep_util.hpp"

namespace pact {
namespace {

using namespace pact::test;
using kernels::KernelContext;

const std::string kFixture = verify::oracle_dir_of(std::string(PACT_SOURCE_DIR) + "/contracts");

using verify::OracleCase;

const std::vector<OracleCase>& oracle_cases() { return verify::oracle_cases(kFixture); }

// Every disagreement of handler `h` with the oracle on case `c`, run in dtype `d`; empty when it agrees.
std::vector<std::string> problems(const kernels::Handler& h, const OracleCase& c, DType d) {
  return verify::oracle_problems(h, c, d);
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

// Training-mode dropout draws its mask from the seed, so no PyTorch value can be its oracle; the contract's
// random_mask check holds it to what every mask satisfies instead (verify::random_mask_problems). Every
// provider's dropout passes in each float dtype it computes. So does a dropout written here with another
// random generator (the check accepts any fair mask, not Pact's), and each mistake made in it is refuted.
enum class DropoutMistake { none, unscaled, half_rate, seedless, vjp_other_seed };

template <DropoutMistake M>
Tensor written_dropout_of(const TensorView& x, const ops::Attributes& a, const KernelContext& ctx, std::uint64_t seed) {
  const double p = a.get_float("dropout", "p", 0.5);
  std::vector<double> v = values_of(x);
  if (!ctx.training || p == 0.0) return Tensor::from_values<double>(x.shape(), v).convert(x.dtype());
  const double drawn_p = M == DropoutMistake::half_rate ? p / 2 : p;
  const double scale = p >= 1.0 ? 0.0 : M == DropoutMistake::unscaled ? 1.0 : 1.0 / (1.0 - p);
  if (M == DropoutMistake::seedless) seed = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (i + 1) * 0xd1b54a32d192ed03ULL;  // splitmix64's finalizer
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    v[i] = static_cast<double>(z >> 11) * 0x1p-53 >= drawn_p ? v[i] * scale : 0.0;
  }
  return Tensor::from_values<double>(x.shape(), v).convert(x.dtype());
}
template <DropoutMistake M>
Tensor written_dropout(std::span<const TensorView> in, const ops::Attributes& a, const KernelContext& ctx) {
  return written_dropout_of<M>(in[0], a, ctx, ctx.seed);
}
template <DropoutMistake M>
std::vector<std::optional<Tensor>> written_dropout_vjp(std::span<const TensorView>, const TensorView&,
                                                       const TensorView& g, const ops::Attributes& a,
                                                       const KernelContext& ctx) {
  std::vector<std::optional<Tensor>> r;
  r.emplace_back(written_dropout_of<M>(g, a, ctx, ctx.seed + (M == DropoutMistake::vjp_other_seed ? 1 : 0)));
  return r;
}
template <DropoutMistake M>
kernels::Handler written_dropout_handler() {
  kernels::Handler h = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::dropout);
  h.forward = &written_dropout<M>;
  h.vjp = &written_dropout_vjp<M>;
  return h;
}

TEST(OpOracle, RandomMaskHoldsDropoutToWhatEveryMaskSatisfies) {
  for (auto handlers : {kernels::reference_handlers(), kernels::native_handlers()}) {
    const kernels::Handler& h = *kernels::find_handler(handlers, ops::OpTag::dropout);
    for (DType d : {DType::f32, DType::f64}) {
      SCOPED_TRACE(std::string(h.provider) + " " + std::string(dtype_name(d)));
      const auto found = verify::random_mask_problems(h, d, 11);
      EXPECT_TRUE(found.empty()) << found.front();
    }
  }
  EXPECT_TRUE(verify::random_mask_problems(written_dropout_handler<DropoutMistake::none>(), DType::f32, 11).empty());
  const std::pair<kernels::Handler, std::string> wrong[] = {
      {written_dropout_handler<DropoutMistake::unscaled>(), "training: a kept value"},
      {written_dropout_handler<DropoutMistake::half_rate>(), "values kept"},
      {written_dropout_handler<DropoutMistake::seedless>(), "another seed gave the same mask"},
      {written_dropout_handler<DropoutMistake::vjp_other_seed>(), "the gradient through the forward's mask"},
  };
  for (const auto& [h, says] : wrong) {
    SCOPED_TRACE(says);
    const auto found = verify::random_mask_problems(h, DType::f32, 11);
    ASSERT_FALSE(found.empty());
    EXPECT_NE(found.front().find(says), std::string::npos) << found.front();
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

// The reference GELU and sigmoid, and each made wrong: GELU's forward by the tanh approximation, sigmoid's
// VJP 0.1% too large.
struct WrongKernels {
  const kernels::Handler& gelu = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::gelu);
  const kernels::Handler& sigmoid = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::sigmoid);
  kernels::Handler wrong_gelu = with_forward(gelu, &gelu_tanh_forward);
  kernels::Handler wrong_sigmoid = with_vjp(sigmoid, &sigmoid_vjp_too_large);
  static kernels::Handler with_forward(kernels::Handler h, kernels::ForwardFn f) {
    h.forward = f;
    return h;
  }
  static kernels::Handler with_vjp(kernels::Handler h, kernels::VjpFn f) {
    h.vjp = f;
    return h;
  }
};

TEST(OpOracle, RefutesAWrongKernel) {
  const WrongKernels k;
  const auto &gelu = k.gelu, &sigmoid = k.sigmoid, &wrong_gelu = k.wrong_gelu, &wrong_sigmoid = k.wrong_sigmoid;
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

// The generic contract checks refute wrong kernels, not only the tampered results of the gates' mutants:
// finite differences catch a sigmoid VJP 0.1% too large and the exact GELU's VJP beside a tanh-approximated
// forward (both in f64, where the margin is 1e-5), and the shape check catches a rule that disagrees with
// PyTorch's result shape (here PyTorch's shape is the one changed, which is what a wrong rule looks like).
TEST(OpOracle, GenericChecksRefuteWrongKernels) {
  const WrongKernels k;
  const auto &gelu = k.gelu, &sigmoid = k.sigmoid, &wrong_gelu = k.wrong_gelu, &wrong_sigmoid = k.wrong_sigmoid;
  int differenced = 0, reshaped = 0;
  for (const auto& c : oracle_cases()) {
    SCOPED_TRACE(c.describe());
    if (c.op == ops::OpTag::sigmoid) {
      EXPECT_TRUE(verify::fd_vjp_problems(sigmoid, c, DType::f64, 5)->empty());
      const auto found = verify::fd_vjp_problems(wrong_sigmoid, c, DType::f64, 5);
      ASSERT_TRUE(found.has_value());
      EXPECT_EQ(found->size(), 1u);
      ++differenced;
    }
    if (c.op == ops::OpTag::gelu && c.attrs.get_string("gelu", "approximate", std::string("none")) == "none") {
      EXPECT_TRUE(verify::fd_vjp_problems(gelu, c, DType::f64, 5)->empty());
      EXPECT_FALSE(verify::fd_vjp_problems(wrong_gelu, c, DType::f64, 5)->empty());
      ++differenced;
    }
    if (c.op == ops::OpTag::sum) {
      const kernels::Handler& h = *kernels::find_handler(kernels::native_handlers(), c.op);
      EXPECT_TRUE(verify::shape_problems(h, c, DType::f32).empty());
      verify::OracleCase other;
      other.id = c.id;
      other.op = c.op;
      other.attrs = c.attrs;
      for (const auto& t : c.inputs) other.inputs.push_back(t.duplicate());
      Dims lifted{2};
      for (auto e : c.out->shape()) lifted.push_back(e);
      other.out = Tensor::from_values<double>(lifted, std::vector<double>(2 * c.out->numel(), 0.0));
      const auto found = verify::shape_problems(h, other, DType::f32);
      ASSERT_FALSE(found.empty());
      EXPECT_NE(found.front().find("the shape rule infers"), std::string::npos) << found.front();
      ++reshaped;
    }
  }
  EXPECT_GT(differenced, 2);
  EXPECT_GT(reshaped, 0);
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
