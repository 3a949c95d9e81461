// The op sweep's sample database (pact/verify/samples.hpp) and the comparison of a provider with its baseline
// on it.

#include "pact/verify/samples.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

#include "pact/verify/oracle.hpp"

namespace pact::verify {

using namespace sampling;

std::vector<Sample> samples() {
  using ops::OpTag;
  return {
      {OpTag::add, {N({3, 4}), N({4})}, {}, false, "broadcast"},
      {OpTag::add, {N({2, 1, 3}), N({4, 1})}, {}, false, "two-sided broadcast"},
      {OpTag::sub, {N({3, 1}), N({3, 5})}, {}},
      {OpTag::mul, {N({2, 3}), N({})}, {}, false, "scalar"},
      {OpTag::div, {N({4, 3}), P({4, 1})}, {}},
      {OpTag::sub, {N({4}), N({2, 3, 4})}, {}, false, "leading operand repeated"},
      {OpTag::mul, {N({2, 3, 4}), N({1, 3, 4})}, {}, false, "trailing block"},
      {OpTag::mul, {N({3, 1, 1}), N({1, 3, 4, 5})}, {}, false, "per-channel scale of lower rank"},
      {OpTag::sub, {N({1, 3, 4, 5}), N({3, 1, 1})}, {}, false, "per-channel operand of lower rank second"},
      {OpTag::div, {N({5, 3}), P({3})}, {}, false, "row divisor"},
      {OpTag::neg, {N({5})}, {}},
      {OpTag::matmul, {N({3, 4}), N({4, 5})}, {}},
      {OpTag::matmul, {N({2, 1, 3, 4}), N({3, 4, 2})}, {}, false, "batched broadcast"},
      {OpTag::matmul, {N({4}), N({4, 3})}, {}, false, "vector-matrix"},
      {OpTag::matmul, {N({2, 3, 4}), N({4})}, {}, false, "matrix-vector"},
      {OpTag::linear, {N({2, 3, 4}), N({5, 4}), N({5})}, {}},
      {OpTag::linear, {N({3, 4}), N({2, 4})}, {}, false, "no bias"},
      {OpTag::linear_int8, {N({2, 3, 37}), Q({5, 37}), P({5}), N({5})}, {}},
      {OpTag::linear_int8, {N({1, 70}), Q({9, 70}), P({9})}, {}, false, "one row, no bias"},
      {OpTag::linear_bf16, {N({2, 3, 37}), B({5, 37}), N({5})}, {}, false, "six rows: the widened weight's GEMM"},
      {OpTag::linear_bf16, {N({1, 70}), B({9, 70})}, {}, false, "one row, no bias: the GEMV"},
      {OpTag::linear_bf16, {N({4, 33}), B({40, 33}), N({40})}, {}, false, "four rows: the GEMV, odd depth"},
      {OpTag::linear_bf16, {N({5, 16}), B({3, 16})}, {}, false, "five rows: the GEMM from the first row past four"},
      {OpTag::relu, {N({4, 5})}, {}},
      {OpTag::gelu, {N({4, 5})}, {}},
      {OpTag::gelu, {N({4, 5})}, A{{"approximate", std::string("tanh")}}, false, "tanh"},
      {OpTag::silu, {N({4, 5})}, {}},
      {OpTag::tanh, {N({4, 5})}, {}},
      {OpTag::sigmoid, {N({4, 5})}, {}},
      {OpTag::hardswish, {W({4, 9})}, {}},
      {OpTag::hardsigmoid, {W({4, 9})}, {}},
      {OpTag::clamp, {N({4, 5})}, A{{"min", -0.5}, {"max", 0.5}}},
      {OpTag::clamp, {N({4, 5})}, A{{"min", 0.0}, {"max", 6.0}}, false, "relu6"},
      {OpTag::exp, {N({4, 5})}, {}},
      {OpTag::log, {P({4, 5})}, {}},
      {OpTag::sqrt, {P({4, 5})}, {}},
      {OpTag::sin, {N({4, 5})}, {}},
      {OpTag::cos, {N({4, 5})}, {}},
      {OpTag::tan, {S({4, 5})}, {}},
      {OpTag::pow, {P({3, 4}), N({4})}, {}},
      {OpTag::where, {M({3, 4}), N({3, 4}), N({4})}, {}},
      {OpTag::where, {M({4, 1}), N({1, 5}), N({})}, {}, false, "three-way broadcast"},
      {OpTag::eq, {Z({3, 4}), Z({4})}, {}},
      {OpTag::ne, {Z({3, 4}), Z({3, 1})}, {}},
      {OpTag::lt, {Z({3, 4}), Z({4})}, {}},
      {OpTag::le, {Z({3, 4}), Z({3, 4})}, {}},
      {OpTag::gt, {N({3, 4}), N({})}, {}},
      {OpTag::ge, {Z({2, 3, 4}), Z({3, 1})}, {}},
      {OpTag::triu, {N({5, 6})}, A{{"diagonal", std::int64_t{1}}}},
      {OpTag::tril, {N({2, 4, 4})}, A{{"diagonal", std::int64_t{-1}}}},
      {OpTag::cumsum, {N({3, 7})}, A{{"dim", std::int64_t{1}}}},
      {OpTag::cumsum, {N({2, 3, 4})}, A{{"dim", std::int64_t{0}}}, false, "dim 0"},
      {OpTag::argmax, {N({3, 7})}, A{{"dim", std::int64_t{1}}}},
      {OpTag::argmax, {Z({2, 3, 4})}, {}, false, "flattened, ties"},
      {OpTag::topk, {N({3, 9})}, A{{"k", std::int64_t{4}}}},
      {OpTag::topk,
       {N({4, 6, 3})},
       A{{"k", std::int64_t{2}}, {"dim", std::int64_t{1}}, {"largest", false}},
       false,
       "smallest, middle dim"},
      {OpTag::topk_indices, {N({3, 9})}, A{{"k", std::int64_t{4}}}},
      {OpTag::cast, {N({3, 5})}, A{{"dtype", std::string("f64")}}},
      {OpTag::cast, {I({3, 4}, 10)}, A{{"dtype", std::string("f32")}}, false, "from indices"},
      {OpTag::full_like, {N({3, 4})}, A{{"value", 2.5}}},
      {OpTag::arange, {}, A{{"start", 0.5}, {"end", 3.0}, {"step", 0.25}}},
      {OpTag::arange,
       {},
       A{{"start", std::int64_t{10}}, {"end", std::int64_t{1}}, {"step", std::int64_t{-3}}},
       false,
       "integers counting down"},
      {OpTag::gather, {N({3, 5}), I({3, 4}, 5)}, A{{"dim", std::int64_t{1}}}},
      {OpTag::gather, {N({4, 3}), I({2, 3}, 4)}, A{{"dim", std::int64_t{0}}}, false, "dim 0"},
      {OpTag::index_select, {N({5, 4}), I({7}, 5)}, A{{"dim", std::int64_t{0}}}},
      {OpTag::index_select, {N({2, 6, 3}), I({4}, 6)}, A{{"dim", std::int64_t{1}}}, false, "middle dim"},
      {OpTag::index_copy, {N({5, 4}), U({3}, 5), N({3, 4})}, A{{"dim", std::int64_t{0}}}},
      {OpTag::index_copy, {N({2, 6, 3}), U({4}, 6), N({2, 4, 3})}, A{{"dim", std::int64_t{1}}}, false, "middle dim"},
      {OpTag::interpolate, {N({1, 2, 4, 5})}, A{{"size", L{8, 10}}}},
      {OpTag::interpolate,
       {N({1, 2, 4, 5})},
       A{{"size", L{7, 9}}, {"mode", std::string("bilinear")}},
       false,
       "bilinear"},
      {OpTag::interpolate,
       {N({1, 2, 4, 5})},
       A{{"size", L{7, 9}}, {"mode", std::string("bilinear")}, {"align_corners", true}},
       false,
       "bilinear, align_corners"},
      {OpTag::softmax, {N({3, 7})}, {}},
      {OpTag::softmax, {N({3, 4, 5})}, A{{"dim", std::int64_t{1}}}, false, "middle dim"},
      {OpTag::log_softmax, {N({3, 7})}, {}},
      {OpTag::log_softmax, {N({2, 5, 3})}, A{{"dim", std::int64_t{0}}}, false, "dim 0"},
      {OpTag::cross_entropy, {N({5, 7}), I({5}, 7)}, {}},
      {OpTag::cross_entropy, {N({5, 7}), I({5}, 7)}, A{{"reduction", std::string("sum")}}, false, "sum"},
      {OpTag::cross_entropy, {N({5, 7}), I({5}, 7)}, A{{"reduction", std::string("none")}}, false, "none"},
      {OpTag::mse_loss, {N({3, 4}), N({3, 4})}, {}},
      {OpTag::layer_norm, {N({3, 8}), N({8}), N({8})}, A{{"normalized_shape", L{8}}}},
      {OpTag::layer_norm, {N({2, 3, 4})}, A{{"normalized_shape", L{3, 4}}}, false, "no affine"},
      {OpTag::rms_norm, {N({3, 8}), N({8})}, A{{"normalized_shape", L{8}}}},
      {OpTag::layer_norm, {N({4, 37}), N({37}), N({37})}, A{{"normalized_shape", L{37}}}, false, "odd width"},
      {OpTag::rms_norm, {N({5, 19})}, A{{"normalized_shape", L{19}}}, false, "no weight"},
      {OpTag::layer_norm,
       {T({3, 21}), N({21}), N({21})},
       A{{"normalized_shape", L{21}}},
       false,
       "tiny values: eps shows"},
      {OpTag::rms_norm, {T({3, 21}), N({21})}, A{{"normalized_shape", L{21}}}, false, "tiny values: eps shows"},
      {OpTag::rotary_embedding, {N({1, 3, 4, 8}), N({1, 1, 4, 8}), N({1, 1, 4, 8})}, {}, false, "table rows"},
      {OpTag::rotary_embedding, {N({2, 5, 6}), N({5, 1}), N({5, 1})}, {}, false, "per-row cos and sin"},
      {OpTag::batch_norm, {N({4, 3, 2, 2}), N({3}), N({3}), N({3}), P({3})}, {}, true, "training"},
      {OpTag::batch_norm, {N({4, 3, 2, 2}), N({3}), N({3}), N({3}), P({3})}, {}, false, "eval"},
      {OpTag::dropout, {N({6, 5})}, A{{"p", 0.3}}, true, "training"},
      {OpTag::dropout, {N({6, 5})}, A{{"p", 0.3}}, false, "eval"},
      {OpTag::embedding, {N({10, 4}), I({2, 3}, 10)}, {}},
      {OpTag::scaled_dot_product_attention, {N({2, 4, 3}), N({2, 5, 3}), N({2, 5, 2})}, {}},
      {OpTag::scaled_dot_product_attention,
       {N({1, 2, 4, 3}), N({1, 2, 4, 3}), N({1, 2, 4, 3})},
       A{{"is_causal", true}},
       false,
       "causal"},
      {OpTag::scaled_dot_product_attention,
       {N({1, 2, 37, 8}), N({1, 2, 40, 8}), N({1, 2, 40, 5})},
       A{{"is_causal", true}},
       false,
       "causal, long rows"},
      {OpTag::scaled_dot_product_attention,
       {N({1, 70, 8}), N({1, 45, 8}), N({1, 45, 5})},
       A{{"is_causal", true}},
       false,
       "causal, more queries than keys"},
      {OpTag::scaled_dot_product_attention,
       {N({2, 33, 4}), N({2, 64, 4}), N({2, 64, 3})},
       A{{"scale", 0.3}},
       false,
       "long rows, scale"},
      {OpTag::scaled_dot_product_attention,
       {N({2, 3, 4}), N({2, 5, 4}), N({2, 5, 4}), M({3, 5})},
       {},
       false,
       "bool mask"},
      {OpTag::conv2d, {N({2, 3, 6, 5}), N({4, 3, 3, 3}), N({4})}, A{{"padding", L{1}}}},
      {OpTag::conv2d,
       {N({1, 4, 7, 7}), N({4, 1, 3, 3})},
       A{{"groups", std::int64_t{4}}, {"stride", L{2}}, {"padding", L{1}}},
       false,
       "depthwise"},
      {OpTag::conv2d,
       {N({1, 2, 7, 6}), N({4, 1, 2, 3}), N({4})},
       A{{"groups", std::int64_t{2}}, {"dilation", L{2, 1}}, {"stride", L{1, 2}}},
       false,
       "grouped dilated"},
      // The native provider's direct and vector paths (issue 18): depthwise (unit, strided, dilated, with a
      // channel multiplier), pointwise, per-channel broadcasts, maps on rows long enough for full vectors.
      {OpTag::conv2d,
       {N({2, 3, 9, 8}), N({6, 1, 3, 3}), N({6})},
       A{{"groups", std::int64_t{3}}, {"padding", L{2}}, {"dilation", L{2}}},
       false,
       "depthwise multiplier dilated"},
      {OpTag::conv2d,
       {N({1, 8, 20, 37}), N({8, 1, 3, 3}), N({8})},
       A{{"groups", std::int64_t{8}}, {"stride", L{2}}, {"padding", L{1}}},
       false,
       "depthwise wide strided"},
      {OpTag::conv2d,
       {N({1, 4, 11, 10}), N({4, 1, 5, 5})},
       A{{"groups", std::int64_t{4}}, {"stride", L{3}}, {"padding", L{2}}},
       false,
       "depthwise 5x5 stride 3"},
      {OpTag::conv2d, {N({2, 8, 5, 7}), N({6, 8, 1, 1}), N({6})}, {}, false, "pointwise"},
      // A weight larger than the padded input: on several threads each computes a range of the filters.
      {OpTag::conv2d,
       {N({1, 32, 6, 6}), N({40, 32, 3, 3}), N({40})},
       A{{"padding", L{1}}},
       false,
       "3 x 3 read in place, the threads splitting 40 filters"},
      {OpTag::conv2d_activation,
       {N({2, 3, 6, 5}), N({4, 3, 3, 3}), N({4})},
       A{{"padding", L{1}}, {"activation", std::string("relu")}}},
      {OpTag::conv2d_activation,
       {N({1, 8, 20, 37}), N({8, 1, 3, 3}), N({8})},
       A{{"groups", std::int64_t{8}}, {"stride", L{2}}, {"padding", L{1}}, {"activation", std::string("relu6")}},
       false,
       "depthwise relu6"},
      {OpTag::conv2d_activation,
       {N({2, 8, 5, 7}), N({6, 8, 1, 1})},
       A{{"activation", std::string("silu")}},
       false,
       "pointwise silu"},
      {OpTag::conv2d_activation,
       {N({1, 16, 12, 13}), N({44, 16, 1, 1}), N({44})},
       A{{"activation", std::string("silu")}},
       false,
       "pointwise silu on whole and edge tiles (the map of the GEMM's epilogue)"},
      {OpTag::conv2d_activation,
       {N({1, 256, 14, 14}), N({12, 256, 3, 3}), N({12})},
       A{{"padding", L{1}}, {"activation", std::string("relu")}},
       false,
       "a 14 x 14 plane under a 2304-long patch (L2-sized chunks, or one chunk: fewer GEMM panels)"},
      {OpTag::conv2d_activation,
       {N({1, 8, 5, 7}), N({10, 8, 1, 1}), N({10})},
       A{{"activation", std::string("relu6")}},
       false,
       "pointwise relu6 (the GEMM's epilogue)"},
      {OpTag::conv2d_activation,
       {N({1, 6, 9, 23}), N({6, 1, 3, 3}), N({6})},
       A{{"groups", std::int64_t{6}}, {"padding", L{1}}, {"activation", std::string("relu")}},
       false,
       "depthwise relu, rows of 23 (a partial block at every width)"},
      {OpTag::conv2d_activation,
       {N({1, 4, 7, 9}), N({4, 1, 5, 5})},
       A{{"groups", std::int64_t{4}}, {"padding", L{2}}, {"activation", std::string("silu")}},
       false,
       "depthwise silu (applied after the store)"},
      // With a residual (added before the activation as each chunk is stored), on each of the native paths.
      {OpTag::conv2d_activation,
       {N({1, 32, 6, 6}), N({32, 32, 3, 3}), N({32}), N({1, 32, 6, 6})},
       A{{"padding", L{1}}, {"activation", std::string("relu")}},
       false,
       "residual relu, 3 x 3 read in place (threads split the filters)"},
      {OpTag::conv2d_activation,
       {N({1, 8, 30, 30}), N({16, 8, 3, 3}), N({16}), N({1, 16, 30, 30})},
       A{{"padding", L{1}}, {"activation", std::string("relu6")}},
       false,
       "residual relu6, 3 x 3 read in place (threads split the rows)"},
      {OpTag::conv2d_activation,
       {N({1, 256, 14, 14}), N({12, 256, 3, 3}), N({12}), N({1, 12, 14, 14})},
       A{{"padding", L{1}}, {"activation", std::string("silu")}},
       false,
       "residual silu, 3 x 3 read in place (the GEMM shares the product)"},
      {OpTag::conv2d_activation,
       {N({2, 8, 5, 7}), N({6, 8, 1, 1}), N({6}), N({2, 6, 5, 7})},
       A{{"activation", std::string("none")}},
       false,
       "residual alone, pointwise"},
      {OpTag::conv2d_activation,
       {N({1, 3, 9, 11}), N({5, 3, 3, 3}), N({5}), N({1, 5, 9, 11})},
       A{{"padding", L{1}}, {"activation", std::string("hardswish")}},
       false,
       "residual hardswish, im2col"},
      {OpTag::conv2d_activation,
       {N({1, 8, 20, 37}), N({8, 1, 3, 3}), N({8}), N({1, 8, 10, 19})},
       A{{"groups", std::int64_t{8}}, {"stride", L{2}}, {"padding", L{1}}, {"activation", std::string("silu")}},
       false,
       "residual silu, depthwise"},
      // Note [Depthwise in place] (conv_direct.cpp, AVX-512): stride 1, rows as wide as the input's, blocks of pixels
      // across row ends with masked taps; planes narrower than a vector, rows the padding leaves out.
      {OpTag::conv2d_activation,
       {N({2, 3, 2, 3}), N({3, 1, 3, 3}), N({3})},
       A{{"groups", std::int64_t{3}}, {"padding", L{1}}, {"activation", std::string("relu6")}},
       false,
       "depthwise in place, a 2 x 3 plane"},
      {OpTag::conv2d,
       {N({1, 2, 6, 10}), N({4, 1, 3, 3}), N({4})},
       A{{"groups", std::int64_t{2}}, {"padding", L{0, 1}}},
       false,
       "depthwise in place, fewer output rows than input rows"},
      {OpTag::conv2d_activation,
       {N({1, 3, 10, 12}), N({3, 1, 5, 5}), N({3})},
       A{{"groups", std::int64_t{3}}, {"stride", L{2}}, {"padding", L{2}}, {"activation", std::string("silu")}},
       false,
       "depthwise in place at stride 2 (the plane's four phases), 5 x 5 on even rows"},
      {OpTag::conv2d,
       {N({2, 2, 9, 8}), N({4, 1, 3, 3})},
       A{{"groups", std::int64_t{2}}, {"stride", L{2}}, {"padding", L{2}}, {"dilation", L{2}}},
       false,
       "depthwise in place at stride 2, dilated, a multiplier, odd rows"},
      {OpTag::conv2d_activation,
       {N({1, 3, 9, 11}), N({5, 3, 3, 3}), N({5})},
       A{{"padding", L{1}}, {"activation", std::string("hardswish")}},
       false,
       "hardswish"},
      {OpTag::conv2d, {N({1, 4, 3, 5}), N({6, 2, 1, 1})}, A{{"groups", std::int64_t{2}}}, false, "grouped pointwise"},
      // Kernels one tap wide or high, and 1 x 1 kernels that are not pointwise (a stride, padding): the
      // native provider's pointwise path (a GEMM straight over the input) must refuse each of them.
      {OpTag::conv2d, {N({1, 3, 6, 5}), N({4, 3, 3, 1})}, {}, false, "a 3 x 1 kernel"},
      {OpTag::conv2d, {N({1, 3, 5, 6}), N({4, 3, 1, 3})}, {}, false, "a 1 x 3 kernel"},
      {OpTag::conv2d, {N({1, 3, 6, 5}), N({4, 3, 2, 1})}, {}, false, "a 2 x 1 kernel"},
      {OpTag::conv2d, {N({1, 4, 7, 6}), N({5, 4, 1, 1})}, A{{"stride", L{2}}}, false, "1 x 1 at stride 2"},
      {OpTag::conv2d, {N({1, 4, 7, 6}), N({5, 4, 1, 1})}, A{{"stride", L{1, 2}}}, false, "1 x 1 at stride 1 x 2"},
      {OpTag::conv2d, {N({1, 4, 5, 6}), N({5, 4, 1, 1})}, A{{"padding", L{1, 0}}}, false, "1 x 1 with row padding"},
      {OpTag::conv2d, {N({1, 4, 5, 6}), N({5, 4, 1, 1})}, A{{"padding", L{0, 1}}}, false, "1 x 1 with column padding"},
      // Note [Implicit convolution] (gemm_ops.inc): B's rows read at offsets into the padded input's phases,
      // for patches of 64 or more. The large ones are conv2d_activation, which has no VJP: the finite
      // differences of the reference's gradients would take a forward pass per input element.
      {OpTag::conv2d_activation,
       {N({2, 16, 12, 30}), N({6, 8, 3, 5}), N({6})},
       A{{"groups", std::int64_t{2}}, {"padding", L{1, 4}}, {"dilation", L{1, 2}}, {"activation", std::string("silu")}},
       false,
       "implicit: two images, groups, 3 x 5 dilated taps, silu in the epilogue"},
      {OpTag::conv2d_activation,
       {N({1, 8, 40, 40}), N({72, 8, 3, 3}), N({72})},
       A{{"padding", L{1}}, {"activation", std::string("relu")}},
       false,
       "implicit: two chunks of rows, more filters than a B read in place serves (packed from the offsets)"},
      {OpTag::conv2d_activation,
       {N({1, 8, 9, 30}), N({16, 8, 3, 3})},
       A{{"padding", L{2}}, {"activation", std::string("relu6")}},
       false,
       "implicit: B read in place at its offsets, wide padding, relu6 in the epilogue"},
      {OpTag::conv2d_activation,
       {N({1, 3, 21, 22}), N({8, 3, 7, 7}), N({8})},
       A{{"stride", L{2}}, {"padding", L{3}}, {"activation", std::string("relu")}},
       false,
       "implicit at stride 2: a 7 x 7 stem on odd sizes (four phases)"},
      {OpTag::conv2d_activation,
       {N({2, 16, 17, 26}), N({6, 8, 3, 3}), N({6})},
       A{{"groups", std::int64_t{2}},
         {"stride", L{2}},
         {"padding", L{1}},
         {"dilation", L{2}},
         {"activation", std::string("hardswish")}},
       false,
       "implicit at stride 2: dilated, grouped, two images, hardswish in the epilogue"},
      {OpTag::conv2d,
       {N({1, 8, 10, 20}), N({4, 8, 3, 3})},
       A{{"stride", L{2, 1}}, {"padding", L{1}}},
       false,
       "implicit at strides 2 and 1"},
      {OpTag::conv2d,
       {N({1, 8, 16, 40}), N({3, 8, 3, 3}), N({3})},
       A{{"stride", L{3}}, {"padding", L{1}}},
       false,
       "implicit at stride 3 (nine phases)"},
      // Each convolution path again with two images and two groups (an image's or a group's offset into the
      // input, weight, bias and output is then seen), and conv2d_activation through the geometries only conv2d
      // crossed: im2col's valid columns at a column stride with left padding, on a plane 3 wide under a 3 x 3
      // kernel (one valid column per outer tap) and under padding wider than the input (none for the outer
      // taps); 1 x 1 kernels that are not pointwise; implicit chunks shared by the threads over an odd row count.
      {OpTag::conv2d,
       {N({2, 16, 7, 12}), N({6, 8, 3, 3}), N({6})},
       A{{"groups", std::int64_t{2}}, {"padding", L{1}}},
       false,
       "implicit: two images, two groups"},
      {OpTag::conv2d,
       {N({2, 16, 9, 14}), N({4, 8, 3, 3})},
       A{{"groups", std::int64_t{2}}, {"stride", L{2}}, {"padding", L{1}}},
       false,
       "implicit at stride 2: two images, two groups"},
      {OpTag::conv2d,
       {N({1, 2, 4, 2}), N({3, 2, 3, 3})},
       A{{"padding", L{1, 3}}},
       false,
       "padding wider than the input"},
      {OpTag::conv2d_activation,
       {N({2, 4, 6, 9}), N({6, 2, 3, 3}), N({6})},
       A{{"groups", std::int64_t{2}}, {"stride", L{1, 2}}, {"padding", L{0, 2}}, {"activation", std::string("relu")}},
       false,
       "im2col: two images, two groups, a column stride, left padding"},
      {OpTag::conv2d_activation,
       {N({1, 2, 9, 70}), N({3, 2, 2, 5})},
       A{{"stride", L{1, 3}}, {"padding", L{0, 4}}, {"activation", std::string("relu6")}},
       false,
       "im2col: unequal strides and padding"},
      {OpTag::conv2d_activation,
       {N({1, 2, 3, 3}), N({4, 2, 3, 3}), N({4})},
       A{{"activation", std::string("silu")}},
       false,
       "im2col: a 3 x 3 kernel on a 3 x 3 plane"},
      {OpTag::conv2d_activation,
       {N({1, 2, 4, 2}), N({3, 2, 3, 3})},
       A{{"padding", L{1, 3}}, {"activation", std::string("hardswish")}},
       false,
       "im2col: padding wider than the input"},
      {OpTag::conv2d_activation,
       {N({2, 4, 3, 5}), N({6, 2, 1, 1}), N({6})},
       A{{"groups", std::int64_t{2}}, {"activation", std::string("relu")}},
       false,
       "grouped pointwise, two images"},
      {OpTag::conv2d_activation,
       {N({1, 4, 7, 6}), N({5, 4, 1, 1})},
       A{{"stride", L{2}}, {"activation", std::string("silu")}},
       false,
       "1 x 1 at stride 2"},
      {OpTag::conv2d_activation,
       {N({1, 4, 5, 6}), N({5, 4, 1, 1})},
       A{{"padding", L{0, 1}}, {"activation", std::string("relu")}},
       false,
       "1 x 1 with column padding"},
      {OpTag::conv2d_activation,
       {N({1, 3, 6, 5}), N({4, 3, 3, 1})},
       A{{"activation", std::string("relu")}},
       false,
       "a 3 x 1 kernel"},
      {OpTag::conv2d_activation,
       {N({1, 8, 41, 40}), N({16, 8, 3, 3}), N({16})},
       A{{"padding", L{1}}, {"activation", std::string("relu")}},
       false,
       "implicit: chunks shared by the threads over 41 rows"},
      // The pointwise path's test, one term at a time: each kernel that fails exactly one of its conditions
      // (a 2 x 1 or 1 x 2 kernel, a stride in one direction, padding on rows), for both convolution ops.
      {OpTag::conv2d, {N({1, 3, 5, 6}), N({4, 3, 1, 2})}, {}, false, "a 1 x 2 kernel"},
      {OpTag::conv2d, {N({1, 4, 7, 6}), N({5, 4, 1, 1})}, A{{"stride", L{2, 1}}}, false, "1 x 1 at stride 2 x 1"},
      {OpTag::conv2d_activation,
       {N({1, 3, 6, 5}), N({4, 3, 2, 1})},
       A{{"activation", std::string("relu")}},
       false,
       "a 2 x 1 kernel"},
      {OpTag::conv2d_activation,
       {N({1, 3, 5, 6}), N({4, 3, 1, 2})},
       A{{"activation", std::string("relu")}},
       false,
       "a 1 x 2 kernel"},
      {OpTag::conv2d_activation,
       {N({1, 4, 7, 6}), N({5, 4, 1, 1})},
       A{{"stride", L{2, 1}}, {"activation", std::string("relu")}},
       false,
       "1 x 1 at stride 2 x 1"},
      {OpTag::conv2d_activation,
       {N({1, 4, 7, 6}), N({5, 4, 1, 1})},
       A{{"stride", L{1, 2}}, {"activation", std::string("relu")}},
       false,
       "1 x 1 at stride 1 x 2"},
      {OpTag::conv2d_activation,
       {N({1, 4, 5, 6}), N({5, 4, 1, 1})},
       A{{"padding", L{1, 0}}, {"activation", std::string("relu")}},
       false,
       "1 x 1 with row padding"},
      {OpTag::conv2d,
       {N({2, 4, 3, 5}), N({6, 2, 1, 1}), N({6})},
       A{{"groups", std::int64_t{2}}},
       false,
       "grouped pointwise with a bias, two images"},
      // Channels-last (conv2d_nhwc: input [N, H, W, C], weight [KH, KW, C / groups, O]) on each native path:
      // im2col (one chunk, chunks shared by the threads, several L2-sized chunks), pointwise straight into the
      // GEMM, the depthwise kernel's vector blocks, single vectors and scalar tails, residuals on each.
      {OpTag::conv2d_nhwc,
       {N({2, 6, 5, 3}), N({3, 3, 3, 4}), N({4})},
       A{{"padding", L{1}}, {"activation", std::string("relu")}},
       false,
       "channels-last 3 x 3, two images"},
      {OpTag::conv2d_nhwc,
       {N({1, 41, 40, 8}), N({3, 3, 8, 16}), N({16})},
       A{{"padding", L{1}}, {"activation", std::string("relu6")}},
       false,
       "channels-last 3 x 3, chunks shared by the threads"},
      {OpTag::conv2d_nhwc,
       {N({1, 14, 14, 256}), N({3, 3, 256, 12}), N({12})},
       A{{"padding", L{1}}, {"activation", std::string("silu")}},
       false,
       "channels-last 3 x 3 under a 2304-long patch (L2-sized chunks)"},
      {OpTag::conv2d_nhwc,
       {N({2, 9, 14, 16}), N({3, 3, 8, 6}), N({6})},
       A{{"groups", std::int64_t{2}}, {"stride", L{2}}, {"padding", L{1}}, {"activation", std::string("hardswish")}},
       false,
       "channels-last grouped at stride 2"},
      {OpTag::conv2d_nhwc,
       {N({1, 10, 9, 5}), N({3, 3, 5, 7}), N({7}), N({1, 10, 9, 7})},
       A{{"padding", L{2}}, {"dilation", L{2}}, {"activation", std::string("none")}},
       false,
       "channels-last dilated, residual alone"},
      {OpTag::conv2d_nhwc,
       {N({1, 7, 6, 4}), N({1, 1, 4, 5})},
       A{{"stride", L{2}}, {"activation", std::string("none")}},
       false,
       "channels-last 1 x 1 at stride 2 (im2col)"},
      {OpTag::conv2d_nhwc,
       {N({2, 5, 7, 8}), N({1, 1, 8, 6})},
       A{{"activation", std::string("silu")}},
       false,
       "channels-last pointwise silu, no bias"},
      {OpTag::conv2d_nhwc,
       {N({1, 7, 7, 96}), N({1, 1, 96, 40}), N({40}), N({1, 7, 7, 40})},
       A{{"activation", std::string("relu")}},
       false,
       "channels-last pointwise, residual relu"},
      {OpTag::conv2d_nhwc,
       {N({2, 4, 3, 6}), N({1, 1, 2, 9}), N({9})},
       A{{"groups", std::int64_t{3}}, {"activation", std::string("relu6")}},
       false,
       "channels-last grouped pointwise"},
      {OpTag::conv2d_nhwc,
       {N({1, 20, 37, 40}), N({3, 3, 1, 40}), N({40})},
       A{{"groups", std::int64_t{40}}, {"stride", L{2}}, {"padding", L{1}}, {"activation", std::string("relu6")}},
       false,
       "channels-last depthwise relu6 at stride 2 (40 channels: blocks, vectors, tails)"},
      {OpTag::conv2d_nhwc,
       {N({1, 9, 7, 70}), N({5, 5, 1, 70})},
       A{{"groups", std::int64_t{70}}, {"padding", L{2}}, {"activation", std::string("silu")}},
       false,
       "channels-last depthwise 5 x 5 silu, 70 channels"},
      {OpTag::conv2d_nhwc,
       {N({2, 8, 8, 24}), N({3, 3, 1, 24}), N({24}), N({2, 8, 8, 24})},
       A{{"groups", std::int64_t{24}}, {"padding", L{2}}, {"dilation", L{2}}, {"activation", std::string("relu")}},
       false,
       "channels-last depthwise dilated, residual relu"},
      {OpTag::conv2d_nhwc,
       {N({1, 5, 5, 3}), N({3, 3, 1, 6}), N({6})},
       A{{"groups", std::int64_t{3}}, {"padding", L{1}}, {"activation", std::string("none")}},
       false,
       "channels-last depthwise with a channel multiplier (the GEMM path)"},
      {OpTag::conv2d_activation,
       {N({2, 4, 7, 8}), N({6, 2, 3, 2}), N({6})},
       A{{"groups", std::int64_t{2}}, {"dilation", L{2}}, {"padding", L{1}}, {"activation", std::string("silu")}},
       false,
       "im2col: dilated rows and columns, two images, two groups"},
      // Note [Implicit convolution] without padding (the input's first and last columns are the phases'),
      // at stride 2, dilated, and with a single output row.
      {OpTag::conv2d, {N({1, 8, 9, 12}), N({4, 8, 3, 3})}, {}, false, "implicit without padding"},
      {OpTag::conv2d,
       {N({1, 8, 11, 13}), N({4, 8, 3, 3})},
       A{{"stride", L{2}}},
       false,
       "implicit at stride 2 without padding"},
      {OpTag::conv2d,
       {N({1, 8, 9, 20}), N({4, 8, 3, 3})},
       A{{"dilation", L{2}}},
       false,
       "implicit, dilated, no padding"},
      {OpTag::conv2d, {N({1, 8, 3, 12}), N({4, 8, 3, 3})}, {}, false, "implicit: one output row"},
      {OpTag::conv2d_activation,
       {N({1, 8, 11, 13}), N({4, 8, 3, 3})},
       A{{"stride", L{2}}, {"activation", std::string("relu")}},
       false,
       "implicit at stride 2 without padding"},
      {OpTag::conv2d_activation,
       {N({1, 8, 3, 12}), N({4, 8, 3, 3})},
       A{{"activation", std::string("relu")}},
       false,
       "implicit: one output row"},
      // Pooling on windows, strides and padding that differ by direction, on 1 x 1 planes, and on integer
      // values (ties: the VJP routes each window's gradient to its first maximum, as PyTorch does).
      {OpTag::max_pool2d,
       {N({1, 2, 7, 9})},
       A{{"kernel_size", L{2, 3}}, {"stride", L{1, 2}}, {"padding", L{1, 0}}},
       false,
       "unequal window, stride and padding"},
      {OpTag::avg_pool2d,
       {N({1, 2, 7, 9})},
       A{{"kernel_size", L{2, 3}}, {"stride", L{1, 2}}, {"padding", L{1, 0}}},
       false,
       "unequal window, stride and padding"},
      {OpTag::max_pool2d, {N({2, 3, 1, 1})}, A{{"kernel_size", L{1}}}, false, "1 x 1 planes"},
      {OpTag::avg_pool2d, {N({2, 3, 1, 1})}, A{{"kernel_size", L{1}}}, false, "1 x 1 planes"},
      {OpTag::adaptive_avg_pool2d, {N({2, 3, 1, 1})}, A{{"output_size", L{1}}}, false, "1 x 1 planes"},
      {OpTag::max_pool2d, {Z({2, 2, 6, 7})}, A{{"kernel_size", L{3}}, {"stride", L{2}}}, false, "ties"},
      {OpTag::batch_norm, {N({1, 1, 3, 4}), N({1}), N({1}), N({1}), P({1})}, {}, false, "eval, one image, one channel"},
      {OpTag::batch_norm,
       {N({1, 1, 3, 4}), N({1}), N({1}), N({1}), P({1})},
       {},
       true,
       "training, one image, one channel"},
      {OpTag::interpolate,
       {N({1, 2, 4, 5})},
       A{{"size", L{1, 2}}, {"mode", std::string("bilinear")}, {"align_corners", true}},
       false,
       "bilinear, align_corners, to 1 x 2"},
      {OpTag::mul, {N({2, 3, 4, 5}), N({2, 3, 1, 1})}, {}, false, "per channel"},
      // Broadcasts the native flat loops must refuse (to the generic loop): a per-image, per-channel gate
      // against a channels-last image, ones between two equal blocks, two-sided ones of one rank.
      {OpTag::mul, {N({2, 4, 5, 19}), N({2, 1, 1, 19})}, {}, false, "per image and channel, channels-last"},
      {OpTag::sub, {N({3, 1, 1, 7}), N({3, 2, 5, 7})}, {}, false, "per image and channel first, channels-last"},
      {OpTag::div, {N({2, 3, 1, 4, 5}), P({2, 1, 1, 1, 5})}, {}, false, "leading and trailing blocks"},
      {OpTag::mul, {N({2, 1, 5}), N({2, 3, 1})}, {}, false, "two-sided broadcast of one rank"},
      {OpTag::add, {N({2, 3, 4, 5}), N({2, 1, 4, 1})}, {}, false, "ones between and after"},
      {OpTag::add, {N({2, 1, 4, 1}), N({2, 3, 4, 5})}, {}, false, "ones between and after first"},
      {OpTag::sub, {N({2, 3, 1, 1}), N({2, 3, 4, 5})}, {}, false, "per channel first"},
      {OpTag::div, {N({2, 3, 4, 5}), P({2, 3, 1, 1})}, {}, false, "per channel"},
      {OpTag::add, {N({3, 1}), N({3, 40})}, {}, false, "per row first"},
      {OpTag::silu, {N({3, 37})}, {}, false, "long rows"},
      {OpTag::sigmoid, {N({3, 37})}, {}, false, "long rows"},
      {OpTag::hardswish, {W({3, 37})}, {}, false, "long rows"},
      {OpTag::hardsigmoid, {W({3, 37})}, {}, false, "long rows"},
      {OpTag::exp, {N({3, 37})}, {}, false, "long rows"},
      // Every tail an 8-lane vector can leave (an AVX2 mask sets lane j where j < the tail): 1 to 6 after
      // two full vectors (7 is "long rows" above).
      {OpTag::exp, {N({17})}, {}, false, "a tail of 1"},
      {OpTag::exp, {N({18})}, {}, false, "a tail of 2"},
      {OpTag::exp, {N({19})}, {}, false, "a tail of 3"},
      {OpTag::exp, {N({20})}, {}, false, "a tail of 4"},
      {OpTag::exp, {N({21})}, {}, false, "a tail of 5"},
      {OpTag::exp, {N({22})}, {}, false, "a tail of 6"},
      {OpTag::neg, {N({3, 37})}, {}, false, "long rows"},
      {OpTag::clamp, {N({3, 37})}, A{{"min", 0.0}}, false, "lower bound only"},
      {OpTag::batch_norm, {N({2, 5, 7, 9}), N({5}), N({5}), N({5}), P({5})}, {}, false, "eval, long planes"},
      {OpTag::batch_norm,
       {N({2, 3, 4, 5}), N({3}), N({3}), N({3}), T({3})},
       {},
       false,
       "eval, tiny variance: eps shows"},
      {OpTag::mean, {N({2, 3, 7, 9})}, A{{"dims", L{2, 3}}, {"keepdim", true}}, false, "global pool"},
      {OpTag::linear, {N({1, 37}), N({21, 37}), N({21})}, {}, false, "one row"},
      {OpTag::linear, {N({2, 40}), N({9, 40})}, {}, false, "two rows, no bias"},
      // A 16-bit weight GEMV (the half provider's few-row linear) on 57 columns: a 32-lane block, then a full
      // and a partial 16-lane block.
      {OpTag::linear, {N({2, 57}), N({9, 57}), N({9})}, {}, false, "two rows, depth 57"},
      {OpTag::max_pool2d,
       {N({1, 3, 20, 37})},
       A{{"kernel_size", L{3}}, {"stride", L{2}}, {"padding", L{1}}},
       false,
       "wide rows"},
      {OpTag::max_pool2d,
       {N({2, 2, 9, 10})},
       A{{"kernel_size", L{2, 3}}, {"stride", L{1}}, {"dilation", L{2}}, {"ceil_mode", true}},
       false,
       "dilated"},
      {OpTag::sum, {N({3, 41})}, A{{"dims", L{-1}}}, false, "long rows"},
      {OpTag::mean, {N({2, 5, 3})}, A{{"dims", L{1}}}, false, "inner dimension"},
      // Column sums: a channels-last image's H and W (the chunk of 64 columns and a tail; more rows than
      // one block of 64), and the first dimensions.
      {OpTag::mean, {N({2, 7, 9, 70})}, A{{"dims", L{1, 2}}}, false, "channels-last global pool"},
      {OpTag::sum, {N({1, 13, 11, 5})}, A{{"dims", L{2, 1}}, {"keepdim", true}}, false, "many rows, few columns"},
      {OpTag::sum, {N({3, 4, 6})}, A{{"dims", L{0, 1}}}, false, "leading dimensions"},
      {OpTag::max_pool2d, {N({2, 2, 5, 5})}, A{{"kernel_size", L{2}}, {"ceil_mode", true}}},
      {OpTag::max_pool2d,
       {N({1, 2, 7, 7})},
       A{{"kernel_size", L{3}}, {"stride", L{2}}, {"padding", L{1}}},
       false,
       "padded"},
      {OpTag::avg_pool2d,
       {N({2, 2, 5, 5})},
       A{{"kernel_size", L{3}}, {"stride", L{2}}, {"padding", L{1}}, {"ceil_mode", true}}},
      {OpTag::avg_pool2d,
       {N({1, 1, 6, 6})},
       A{{"kernel_size", L{2}}, {"padding", L{1}}, {"count_include_pad", false}},
       false,
       "exclude pad"},
      {OpTag::avg_pool2d,
       {N({1, 6, 20, 20})},
       A{{"kernel_size", L{2}}, {"stride", L{2}}},
       false,
       "2 x 2 / 2 (densenet's transitions): the in-place depthwise path at AVX-512"},
      {OpTag::avg_pool2d,
       {N({2, 3, 11, 9})},
       A{{"kernel_size", L{3, 2}},
         {"stride", L{3, 1}},
         {"padding", L{1, 1}},
         {"ceil_mode", true},
         {"count_include_pad", false}},
       false,
       "rectangular, stride 3, ceil mode, excluding the padding"},
      {OpTag::adaptive_avg_pool2d, {N({2, 3, 5, 7})}, A{{"output_size", L{2, 3}}}},
      {OpTag::reshape, {N({2, 3, 4})}, A{{"shape", L{4, -1}}}},
      {OpTag::permute, {N({2, 3, 4})}, A{{"dims", L{2, 0, 1}}}},
      {OpTag::transpose, {N({2, 3, 4})}, A{{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{2}}}},
      // 65 elements: past two 16-lane (and 8-lane) blocks of the 16-bit conversions, with a tail.
      {OpTag::transpose, {N({5, 13})}, A{{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{1}}}, false, "65 elements"},
      {OpTag::flatten, {N({2, 3, 4})}, A{{"start_dim", std::int64_t{1}}}},
      {OpTag::concat, {N({2, 3}), N({2, 2}), N({2, 1})}, A{{"dim", std::int64_t{1}}}},
      {OpTag::slice,
       {N({7, 3})},
       A{{"dim", std::int64_t{0}}, {"start", std::int64_t{1}}, {"end", std::int64_t{-1}}, {"step", std::int64_t{2}}}},
      {OpTag::sum, {N({3, 4, 5})}, A{{"dims", L{1}}}},
      {OpTag::sum, {N({3, 4})}, {}, false, "all"},
      {OpTag::mean, {N({3, 4, 5})}, A{{"dims", L{0, 2}}, {"keepdim", true}}},
      {OpTag::max, {N({3, 4, 5})}, A{{"dims", L{2}}}},
      // Size-1 and empty dimensions.
      {OpTag::add, {N({0, 3}), N({1, 3})}, {}, false, "empty"},
      {OpTag::mul, {N({1, 1}), N({1})}, {}, false, "unit"},
      {OpTag::matmul, {N({0, 3}), N({3, 4})}, {}, false, "empty rows"},
      {OpTag::matmul, {N({2, 0}), N({0, 4})}, {}, false, "empty inner"},
      {OpTag::matmul, {N({1, 1}), N({1, 1})}, {}, false, "1x1"},
      {OpTag::linear, {N({0, 4}), N({3, 4}), N({3})}, {}, false, "no rows"},
      {OpTag::softmax, {N({4, 1})}, {}, false, "one column"},
      {OpTag::log_softmax, {N({0, 5})}, {}, false, "no rows"},
      {OpTag::sum, {N({3, 0})}, A{{"dims", L{1}}}, false, "empty dim"},
      {OpTag::layer_norm, {N({1, 6}), N({6}), N({6})}, A{{"normalized_shape", L{6}}}, false, "one row"},
      {OpTag::conv2d, {N({0, 2, 5, 5}), N({3, 2, 3, 3})}, {}, false, "empty batch"},
      {OpTag::conv2d, {N({1, 1, 1, 1}), N({1, 1, 1, 1}), N({1})}, {}, false, "1x1"},
      {OpTag::relu, {N({0})}, {}, false, "empty"},
      {OpTag::concat, {N({0, 2}), N({3, 2})}, A{{"dim", std::int64_t{0}}}, false, "empty part"},
  };
}

// Samples past the native kernels' blocking boundaries (GEMM tiles and K blocks, im2col panels, rows
// shared among the threads), too large for the finite-difference sweep, or with values beyond it.
std::vector<Sample> large_samples() {
  using ops::OpTag;
  return {
      {OpTag::softmax, {N({300, 257})}, {}, false, "rows shared among the threads"},
      {OpTag::cross_entropy, {N({300, 257}), I({300}, 257)}, {}, false, "rows shared among the threads"},
      {OpTag::matmul, {N({3, 200, 301}), N({301, 190})}, {}, false, "full tiles, several K blocks"},
      // Past the largest K block (1024) and the largest N block (8192) the blocking can choose on any CPU, so
      // the GEMM's block loops take a second turn whatever the caches; and a linear with no inner dimension,
      // whose result is its bias.
      {OpTag::matmul, {N({9, 1100}), N({1100, 40})}, {}, false, "two K blocks on any CPU"},
      {OpTag::matmul, {N({2, 30}), N({30, 8300})}, {}, false, "two N blocks on any CPU"},
      {OpTag::linear, {N({3, 0}), N({4, 0}), N({4})}, {}, false, "no inner dimension: the bias alone"},
      // linear's GEMM (B transposed, a column bias in the epilogue) through the same blocks: row blocks past
      // the largest MC (1024), shared among the threads by row tiles; two K blocks; two N blocks, shared by
      // column panels.
      {OpTag::linear, {N({1100, 20}), N({50, 20}), N({50})}, {}, false, "two row blocks on any CPU, a bias"},
      {OpTag::linear, {N({9, 1100}), N({40, 1100}), N({40})}, {}, false, "two K blocks on any CPU, a bias"},
      {OpTag::linear, {N({5, 30}), N({8300, 30}), N({8300})}, {}, false, "two N blocks on any CPU, a bias"},
      // An elementwise map long enough to be shared among the threads (kShareElements, vector_ops.cpp).
      {OpTag::exp, {N({66000})}, {}, false, "shared among the threads"},
      {OpTag::sigmoid, {N({66000})}, {}, false, "shared among the threads"},
      {OpTag::layer_norm, {N({300, 256}), N({256}), N({256})}, A{{"normalized_shape", L{256}}}, false, "300 rows"},
      {OpTag::rms_norm, {N({300, 130}), N({130})}, A{{"normalized_shape", L{130}}}, false, "300 rows: threads"},
      {OpTag::log_softmax, {N({300, 257})}, {}, false, "rows shared among the threads"},
      {OpTag::conv2d,
       {N({1, 3, 45, 75}), N({8, 3, 7, 7}), N({8})},
       A{{"stride", L{2}}, {"padding", L{3}}},
       false,
       "wide image: output rows cross the packed-B panels"},
      {OpTag::conv2d,
       {N({2, 4, 20, 40}), N({6, 2, 3, 3})},
       A{{"groups", std::int64_t{2}}, {"dilation", L{2}}, {"padding", L{2}}},
       false,
       "groups, dilation"},
      {OpTag::conv2d,
       {N({1, 2, 9, 70}), N({3, 2, 2, 5})},
       A{{"stride", L{1, 3}}, {"padding", L{0, 4}}},
       false,
       "unequal strides and padding"},
      {OpTag::gelu, {N({3, 12001})}, {}, false, "past 2^15 elements: shared among the threads"},
      // Logits of magnitude 1e4 over rows of two 16-lane blocks and a tail: the max must be exact.
      {OpTag::softmax, {H({3, 37})}, {}, false, "huge logits"},
      {OpTag::log_softmax, {H({3, 37})}, {}, false, "huge logits"},
      {OpTag::cross_entropy, {H({3, 37}), I({3}, 37)}, {}, false, "huge logits"},
      // Every row's max in a lane of its own: over 48 rows of 37 some row's max sits at lane 0 of a block, so a
      // row max that skips a lane shifts by a value 1e4 below the max, and exp overflows.
      {OpTag::log_softmax, {H({48, 37})}, {}, false, "huge logits, many rows"},
      {OpTag::softmax, {H({48, 37})}, {}, false, "huge logits, many rows"},
      // The native binary ops' routing (native.cpp: row_broadcast, row_scalar): each shape is one the fast
      // paths take, or one that looks close to one and must go to the generic kernel.
      {OpTag::add, {N({2, 3, 4}), N({2, 3, 4})}, {}, false, "equal shapes"},
      {OpTag::mul, {N({2, 3, 4}), N({2, 1, 4})}, {}, false, "a 1 in the middle: not a trailing block"},
      {OpTag::sub, {N({2, 3, 5}), N({2, 3, 1})}, {}, false, "one value per row, rank kept"},
      {OpTag::div, {N({2, 3, 1}), P({2, 3, 5})}, {}, false, "one value per row, first operand"},
      {OpTag::add, {N({1, 2, 3, 4}), N({2, 3, 4})}, {}, false, "a leading 1 on the larger operand"},
      {OpTag::mul, {N({2, 3, 4}), N({1})}, {}, false, "one element of rank 1"},
      {OpTag::add, {N({6, 1}), N({1, 5})}, {}, false, "outer sum"},
      {OpTag::sub, {N({0, 3}), N({3})}, {}, false, "no rows"},
      {OpTag::mul, {N({2, 3, 4}), N({1, 1, 4})}, {}, false, "a trailing block under leading 1s"},
      {OpTag::add, {N({2, 1, 4, 1}), N({2, 3, 4, 5})}, {}, false, "1s between kept dimensions"},
      {OpTag::div, {N({3, 4, 5}), P({3, 4, 1})}, {}, false, "a per-row divisor"},
      {OpTag::mul, {N({4, 37}), N({37})}, {}, false, "rows of 37"},
      {OpTag::sub, {N({3, 1}), N({2, 3, 5})}, {}, false, "a 1 below a lower rank: not a row operand"},
      {OpTag::add, {N({3, 1, 5}), N({3, 4, 1})}, {}, false, "two-sided, same rank"},
      {OpTag::add, {N({2, 0}), N({0})}, {}, false, "an empty repeated operand"},
      {OpTag::sub, {N({0}), N({2, 0})}, {}, false, "an empty repeated operand first"},
      {OpTag::mul, {N({0, 3}), N({0, 1})}, {}, false, "one value per row, no rows"},
      // rotary_embedding's routing: a table as large as x, one table row for every position, a table with a
      // 1 in the middle (not a trailing block).
      {OpTag::rotary_embedding, {N({3, 8}), N({3, 8}), N({3, 8})}, {}, false, "tables as large as x"},
      {OpTag::rotary_embedding, {N({2, 3, 8}), N({8}), N({8})}, {}, false, "one table row"},
      {OpTag::rotary_embedding, {N({2, 4, 6}), N({2, 1, 6}), N({2, 1, 6})}, {}, false, "a table with a middle 1"},
      {OpTag::rotary_embedding, {N({10}), N({10}), N({10})}, {}, false, "rank 1"},
  };
}

// Sample cases for the update ops (role update: they write their role-u operands in place). Inputs are in
// operand order; the sweep splits them into state and read operands by the op's roles.
std::vector<Sample> update_samples() {
  using ops::OpTag;
  return {
      {OpTag::accumulate_grad, {N({3, 5}), N({3, 5})}, {}},
      {OpTag::accumulate_grad, {N({0, 4}), N({0, 4})}, {}, false, "empty"},
      {OpTag::batch_norm_stats, {N({3}), P({3}), N({4, 3, 2, 2})}, A{{"momentum", 0.1}}},
      {OpTag::batch_norm_stats, {N({5}), P({5}), N({6, 5})}, A{{"momentum", 0.3}}, false, "rank 2"},
      {OpTag::sgd, {N({4, 3}), N({4, 3})}, A{{"lr", 0.1}, {"weight_decay", 0.01}}, false, "plain"},
      {OpTag::sgd,
       {N({37}), N({37}), N({37})},
       A{{"lr", 0.05}, {"momentum", 0.9}, {"weight_decay", 0.0}},
       false,
       "momentum"},
      {OpTag::adam,
       {N({4, 5}), N({4, 5}), N({4, 5}), P({4, 5})},
       A{{"lr", 0.01}, {"step", std::int64_t{3}}},
       false,
       "adam"},
      {OpTag::adam,
       {N({67}), N({67}), N({67}), P({67})},
       A{{"lr", 0.01}, {"weight_decay", 0.1}, {"decoupled", true}, {"step", std::int64_t{1}}},
       false,
       "adamw, a vector tail"},
  };
}

std::vector<Sample> provider_samples() {
  std::vector<Sample> all = samples();
  for (auto more : {large_samples(), update_samples()}) all.insert(all.end(), more.begin(), more.end());
  return all;
}

/// Random values for one sample input in dtype `dtype` (normal/positive) or its own dtype (index, mask).
Tensor make_input(const SampleInput& in, DType dtype, std::mt19937& rng) {
  const std::int64_t n = ops::numel(in.shape);
  std::vector<double> v(static_cast<std::size_t>(n));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> pos(0.5, 2.0);
  std::uniform_real_distribution<double> small(-1.2, 1.2);
  std::uniform_real_distribution<double> tiny(1e-4, 2e-3);
  for (auto& x : v) {
    switch (in.kind) {
      case SampleInput::normal:
      case SampleInput::bf16_weight:
        x = normal(rng);
        break;
      case SampleInput::wide:
        x = 4.0 * normal(rng);
        break;
      case SampleInput::positive:
        x = pos(rng);
        break;
      case SampleInput::small:
        x = small(rng);
        break;
      case SampleInput::tiny:
        x = tiny(rng);
        break;
      case SampleInput::huge:
        x = 1e4 * normal(rng);
        break;
      case SampleInput::whole:
        x = static_cast<double>(static_cast<int>(rng() % 5) - 2);
        break;
      case SampleInput::index:
        x = static_cast<double>(rng() % static_cast<std::uint64_t>(in.bound));
        break;
      case SampleInput::unique:
        break;  // below: a shuffled prefix of 0 .. bound - 1
      case SampleInput::mask:
        x = (rng() % 4) != 0 ? 1.0 : 0.0;
        break;
      case SampleInput::quantized:
        x = static_cast<double>(static_cast<int>(rng() % 255) - 127);
        break;
    }
  }
  if (in.kind == SampleInput::unique) {
    std::vector<double> all(static_cast<std::size_t>(in.bound));
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<double>(i);
    std::shuffle(all.begin(), all.end(), rng);
    std::copy_n(all.begin(), v.size(), v.begin());
  }
  if (in.kind == SampleInput::mask) {
    for (std::int64_t i = 0; i < n; i += in.shape[in.shape.size() - 1])
      v[static_cast<std::size_t>(i)] = 1.0;  // no fully masked row
  }
  Tensor t = Tensor::from_values<double>(in.shape, std::span<const double>(v));
  const DType target = in.kind == SampleInput::index || in.kind == SampleInput::unique ? DType::i64
                       : in.kind == SampleInput::mask                                  ? DType::boolean
                       : in.kind == SampleInput::quantized                             ? DType::i8
                       : in.kind == SampleInput::bf16_weight                           ? DType::bf16
                                                                                       : dtype;
  return target == DType::f64 ? std::move(t) : t.convert(target);
}

std::string describe(const Sample& s) {
  return std::string(ops::op_kind(s.op)) + (s.label[0] ? fmt::format(" [{}]", s.label) : std::string());
}

namespace {

// A view with the same values as `t` but a strided (transposed-back) layout, when t has rank >= 2.
TensorView strided_copy(const Tensor& t, std::vector<Tensor>& keep) {
  if (t.rank() < 2) return t.as_view();
  keep.push_back(t.transpose(0, t.rank() - 1).duplicate());
  return keep.back().transpose(0, t.rank() - 1);
}

// A result's values, copied to the host first when it lives on a device.
std::vector<double> values_of(const Tensor& t) {
  if (t.as_view().device() == DeviceKind::cpu) return t.to_doubles();
  return t.transfer_to(cpu_provider()).to_doubles();
}

// Whether a float32 tensor is given to a candidate computing in `dtype` as 16-bit values.
bool narrowed_to(const Tensor& t, DType dtype) {
  return t.dtype() == DType::f32 && (dtype == DType::bf16 || dtype == DType::f16);
}

// The candidate's own copy of a baseline's tensor: in `dtype` when it is float32 (a 16-bit candidate's
// values, which the baseline holds rounded already), on the handler's device (the CUDA provider's kernels
// read device tensors only).
Tensor placed_for(const kernels::Handler& h, const Tensor& t, DType dtype) {
  Tensor own = narrowed_to(t, dtype) ? t.as_view().convert(dtype) : t.duplicate();
  return placed_on(std::move(own), h.device);
}

std::vector<Tensor> placed_for(const kernels::Handler& h, const std::vector<Tensor>& host, DType dtype) {
  std::vector<Tensor> out;
  out.reserve(host.size());
  for (const auto& t : host) out.push_back(placed_for(h, t, dtype));
  return out;
}

// `t` (float32) rounded to the 16-bit `dtype` and back; float32 itself unchanged.
Tensor rounded_to(Tensor t, DType dtype) {
  return narrowed_to(t, dtype) ? t.as_view().convert(dtype).as_view().convert(DType::f32) : std::move(t);
}

std::vector<double> concatenated(const std::vector<Tensor>& ts) {
  std::vector<double> out;
  for (const auto& t : ts) {
    const auto v = values_of(t);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

SampleBaseline sample_baseline(const kernels::Handler& baseline, const Sample& s, std::mt19937& rng, DType dtype) {
  SampleBaseline b;
  b.dtype = dtype;
  for (const auto& in : s.inputs) {
    Tensor t = make_input(in, DType::f32, rng);
    const bool narrowed = narrowed_to(t, dtype);
    b.inputs.push_back(rounded_to(std::move(t), dtype));
    if (!narrowed || !b.unrepresentable.empty()) continue;  // only rounding can leave the finite values
    const auto v = b.inputs.back().to_doubles();
    if (std::any_of(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }))
      b.unrepresentable = fmt::format("input {} has values beyond {}'s range", b.inputs.size() - 1, dtype_name(dtype));
  }
  if (!b.unrepresentable.empty()) return b;
  if (ops::op_info(s.op).role == ops::OpRole::update) {
    b.state = concatenated(updated_state(baseline, b.inputs, s.attrs));
    return b;
  }
  const kernels::KernelContext ctx{s.training, 41};
  const Tensor& y = b.forward.emplace(kernels::run_forward(baseline, views_of(b.inputs), s.attrs, ctx));
  std::vector<double> gv(static_cast<std::size_t>(y.numel()));
  std::normal_distribution<double> nd;
  for (auto& x : gv) x = nd(rng);
  const Tensor& g = b.cotangent.emplace(
      rounded_to(Tensor::from_values<double>(y.shape(), std::span<const double>(gv)).convert(y.dtype()), dtype));
  b.has_vjp = baseline.vjp != nullptr;
  if (b.has_vjp) b.vjp = kernels::run_vjp(baseline, views_of(b.inputs), y.as_view(), g.as_view(), s.attrs, ctx);
  return b;
}

std::vector<std::string> sweep_problems(const kernels::Handler& candidate, const kernels::Handler& baseline,
                                        const Sample& s, std::mt19937& rng, const ResultTamper* tamper) {
  return sweep_problems(candidate, s, sample_baseline(baseline, s, rng), tamper);
}

std::vector<std::string> sweep_problems(const kernels::Handler& candidate, const Sample& s, const SampleBaseline& b,
                                        const ResultTamper* tamper) {
  std::vector<std::string> found;
  if (!b.unrepresentable.empty()) return found;  // the caller does not count it
  const auto& info = ops::op_info(s.op);
  const ops::Tolerance tolerance = info.tolerance(b.dtype), vjp_tolerance = info.vjp_tolerance(b.dtype);
  auto check = [&](const std::vector<double>& got, const std::vector<double>& want, ops::Tolerance tol,
                   const std::string& what) {
    if (got.size() != want.size()) {
      found.push_back(fmt::format("{}: {} values, the baseline has {}", what, got.size(), want.size()));
      return;
    }
    const ops::Agreement r = ops::compare(got, want, tol);
    if (!r.within)
      found.push_back(fmt::format("{}: element {} is {} but the baseline gives {} (tolerance {} + {} * {})", what,
                                  r.worst, got[r.worst], want[r.worst], tol.abs, tol.rel, r.scale));
  };
  // The candidate's own copies of the inputs: a kernel that writes into its input harms no other candidate.
  const std::vector<Tensor> candidate_ins = placed_for(candidate, b.inputs, b.dtype);
  if (info.role == ops::OpRole::update) {
    auto state = updated_state(candidate, candidate_ins, s.attrs);
    if (tamper != nullptr && tamper->state) tamper->state(state);
    check(concatenated(state), b.state, tolerance, "new state");
    return found;
  }
  const kernels::KernelContext ctx{s.training, 41};
  const Tensor& yr = *b.forward;
  const std::vector<double> want = yr.to_doubles();
  Tensor yc = kernels::run_forward(candidate, views_of(candidate_ins), s.attrs, ctx);
  if (tamper != nullptr && tamper->forward) tamper->forward(yc);
  if (yc.shape() != yr.shape())
    found.push_back(fmt::format("forward: shape [{}] but the baseline gives [{}]", fmt::join(yc.shape(), ", "),
                                fmt::join(yr.shape(), ", ")));
  check(values_of(yc), want, tolerance, "forward");
  // Note [16-bit tolerances]: an op whose every result is one IEEE basic operation gives, on 16-bit operands,
  // the correct rounding of the exact result; the reference's f32 result rounded to the dtype is that, bit
  // for bit, bar an f32 subnormal, which a conversion instruction may flush to zero (avx512_bf16's does).
  std::vector<double> rounded_once;
  if (b.dtype != DType::f32 && info.correctly_rounded() && yr.dtype() == DType::f32)
    rounded_once = yr.as_view().convert(b.dtype).to_doubles();
  const ops::Tolerance subnormal{std::numeric_limits<float>::min(), 0.0};
  if (!rounded_once.empty()) check(values_of(yc), rounded_once, subnormal, "forward, correctly rounded");
  std::vector<Tensor> keep;
  std::vector<TensorView> strided;
  strided.reserve(candidate_ins.size());
  for (const auto& t : candidate_ins) strided.push_back(strided_copy(t, keep));
  Tensor ys = kernels::run_forward(candidate, strided, s.attrs, ctx);
  if (tamper != nullptr && tamper->forward) tamper->forward(ys);
  check(values_of(ys), want, tolerance, "forward, strided inputs");
  if (!rounded_once.empty())
    check(values_of(ys), rounded_once, subnormal, "forward, strided inputs, correctly rounded");
  if (candidate.vjp == nullptr) return found;  // forward-only handlers (LibTorch)
  if (!b.has_vjp) {
    found.emplace_back("vjp: the candidate has one, the baseline none to compare it with");
    return found;
  }
  // A VJP that fails (one that reads an operand the tape would not keep) is a problem of its own, after
  // whatever the forward checks found.
  try {
    [&] {
      const auto& gr = b.vjp;
      const Tensor gd = placed_for(candidate, *b.cotangent, yc.dtype());  // the candidate's output dtype
      // The VJP is called as the tape calls it: an operand the op does not save (the op table's saves column) is
      // a geometry-only placeholder, which a VJP that reads it fails on.
      std::vector<Tensor> placeholders;
      placeholders.reserve(candidate_ins.size() + 1);
      auto kept = [&](const Tensor& t, bool saved) {
        if (saved) return t.as_view();
        return placeholders.emplace_back(Tensor::empty(t.shape(), t.dtype(), meta_provider())).as_view();
      };
      std::vector<TensorView> vjp_ins;
      for (std::size_t k = 0; k < candidate_ins.size(); ++k)
        vjp_ins.push_back(kept(candidate_ins[k], info.saves_input(k)));
      const TensorView vjp_y = kept(yc, info.saves_output());
      auto gc = kernels::run_vjp(candidate, vjp_ins, vjp_y, gd.as_view(), s.attrs, ctx);
      if (tamper != nullptr && tamper->vjp) tamper->vjp(gc);
      for (std::size_t i = 0; i < gr.size(); ++i) {
        if (i >= gc.size() || gr[i].has_value() != gc[i].has_value()) {
          found.push_back(fmt::format("vjp input {}: {} a gradient where the baseline {}", i,
                                      i < gc.size() && gc[i] ? "has" : "has no", gr[i] ? "has one" : "has none"));
          continue;
        }
        if (gr[i]) check(values_of(*gc[i]), gr[i]->to_doubles(), vjp_tolerance, fmt::format("vjp input {}", i));
      }
      // One gradient wanted at a time (KernelContext::wanted_grads: the tape asks so when the other inputs need
      // none, and a GEMM op then skips their products): the wanted one is the baseline's, and so is any other the
      // VJP still returns.
      if (std::count_if(gr.begin(), gr.end(), [](const auto& x) { return x.has_value(); }) < 2) return;
      for (std::size_t i = 0; i < gr.size() && i < 64; ++i) {
        if (!gr[i]) continue;
        kernels::KernelContext one = ctx;
        one.wanted_grads = std::uint64_t{1} << i;
        auto g1 = kernels::run_vjp(candidate, vjp_ins, vjp_y, gd.as_view(), s.attrs, one);
        if (tamper != nullptr && tamper->vjp) tamper->vjp(g1);
        for (std::size_t j = 0; j < gr.size(); ++j) {
          const std::string what = fmt::format("vjp input {}, only input {} wanted", j, i);
          if (j < g1.size() && g1[j] && gr[j]) {
            check(values_of(*g1[j]), gr[j]->to_doubles(), vjp_tolerance, what);
          } else if (j == i) {
            found.push_back(what + ": no gradient");
          }
        }
      }
    }();
  } catch (const Error& e) {
    found.push_back(fmt::format("vjp: the kernel failed: {}", e.what()));
  }
  return found;
}

}  // namespace pact::verify
