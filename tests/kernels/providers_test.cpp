// Differential tests: native and blas against the reference provider on every sample, with the op
// table's tolerance; GEMM variants on odd, unit, empty and transposed sizes; reference determinism
// across thread counts.

#include <gtest/gtest.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <thread>

#include "pact/core/cpu.hpp"
#include "pact/core/simd_dispatch.hpp"
#include "pact/kernels/cpu/common.hpp"
#include "pact/kernels/cpu/fast_math.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/cpu/vector_ops.hpp"
#include "sweep_util.hpp"

namespace pact {
namespace {

using namespace pact::test;
using kernels::KernelContext;

// Tests run once per ISA level (portable, avx2, avx512): the level is forced for the test's duration.
class EveryLevel : public ::testing::TestWithParam<Isa> {};
INSTANTIATE_TEST_SUITE_P(Isa, EveryLevel, ::testing::ValuesIn(kIsaLevels),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

// Forces a level for a scope; why() says why a level could not be forced.
// The level the sgemm family runs at when `level` is active (a family without a variant at a level runs the
// one below: sgemm has none at avx512_bf16).
std::string sgemm_level(Isa level) {
  for (const auto& f : simd::families())
    if (f.name == "sgemm") return std::string(isa_name(f.serves(level)));
  return "no sgemm family";
}

class ForcedLevel {
 public:
  explicit ForcedLevel(Isa level) : scope_(level), level_(level) {}
  bool active() const { return scope_.active(); }
  std::string why() const {
    return "this CPU (" + cpu_facts().model + ") cannot run " + std::string(isa_name(level_)) + "; it runs at most " +
           std::string(isa_name(cpu_facts().best));
  }

 private:
  ScopedIsa scope_;
  Isa level_;
};

// Compares `candidate` with `baseline` (the reference provider unless given) on every sample it covers
// (verify::sweep_problems: forward, strided inputs, VJP, an update op's new state).
void compare_provider(std::span<const kernels::Handler> candidate, std::string_view name,
                      std::span<const kernels::Handler> baseline = kernels::reference_handlers()) {
  std::mt19937 rng(99);
  int compared = 0;
  for (const auto& s : verify::provider_samples()) {
    const kernels::Handler* h = kernels::find_handler(candidate, s.op);
    if (!h) continue;
    SCOPED_TRACE(std::string(name) + " " + describe(s));
    for (const auto& problem : verify::sweep_problems(*h, *kernels::find_handler(baseline, s.op), s, rng))
      ADD_FAILURE() << problem;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(Providers, NativeCoversEveryReferenceOp) {
  for (const auto& h : kernels::reference_handlers()) {
    const kernels::Handler* n = kernels::find_handler(kernels::native_handlers(), h.op);
    ASSERT_NE(n, nullptr) << ops::op_kind(h.op);
    EXPECT_EQ(n->provider, "native");
  }
  for (auto op : {ops::OpTag::matmul, ops::OpTag::linear, ops::OpTag::conv2d}) {
    const kernels::Handler* b = kernels::find_handler(kernels::blas_handlers(), op);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->provider, "blas");
  }
}

// The native sweep at the active level (the capsules' evidence: what this process runs), and at every ISA
// level the CPU runs (PACT_ISA's levels; a level it cannot run is skipped).
TEST(Providers, NativeMatchesReference) { compare_provider(kernels::native_handlers(), "native"); }
TEST_P(EveryLevel, NativeMatchesReference) {
  const ForcedLevel forced(GetParam());
  if (!forced.active()) GTEST_SKIP() << forced.why();
  compare_provider(kernels::native_handlers(), "native at " + std::string(isa_name(GetParam())));
}
// Few rows against a large weight (at most 64 rows, a weight of 2^18 elements or more): the native linear
// computes W x^T and transposes it (gemm_ops.inc); its rows, with and without a bias, at every level.
TEST_P(EveryLevel, NativeLinearOnFewRowsAgainstAWideWeight) {
  const ForcedLevel forced(GetParam());
  if (!forced.active()) GTEST_SKIP() << forced.why();
  std::mt19937 rng(17);
  const kernels::Handler& native = *kernels::find_handler(kernels::native_handlers(), ops::OpTag::linear);
  const kernels::Handler& ref = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::linear);
  for (const std::int64_t rows : {3, 49, 64}) {
    SCOPED_TRACE(rows);
    std::vector<Tensor> ins;
    ins.push_back(make_input(N({rows, 300}), DType::f32, rng));
    ins.push_back(make_input(N({1100, 300}), DType::f32, rng));
    ins.push_back(make_input(N({1100}), DType::f32, rng));
    const std::vector<TensorView> all = views_of(ins);
    for (const std::size_t operands : {std::size_t{2}, std::size_t{3}}) {
      const std::vector<TensorView> in(all.begin(), all.begin() + static_cast<long>(operands));
      const auto want = values_of(kernels::run_forward(ref, in, {}).as_view());
      const auto got = values_of(kernels::run_forward(native, in, {}).as_view());
      EXPECT_TRUE(close(got, want, ops::op_info(ops::OpTag::linear).tolerance())) << operands << " operands";
    }
  }
}

// Max pooling takes the maximum exactly, and a NaN anywhere in a window wins, at every level: rows of 41
// columns (AVX-512: two 16-float steps and a masked tail), column strides 1, 2 (the even columns of two
// loads) and 3 (the separable body), padded, the NaNs at row ends and in the middle.
TEST_P(EveryLevel, NativeMaxPoolingMatchesTheReferenceWithNaNs) {
  const ForcedLevel forced(GetParam());
  if (!forced.active()) GTEST_SKIP() << forced.why();
  std::mt19937 rng(29);
  std::normal_distribution<float> nd;
  std::vector<float> v(2 * 9 * 41);
  for (auto& x : v) x = nd(rng);
  for (const std::size_t at : {std::size_t{0}, std::size_t{40}, std::size_t{41 * 4 + 17}, std::size_t{41 * 9 + 33}})
    v[at] = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_values<float>(Dims{1, 2, 9, 41}, v);
  const kernels::Handler& native = *kernels::find_handler(kernels::native_handlers(), ops::OpTag::max_pool2d);
  const kernels::Handler& ref = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::max_pool2d);
  for (const std::int64_t stride : {1, 2, 3}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    ops::Attributes a;
    a.set("kernel_size", std::vector<std::int64_t>{3});
    a.set("stride", std::vector<std::int64_t>{stride});
    a.set("padding", std::vector<std::int64_t>{1});
    const std::vector<TensorView> in{x.as_view()};
    const auto want = values_of(kernels::run_forward(ref, in, a).as_view());
    const auto got = values_of(kernels::run_forward(native, in, a).as_view());
    ASSERT_EQ(got.size(), want.size());
    int nans = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      nans += std::isnan(want[i]) ? 1 : 0;
      if (std::isnan(want[i]))
        EXPECT_TRUE(std::isnan(got[i])) << "output " << i;
      else
        EXPECT_EQ(got[i], want[i]) << "output " << i;
    }
    EXPECT_GT(nans, 3);  // the NaNs reached the outputs whose windows hold them
  }
}

// A batch of products shared among threads whole (each a one-thread sgemm) gives one thread's result bit
// for bit, and the reference's within the op's tolerance: batches that divide among the threads, batches
// that do not (one region per product instead), and a batch broadcast over a leading dimension.
TEST_P(EveryLevel, NativeBatchedMatmulIsTheSameAtEveryThreadCount) {
  const ForcedLevel forced(GetParam());
  if (!forced.active()) GTEST_SKIP() << forced.why();
  std::mt19937 rng(23);
  const kernels::Handler& native = *kernels::find_handler(kernels::native_handlers(), ops::OpTag::matmul);
  const kernels::Handler& ref = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::matmul);
  const int threads_before = omp_get_max_threads();
  for (const auto& [as, bs] : {std::pair{N({8, 64, 70}), N({8, 70, 40})}, std::pair{N({2, 4, 64, 70}), N({4, 70, 40})},
                               std::pair{N({5, 97, 33}), N({5, 33, 120})}}) {
    std::vector<Tensor> ins;
    ins.push_back(make_input(as, DType::f32, rng));
    ins.push_back(make_input(bs, DType::f32, rng));
    const std::vector<TensorView> in = views_of(ins);
    const auto want = values_of(kernels::run_forward(ref, in, {}).as_view());
    omp_set_num_threads(1);
    const auto one = values_of(kernels::run_forward(native, in, {}).as_view());
    EXPECT_TRUE(close(one, want, ops::op_info(ops::OpTag::matmul).tolerance()));
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      EXPECT_EQ(values_of(kernels::run_forward(native, in, {}).as_view()), one) << threads << " threads";
    }
  }
  omp_set_num_threads(threads_before);
}

// A grouped convolution whose groups take the implicit path (patches of 64 or more) is shared among the
// threads by whole groups (gemm_ops.inc): one thread's result bit for bit at two and three threads, and the
// reference's within the op's tolerance; with a bias, a residual and relu (conv2d_activation, the residual
// offset to each group's part of the output), and plain at stride 2, on two images.
TEST_P(EveryLevel, NativeGroupedConvolutionIsTheSameAtEveryThreadCount) {
  const ForcedLevel forced(GetParam());
  if (!forced.active()) GTEST_SKIP() << forced.why();
  std::mt19937 rng(29);
  const int threads_before = omp_get_max_threads();
  struct Case {
    ops::OpTag op;
    std::int64_t stride;
    bool residual;
  };
  for (const Case& k : {Case{ops::OpTag::conv2d_activation, 1, true}, Case{ops::OpTag::conv2d, 2, false}}) {
    SCOPED_TRACE(std::string(ops::op_kind(k.op)));
    const kernels::Handler& native = *kernels::find_handler(kernels::native_handlers(), k.op);
    const kernels::Handler& ref = *kernels::find_handler(kernels::reference_handlers(), k.op);
    ops::Attributes a{{"stride", std::vector<std::int64_t>{k.stride}},
                      {"padding", std::vector<std::int64_t>{1}},
                      {"groups", std::int64_t{3}}};
    if (k.op == ops::OpTag::conv2d_activation) a.set("activation", std::string("relu"));
    std::vector<Tensor> ins;
    ins.push_back(make_input(N({2, 24, 11, 13}), DType::f32, rng));
    ins.push_back(make_input(N({30, 8, 3, 3}), DType::f32, rng));  // 10 filters a group, patches of 72
    ins.push_back(make_input(N({30}), DType::f32, rng));
    if (k.residual) ins.push_back(make_input(N({2, 30, 11, 13}), DType::f32, rng));
    const std::vector<TensorView> in = views_of(ins);
    const auto want = values_of(kernels::run_forward(ref, in, a).as_view());
    omp_set_num_threads(1);
    const auto one = values_of(kernels::run_forward(native, in, a).as_view());
    EXPECT_TRUE(close(one, want, ops::op_info(k.op).tolerance()));
    for (int threads : {2, 3}) {
      omp_set_num_threads(threads);
      EXPECT_EQ(values_of(kernels::run_forward(native, in, a).as_view()), one) << threads << " threads";
    }
  }
  omp_set_num_threads(threads_before);
}

// A kernel's read of a large non-contiguous view (Dense) is gathered by the threads together, each a range of
// the view's outermost plan dimension: at one, two and three threads every element lands at its logical
// position (checked get), for permuted, flipped and step-sliced views of 4 x 61 x 23 x 29 (a layout's
// outermost dimension from 1 to 61 long, fewer than the threads included).
TEST(Providers, SharedGatherOfLargeViewsMatchesCheckedGet) {
  const Dims shape{4, 61, 23, 29};
  std::vector<float> values(static_cast<std::size_t>(4 * 61 * 23 * 29));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  const Tensor t = Tensor::from_values<float>(shape, std::span<const float>(values));
  std::mt19937 rng(31);
  const int threads_before = omp_get_max_threads();
  int large = 0;
  for (int trial = 0; trial < 40; ++trial) {
    TensorView v = t.as_view();
    for (int k = 0; k < 3; ++k) v = v.transpose(static_cast<int>(rng() % 4), static_cast<int>(rng() % 4));
    if (rng() % 3 == 0) v = v.flip(static_cast<int>(rng() % 4));
    if (rng() % 3 == 0) {
      const int dim = static_cast<int>(rng() % 4);
      v = v.slice(dim, static_cast<std::int64_t>(rng() % 2), v.shape()[dim], 1 + static_cast<std::int64_t>(rng() % 2));
    }
    if (trial % 8 == 0) v = v.slice(static_cast<int>(rng() % 4), 0, 1);  // a unit outer dimension
    const Dims s = v.shape();
    std::vector<float> want;
    for (std::int64_t i = 0; i < s[0]; ++i)
      for (std::int64_t j = 0; j < s[1]; ++j)
        for (std::int64_t k = 0; k < s[2]; ++k)
          for (std::int64_t l = 0; l < s[3]; ++l) want.push_back(static_cast<float>(v.get(Dims{i, j, k, l}).real));
    large += want.size() >= (std::size_t{1} << 16) ? 1 : 0;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      const kernels::cpu::Dense<float> d(v, "test", "x");
      EXPECT_EQ(std::vector<float>(d.span().begin(), d.span().end()), want)
          << "trial " << trial << ", " << threads << " threads, shape " << s.to_string();
    }
  }
  omp_set_num_threads(threads_before);
  EXPECT_GE(large, 20);  // most views are large enough to be shared
}

// Large copies shared among the threads: native concat by ranges of its output (inputs contiguous and
// permuted, along the first, a middle and the last dimension) and a materialised view (permute, slice)
// give the reference provider's result bit for bit at one, two and three threads.
TEST(Providers, SharedCopiesAreTheReferencesAtEveryThreadCount) {
  std::mt19937 rng(37);
  const int threads_before = omp_get_max_threads();
  const Tensor a = make_input(N({3, 40, 25, 27}), DType::f32, rng);
  const Tensor b = make_input(N({3, 27, 25, 40}), DType::f32, rng);  // permuted to [3, 40, 25, 27] below
  const Tensor c = make_input(N({3, 40, 25, 27}), DType::f32, rng);
  const TensorView bt = b.as_view().transpose(1, 3);
  auto run = [](ops::OpTag op, std::span<const TensorView> in, const ops::Attributes& attrs, bool native) {
    const auto& handlers = native ? kernels::native_handlers() : kernels::reference_handlers();
    return values_of(kernels::run_forward(*kernels::find_handler(handlers, op), in, attrs).as_view());
  };
  struct Case {
    ops::OpTag op;
    std::vector<TensorView> in;
    ops::Attributes attrs;
  };
  const std::vector<Case> cases{
      {ops::OpTag::concat, {a.as_view(), bt, c.as_view()}, {{"dim", std::int64_t{1}}}},
      {ops::OpTag::concat, {a.as_view(), bt}, {{"dim", std::int64_t{0}}}},
      {ops::OpTag::concat, {bt, c.as_view(), a.as_view()}, {{"dim", std::int64_t{-1}}}},
      {ops::OpTag::permute, {a.as_view()}, {{"dims", std::vector<std::int64_t>{0, 2, 3, 1}}}},
      {ops::OpTag::slice, {bt}, {{"dim", std::int64_t{2}}, {"start", std::int64_t{1}}, {"end", std::int64_t{25}}}}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(ops::op_kind(k.op)));
    const auto want = run(k.op, k.in, k.attrs, false);
    ASSERT_GE(want.size(), std::size_t{1} << 16);  // large enough to be shared
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      EXPECT_EQ(run(k.op, k.in, k.attrs, true), want) << threads << " threads";
    }
  }
  omp_set_num_threads(threads_before);
}

TEST(Providers, BlasMatchesReference) { compare_provider(kernels::blas_handlers(), "blas"); }

// On 16-bit operands an add is correctly rounded (Note [16-bit tolerances]): the sweep holds the half
// provider's add to the reference's sum rounded to bf16, bit for bit. A result one unit in the last
// place off at its smallest element (a tie rounded the wrong way) is well inside the op's 16-bit tolerance,
// and that comparison alone would pass it.
TEST(Providers, HalfArithmeticIsCorrectlyRounded) {
  const kernels::Handler& half = *kernels::find_handler(kernels::half_handlers(), ops::OpTag::add);
  const kernels::Handler& ref = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::add);
  verify::ResultTamper one_ulp;
  one_ulp.forward = [](Tensor& y) {
    std::vector<double> v = y.to_doubles();
    std::size_t at = v.size();
    for (std::size_t i = 0; i < v.size(); ++i)
      if (v[i] != 0 && (at == v.size() || std::abs(v[i]) < std::abs(v[at]))) at = i;
    if (at == v.size()) return;
    v[at] = from_bf16(BFloat16{static_cast<std::uint16_t>(to_bf16(static_cast<float>(v[at])).bits + 1)});
    y = Tensor::from_values<double>(y.shape(), std::span<const double>(v)).convert(DType::bf16);
  };
  int samples = 0;
  for (const auto& s : verify::provider_samples()) {
    if (s.op != ops::OpTag::add) continue;
    SCOPED_TRACE(describe(s));
    std::mt19937 rng(7);
    const verify::SampleBaseline b = verify::sample_baseline(ref, s, rng, DType::bf16);
    if (b.forward->numel() == 0) continue;
    ++samples;
    EXPECT_EQ(verify::sweep_problems(half, s, b, nullptr), std::vector<std::string>{});
    const auto found = verify::sweep_problems(half, s, b, &one_ulp);
    ASSERT_EQ(found.size(), 2u) << ::testing::PrintToString(found);
    EXPECT_TRUE(found[0].starts_with("forward, correctly rounded: element")) << found[0];
    EXPECT_TRUE(found[1].starts_with("forward, strided inputs, correctly rounded: element")) << found[1];
  }
  EXPECT_GE(samples, 2);
}

// Three wrong half adds, each inside the 16-bit tolerance on values, which the sweep still refutes: a result
// left in f32, gradients left in f32, and a VJP that reads an input add does not save (the tape hands it a
// geometry-only placeholder, and so does the sweep).
const kernels::Handler& half_add() { return *kernels::find_handler(kernels::half_handlers(), ops::OpTag::add); }
Tensor add_left_in_f32(std::span<const TensorView> in, const ops::Attributes& a, const KernelContext& c) {
  return half_add().forward(in, a, c).as_view().convert(DType::f32);
}
std::vector<std::optional<Tensor>> grads_left_in_f32(std::span<const TensorView> in, const TensorView& y,
                                                     const TensorView& g, const ops::Attributes& a,
                                                     const KernelContext& c) {
  auto grads = half_add().vjp(in, y, g, a, c);
  for (auto& x : grads) {
    if (!x) continue;
    Tensor wide = x->as_view().convert(DType::f32);  // the view ends before its owner is replaced
    x = std::move(wide);
  }
  return grads;
}
std::vector<std::optional<Tensor>> reads_an_unsaved_input(std::span<const TensorView> in, const TensorView& y,
                                                          const TensorView& g, const ops::Attributes& a,
                                                          const KernelContext& c) {
  (void)in[0].to_doubles();
  return half_add().vjp(in, y, g, a, c);
}

TEST(Providers, TheSweepHoldsResultDtypesAndTheSavesColumn) {
  const kernels::Handler& ref = *kernels::find_handler(kernels::reference_handlers(), ops::OpTag::add);
  const std::vector<verify::Sample> all = verify::provider_samples();
  const auto sample = std::find_if(all.begin(), all.end(), [](const auto& s) { return s.op == ops::OpTag::add; });
  ASSERT_NE(sample, all.end());
  std::mt19937 rng(7);
  const verify::SampleBaseline b = verify::sample_baseline(ref, *sample, rng, DType::bf16);
  ASSERT_EQ(verify::sweep_problems(half_add(), *sample, b, nullptr), std::vector<std::string>{});
  auto first_problem = [&](auto&& edit) {
    kernels::Handler wrong = half_add();
    edit(wrong);
    const auto found = verify::sweep_problems(wrong, *sample, b, nullptr);
    return found.empty() ? std::string("none") : found.front();
  };
  // run_forward refuses a result of another dtype than the shape rule's, run_vjp a gradient of another than
  // its input's: typed errors (evaluate_capsule reports a forward's as the kernel failing).
  kernels::Handler f32_result = half_add();
  f32_result.forward = &add_left_in_f32;
  EXPECT_THROW((void)verify::sweep_problems(f32_result, *sample, b, nullptr), Error);
  const std::string f32_grads = first_problem([](kernels::Handler& h) { h.vjp = &grads_left_in_f32; });
  EXPECT_TRUE(f32_grads.starts_with("vjp: the kernel failed:") &&
              f32_grads.find("gradient 0 is f32[") != std::string::npos)
      << f32_grads;
  const std::string unsaved = first_problem([](kernels::Handler& h) { h.vjp = &reads_an_unsaved_input; });
  EXPECT_TRUE(unsaved.starts_with("vjp: the kernel failed:") && unsaved.find("geometry only") != std::string::npos)
      << unsaved;
}
TEST(Providers, LibTorchMatchesNative) {
  if (!kernels::libtorch_built()) {
    EXPECT_TRUE(kernels::libtorch_handlers().empty());
    GTEST_SKIP() << "built without -DPACT_WITH_LIBTORCH=ON (cmake --preset libtorch): no LibTorch handlers to compare";
  }
  EXPECT_EQ(kernels::libtorch_handlers().size(), 8u);
  compare_provider(kernels::libtorch_handlers(), "libtorch", kernels::native_handlers());
}

// Native attention reads a head-split view (a [B, T, H, E] tensor seen as [B, H, T, E], rows H * E
// apart) in place: forward and VJP, with the output gradient a head-split view too, match the same
// kernel on contiguous copies. Rows of 19 exercise the 16-lane softmax with a scalar tail.
TEST(Providers, NativeAttentionReadsHeadSplitViewsInPlace) {
  std::mt19937 rng(5);
  const kernels::Handler& h =
      *kernels::find_handler(kernels::native_handlers(), ops::OpTag::scaled_dot_product_attention);
  std::vector<Tensor> owners, dense;
  std::vector<TensorView> heads;
  for (int i = 0; i < 4; ++i) owners.push_back(make_input(N({2, 19, 3, 8}), DType::f32, rng));  // q, k, v, grad
  for (const auto& t : owners) {
    heads.push_back(t.transpose(1, 2));
    dense.push_back(t.transpose(1, 2).duplicate());
  }
  ASSERT_FALSE(heads[0].is_contiguous());
  const ops::Tolerance tight{1e-6, 1e-5};
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    const ops::Attributes a{{"is_causal", causal}};
    const KernelContext ctx{false, 0};
    const std::vector<TensorView> in_heads(heads.begin(), heads.begin() + 3);
    const std::vector<TensorView> in_dense{dense[0].as_view(), dense[1].as_view(), dense[2].as_view()};
    Tensor yh = kernels::run_forward(h, in_heads, a, ctx), yd = kernels::run_forward(h, in_dense, a, ctx);
    EXPECT_TRUE(close(values_of(yh.as_view()), values_of(yd.as_view()), tight));
    auto gh = kernels::run_vjp(h, in_heads, yh.as_view(), heads[3], a, ctx);
    auto gd = kernels::run_vjp(h, in_dense, yd.as_view(), dense[3].as_view(), a, ctx);
    ASSERT_EQ(gh.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      ASSERT_TRUE(gh[i] && gd[i]) << "input " << i;
      EXPECT_TRUE(close(values_of(gh[i]->as_view()), values_of(gd[i]->as_view()), tight)) << "vjp input " << i;
    }
  }
}

// A VJP call is held to the op's shape rule like a forward call: inputs the rule rejects, or a cotangent
// of another shape, are refused typed before any kernel reads them.
TEST(Providers, VjpRefusesInputsOrCotangentsTheShapeRuleRejects) {
  const kernels::Handler& h = *kernels::find_handler(kernels::native_handlers(), ops::OpTag::layer_norm);
  const ops::Attributes a{{"normalized_shape", std::vector<std::int64_t>{8}}};
  Tensor x = Tensor::zeros(Dims{4, 8}, DType::f32), b = Tensor::zeros(Dims{8}, DType::f32);
  Tensor short_w = Tensor::zeros(Dims{3}, DType::f32), w = Tensor::zeros(Dims{8}, DType::f32);
  Tensor g = Tensor::zeros(Dims{4, 8}, DType::f32), wrong_g = Tensor::zeros(Dims{4, 7}, DType::f32);
  // The error's message, or "" when the call succeeds.
  auto refusal = [&](const Tensor& weight, const Tensor& grad) -> std::string {
    try {
      kernels::run_vjp(h, std::vector{x.as_view(), weight.as_view(), b.as_view()}, grad.as_view(), grad.as_view(), a,
                       {});
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("layer_norm"), std::string::npos) << e.what();
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal(short_w, g), "");
  EXPECT_NE(refusal(w, wrong_g).find("shape rule gives"), std::string::npos);
  EXPECT_EQ(refusal(w, g), "");
}

TEST(Providers, BlasRefusesF64Typed) {
  Tensor a = Tensor::zeros(Dims{2, 2}, DType::f64);
  try {
    kernels::run_forward(*kernels::find_handler(kernels::blas_handlers(), ops::OpTag::matmul),
                         std::vector{a.as_view(), a.as_view()}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::dtype_mismatch);
  }
}

// Every GEMM variant the CPU can run, on awkward sizes and on transposed operands, on one to three
// threads (the thread count picks the blocking and the packing scheme), against a double-precision loop.
TEST_P(EveryLevel, GemmMatchesAReferenceLoopOnOddAndDegenerateShapes) {
  std::normal_distribution<float> nd;
  const std::int64_t sizes[][3] = {{1, 1, 1},       {0, 5, 3},       {5, 0, 3},      {4, 6, 0},   {13, 37, 29},
                                   {12, 32, 256},   {25, 65, 300},   {200, 70, 513}, {1, 97, 33}, {97, 1, 33},
                                   {64, 96, 147},   {40, 100, 600},  // m <= 64: row-major B read in place
                                   {97, 100, 600},  {60, 300, 600},  // threads split the columns
                                   {200, 70, 513},   // fewer than two panels a thread: threads split the rows
                                   {120, 150, 200},  // 5 panels of 32 split unevenly: threads split the rows
                                   {17, 1030, 40},  {40, 1100, 600},  // n >= 1024: the wide kernel, A and B packed
                                   {30, 50, 1300}};  // two or more depth blocks at every level's KC (128 to 1024)
  const int threads_before = omp_get_max_threads();
  // Note [Threads own their operands] (gemm.cpp): each thread's part is the same products in the same
  // order, so every thread count gives one thread's result bit for bit.
  std::map<std::string, std::vector<float>> one_thread;
  {
    const ForcedLevel forced(GetParam());
    if (!forced.active()) GTEST_SKIP() << forced.why();
    const std::string variant(isa_name(GetParam()));
    ASSERT_EQ(kernels::cpu::sgemm_variant(), sgemm_level(GetParam()));
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      for (const auto& s : sizes) {
        const std::int64_t m = s[0], n = s[1], k = s[2];
        for (int trans = 0; trans < 4; ++trans) {
          SCOPED_TRACE(std::string(variant) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                       std::to_string(k) + " trans " + std::to_string(trans) + ", " + std::to_string(threads) +
                       " thread(s)");
          std::vector<float> a(static_cast<std::size_t>(std::max<std::int64_t>(m * k, 1))),
              b(static_cast<std::size_t>(std::max<std::int64_t>(k * n, 1)));
          std::mt19937 rng(static_cast<unsigned>(((m * 131 + n) * 131 + k) * 4 + trans));  // same per case
          for (auto& x : a) x = nd(rng);
          for (auto& x : b) x = nd(rng);
          // trans bit 0: A stored k x m (column access), bit 1: B stored n x k.
          const std::int64_t ar = trans & 1 ? 1 : k, ac = trans & 1 ? m : 1;
          const std::int64_t br = trans & 2 ? 1 : n, bc = trans & 2 ? k : 1;
          std::vector<float> c(static_cast<std::size_t>(std::max<std::int64_t>(m * n, 1)), 7.0f);
          kernels::cpu::sgemm(m, n, k, a.data(), ar, ac, b.data(), br, bc, c.data(), n, false);
          const std::string key =
              std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + "/" + std::to_string(trans);
          if (threads == 1) {
            one_thread[key] = c;
          } else {
            ASSERT_TRUE(one_thread.at(key) == c) << "differs from one thread's result";
          }
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              double ref = 0;
              for (std::int64_t p = 0; p < k; ++p)
                ref +=
                    double(a[static_cast<std::size_t>(i * ar + p * ac)]) * b[static_cast<std::size_t>(p * br + j * bc)];
              ASSERT_NEAR(c[static_cast<std::size_t>(i * n + j)], ref, 1e-4 * (1 + std::sqrt(double(k))))
                  << i << "," << j;
            }
        }
      }
    }
  }
  omp_set_num_threads(threads_before);
}

// B given by row offsets (sgemm's b_rows: an implicit convolution's shifted input rows): read in place by the
// direct kernels (m up to 8 MR), packed from the offsets otherwise and by the portable level, across depth
// blocks (the offsets of a later block) and the threads' column and row splits, on every variant.
TEST_P(EveryLevel, GemmReadsTheRowsOfBAtTheirOffsets) {
  std::normal_distribution<float> nd;
  const std::int64_t sizes[][3] = {{20, 100, 37},    // in place
                                   {100, 100, 37},   // packed
                                   {9, 1100, 40},    // the wide kernel, packed
                                   {40, 45, 1300},   // several depth blocks
                                   {200, 45, 300}};  // threads split the rows
  const int threads_before = omp_get_max_threads();
  for (int threads : {1, 2}) {
    const ForcedLevel forced(GetParam());
    if (!forced.active()) GTEST_SKIP() << forced.why();  // before the thread count changes: nothing to restore
    omp_set_num_threads(threads);
    for (const auto& s : sizes) {
      const std::int64_t m = s[0], n = s[1], k = s[2];
      for (int trans = 0; trans < 2; ++trans) {
        SCOPED_TRACE(std::string(isa_name(GetParam())) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                     std::to_string(k) + (trans ? " A transposed" : "") + ", " + std::to_string(threads) +
                     " thread(s)");
        std::mt19937 rng(static_cast<unsigned>((m * 131 + n) * 131 + k));
        std::vector<float> a(static_cast<std::size_t>(m * k)), pool(static_cast<std::size_t>(3 * n + 5 * k));
        for (auto* v : {&a, &pool})
          for (auto& x : *v) x = nd(rng);
        // Row p at an offset that is neither sorted nor a multiple of anything, rows overlapping.
        std::vector<std::int64_t> rows(static_cast<std::size_t>(k));
        for (std::int64_t p = 0; p < k; ++p) rows[static_cast<std::size_t>(p)] = (p * 7919) % (2 * n + 5 * k - 1);
        const std::int64_t ar = trans ? 1 : k, ac = trans ? m : 1;
        std::vector<float> c(static_cast<std::size_t>(m * n), 3.0f);
        kernels::cpu::sgemm(m, n, k, a.data(), ar, ac, pool.data(), 0, 1, c.data(), n, false, {}, rows.data());
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double ref = 0;
            for (std::int64_t p = 0; p < k; ++p)
              ref += double(a[static_cast<std::size_t>(i * ar + p * ac)]) *
                     pool[static_cast<std::size_t>(rows[static_cast<std::size_t>(p)] + j)];
            ASSERT_NEAR(c[static_cast<std::size_t>(i * n + j)], ref, 1e-4 * (1 + std::sqrt(double(k))))
                << i << "," << j;
          }
      }
    }
  }
  omp_set_num_threads(threads_before);
}

// im2col's strided rows: every stride and length, each source exactly as long as the copy needs (the
// ASan preset catches a read past it; the AVX-512 stride-2 path reads 32 floats per 16 outputs).
TEST(Gemm, StridedCopyMatchesAScalarLoopWithoutReadingPastItsSource) {
  for (std::int64_t stride : {1, 2, 3}) {
    for (std::int64_t count = 0; count <= 70; ++count) {
      std::vector<float> src(static_cast<std::size_t>(count == 0 ? 0 : (count - 1) * stride + 1));
      for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) * 0.5f - 3.0f;
      std::vector<float> dst(static_cast<std::size_t>(count + 16), -99.0f);  // 16 guard elements after the copy
      kernels::cpu::strided_copy(src.data(), stride, dst.data(), count);
      for (std::int64_t z = 0; z < count; ++z) {
        ASSERT_EQ(dst[static_cast<std::size_t>(z)], src[static_cast<std::size_t>(z * stride)])
            << "stride " << stride << " count " << count << " z " << z;
      }
      for (std::int64_t z = count; z < count + 16; ++z)
        ASSERT_EQ(dst[static_cast<std::size_t>(z)], -99.0f) << "wrote past the copy at " << z;
    }
  }
}

// A bias folded into the store, per row or per column, with and without accumulation, on every variant:
// full and edge tiles, and a depth over one block (the bias must go in once, not once per block).
TEST_P(EveryLevel, GemmAddsTheBiasOnceAsCIsStored) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd;
  // The last two are shared among threads: by columns (a column bias offset to each part), by rows (a row
  // bias offset).
  const std::int64_t sizes[][3] = {{16, 64, 8},   {13, 37, 29},    {24, 40, 700}, {3, 5, 0},
                                   {9, 1030, 20}, {16, 1056, 520}, {200, 40, 300}};
  const int threads_before = omp_get_max_threads();
  for (int threads : {1, 2}) {
    const ForcedLevel forced(GetParam());
    if (!forced.active()) GTEST_SKIP() << forced.why();  // before the thread count changes: nothing to restore
    omp_set_num_threads(threads);
    const std::string variant(std::string(isa_name(GetParam())) + ", " + std::to_string(threads) + " thread(s)");
    ASSERT_EQ(kernels::cpu::sgemm_variant(), sgemm_level(GetParam()));
    for (const auto& s : sizes) {
      const std::int64_t m = s[0], n = s[1], k = s[2];
      std::vector<float> a(static_cast<std::size_t>(std::max<std::int64_t>(m * k, 1))),
          b(static_cast<std::size_t>(std::max<std::int64_t>(k * n, 1)));
      std::vector<float> row_bias(static_cast<std::size_t>(m)), col_bias(static_cast<std::size_t>(n));
      for (auto* v : {&a, &b, &row_bias, &col_bias})
        for (auto& x : *v) x = nd(rng);
      for (bool per_row : {true, false})
        for (bool accumulate : {false, true})
          for (int trans = 0; trans < 2; ++trans) {
            SCOPED_TRACE(std::string(variant) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                         std::to_string(k) + (per_row ? " per row" : " per column") +
                         (accumulate ? " accumulate" : "") + (trans ? " A transposed" : ""));
            const std::int64_t ar = trans ? 1 : k, ac = trans ? m : 1;
            std::vector<float> c(static_cast<std::size_t>(m * n), 0.5f);
            const kernels::cpu::GemmEpilogue bias{per_row ? row_bias.data() : col_bias.data(), per_row};
            kernels::cpu::sgemm(m, n, k, a.data(), ar, ac, b.data(), n, 1, c.data(), n, accumulate, bias);
            for (std::int64_t i = 0; i < m; ++i)
              for (std::int64_t j = 0; j < n; ++j) {
                double ref = (accumulate ? 0.5 : 0.0) +
                             (per_row ? row_bias[static_cast<std::size_t>(i)] : col_bias[static_cast<std::size_t>(j)]);
                for (std::int64_t p = 0; p < k; ++p)
                  ref += double(a[static_cast<std::size_t>(i * ar + p * ac)]) * b[static_cast<std::size_t>(p * n + j)];
                ASSERT_NEAR(c[static_cast<std::size_t>(i * n + j)], ref, 1e-4 * (1 + std::sqrt(double(k))))
                    << i << "," << j;
              }
          }
    }
  }
  omp_set_num_threads(threads_before);
}

// The clamp of the epilogue (a fused relu or relu6) applies once, to the finished sum: a depth over
// several blocks must not clamp the partial sums (a relu on the first block's sum would be wrong), an
// accumulation clamps C + A B, and a NaN stays NaN (max(lo, x), then min(hi, .)) as in the generic clamp.
TEST_P(EveryLevel, GemmClampsTheFinishedSumOnce) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  const std::int64_t sizes[][3] = {{16, 64, 8}, {13, 37, 29}, {24, 40, 1500}, {3, 5, 0}, {9, 1030, 20}};
  const float bounds[][2] = {{0.0f, std::numeric_limits<float>::infinity()}, {-0.5f, 0.7f}};
  {
    const ForcedLevel forced(GetParam());
    if (!forced.active()) GTEST_SKIP() << forced.why();
    const std::string variant(isa_name(GetParam()));
    for (const auto& s : sizes) {
      const std::int64_t m = s[0], n = s[1], k = s[2];
      std::vector<float> a(static_cast<std::size_t>(std::max<std::int64_t>(m * k, 1))),
          b(static_cast<std::size_t>(std::max<std::int64_t>(k * n, 1))), bias(static_cast<std::size_t>(m));
      for (auto* v : {&a, &b, &bias})
        for (auto& x : *v) x = nd(rng);
      if (k > 0) a[static_cast<std::size_t>(k / 2)] = std::numeric_limits<float>::quiet_NaN();  // row 0
      // Later depth blocks push the sums of one sign to the other, so clamping a partial sum is wrong.
      for (std::int64_t p = k / 2; p < k; ++p)
        a[static_cast<std::size_t>((m - 1) * k + p)] = -4.0f * a[static_cast<std::size_t>((m - 1) * k + p - k / 2)];
      for (const auto& bound : bounds)
        for (bool accumulate : {false, true}) {
          SCOPED_TRACE(variant + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                       " clamp [" + std::to_string(bound[0]) + ", " + std::to_string(bound[1]) + "]" +
                       (accumulate ? " accumulate" : ""));
          std::vector<float> c(static_cast<std::size_t>(m * n), -0.25f);
          kernels::cpu::GemmEpilogue store{bias.data(), true, true, bound[0], bound[1]};
          kernels::cpu::sgemm(m, n, k, a.data(), k, 1, b.data(), n, 1, c.data(), n, accumulate, store);
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              double sum = (accumulate ? -0.25 : 0.0) + bias[static_cast<std::size_t>(i)];
              for (std::int64_t p = 0; p < k; ++p)
                sum += double(a[static_cast<std::size_t>(i * k + p)]) * b[static_cast<std::size_t>(p * n + j)];
              const float got = c[static_cast<std::size_t>(i * n + j)];
              if (std::isnan(sum)) {
                ASSERT_TRUE(std::isnan(got)) << i << "," << j << ": " << got;
                continue;
              }
              const double want = std::min<double>(std::max<double>(sum, bound[0]), bound[1]);
              ASSERT_NEAR(got, want, 1e-4 * (1 + std::sqrt(double(k)))) << i << "," << j;
            }
        }
    }
  }
}

// A product whose width is no multiple of the micro-kernel's panels ends in edge tiles (AVX-512 and AVX2:
// stored masked straight into C, in as few vectors as cover the columns): every width from 1 to 50 and two
// on the wide AVX-512 kernel, full and short row tiles, with a column bias, a clamp and an accumulation, A
// read in place and packed, on one and two threads. C's rows are wider than the product (ldc > n): the
// columns past it, and the rows past m, must keep what they held.
TEST_P(EveryLevel, GemmStoresEdgeTilesWithinTheirColumns) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd;
  std::vector<std::array<std::int64_t, 3>> sizes;
  for (std::int64_t n = 1; n <= 50; ++n) sizes.push_back({n % 3 == 0 ? 13 : 48, n, n % 2 == 0 ? 7 : 40});
  sizes.push_back({16, 1030, 9});   // the wide kernel: 21 panels of 48 and 22 columns
  sizes.push_back({17, 1071, 33});  // 22 panels of 48 and 15 columns, a short row tile
  const int threads_before = omp_get_max_threads();
  constexpr float kUntouched = 12345.0f;
  for (int threads : {1, 2}) {
    const ForcedLevel forced(GetParam());
    if (!forced.active()) GTEST_SKIP() << forced.why();  // before the thread count changes: nothing to restore
    omp_set_num_threads(threads);
    for (const auto& [m, n, k] : sizes)
      for (int trans = 0; trans < 2; ++trans)
        for (bool accumulate : {false, true}) {
          SCOPED_TRACE(std::string(isa_name(GetParam())) + " " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                       std::to_string(k) + (trans ? " A transposed" : "") + (accumulate ? " accumulate" : "") + ", " +
                       std::to_string(threads) + " thread(s)");
          const std::int64_t ldc = n + 21, ar = trans ? 1 : k, ac = trans ? m : 1;
          std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)),
              bias(static_cast<std::size_t>(n));
          for (auto* v : {&a, &b, &bias})
            for (auto& x : *v) x = nd(rng);
          // Rows m and m + 1 of C lie past the product as well.
          std::vector<float> c(static_cast<std::size_t>((m + 2) * ldc), kUntouched);
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) c[static_cast<std::size_t>(i * ldc + j)] = 0.25f;
          const kernels::cpu::GemmEpilogue store{bias.data(), false, true, -1.5f, 2.0f};
          kernels::cpu::sgemm(m, n, k, a.data(), ar, ac, b.data(), n, 1, c.data(), ldc, accumulate, store);
          for (std::int64_t i = 0; i < m + 2; ++i)
            for (std::int64_t j = 0; j < ldc; ++j) {
              const float got = c[static_cast<std::size_t>(i * ldc + j)];
              if (i >= m || j >= n) {
                ASSERT_EQ(got, kUntouched) << "wrote outside the product at " << i << "," << j;
                continue;
              }
              double sum = (accumulate ? 0.25 : 0.0) + bias[static_cast<std::size_t>(j)];
              for (std::int64_t p = 0; p < k; ++p)
                sum += double(a[static_cast<std::size_t>(i * ar + p * ac)]) * b[static_cast<std::size_t>(p * n + j)];
              ASSERT_NEAR(got, std::min(std::max(sum, -1.5), 2.0), 1e-4 * (1 + std::sqrt(double(k)))) << i << "," << j;
            }
        }
  }
  omp_set_num_threads(threads_before);
}

// The map of the epilogue (a fused silu, sigmoid or hardswish; GemmEpilogue::mapped) applies once, to each
// finished tile: over several depth blocks (the later blocks flip the sums' signs, so a map of a partial sum
// is wrong), on edge tiles, on the wide AVX-512 kernel's 48-column tiles, with no depth at all, and with the
// product shared among two threads; on blocks of C within a quarter of the L2 once their panels are done,
// and on each tile as it is stored in larger ones (the last size: 1 MB of C).
TEST_P(EveryLevel, GemmMapsTheFinishedSumOnce) {
  using kernels::cpu::MapOp;
  std::mt19937 rng(10);
  std::normal_distribution<float> nd;
  const std::int64_t sizes[][3] = {{16, 64, 8},   {13, 37, 29},  {24, 40, 1500}, {3, 5, 0},
                                   {9, 1030, 20}, {40, 300, 70}, {97, 2600, 24}};
  const auto want_of = [](MapOp op, double x) {
    switch (op) {
      case MapOp::silu:
        return x / (1 + std::exp(-x));
      case MapOp::sigmoid:
        return 1 / (1 + std::exp(-x));
      default:  // hardswish
        return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    }
  };
  const int threads_before = omp_get_max_threads();
  for (int threads : {1, 2}) {
    const ForcedLevel forced(GetParam());
    if (!forced.active()) GTEST_SKIP() << forced.why();  // before the thread count changes: nothing to restore
    omp_set_num_threads(threads);
    for (const auto& s : sizes) {
      const std::int64_t m = s[0], n = s[1], k = s[2];
      std::vector<float> a(static_cast<std::size_t>(std::max<std::int64_t>(m * k, 1))),
          b(static_cast<std::size_t>(std::max<std::int64_t>(k * n, 1))), bias(static_cast<std::size_t>(m));
      for (auto* v : {&a, &b, &bias})
        for (auto& x : *v) x = nd(rng);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t p = k / 2; p < k; ++p)
          a[static_cast<std::size_t>(i * k + p)] = -3.0f * a[static_cast<std::size_t>(i * k + p - k / 2)];
      for (MapOp op : {MapOp::silu, MapOp::sigmoid, MapOp::hardswish})
        for (bool accumulate : {false, true}) {
          SCOPED_TRACE(std::string(isa_name(GetParam())) + ", " + std::to_string(threads) + " thread(s) " +
                       std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " map " +
                       std::to_string(static_cast<int>(op)) + (accumulate ? " accumulate" : ""));
          std::vector<float> c(static_cast<std::size_t>(m * n), -0.25f);
          kernels::cpu::GemmEpilogue store{bias.data(), true};
          store.mapped = true;
          store.op = op;
          kernels::cpu::sgemm(m, n, k, a.data(), k, 1, b.data(), n, 1, c.data(), n, accumulate, store);
          for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
              double sum = (accumulate ? -0.25 : 0.0) + bias[static_cast<std::size_t>(i)];
              for (std::int64_t p = 0; p < k; ++p)
                sum += double(a[static_cast<std::size_t>(i * k + p)]) * b[static_cast<std::size_t>(p * n + j)];
              ASSERT_NEAR(c[static_cast<std::size_t>(i * n + j)], want_of(op, sum), 1e-4 * (1 + std::sqrt(double(k))))
                  << i << "," << j << " sum " << sum;
            }
        }
    }
  }
  omp_set_num_threads(threads_before);
}

// exp, silu and sigmoid (the maps the AVX-512 level computes with vscalefps) against float64 at every level:
// every tail length, the ends of float's range (underflow to zero, overflow to infinity), infinities and NaN.
TEST_P(EveryLevel, ExpMapsMatchFloat64AcrossTheRange) {
  using kernels::cpu::MapOp;
  const ForcedLevel forced(GetParam());
  if (!forced.active()) GTEST_SKIP() << forced.why();
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x{0.0f,  -0.0f,  1e-30f, -1e-30f, 0.5f,    -0.5f,   1.0f,  -1.0f,  3.7f,  -3.7f,
                       20.0f, -20.0f, 80.0f,  -80.0f,  86.0f,   -86.0f,  87.5f, -87.5f, 88.5f, -88.5f,
                       89.0f, -89.0f, 100.0f, -100.0f, -103.0f, -110.0f, 1e10f, -1e10f, inf,   -inf};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> ud(-30.0f, 30.0f);
  for (int i = 0; i < 200; ++i) x.push_back(ud(rng));
  const auto want_of = [](MapOp op, double v) {
    if (op == MapOp::exp) return std::exp(v);
    if (op == MapOp::sigmoid) return 1 / (1 + std::exp(-v));
    return v / (1 + std::exp(-v));
  };
  for (MapOp op : {MapOp::exp, MapOp::silu, MapOp::sigmoid})
    for (std::size_t len = 1; len <= x.size(); len += (len < 40 ? 1 : 37)) {
      std::vector<float> in(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(len)), out(len + 1, 7.0f);
      in.back() = len % 3 == 0 ? std::numeric_limits<float>::quiet_NaN() : in.back();
      kernels::cpu::map_f32(op, in.data(), out.data(), static_cast<std::int64_t>(len), 0.0f, 0.0f);
      ASSERT_EQ(out[len], 7.0f) << "wrote past the end at length " << len;
      for (std::size_t i = 0; i < len; ++i) {
        SCOPED_TRACE(std::string(isa_name(GetParam())) + " map " + std::to_string(static_cast<int>(op)) + " of " +
                     std::to_string(in[i]) + " (length " + std::to_string(len) + ")");
        const double want = want_of(op, in[i]);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(out[i])) << out[i];
        } else if (std::fabs(want) > std::numeric_limits<float>::max()) {
          ASSERT_EQ(out[i], want > 0 ? inf : -inf);
        } else {
          // Four ulps of the result, or within 1e-35 where it is smaller than that (silu of -89 is -2e-37 in
          // float64, but the float formula x / (1 + exp(-x)) gives -0 there, as the reference kernel does).
          ASSERT_NEAR(out[i], want, std::max(4 * 1.2e-7 * std::fabs(want), 1e-35)) << out[i];
        }
      }
    }
}

// fast_exp_no_overflow is fast_exp without its overflow end: the same bits for every argument below 88.3
// (softmax's x - max, gelu's erfc and pdf), and a NaN for a NaN (not necessarily the argument's bits: it has
// no select for NaN). Every 97th bit pattern from +0 up to 88.3 and from -0 down through -inf and the
// negative NaNs, the neighbours of both clamps, and a NaN.
TEST(FastMath, ExpWithoutItsOverflowEndIsFastExpBitForBit) {
  const auto same = [](float x) {
    const float a = kernels::cpu::fast_exp(x), b = kernels::cpu::fast_exp_no_overflow(x);
    if (std::isnan(x)) return std::isnan(a) && std::isnan(b);
    return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
  };
  std::uint64_t checked = 0;
  const std::uint64_t top = std::bit_cast<std::uint32_t>(88.3f);
  for (std::uint64_t u = 0; u <= top; u += 97, ++checked) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    ASSERT_TRUE(same(x)) << x << " (bits " << std::hex << u << ")";
  }
  for (std::uint64_t u = 0x80000000u; u <= 0xffffffffu; u += 97, ++checked) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(u));
    ASSERT_TRUE(same(x)) << x << " (bits " << std::hex << u << ")";
  }
  for (float edge : {-87.3f, 88.3f}) {
    float up = edge, down = edge;
    for (int i = 0; i < 64; ++i, up = std::nextafter(up, 100.0f), down = std::nextafter(down, -100.0f)) {
      if (up <= 88.3f) {
        ASSERT_TRUE(same(up)) << up;
      }
      ASSERT_TRUE(same(down)) << down;
    }
  }
  for (float x : {0.0f, -0.0f, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::denorm_min(), 3e-8f, -1e-30f, -0.5f, 1.0f, 88.0f})
    ASSERT_TRUE(same(x)) << x;
  EXPECT_GT(checked, 33'000'000u);
}

// A binary op of a tensor and a single value (the row broadcast with rows of one element, either operand the
// single one) at every level, on one thread and on the sharing path: each element exactly as the plain
// expression, NaN and infinities included.
TEST_P(EveryLevel, BinaryRowsAgainstASingleValueMatchThePlainExpression) {
  using kernels::cpu::BinaryKind;
  const ForcedLevel forced(GetParam());
  if (!forced.active()) GTEST_SKIP() << forced.why();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ud(-4.0f, 4.0f);
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{7}, std::int64_t{33}, std::int64_t{70001}}) {
    std::vector<float> big(static_cast<std::size_t>(n));
    for (float& v : big) v = ud(rng);
    big[0] = std::numeric_limits<float>::quiet_NaN();
    if (n > 2) big[2] = 0.0f;
    for (float scalar : {2.5f, 0.0f, -std::numeric_limits<float>::infinity()})
      for (BinaryKind op : {BinaryKind::add, BinaryKind::sub, BinaryKind::mul, BinaryKind::div})
        for (bool scalar_first : {false, true}) {
          std::vector<float> out(static_cast<std::size_t>(n) + 1, 7.0f);
          kernels::cpu::rows_f32(op, scalar_first ? &scalar : big.data(), scalar_first ? big.data() : &scalar,
                                 scalar_first, !scalar_first, n, 1, out.data());
          ASSERT_EQ(out[static_cast<std::size_t>(n)], 7.0f) << "wrote past the end";
          for (std::int64_t i = 0; i < n; ++i) {
            const float x = scalar_first ? scalar : big[static_cast<std::size_t>(i)];
            const float y = scalar_first ? big[static_cast<std::size_t>(i)] : scalar;
            const float want = op == BinaryKind::add   ? x + y
                               : op == BinaryKind::sub ? x - y
                               : op == BinaryKind::mul ? x * y
                                                       : x / y;
            const float got = out[static_cast<std::size_t>(i)];
            ASSERT_TRUE(std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(want) ||
                        (std::isnan(got) && std::isnan(want)))
                << isa_name(GetParam()) << " op " << static_cast<int>(op) << (scalar_first ? " scalar first" : "")
                << " at " << i << " of " << n << ": " << got << " against " << want;
          }
        }
  }
}

// Operands of one shape (or a single row against a repeated one) are one run of elements, shared among
// two threads by cache lines: every element is computed once, from its own operands, bit for bit the plain
// expression, at sizes below and above the sharing threshold and at odd ends.
TEST_P(EveryLevel, BinaryOfOneShapeIsSharedByElementsAndMatchesThePlainExpression) {
  using kernels::cpu::BinaryKind;
  const ForcedLevel forced(GetParam());
  if (!forced.active()) GTEST_SKIP() << forced.why();
  const int threads_before = omp_get_max_threads();
  omp_set_num_threads(2);
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> ud(-4.0f, 4.0f);
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{17}, std::int64_t{65536}, std::int64_t{131075}}) {
    std::vector<float> x(static_cast<std::size_t>(n)), y(x.size());
    for (float& v : x) v = ud(rng);
    for (float& v : y) v = ud(rng);
    for (BinaryKind op : {BinaryKind::add, BinaryKind::sub, BinaryKind::mul, BinaryKind::div})
      for (int form = 0; form < 3; ++form) {  // one shape; one row with a repeated b; with a repeated a
        std::vector<float> out(static_cast<std::size_t>(n) + 1, 7.0f);
        kernels::cpu::rows_f32(op, x.data(), y.data(), form == 2, form == 1, 1, n, out.data());
        ASSERT_EQ(out[static_cast<std::size_t>(n)], 7.0f) << "wrote past the end";
        for (std::size_t i = 0; i < x.size(); ++i) {
          const float want = op == BinaryKind::add   ? x[i] + y[i]
                             : op == BinaryKind::sub ? x[i] - y[i]
                             : op == BinaryKind::mul ? x[i] * y[i]
                                                     : x[i] / y[i];
          ASSERT_EQ(std::bit_cast<std::uint32_t>(out[i]), std::bit_cast<std::uint32_t>(want))
              << isa_name(GetParam()) << " op " << static_cast<int>(op) << " form " << form << " at " << i << " of "
              << n;
        }
      }
  }
  omp_set_num_threads(threads_before);
}

TEST(Gemm, AccumulateAddsIntoC) {
  std::vector<float> a{1, 2, 3, 4}, b{1, 0, 0, 1}, c{10, 10, 10, 10};
  kernels::cpu::sgemm(2, 2, 2, a.data(), 2, 1, b.data(), 2, 1, c.data(), 2, true);
  EXPECT_EQ(c, (std::vector<float>{11, 12, 13, 14}));
}

// Note [OpenBLAS's idle threads]: after a threaded OpenBLAS call its workers spin for about 0.1 s; parked
// (by openblas_threads too, whose count change starts them), they use no CPU while the caller sleeps, and the
// next threaded call starts them again with the same result.
TEST(Openblas, ParkedWorkersSpinNoMoreAndComeBackForTheNextCall) {
  const int threads_before = omp_get_max_threads();
  kernels::cpu::openblas_threads(1);
  const std::int64_t n = 192;
  std::vector<float> a(static_cast<std::size_t>(n * n)), b(a.size()), c(a.size()), want(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 7) - 3.0f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
  kernels::cpu::sgemm(n, n, n, a.data(), n, 1, b.data(), n, 1, want.data(), n, false);
  auto threaded_call = [&] {
    std::fill(c.begin(), c.end(), 0.0f);
    kernels::cpu::openblas_sgemm(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false);
  };
  // The process's CPU time while this thread sleeps 120 ms: what other threads spent meanwhile.
  auto cpu_ms_while_asleep = [] {
    auto cpu_ms = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
    };
    const double before = cpu_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    return cpu_ms() - before;
  };
  kernels::cpu::openblas_threads(2);
  const double counted = cpu_ms_while_asleep();
  threaded_call();
  const double spinning = cpu_ms_while_asleep();
  threaded_call();
  kernels::cpu::park_openblas_threads();
  const double parked = cpu_ms_while_asleep();
  threaded_call();
  for (std::size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], want[i], 1e-3f) << i;
  kernels::cpu::openblas_threads(threads_before);
  if (spinning < 30.0)
    GTEST_SKIP() << "OpenBLAS's workers spent " << spinning
                 << " ms of CPU after a threaded call (a serial OpenBLAS, one core, or a busy machine): "
                    "nothing to park here";
  EXPECT_LT(counted, 15.0) << "OpenBLAS's workers spent " << counted << " ms of CPU after its thread count was set ("
                           << spinning << " ms unparked)";
  EXPECT_LT(parked, 15.0) << "OpenBLAS's workers still spent " << parked << " ms of CPU after parking (" << spinning
                          << " ms unparked)";
}

TEST(Determinism, ReferenceIsBitwiseIdenticalAcrossThreadCounts) {
  const int saved = omp_get_max_threads();
  auto run_all = [&](int threads) {
    omp_set_num_threads(threads);
    std::mt19937 rng(17);
    std::vector<std::vector<double>> out;
    for (const auto& s : samples()) {
      std::vector<Tensor> ins;
      for (const auto& in : s.inputs) ins.push_back(make_input(in, DType::f32, rng));
      out.push_back(values_of(kernels::run_forward(*kernels::find_handler(kernels::reference_handlers(), s.op),
                                                   views_of(ins), s.attrs, KernelContext{s.training, 5})
                                  .as_view()));
    }
    return out;
  };
  auto one = run_all(1), two = run_all(2);
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), two.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].size(), two[i].size());
    if (one[i].empty()) continue;  // memcmp(nullptr) is UB
    EXPECT_EQ(std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(double)), 0) << describe(samples()[i]);
  }
}

// Larger native cases where the threaded and blocked paths engage.
// KernelContext::wanted_grads: a VJP asked for fewer gradients returns the others unchanged (bitwise),
// and the GEMM ops of native and blas skip the product of an unwanted x or weight gradient.
TEST(Providers, VjpsSkipUnwantedGradientsAndKeepTheOthers) {
  std::mt19937 rng(5);
  int skipped = 0;
  for (auto handlers : {kernels::reference_handlers(), kernels::native_handlers(), kernels::blas_handlers()}) {
    for (const auto& s : samples()) {
      const kernels::Handler* h = kernels::find_handler(handlers, s.op);
      if (h == nullptr || h->vjp == nullptr) continue;
      SCOPED_TRACE(std::string(h->provider) + " " + describe(s));
      std::vector<Tensor> ins;
      for (const auto& in : s.inputs) ins.push_back(make_input(in, DType::f32, rng));
      const KernelContext all{s.training, 41};
      const Tensor y = kernels::run_forward(*h, views_of(ins), s.attrs, all);
      std::vector<float> gv(static_cast<std::size_t>(y.numel()));
      std::normal_distribution<float> nd;
      for (auto& x : gv) x = nd(rng);
      const Tensor g = Tensor::from_values<float>(y.shape(), std::span<const float>(gv)).convert(y.dtype());
      const auto full = kernels::run_vjp(*h, views_of(ins), y.as_view(), g.as_view(), s.attrs, all);
      for (std::size_t skip = 0; skip < ins.size(); ++skip) {
        KernelContext some = all;
        some.wanted_grads = ~(std::uint64_t{1} << skip);
        const auto part = kernels::run_vjp(*h, views_of(ins), y.as_view(), g.as_view(), s.attrs, some);
        ASSERT_EQ(part.size(), full.size());
        for (std::size_t i = 0; i < full.size(); ++i) {
          if (i == skip) continue;
          ASSERT_EQ(part[i].has_value(), full[i].has_value()) << "input " << i;
          if (full[i]) {
            EXPECT_EQ(values_of(part[i]->as_view()), values_of(full[i]->as_view())) << "input " << i;
          }
        }
        const bool gemm_op = s.op == ops::OpTag::matmul || s.op == ops::OpTag::linear || s.op == ops::OpTag::conv2d;
        if (gemm_op && h->provider != "reference" && skip < 2) {
          EXPECT_FALSE(part[skip].has_value()) << "the unwanted gradient of input " << skip << " was computed";
          ++skipped;
        }
      }
    }
  }
  EXPECT_GT(skipped, 0);
}

}  // namespace
}  // namespace pact
