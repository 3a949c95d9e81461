// The op sweep over the reference provider: coverage of the op table, finite-difference gradient checks
// in f64 for every differentiable input, bitwise determinism, and invariants.

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "sweep_util.hpp"

namespace pact {
namespace {

using namespace pact::test;
using kernels::KernelContext;

TEST(OpSweep, EveryKernelAndViewOpHasAReferenceHandlerAndASample) {
  std::set<ops::OpTag> sampled;
  for (const auto& s : samples()) sampled.insert(s.op);
  for (const auto& s : update_samples()) sampled.insert(s.op);
  for (const auto& op : ops::op_table()) {
    const bool needs = op.role == ops::OpRole::kernel || op.role == ops::OpRole::view || op.role == ops::OpRole::update;
    const kernels::Handler* h = kernels::find_handler(kernels::reference_handlers(), op.tag);
    EXPECT_EQ(h != nullptr, needs) << op.kind;
    if (!needs) continue;
    EXPECT_TRUE(sampled.count(op.tag)) << "no sample case for " << op.kind;
    if (h) {
      EXPECT_EQ(h->provider, "reference");
      EXPECT_EQ(h->device, DeviceKind::cpu);
      EXPECT_EQ(h->vjp != nullptr, op.has_vjp) << op.kind;
      EXPECT_EQ(h->update != nullptr, op.role == ops::OpRole::update) << op.kind;
      EXPECT_EQ(h->forward == nullptr, op.role == ops::OpRole::update) << op.kind;
    }
  }
}

// Finite differences of L(x) = sum(f(x) * r) against the VJP with cotangent r, in f64.
TEST(OpSweep, ReferenceGradientsMatchFiniteDifferences) {
  std::mt19937 rng(2026);
  for (const auto& s : samples()) {
    SCOPED_TRACE(describe(s));
    const kernels::Handler& h = *kernels::find_handler(kernels::reference_handlers(), s.op);
    if (!ops::op_info(s.op).has_vjp) {  // an inference-only op (conv2d_activation): no VJP to check
      EXPECT_EQ(h.vjp, nullptr);
      continue;
    }
    std::vector<Tensor> ins;
    for (const auto& in : s.inputs) ins.push_back(make_input(in, DType::f64, rng));
    const KernelContext ctx{s.training, 77};
    Tensor y = kernels::run_forward(h, views_of(ins), s.attrs, ctx);
    std::vector<double> rv(static_cast<std::size_t>(y.numel()));
    std::normal_distribution<double> nd;
    for (auto& x : rv) x = nd(rng);
    // The cotangent in the output's dtype (a cast's output need not be f64).
    Tensor r = Tensor::from_values<double>(y.shape(), std::span<const double>(rv)).convert(y.dtype());
    auto grads = kernels::run_vjp(h, views_of(ins), y.as_view(), r.as_view(), s.attrs, ctx);
    auto loss = [&](const std::vector<Tensor>& xs) {
      Tensor out = kernels::run_forward(h, views_of(xs), s.attrs, ctx);
      auto ov = values_of(out.as_view());
      double l = 0;
      for (std::size_t i = 0; i < ov.size(); ++i) l += ov[i] * rv[i];
      return l;
    };
    for (std::size_t i = 0; i < ins.size(); ++i) {
      SCOPED_TRACE("input " + std::to_string(i));
      const SampleInput::Kind kind = s.inputs[i].kind;
      const bool differentiable = kind == SampleInput::normal || kind == SampleInput::positive ||
                                  kind == SampleInput::wide || kind == SampleInput::small ||
                                  kind == SampleInput::whole || kind == SampleInput::tiny;
      const bool buffer = s.op == ops::OpTag::batch_norm && i >= 3;
      if (!differentiable || buffer) {
        EXPECT_FALSE(grads[i].has_value()) << "a gradient for a non-differentiable input";
        continue;
      }
      ASSERT_TRUE(grads[i].has_value());
      // Integer values tie in a max window, where max_pool2d has no derivative (its VJP's convention, the
      // first maximum, is what the providers are compared on): no difference to take.
      if (s.op == ops::OpTag::max_pool2d && kind == SampleInput::whole) continue;
      const auto analytic = values_of(grads[i]->as_view());
      std::vector<double> numeric(analytic.size());
      const double step = 1e-6;
      for (std::int64_t e = 0; e < ins[i].numel(); ++e) {
        std::vector<Tensor> plus, minus;
        for (std::size_t k = 0; k < ins.size(); ++k) {
          plus.push_back(k == i ? perturbed(ins[k], e, step) : ins[k].duplicate());
          minus.push_back(k == i ? perturbed(ins[k], e, -step) : ins[k].duplicate());
        }
        numeric[static_cast<std::size_t>(e)] = (loss(plus) - loss(minus)) / (2 * step);
      }
      EXPECT_TRUE(close(analytic, numeric, {1e-6, 1e-5}));
    }
  }
}

// The same values bit for bit (memcmp, so NaNs and signed zeros count), of the same count.
::testing::AssertionResult same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " values against " << b.size();
  if (!a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) != 0) {  // memcmp(nullptr) is UB
    return ::testing::AssertionFailure() << "the values differ in their bits";
  }
  return ::testing::AssertionSuccess();
}

TEST(OpSweep, ReferenceIsBitwiseDeterministic) {
  for (const auto& s : samples()) {
    SCOPED_TRACE(describe(s));
    const kernels::Handler& h = *kernels::find_handler(kernels::reference_handlers(), s.op);
    std::mt19937 rng(5);
    std::vector<Tensor> ins;
    for (const auto& in : s.inputs) ins.push_back(make_input(in, DType::f32, rng));
    const KernelContext ctx{s.training, 9};
    EXPECT_TRUE(same_bits(values_of(kernels::run_forward(h, views_of(ins), s.attrs, ctx).as_view()),
                          values_of(kernels::run_forward(h, views_of(ins), s.attrs, ctx).as_view())));
  }
  // The update ops: the same state twice, bit for bit, in f32 and f64.
  for (const auto& s : update_samples()) {
    SCOPED_TRACE(describe(s));
    const kernels::Handler& h = *kernels::find_handler(kernels::reference_handlers(), s.op);
    for (DType d : {DType::f32, DType::f64}) {
      std::mt19937 rng(5);
      std::vector<Tensor> ins;
      for (const auto& in : s.inputs) ins.push_back(make_input(in, d, rng));
      EXPECT_TRUE(same_bits(updated_state(h, ins, s.attrs), updated_state(h, ins, s.attrs)));
    }
  }
}

// Each update op against its definition computed here in double, element by element (PyTorch's
// formulas: torch.optim.SGD and Adam/AdamW, batch norm's running statistics with the unbiased variance).
TEST(OpSweep, ReferenceUpdatesFollowTheirDefinitions) {
  for (const auto& s : update_samples()) {
    SCOPED_TRACE(describe(s));
    const kernels::Handler& h = *kernels::find_handler(kernels::reference_handlers(), s.op);
    std::mt19937 rng(8);
    std::vector<Tensor> ins;
    for (const auto& in : s.inputs) ins.push_back(make_input(in, DType::f64, rng));
    std::vector<std::vector<double>> v;
    for (const auto& t : ins) v.push_back(values_of(t.as_view()));
    std::vector<double> want;
    const auto& a = s.attrs;
    switch (s.op) {
      case ops::OpTag::accumulate_grad:
        for (std::size_t i = 0; i < v[0].size(); ++i) want.push_back(v[0][i] + v[1][i]);
        break;
      case ops::OpTag::batch_norm_stats: {
        const double m = a.get_float("t", "momentum", 0.1);
        const Dims& xs = ins[2].shape();
        const std::int64_t n = xs[0], c = xs[1], inner = ins[2].numel() / (n * c);
        std::vector<double> mean(static_cast<std::size_t>(c)), var(static_cast<std::size_t>(c));
        for (std::int64_t ch = 0; ch < c; ++ch) {
          double sum = 0, sq = 0;
          for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t p = 0; p < inner; ++p) sum += v[2][static_cast<std::size_t>((b * c + ch) * inner + p)];
          const double mu = sum / static_cast<double>(n * inner);
          for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t p = 0; p < inner; ++p) {
              const double d = v[2][static_cast<std::size_t>((b * c + ch) * inner + p)] - mu;
              sq += d * d;
            }
          mean[static_cast<std::size_t>(ch)] = (1 - m) * v[0][static_cast<std::size_t>(ch)] + m * mu;
          var[static_cast<std::size_t>(ch)] =
              (1 - m) * v[1][static_cast<std::size_t>(ch)] + m * sq / static_cast<double>(n * inner - 1);
        }
        want = mean;
        want.insert(want.end(), var.begin(), var.end());
        break;
      }
      case ops::OpTag::sgd: {
        const double lr = a.get_float("t", "lr"), mom = a.get_float("t", "momentum", 0.0),
                     wd = a.get_float("t", "weight_decay", 0.0);
        std::vector<double> w = v[0], vel;
        for (std::size_t i = 0; i < w.size(); ++i) {
          const double d = v[1][i] + wd * v[0][i];
          if (v.size() > 2) vel.push_back(mom * v[2][i] + d);
          w[i] = v[0][i] - lr * (v.size() > 2 ? vel.back() : d);
        }
        want = w;
        want.insert(want.end(), vel.begin(), vel.end());
        break;
      }
      case ops::OpTag::adam: {
        const double lr = a.get_float("t", "lr"), wd = a.get_float("t", "weight_decay", 0.0);
        const bool decoupled = a.get_bool("t", "decoupled", false);
        const auto t = static_cast<double>(a.get_int("t", "step"));
        const double bc1 = 1 - std::pow(0.9, t), bc2 = 1 - std::pow(0.999, t);
        std::vector<double> w = v[0], m1 = v[2], m2 = v[3];
        for (std::size_t i = 0; i < w.size(); ++i) {
          if (decoupled) w[i] *= 1 - lr * wd;
          const double g = v[1][i] + (decoupled ? 0.0 : wd * v[0][i]);
          m1[i] = 0.9 * m1[i] + 0.1 * g;
          m2[i] = 0.999 * m2[i] + 0.001 * g * g;
          w[i] -= lr / bc1 * m1[i] / (std::sqrt(m2[i]) / std::sqrt(bc2) + 1e-8);
        }
        want = w;
        want.insert(want.end(), m1.begin(), m1.end());
        want.insert(want.end(), m2.begin(), m2.end());
        break;
      }
      default:
        FAIL() << "no definition for " << ops::op_kind(s.op);
    }
    EXPECT_TRUE(close(updated_state(h, ins, s.attrs), want, {1e-12, 1e-12}));
  }
}

TEST(OpSweep, StridedInputsGiveTheSameResultsAsContiguousOnes) {
  std::mt19937 rng(11);
  for (const auto& s : samples()) {
    SCOPED_TRACE(describe(s));
    const kernels::Handler& h = *kernels::find_handler(kernels::reference_handlers(), s.op);
    std::vector<Tensor> ins, transposed_owners;
    for (const auto& in : s.inputs) ins.push_back(make_input(in, DType::f32, rng));
    // Make each rank >= 2 input a transposed view of a transposed copy: same values, strided layout.
    std::vector<TensorView> strided;
    for (auto& t : ins) {
      if (t.rank() >= 2) {
        transposed_owners.push_back(t.transpose(0, t.rank() - 1).duplicate());
        strided.push_back(transposed_owners.back().transpose(0, t.rank() - 1));
      } else {
        strided.push_back(t.as_view());
      }
    }
    const KernelContext ctx{s.training, 3};
    auto a = values_of(kernels::run_forward(h, views_of(ins), s.attrs, ctx).as_view());
    auto b = values_of(kernels::run_forward(h, strided, s.attrs, ctx).as_view());
    EXPECT_EQ(a, b);
  }
}

TEST(Invariants, SoftmaxFamily) {
  std::mt19937 rng(1);
  const auto& ref = kernels::reference_handlers();
  Tensor x = make_input(N({6, 9}), DType::f64, rng);
  auto y = values_of(
      kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::softmax), std::vector{x.as_view()}, {}).as_view());
  for (int r = 0; r < 6; ++r) {
    double sum = 0;
    for (int c = 0; c < 9; ++c) sum += y[static_cast<std::size_t>(r * 9 + c)];
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  // Shift invariance: softmax(x + c) == softmax(x).
  Tensor shift = Tensor::from_values<double>(Dims{}, std::vector<double>{123.0});
  Tensor xs =
      kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::add), std::vector{x.as_view(), shift.as_view()}, {});
  auto ys = values_of(
      kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::softmax), std::vector{xs.as_view()}, {}).as_view());
  EXPECT_TRUE(close(ys, y, {1e-12, 1e-10}));
  auto ls =
      values_of(kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::log_softmax), std::vector{x.as_view()}, {})
                    .as_view());
  for (double v : ls) EXPECT_LE(v, 0.0);
  Tensor t = make_input(I({6}, 9), DType::f64, rng);
  auto ce = values_of(kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::cross_entropy),
                                           std::vector{x.as_view(), t.as_view()}, A{{"reduction", std::string("none")}})
                          .as_view());
  for (double v : ce) EXPECT_GE(v, 0.0);
}

TEST(Invariants, LayerNormHasZeroMeanAndUnitVariance) {
  std::mt19937 rng(2);
  Tensor x = make_input(N({5, 32}), DType::f64, rng);
  auto y = values_of(kernels::run_forward(*kernels::find_handler(kernels::reference_handlers(), ops::OpTag::layer_norm),
                                          std::vector{x.as_view()}, A{{"normalized_shape", L{32}}, {"eps", 0.0}})
                         .as_view());
  for (int r = 0; r < 5; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 32; ++c) mean += y[static_cast<std::size_t>(r * 32 + c)];
    mean /= 32;
    for (int c = 0; c < 32; ++c) var += std::pow(y[static_cast<std::size_t>(r * 32 + c)] - mean, 2);
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(var / 32, 1.0, 1e-10);
  }
}

TEST(BadInput, KernelsReportTheOpAndOperand) {
  const auto& ref = kernels::reference_handlers();
  Tensor x = Tensor::zeros(Dims{2, 3}, DType::f32);
  Tensor bad_target = Tensor::from_values<std::int64_t>(Dims{2}, std::vector<std::int64_t>{0, 3});
  try {
    kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::cross_entropy),
                         std::vector{x.as_view(), bad_target.as_view()}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::index_out_of_range);
    EXPECT_NE(std::string(e.what()).find("target"), std::string::npos) << e.what();
  }
  Tensor w = Tensor::zeros(Dims{4, 2}, DType::f32);
  Tensor idx = Tensor::from_values<std::int64_t>(Dims{1}, std::vector<std::int64_t>{-1});
  try {
    kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::embedding), std::vector{w.as_view(), idx.as_view()},
                         {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::index_out_of_range);
  }
  Tensor m = Tensor::zeros(Dims{3, 4}, DType::f32);
  try {
    kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::matmul), std::vector{x.as_view(), x.as_view()}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.operation(), "matmul");
  }
  Tensor meta = Tensor::empty(Dims{2, 3}, DType::f32, meta_provider());
  EXPECT_THROW(kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::relu), std::vector{meta.as_view()}, {}),
               Error);
  Tensor g = Tensor::zeros(Dims{3}, DType::f32);
  Tensor y = kernels::run_forward(*kernels::find_handler(ref, ops::OpTag::relu), std::vector{m.as_view()}, {});
  EXPECT_THROW(kernels::run_vjp(*kernels::find_handler(ref, ops::OpTag::relu), std::vector{m.as_view()}, y.as_view(),
                                g.as_view(), {}),
               Error);
}

// The indexing and selection ops refuse what they cannot address, typed, naming the op and the operand:
// an index outside its dimension, a non-bool condition, a source of the wrong shape, an impossible k, an
// arange that never reaches its end.
TEST(BadInput, IndexingOpsRefuseIndicesAndShapesTheyCannotAddress) {
  using ops::OpTag;
  const auto& ref = kernels::reference_handlers();
  auto fails = [&](OpTag op, std::vector<TensorView> ins, const ops::Attributes& a, ErrorCode code, const char* says) {
    try {
      kernels::run_forward(*kernels::find_handler(ref, op), ins, a);
      ADD_FAILURE() << ops::op_kind(op) << " accepted " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_EQ(e.operation(), std::string(ops::op_kind(op))) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  auto idx = [](Dims shape, std::vector<std::int64_t> v) { return Tensor::from_values<std::int64_t>(shape, v); };
  const Tensor x = Tensor::zeros(Dims{3, 5}, DType::f32), row = Tensor::zeros(Dims{1, 5}, DType::f32);
  const Tensor empty = Tensor::zeros(Dims{0, 3}, DType::f32);
  const Tensor past = idx({3, 1}, {0, 5, 1}), tall = idx({4, 1}, {0, 1, 2, 3}), negative = idx({2}, {0, -1});
  const Tensor three = idx({1}, {3}), two = idx({2}, {0, 1});
  const ops::Attributes dim1{{"dim", std::int64_t{1}}}, dim0{{"dim", std::int64_t{0}}};
  fails(OpTag::gather, {x.as_view(), past.as_view()}, dim1, ErrorCode::index_out_of_range, "'index'[1] = 5");
  fails(OpTag::gather, {x.as_view(), tall.as_view()}, dim1, ErrorCode::invalid_argument, "larger than x");
  fails(OpTag::index_select, {x.as_view(), negative.as_view()}, dim0, ErrorCode::index_out_of_range, "'index'[1] = -1");
  fails(OpTag::index_copy, {x.as_view(), three.as_view(), row.as_view()}, dim0, ErrorCode::index_out_of_range,
        "is outside [0, 3)");
  fails(OpTag::index_copy, {x.as_view(), two.as_view(), row.as_view()}, dim0, ErrorCode::invalid_argument,
        "source has shape [1, 5]");
  fails(OpTag::where, {x.as_view(), x.as_view(), x.as_view()}, {}, ErrorCode::dtype_mismatch, "'condition' is f32");
  fails(OpTag::topk, {x.as_view()}, {{"k", std::int64_t{6}}}, ErrorCode::invalid_argument, "k = 6");
  fails(OpTag::arange, {}, {{"start", std::int64_t{0}}, {"end", std::int64_t{5}}, {"step", std::int64_t{-1}}},
        ErrorCode::invalid_argument, "moves away");
  fails(OpTag::arange, {}, {{"end", 4.0}, {"step", 0.0}}, ErrorCode::invalid_argument, "nonzero step");
  fails(OpTag::argmax, {empty.as_view()}, {}, ErrorCode::invalid_argument, "empty");
  fails(OpTag::interpolate, {x.as_view()}, {{"size", std::vector<std::int64_t>{4, 4}}}, ErrorCode::invalid_argument,
        "expected rank 4..4");
  fails(OpTag::cast, {x.as_view()}, {{"dtype", std::string("c64")}}, ErrorCode::invalid_argument, "c64");
}

}  // namespace
}  // namespace pact
