// The op table's saves column (Note [Op table]) against every VJP: the tape retains only what the column
// names and hands the VJP a geometry-only placeholder for everything else, so a VJP that reads an unsaved
// input or output must be caught here, on every sample of the op sweep, for every provider.

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "pact/kernels/kernel.hpp"
#include "sweep_util.hpp"

namespace pact::test {
namespace {

using kernels::KernelContext;

std::vector<std::optional<Tensor>> vjp_with(const kernels::Handler& h, const Sample& s, const std::vector<Tensor>& ins,
                                            const Tensor& y, const Tensor& g, std::uint32_t kept) {
  std::vector<Tensor> placeholders;
  placeholders.reserve(ins.size() + 1);
  std::vector<TensorView> in;
  for (std::size_t k = 0; k < ins.size(); ++k) {
    if ((kept >> k & 1u) != 0) {
      in.push_back(ins[k].as_view());
    } else {
      placeholders.push_back(Tensor::empty(ins[k].shape(), ins[k].dtype(), meta_provider()));
      in.push_back(placeholders.back().as_view());
    }
  }
  Tensor y_placeholder = Tensor::empty(y.shape(), y.dtype(), meta_provider());
  const TensorView out = (kept & ops::operand::out) != 0 ? y.as_view() : y_placeholder.as_view();
  return kernels::run_vjp(h, in, out, g.as_view(), s.attrs, KernelContext{s.training, 41});
}

TEST(SavesColumn, EveryVjpReadsOnlyWhatItsOpSaves) {
  std::mt19937 rng(17);
  int checked = 0;
  for (const auto& s : samples()) {
    const ops::OpInfo& info = ops::op_info(s.op);
    for (auto handlers : {kernels::reference_handlers(), kernels::native_handlers(), kernels::blas_handlers()}) {
      const kernels::Handler* h = kernels::find_handler(handlers, s.op);
      if (h == nullptr || h->vjp == nullptr) continue;
      SCOPED_TRACE(std::string(h->provider) + " " + describe(s));
      for (DType dtype : {DType::f32, DType::f64}) {
        if (h->provider == "blas" && dtype == DType::f64) continue;  // blas computes f32 only
        std::vector<Tensor> ins;
        for (const auto& in : s.inputs) ins.push_back(make_input(in, dtype, rng));
        const Tensor y = kernels::run_forward(*h, views_of(ins), s.attrs, KernelContext{s.training, 41});
        std::vector<double> gv(static_cast<std::size_t>(y.numel()));
        std::normal_distribution<double> nd;
        for (auto& x : gv) x = nd(rng);
        const Tensor g = Tensor::from_values<double>(y.shape(), std::span<const double>(gv)).convert(y.dtype());
        const auto full = vjp_with(*h, s, ins, y, g, ~std::uint32_t{0});
        std::vector<std::optional<Tensor>> saved;
        try {
          saved = vjp_with(*h, s, ins, y, g, info.saves);
        } catch (const Error& e) {
          ADD_FAILURE() << "the VJP reads an operand its op does not save: " << e.what();
          continue;
        }
        ASSERT_EQ(saved.size(), full.size());
        for (std::size_t k = 0; k < full.size(); ++k) {
          ASSERT_EQ(saved[k].has_value(), full[k].has_value()) << "input " << k;
          if (full[k]) {
            EXPECT_EQ(values_of(saved[k]->as_view()), values_of(full[k]->as_view())) << "input " << k;
          }
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(SavesColumn, AVjpThatReadsAnUnsavedOperandIsCaught) {
  // The check above can fail: with relu's output withheld (as a table that forgot `out` would), its VJP
  // refuses typed instead of silently reading something else.
  std::mt19937 rng(3);
  const Sample s{ops::OpTag::relu, {N({4, 5})}, {}};
  for (auto handlers : {kernels::reference_handlers(), kernels::native_handlers()}) {
    const kernels::Handler& h = *kernels::find_handler(handlers, ops::OpTag::relu);
    std::vector<Tensor> ins;
    ins.push_back(make_input(s.inputs[0], DType::f32, rng));
    const Tensor y = kernels::run_forward(h, views_of(ins), s.attrs, {});
    const Tensor g = y.duplicate();
    try {
      vjp_with(h, s, ins, y, g, ops::operand::in0);
      ADD_FAILURE() << h.provider << ": relu's VJP ran without its saved output";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::no_host_bytes) << e.what();
    }
  }
}

}  // namespace
}  // namespace pact::test
