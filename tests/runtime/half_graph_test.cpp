// bf16 and f16 as compute dtypes end to end (issue 22 item 2): a decoder block whose parameters and
// activations are 16-bit plans under cpu-checked onto the half provider alone, runs, and agrees with the
// same block in f32 on the same (16-bit) numbers within what one rounding per op explains. The agreement
// check fails when a half kernel is wrong.

#include <gtest/gtest.h>

#include <random>

#include "pact/plan/planner.hpp"
#include "pact/runtime/executor.hpp"
#include "pact/runtime/retention.hpp"
#include "pact/runtime/torch_run.hpp"

namespace pact {
namespace {

using ops::OpTag;
using Ints = std::vector<std::int64_t>;

constexpr std::int64_t kSeq = 6, kModel = 32, kHeads = 2, kHidden = 64, kVocab = 20;

// ids -> embedding -> rms_norm -> causal attention (q, k, v, o projections) -> residual -> rms_norm ->
// SwiGLU-less MLP (silu) -> residual, every float value in `d`.
ir::Graph decoder_block(DType d) {
  ir::GraphBuilder b;
  b.input("ids", {1, kSeq}, DType::i64);
  b.parameter("table", {kVocab, kModel}, d);
  b.parameter("norm1", {kModel}, d);
  b.parameter("norm2", {kModel}, d);
  for (const char* w : {"wq", "wk", "wv", "wo"}) b.parameter(w, {kModel, kModel}, d);
  b.parameter("up", {kHidden, kModel}, d);
  b.parameter("up_bias", {kHidden}, d);
  b.parameter("down", {kModel, kHidden}, d);
  b.op("emb", OpTag::embedding, {"table", "ids"});
  b.op("h", OpTag::rms_norm, {"emb", "norm1"}, ops::Attributes{{"normalized_shape", Ints{kModel}}, {"eps", 1e-5}});
  for (const char* p : {"q", "k", "v"}) {
    const std::string id(p);
    b.op(id + "_proj", OpTag::linear, {"h", "w" + id});
    b.op(id + "_heads", OpTag::reshape, {id + "_proj"},
         ops::Attributes{{"shape", Ints{1, kSeq, kHeads, kModel / kHeads}}});
    b.op(id, OpTag::permute, {id + "_heads"}, ops::Attributes{{"dims", Ints{0, 2, 1, 3}}});
  }
  b.op("att", OpTag::scaled_dot_product_attention, {"q", "k", "v"}, ops::Attributes{{"is_causal", true}});
  b.op("att_t", OpTag::permute, {"att"}, ops::Attributes{{"dims", Ints{0, 2, 1, 3}}});
  b.op("att_flat", OpTag::reshape, {"att_t"}, ops::Attributes{{"shape", Ints{1, kSeq, kModel}}});
  b.op("o", OpTag::linear, {"att_flat", "wo"});
  b.op("r1", OpTag::add, {"emb", "o"});
  b.op("h2", OpTag::rms_norm, {"r1", "norm2"}, ops::Attributes{{"normalized_shape", Ints{kModel}}, {"eps", 1e-5}});
  b.op("u", OpTag::linear, {"h2", "up", "up_bias"});
  b.op("a", OpTag::silu, {"u"});
  b.op("dn", OpTag::linear, {"a", "down"});
  b.op("y", OpTag::add, {"r1", "dn"});
  b.output("y");
  return b.build();
}

// Random parameters as bf16 values (exactly f16 values too, at these magnitudes), in dtype `d`.
plan::SourceValues block_values(DType d) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd;
  const ir::Graph g = decoder_block(DType::f32);
  plan::SourceValues values;
  for (const auto& n : g.nodes) {
    if (n.op != OpTag::parameter) continue;
    std::vector<float> v(static_cast<std::size_t>(ops::numel(n.type.shape)));
    const float scale = n.type.shape.size() == 2 && n.id != "table" ? 0.2f : 1.0f;
    for (auto& x : v) x = from_bf16(to_bf16(n.id.starts_with("norm") ? 1.0f + 0.1f * nd(rng) : scale * nd(rng)));
    values.emplace(n.id, Tensor::from_values<float>(n.type.shape, v).convert(d));
  }
  values.emplace("ids", Tensor::from_values<std::int64_t>(Dims{1, kSeq}, std::vector<std::int64_t>{3, 1, 4, 1, 5, 9}));
  return values;
}

struct BlockRun {
  Tensor y;
  std::vector<std::string> capsules;
};

BlockRun run_block(DType d) {
  const contract::DefaultEvidenceResolver resolver;
  auto planned = plan::plan_graph(decoder_block(d), contract::builtin_profile("cpu-checked"), resolver,
                                  contract::VjpMode::forward_only);
  if (!planned) ADD_FAILURE() << plan::render_audit_table(planned.error().audit);
  BlockRun r{Tensor::zeros(Dims{1}, DType::f32), {}};
  if (!planned) return r;
  for (const auto& k : planned->audit().kernels) r.capsules.push_back(k.capsule->name);
  std::map<std::string, runtime::EagerTensor> bindings;
  for (auto& [id, t] : block_values(d)) bindings.emplace(id, runtime::EagerTensor{runtime::retain(std::move(t)), -1});
  auto result = runtime::execute(*planned, bindings);
  r.y = result.outputs.at("y").view().duplicate();
  return r;
}

double relative_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.convert(DType::f32);
  return runtime::compare_outputs("y", g.as_view(), want.as_view()).relative_error;
}

// What one rounding per op allows on this block (about a dozen ops deep): bf16 keeps 8 significant bits,
// f16 11. Measured: bf16 about 5e-3, f16 about 6e-4.
double allowed(DType d) { return d == DType::bf16 ? 3e-2 : 4e-3; }

TEST(HalfGraph, A16BitDecoderBlockRunsOnTheHalfProviderAndAgreesWithF32) {
  const BlockRun f32 = run_block(DType::f32);
  for (DType d : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    const BlockRun r = run_block(d);
    ASSERT_FALSE(r.capsules.empty());
    for (const auto& c : r.capsules) EXPECT_TRUE(c.starts_with("half.")) << c;
    EXPECT_EQ(r.y.dtype(), d);
    const double e = relative_error(r.y, f32.y);
    EXPECT_LT(e, allowed(d));
    EXPECT_GT(e, 0.0) << "a 16-bit run equal to f32 to the last bit rounded nothing";
  }
}

// A half linear that negates its result is found by the same agreement check.
Tensor negated_linear(std::span<const TensorView> in, const ops::Attributes& a, const kernels::KernelContext& c) {
  const auto& half = kernels::half_handlers();
  const Tensor y = kernels::find_handler(half, OpTag::linear)->forward(in, a, c);
  const TensorView v = y.as_view();
  return kernels::find_handler(half, OpTag::neg)->forward(std::span<const TensorView>(&v, 1), {}, c);
}

TEST(HalfGraph, TheAgreementCheckRefutesAWrongHalfKernel) {
  const BlockRun f32 = run_block(DType::f32);
  const kernels::Handler& real = *kernels::find_handler(kernels::half_handlers(), OpTag::linear);
  kernels::Handler mutant = real;
  mutant.forward = &negated_linear;
  const kernels::ScopedHandlerSubstitution swap(real, mutant);
  const BlockRun r = run_block(DType::bf16);
  EXPECT_GT(relative_error(r.y, f32.y), 10 * allowed(DType::bf16));
}

}  // namespace
}  // namespace pact
