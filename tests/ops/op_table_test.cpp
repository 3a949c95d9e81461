// The op table: wire round trip, arity and attribute schema checks, shape rules, FLOP rules, and the
// generated catalogue in lockstep with docs/ops.md.

#include "pact/ops/op_table.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "../support/expect_error.hpp"
#include "pact/ops/catalogue.hpp"

namespace pact::ops {
namespace {

using ::pact::test::code_of;

TensorType f32(Dims shape) { return {DType::f32, shape}; }
TensorType i64(Dims shape) { return {DType::i64, shape}; }

TEST(OpTable, EveryTagRoundTripsThroughItsWireKind) {
  std::set<std::string_view> kinds;
  for (const auto& op : op_table()) {
    EXPECT_EQ(parse_op_kind(op.kind), op.tag);
    EXPECT_EQ(op_kind(op.tag), op.kind);
    EXPECT_EQ(&op_info(op.tag), &op);
    EXPECT_TRUE(kinds.insert(op.kind).second) << "duplicate kind " << op.kind;
    EXPECT_TRUE(op.shape != nullptr && op.flops != nullptr);
  }
  EXPECT_EQ(static_cast<int>(kinds.size()), kOpCount);
  EXPECT_EQ(code_of([] { parse_op_kind("Matmul"); }), ErrorCode::parse_error);
  EXPECT_EQ(code_of([] { parse_op_kind(""); }), ErrorCode::parse_error);
}

// Shapes and attributes come from model files: no rule wraps around int64 (issue 21 item 5). Each case
// was accepted (with a wrapped result) or was undefined behaviour before the rules checked their
// arithmetic; now each is a typed invalid_argument naming the op.
TEST(ShapeRules, OverflowFromAModelFileIsATypedError) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  auto refused = [](OpTag op, std::vector<TensorType> in, const Attributes& a) {
    auto infer = [&] { infer_type(op, in, a); };
    return code_of(infer) == ErrorCode::invalid_argument &&
           ::pact::test::mentions(::pact::test::message_of(infer), std::string(op_kind(op)));
  };
  // concat of [INT64_MAX], [INT64_MAX], [18]: the sum wrapped to 16.
  EXPECT_TRUE(
      refused(OpTag::concat, {i64(Dims{kMax / 8}), i64(Dims{kMax / 8}), i64(Dims{18})}, {{"dim", std::int64_t{0}}}));
  EXPECT_TRUE(refused(OpTag::concat, {f32(Dims{kMax / 4}), f32(Dims{kMax / 4})}, {{"dim", std::int64_t{0}}}));
  // An operand whose element count or byte size does not fit.
  EXPECT_TRUE(refused(OpTag::relu, {f32(Dims{std::int64_t{1} << 32, std::int64_t{1} << 32})}, {}));
  EXPECT_TRUE(refused(OpTag::relu, {f32(Dims{std::int64_t{1} << 62})}, {}));  // 2^62 floats are 2^64 bytes
  // reshape's -1 against an input whose count overflows; flatten's product.
  EXPECT_TRUE(refused(OpTag::reshape, {f32(Dims{std::int64_t{1} << 40, std::int64_t{1} << 40})},
                      {{"shape", std::vector<std::int64_t>{-1}}}));
  EXPECT_TRUE(refused(OpTag::flatten, {f32(Dims{std::int64_t{1} << 31, std::int64_t{1} << 31, 8})}, {}));
  // A pool or convolution whose padding or dilation overflows the padded extent.
  EXPECT_TRUE(refused(OpTag::max_pool2d, {f32(Dims{1, 1, 8, 8})},
                      {{"kernel_size", std::vector<std::int64_t>{3}}, {"dilation", std::vector<std::int64_t>{kMax}}}));
  EXPECT_TRUE(refused(OpTag::conv2d, {f32(Dims{1, 1, 8, 8}), f32(Dims{1, 1, 3, 3})},
                      {{"padding", std::vector<std::int64_t>{kMax / 2 + 1}}}));
  // matmul whose broadcast batch makes an output too large.
  EXPECT_TRUE(
      refused(OpTag::matmul, {f32(Dims{std::int64_t{1} << 31, 1, 1, 4}), f32(Dims{std::int64_t{1} << 31, 4, 1})}, {}));
  // A slice step near INT64_MAX counts one element (it wrapped to a negative count).
  const std::vector<TensorType> seven{f32(Dims{7, 3})};
  EXPECT_EQ(
      infer_type(OpTag::slice, seven, {{"dim", std::int64_t{0}}, {"start", std::int64_t{1}}, {"step", kMax}}).shape,
      (Dims{1, 3}));
  // FLOP estimates saturate instead of wrapping.
  const TensorType big = f32(Dims{std::int64_t{1} << 21, std::int64_t{1} << 21});  // 2 * 2^42 * 2^21 FLOPs
  const std::vector<TensorType> pair{big, big};
  const TensorType out = infer_type(OpTag::matmul, pair, {});
  EXPECT_EQ(estimate_flops(OpTag::matmul, pair, out, {}), std::numeric_limits<std::int64_t>::max());
}

// The maps (what a batch axis and the channels-last layout pass through) take one operand and give its
// shape back; ops with a dimension, a shape or a second operand are none (the layout choice's own evidence,
// Fusion.ChannelsLastPassesThroughSqueezeAndExcitation, holds a moved map's values to the NCHW graph's).
TEST(OpTable, ElementwiseMapsActOnEachElementAlone) {
  int maps = 0;
  const Dims shape{2, 3, 4};
  for (const auto& row : op_table()) {
    if (!elementwise_map(row.tag)) continue;
    SCOPED_TRACE(row.kind);
    ++maps;
    EXPECT_EQ(row.min_arity, 1);
    EXPECT_EQ(row.max_arity, 1);
    const Attributes attrs = row.tag == OpTag::clamp ? Attributes{{"min", 0.5}} : Attributes{};
    EXPECT_EQ(infer_type(row.tag, std::vector<TensorType>{{DType::f32, shape}}, attrs).shape, shape);
  }
  EXPECT_EQ(maps, 15);
  for (OpTag op : {OpTag::softmax, OpTag::mean, OpTag::add, OpTag::reshape, OpTag::permute, OpTag::dropout,
                   OpTag::cumsum, OpTag::conv2d})
    EXPECT_FALSE(elementwise_map(op)) << op_kind(op);
}

TEST(OpTable, SpecOpListIsPresent) {
  for (const char* kind : {"input",
                           "parameter",
                           "constant",
                           "add",
                           "sub",
                           "mul",
                           "div",
                           "neg",
                           "matmul",
                           "linear",
                           "relu",
                           "gelu",
                           "silu",
                           "tanh",
                           "sigmoid",
                           "clamp",
                           "exp",
                           "log",
                           "sqrt",
                           "softmax",
                           "log_softmax",
                           "cross_entropy",
                           "mse_loss",
                           "layer_norm",
                           "rms_norm",
                           "batch_norm",
                           "dropout",
                           "embedding",
                           "scaled_dot_product_attention",
                           "conv2d",
                           "max_pool2d",
                           "avg_pool2d",
                           "adaptive_avg_pool2d",
                           "reshape",
                           "permute",
                           "transpose",
                           "flatten",
                           "concat",
                           "slice",
                           "sum",
                           "mean",
                           "max",
                           "output"}) {
    EXPECT_NO_THROW(parse_op_kind(kind)) << kind;
  }
  EXPECT_TRUE(op_info(OpTag::dropout).mode_dependent);
  EXPECT_TRUE(op_info(OpTag::batch_norm).mode_dependent);
  EXPECT_FALSE(op_info(OpTag::conv2d).mode_dependent);
  EXPECT_FALSE(op_info(OpTag::input).runtime_relevant());
  EXPECT_TRUE(op_info(OpTag::transpose).runtime_relevant());  // a planned view node materialises
  EXPECT_FALSE(op_info(OpTag::output).runtime_relevant());
  EXPECT_TRUE(op_info(OpTag::matmul).runtime_relevant());
}

TEST(OpTable, ArityAndAttributeSchemaAreChecked) {
  std::vector<TensorType> one{f32({2})};
  EXPECT_EQ(code_of([&] { infer_type(OpTag::add, one, {}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              infer_type(OpTag::softmax, one, Attributes{{"axis", std::int64_t{0}}});
            }),
            ErrorCode::invalid_argument);  // unknown attribute
  EXPECT_EQ(code_of([&] {
              infer_type(OpTag::softmax, one, Attributes{{"dim", 0.5}});
            }),
            ErrorCode::invalid_argument);                                                         // wrong type
  EXPECT_EQ(code_of([&] { infer_type(OpTag::reshape, one, {}); }), ErrorCode::invalid_argument);  // missing
  EXPECT_EQ(code_of([&] { infer_type(OpTag::concat, std::vector<TensorType>{}, {}); }), ErrorCode::invalid_argument);
  try {
    infer_type(OpTag::linear, std::vector<TensorType>{f32({4, 3}), f32({5, 2})}, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.operation(), "linear");
    EXPECT_NE(e.detail().find("weight"), std::string::npos) << e.what();
  }
}

TEST(ShapeRules, ElementwiseBroadcastsAsNumPy) {
  EXPECT_EQ(infer_type(OpTag::add, std::vector{f32({4, 1, 3}), f32({5, 1})}, {}).shape, (Dims{4, 5, 3}));
  EXPECT_EQ(infer_type(OpTag::mul, std::vector{f32({}), f32({2, 2})}, {}).shape, (Dims{2, 2}));
  EXPECT_EQ(code_of([] { infer_type(OpTag::sub, std::vector{f32({3}), f32({4})}, {}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] {
              infer_type(OpTag::div, std::vector{f32({3}), TensorType{DType::f64, Dims{3}}}, {});
            }),
            ErrorCode::dtype_mismatch);
}

TEST(ShapeRules, MatmulFollowsTorchRules) {
  auto mm = [](Dims a, Dims b) { return infer_type(OpTag::matmul, std::vector{f32(a), f32(b)}, {}).shape; };
  EXPECT_EQ(mm({3}, {3}), (Dims{}));
  EXPECT_EQ(mm({2, 3}, {3, 4}), (Dims{2, 4}));
  EXPECT_EQ(mm({3}, {3, 4}), (Dims{4}));
  EXPECT_EQ(mm({2, 3}, {3}), (Dims{2}));
  EXPECT_EQ(mm({5, 1, 2, 3}, {7, 3, 4}), (Dims{5, 7, 2, 4}));
  EXPECT_EQ(code_of([&] { mm({2, 3}, {4, 5}); }), ErrorCode::invalid_argument);
}

// linear_int8: an i8 weight [out, in], one scale per output in x's dtype, an optional bias; 16-bit x too.
TEST(ShapeRules, LinearInt8TakesAnI8WeightAndPerOutputScales) {
  auto run = [](DType x, Dims xs, DType w, Dims ws, Dims scale, std::optional<Dims> bias = std::nullopt) {
    std::vector<TensorType> in{{x, xs}, {w, ws}, {x, scale}};
    if (bias) in.push_back({x, *bias});
    return infer_type(OpTag::linear_int8, in, {});
  };
  EXPECT_EQ(run(DType::f32, {2, 3, 8}, DType::i8, {5, 8}, {5}, Dims{5}), (TensorType{DType::f32, {2, 3, 5}}));
  EXPECT_EQ(run(DType::bf16, {1, 8}, DType::i8, {5, 8}, {5}), (TensorType{DType::bf16, {1, 5}}));
  EXPECT_EQ(code_of([&] { run(DType::f32, {2, 8}, DType::f32, {5, 8}, {5}); }), ErrorCode::dtype_mismatch);
  EXPECT_EQ(code_of([&] { run(DType::f32, {2, 8}, DType::i8, {5, 7}, {5}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { run(DType::f32, {2, 8}, DType::i8, {5, 8}, {1}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { run(DType::f32, {2, 8}, DType::i8, {5, 8}, {5}, Dims{4}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { run(DType::i64, {2, 8}, DType::i8, {5, 8}, {5}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(estimate_flops(OpTag::linear_int8, std::vector<TensorType>{f32({2, 8}), {DType::i8, {5, 8}}, f32({5})},
                           f32({2, 5}), {}),
            2 * 10 * 8 + 10);
}

// linear_bf16: a bf16 weight [out, in] against float x, an optional bias in x's dtype; the result in x's dtype.
TEST(ShapeRules, LinearBf16TakesABf16WeightAndFloatActivations) {
  auto run = [](DType x, Dims xs, DType w, Dims ws, std::optional<Dims> bias = std::nullopt, DType b = DType::f32) {
    std::vector<TensorType> in{{x, xs}, {w, ws}};
    if (bias) in.push_back({b, *bias});
    return infer_type(OpTag::linear_bf16, in, {});
  };
  EXPECT_EQ(run(DType::f32, {2, 3, 8}, DType::bf16, {5, 8}, Dims{5}), (TensorType{DType::f32, {2, 3, 5}}));
  EXPECT_EQ(run(DType::f64, {8}, DType::bf16, {5, 8}, Dims{5}, DType::f64), (TensorType{DType::f64, {5}}));
  EXPECT_EQ(code_of([&] { run(DType::f32, {2, 8}, DType::f32, {5, 8}); }), ErrorCode::dtype_mismatch);
  EXPECT_EQ(code_of([&] { run(DType::f32, {2, 8}, DType::f16, {5, 8}); }), ErrorCode::dtype_mismatch);
  EXPECT_EQ(code_of([&] { run(DType::f32, {2, 8}, DType::bf16, {5, 7}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { run(DType::f32, {2, 8}, DType::bf16, {5, 8}, Dims{4}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              run(DType::f32, {2, 8}, DType::bf16, {5, 8}, Dims{5}, DType::bf16);
            }),
            ErrorCode::dtype_mismatch);
  EXPECT_EQ(code_of([&] { run(DType::i64, {2, 8}, DType::bf16, {5, 8}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { run(DType::f32, {}, DType::bf16, {5, 8}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(
      estimate_flops(OpTag::linear_bf16, std::vector<TensorType>{f32({2, 8}), {DType::bf16, {5, 8}}}, f32({2, 5}), {}),
      2 * 10 * 8);
}

// rotary_embedding: x's type; cos and sin of one shape that broadcasts to x's, an even last dimension.
TEST(ShapeRules, RotaryEmbeddingTakesTablesThatBroadcastToAnEvenLastDimension) {
  auto run = [](Dims x, Dims c, Dims s, DType d = DType::f32, DType table = DType::f32) {
    return infer_type(OpTag::rotary_embedding, std::vector<TensorType>{{d, x}, {table, c}, {table, s}}, {});
  };
  EXPECT_EQ(run({1, 4, 3, 8}, {1, 1, 3, 8}, {1, 1, 3, 8}), (TensorType{DType::f32, {1, 4, 3, 8}}));
  EXPECT_EQ(run({2, 5, 6}, {5, 1}, {5, 1}, DType::bf16, DType::bf16), (TensorType{DType::bf16, {2, 5, 6}}));
  EXPECT_EQ(code_of([&] { run({1, 4, 3, 7}, {3, 7}, {3, 7}); }), ErrorCode::invalid_argument);        // odd
  EXPECT_EQ(code_of([&] { run({1, 4, 3, 8}, {3, 8}, {1, 3, 8}); }), ErrorCode::invalid_argument);     // cos != sin
  EXPECT_EQ(code_of([&] { run({1, 4, 3, 8}, {2, 3, 8}, {2, 3, 8}); }), ErrorCode::invalid_argument);  // grows x
  EXPECT_EQ(code_of([&] { run({3, 8}, {5, 3, 8}, {5, 3, 8}); }), ErrorCode::invalid_argument);        // outranks x
  EXPECT_EQ(code_of([&] { run({3, 8}, {3, 8}, {3, 8}, DType::f32, DType::bf16); }), ErrorCode::dtype_mismatch);
  EXPECT_EQ(code_of([&] { run({}, {}, {}); }), ErrorCode::invalid_argument);
}

// The 16-bit tolerances: the f32 ones widened to a multiple of the unit roundoff (Note [16-bit tolerances]).
TEST(OpTable, SixteenBitTolerancesWidenTheF32OnesByTheUnitRoundoff) {
  const OpInfo& relu = op_info(OpTag::relu);
  const OpInfo& linear = op_info(OpTag::linear);
  EXPECT_EQ(relu.tolerance(DType::f32).rel, 0.0);
  EXPECT_EQ(relu.tolerance(DType::bf16).rel, 0x1p-8);
  EXPECT_EQ(relu.tolerance(DType::f16).rel, 0x1p-11);
  EXPECT_EQ(linear.tolerance(DType::bf16).rel, 4 * 0x1p-8);
  EXPECT_EQ(linear.tolerance(DType::f64).rel, linear.tolerance().rel);
  EXPECT_GT(linear.vjp_tolerance(DType::bf16).rel, linear.tolerance(DType::bf16).rel);
}

TEST(ShapeRules, ConvAndPoolingMatchPyTorch) {
  Attributes conv{{"stride", std::vector<std::int64_t>{2}}, {"padding", std::vector<std::int64_t>{3}}};
  // ResNet-18 stem: 1x3x224x224, 64 filters 7x7 stride 2 padding 3 -> 1x64x112x112.
  EXPECT_EQ(infer_type(OpTag::conv2d, std::vector{f32({1, 3, 224, 224}), f32({64, 3, 7, 7})}, conv).shape,
            (Dims{1, 64, 112, 112}));
  // Depthwise: groups = channels.
  Attributes dw{{"groups", std::int64_t{32}}, {"padding", std::vector<std::int64_t>{1}}};
  EXPECT_EQ(infer_type(OpTag::conv2d, std::vector{f32({2, 32, 9, 9}), f32({32, 1, 3, 3}), f32({32})}, dw).shape,
            (Dims{2, 32, 9, 9}));
  EXPECT_EQ(code_of([&] {
              infer_type(OpTag::conv2d, std::vector{f32({1, 3, 8, 8}), f32({4, 2, 3, 3})}, {});
            }),
            ErrorCode::invalid_argument);
  // max_pool2d(3, stride 2, padding 1) on 112 -> 56; ceil_mode matters on odd sizes.
  Attributes mp{{"kernel_size", std::vector<std::int64_t>{3}},
                {"stride", std::vector<std::int64_t>{2}},
                {"padding", std::vector<std::int64_t>{1}}};
  EXPECT_EQ(infer_type(OpTag::max_pool2d, std::vector{f32({1, 64, 112, 112})}, mp).shape, (Dims{1, 64, 56, 56}));
  Attributes floor_mode{{"kernel_size", std::vector<std::int64_t>{2}}};
  Attributes ceil_mode{{"kernel_size", std::vector<std::int64_t>{2}}, {"ceil_mode", true}};
  EXPECT_EQ(infer_type(OpTag::max_pool2d, std::vector{f32({1, 1, 5, 5})}, floor_mode).shape, (Dims{1, 1, 2, 2}));
  EXPECT_EQ(infer_type(OpTag::max_pool2d, std::vector{f32({1, 1, 5, 5})}, ceil_mode).shape, (Dims{1, 1, 3, 3}));
  // torch: avg_pool2d(3, stride 2, ceil_mode) on 6 -> 3 (the last window would start at 6 >= 6 + 0: dropped)
  Attributes ap{
      {"kernel_size", std::vector<std::int64_t>{3}}, {"stride", std::vector<std::int64_t>{2}}, {"ceil_mode", true}};
  EXPECT_EQ(infer_type(OpTag::avg_pool2d, std::vector{f32({1, 1, 6, 6})}, ap).shape, (Dims{1, 1, 3, 3}));
  Attributes bad_pad{{"kernel_size", std::vector<std::int64_t>{2}}, {"padding", std::vector<std::int64_t>{2}}};
  EXPECT_EQ(code_of([&] {
              infer_type(OpTag::avg_pool2d, std::vector{f32({1, 1, 6, 6})}, bad_pad);
            }),
            ErrorCode::invalid_argument);
  Attributes ad{{"output_size", std::vector<std::int64_t>{1, 1}}};
  EXPECT_EQ(infer_type(OpTag::adaptive_avg_pool2d, std::vector{f32({2, 512, 7, 7})}, ad).shape, (Dims{2, 512, 1, 1}));
}

// The message of the shape rule's refusal (an invalid_argument), or "" when the rule accepts.
std::string shape_refusal(OpTag op, const std::vector<TensorType>& in, const Attributes& a) {
  try {
    infer_type(op, in, a);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    return e.what();
  }
  return "";
}

// conv2d_activation's fourth input, the residual, has the output's type; activation "none" needs it.
TEST(ShapeRules, ConvActivationTakesAResidualOfTheOutputsType) {
  const Attributes relu{{"padding", std::vector<std::int64_t>{1}}, {"activation", std::string("relu")}};
  const Attributes none{{"padding", std::vector<std::int64_t>{1}}, {"activation", std::string("none")}};
  const Attributes gelu{{"padding", std::vector<std::int64_t>{1}}, {"activation", std::string("gelu")}};
  const auto x = f32({2, 3, 8, 8}), w = f32({4, 3, 3, 3}), b = f32({4}), r = f32({2, 4, 8, 8});
  EXPECT_EQ(infer_type(OpTag::conv2d_activation, std::vector{x, w, b, r}, relu).shape, (Dims{2, 4, 8, 8}));
  EXPECT_EQ(infer_type(OpTag::conv2d_activation, std::vector{x, w, b, r}, none).shape, (Dims{2, 4, 8, 8}));
  auto refusal = [](const std::vector<TensorType>& in, const Attributes& a) {
    return shape_refusal(OpTag::conv2d_activation, in, a);
  };
  for (const auto& wrong : {f32({2, 4, 8, 7}), f32({1, 4, 8, 8}), f32({4, 8, 8}), TensorType{DType::f64, {2, 4, 8, 8}}})
    EXPECT_NE(refusal({x, w, b, wrong}, relu).find("operand 'residual'"), std::string::npos) << wrong.shape.to_string();
  EXPECT_NE(refusal({x, w, b}, none).find("activation 'none'"), std::string::npos);
  EXPECT_NE(refusal({x, w, b, r}, gelu).find("activation 'gelu'"), std::string::npos);
  // The flops: the convolution's, its bias, the residual add and the activation.
  EXPECT_EQ(
      estimate_flops(OpTag::conv2d_activation, std::vector{x, w, b, r}, TensorType{DType::f32, {2, 4, 8, 8}}, relu),
      2LL * 2 * 4 * 64 * 27 + 3LL * 2 * 4 * 64);
}

// conv2d_nhwc: channels-last input [N, H, W, C], weight [KH, KW, C / groups, O], output [N, OH, OW, O];
// activation "none" needs no residual; each wrong operand is refused naming it.
TEST(ShapeRules, ChannelsLastConvolution) {
  const Attributes none{{"padding", std::vector<std::int64_t>{1}},
                        {"stride", std::vector<std::int64_t>{2}},
                        {"activation", std::string("none")}};
  const auto x = f32({2, 9, 8, 6}), w = f32({3, 3, 6, 4}), b = f32({4}), r = f32({2, 5, 4, 4});
  EXPECT_EQ(infer_type(OpTag::conv2d_nhwc, std::vector{x, w}, none).shape, (Dims{2, 5, 4, 4}));
  EXPECT_EQ(infer_type(OpTag::conv2d_nhwc, std::vector{x, w, b, r}, none).shape, (Dims{2, 5, 4, 4}));
  Attributes depthwise = none;
  depthwise.set("groups", std::int64_t{6});
  EXPECT_EQ(infer_type(OpTag::conv2d_nhwc, std::vector{x, f32({3, 3, 1, 6})}, depthwise).shape, (Dims{2, 5, 4, 6}));
  auto refusal = [](const std::vector<TensorType>& in, const Attributes& a) {
    return shape_refusal(OpTag::conv2d_nhwc, in, a);
  };
  EXPECT_NE(refusal({x, f32({4, 6, 3, 3})}, none).find("input channels per group"), std::string::npos);
  EXPECT_NE(refusal({x, w, f32({6})}, none).find("operand 'bias'"), std::string::npos);
  EXPECT_NE(refusal({x, w, b, f32({2, 4, 5, 4})}, none).find("operand 'residual'"), std::string::npos);
  EXPECT_NE(refusal({x, f32({3, 3, 3, 4})}, depthwise).find("groups 6"), std::string::npos);
  Attributes gelu = none;
  gelu.set("activation", std::string("gelu"));
  EXPECT_NE(refusal({x, w}, gelu).find("activation 'gelu'"), std::string::npos);
  EXPECT_NE(refusal({f32({2, 9, 8}), f32({3, 3, 8, 4})}, none).find("conv2d_nhwc"), std::string::npos);
  // The flops: the convolution's (patch KH KW C / groups), its bias and the activation's pass.
  EXPECT_EQ(estimate_flops(OpTag::conv2d_nhwc, std::vector{x, w, b}, TensorType{DType::f32, {2, 5, 4, 4}}, none),
            2LL * 160 * 54 + 160 + 160);
}

TEST(ShapeRules, LossesNormsAttentionEmbedding) {
  EXPECT_EQ(infer_type(OpTag::cross_entropy, std::vector{f32({8, 10}), i64({8})}, {}).shape, (Dims{}));
  EXPECT_EQ(infer_type(OpTag::cross_entropy, std::vector{f32({8, 10}), i64({8})},
                       Attributes{{"reduction", std::string("none")}})
                .shape,
            (Dims{8}));
  EXPECT_EQ(code_of([] {
              infer_type(OpTag::cross_entropy, std::vector{f32({8, 10}), f32({8})}, {});
            }),
            ErrorCode::dtype_mismatch);
  Attributes ln{{"normalized_shape", std::vector<std::int64_t>{16}}};
  EXPECT_EQ(infer_type(OpTag::layer_norm, std::vector{f32({2, 5, 16}), f32({16}), f32({16})}, ln).shape,
            (Dims{2, 5, 16}));
  EXPECT_EQ(code_of([&] {
              infer_type(OpTag::layer_norm, std::vector{f32({2, 5, 8})}, ln);
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(
      infer_type(OpTag::batch_norm, std::vector{f32({4, 3, 5, 5}), f32({3}), f32({3}), f32({3}), f32({3})}, {}).shape,
      (Dims{4, 3, 5, 5}));
  EXPECT_EQ(
      infer_type(OpTag::scaled_dot_product_attention,
                 std::vector{f32({2, 4, 7, 8}), f32({2, 4, 9, 8}), f32({2, 4, 9, 6})}, Attributes{{"is_causal", true}})
          .shape,
      (Dims{2, 4, 7, 6}));
  EXPECT_EQ(infer_type(OpTag::embedding, std::vector{f32({100, 16}), i64({3, 5})}, {}).shape, (Dims{3, 5, 16}));
}

TEST(ShapeRules, ViewsConcatSliceReductions) {
  EXPECT_EQ(
      infer_type(OpTag::reshape, std::vector{f32({2, 3, 4})}, Attributes{{"shape", std::vector<std::int64_t>{4, -1}}})
          .shape,
      (Dims{4, 6}));
  EXPECT_EQ(
      code_of([] {
        infer_type(OpTag::reshape, std::vector{f32({2, 3})}, Attributes{{"shape", std::vector<std::int64_t>{4, -1}}});
      }),
      ErrorCode::invalid_argument);
  EXPECT_EQ(
      infer_type(OpTag::permute, std::vector{f32({2, 3, 4})}, Attributes{{"dims", std::vector<std::int64_t>{2, 0, 1}}})
          .shape,
      (Dims{4, 2, 3}));
  EXPECT_EQ(
      code_of([] {
        infer_type(OpTag::permute, std::vector{f32({2, 3})}, Attributes{{"dims", std::vector<std::int64_t>{0, 0}}});
      }),
      ErrorCode::invalid_argument);
  EXPECT_EQ(
      infer_type(OpTag::flatten, std::vector{f32({2, 3, 4, 5})}, Attributes{{"start_dim", std::int64_t{1}}}).shape,
      (Dims{2, 60}));
  EXPECT_EQ(
      infer_type(OpTag::concat, std::vector{f32({2, 3}), f32({2, 5})}, Attributes{{"dim", std::int64_t{1}}}).shape,
      (Dims{2, 8}));
  EXPECT_EQ(infer_type(OpTag::slice, std::vector{f32({10})},
                       Attributes{{"dim", std::int64_t{0}}, {"start", std::int64_t{-7}}, {"step", std::int64_t{3}}})
                .shape,
            (Dims{3}));
  EXPECT_EQ(infer_type(OpTag::sum, std::vector{f32({2, 3, 4})},
                       Attributes{{"dims", std::vector<std::int64_t>{1}}, {"keepdim", true}})
                .shape,
            (Dims{2, 1, 4}));
  EXPECT_EQ(infer_type(OpTag::mean, std::vector{f32({2, 3, 4})}, {}).shape, (Dims{}));
}

TEST(FlopRules, FollowTheSpecConvention) {
  auto out = infer_type(OpTag::matmul, std::vector{f32({8, 16}), f32({16, 32})}, {});
  EXPECT_EQ(estimate_flops(OpTag::matmul, std::vector{f32({8, 16}), f32({16, 32})}, out, {}), 2 * 8 * 16 * 32);
  // Attention over T = 128, d = 64, no causal halving: 4 * T^2 * d for the two products, plus softmax.
  std::vector q{f32({1, 128, 64}), f32({1, 128, 64}), f32({1, 128, 64})};
  auto ao = infer_type(OpTag::scaled_dot_product_attention, q, {});
  EXPECT_EQ(estimate_flops(OpTag::scaled_dot_product_attention, q, ao, {}), 4LL * 128 * 128 * 64 + 5LL * 128 * 128);
  std::vector emb{f32({1000, 64}), i64({32})};
  EXPECT_EQ(estimate_flops(OpTag::embedding, emb, infer_type(OpTag::embedding, emb, {}), {}), 0);
  std::vector conv{f32({1, 3, 224, 224}), f32({64, 3, 7, 7})};
  Attributes ca{{"stride", std::vector<std::int64_t>{2}}, {"padding", std::vector<std::int64_t>{3}}};
  EXPECT_EQ(estimate_flops(OpTag::conv2d, conv, infer_type(OpTag::conv2d, conv, ca), ca),
            2LL * 64 * 112 * 112 * 3 * 49);
}

TEST(Catalogue, DocsOpsMdIsGeneratedFromTheTable) {
  std::ifstream in("docs/ops.md");
  ASSERT_TRUE(in) << "docs/ops.md missing (run from the repository root; regenerate with pact ops --markdown)";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), render_catalogue_markdown())
      << "regenerate: build/release/bin/pact ops --markdown > docs/ops.md";
}

}  // namespace
}  // namespace pact::ops

namespace pact::ops {
namespace {

TEST(Compare, TheOneToleranceComparison) {
  // |c - r| <= abs + rel * max(1, max finite |r|), elementwise; the worst element is named.
  const std::vector<double> ref{1.0, -4.0, 0.5};
  EXPECT_TRUE(compare(std::vector<double>{1.0, -4.0, 0.5}, ref, {}).within);
  const Agreement a = compare(std::vector<double>{1.0, -4.0 + 3e-6, 0.5}, ref, Tolerance{0, 1e-6});
  EXPECT_TRUE(a.within);  // 3e-6 <= 1e-6 * 4
  EXPECT_EQ(a.scale, 4.0);
  EXPECT_EQ(a.worst, 1u);
  EXPECT_FALSE(compare(std::vector<double>{1.0, -4.0 + 5e-6, 0.5}, ref, Tolerance{0, 1e-6}).within);
  EXPECT_NEAR(compare(std::vector<double>{1.0, -4.0 + 5e-6, 0.5}, ref, Tolerance{}).relative_error(), 5e-6 / 4, 1e-15);
  // Equal NaNs and equal infinities agree; a NaN against a number is an infinite error.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(compare(std::vector<double>{nan, inf}, std::vector<double>{nan, inf}, {}).within);
  const Agreement n = compare(std::vector<double>{nan, 2.0}, std::vector<double>{1.0, 2.0}, Tolerance{1e9, 1e9});
  EXPECT_FALSE(n.within);
  EXPECT_EQ(n.max_abs_error, inf);
  // The scale ignores non-finite reference values.
  EXPECT_EQ(compare(std::vector<double>{inf, 3.0}, std::vector<double>{inf, 3.0}, {}).scale, 3.0);
  EXPECT_EQ(code_of([] {
              compare(std::vector<double>{1.0}, std::vector<double>{1.0, 2.0}, {});
            }),
            ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace pact::ops
