#pragma once
/// The op table (SPEC §5): every op declared once with its tag, fixed v1 wire kind string, arity,
/// attribute schema, shape rule, FLOP rule, comparison tolerance, VJP and mode flags. IR parsing,
/// planning, capture estimates, kernels, tests and CLI listings all read it from here.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "pact/core/dtype.hpp"
#include "pact/core/layout.hpp"
#include "pact/ops/attributes.hpp"

namespace pact::ops {

// Note [Op table]
// Columns: tag, v1 wire kind, min arity, max arity (-1: variadic), VJP, mode-dependent, role,
// tolerance class, saves, passthrough, input roles.
// - VJP: true (the op has one), false (it has none: an inference-only fusion, which a training plan
//   refuses), nograd (no gradient flows through it, as PyTorch's argmax, arange and zeros_like: integer
//   outputs, or outputs that do not depend on the input values; a training plan admits it forward only
//   and the tape never records it).
// - saves: what the VJP reads besides the cotangent (in0..in4, out; none), as PyTorch's derivatives.yaml
//   declares; the tape retains exactly these, and hands every other input and the output to the VJP as
//   a geometry-only placeholder, which a VJP that reads it refuses typed (tests/kernels: the saves test).
// - passthrough: the inputs whose gradient is the cotangent itself, re-described in the input's shape,
//   whenever the input has as many elements as the output (a reshape; an add or sub operand that was not
//   broadcast). Backward hands such an input the cotangent, zero copy, when it can.
// - input roles, one letter per operand (the last repeats for a variadic op): d data, w weight, b bias,
//   s running statistic, i index or class target, m mask, u state an update op writes in place, c any dtype (the
//   operand of a conversion, or one whose geometry alone is read). Selection checks the dtype of every operand but
//   indices, masks and c operands against what a capsule computes (the shape rule checks those).
// Op roles: source (input, parameter, constant: no kernel, no inputs), view (pure re-description of its
// input's bytes), kernel (computes new values), sink (output), update (writes new values into its
// operands of role u in place, as torch's `_fused_adam_` does: the training step's gradient
// accumulation, batch-norm running statistics and optimizer updates; no graph holds one, the planner
// admits them for a training plan: Note [Training kernels] in pact/plan/planner.hpp), collective (an update
// across processes: data-parallel training's gradient mean over the ranks, which the session's
// train::Communicator performs; no CPU provider has a handler for it, only a communicator's row of the
// provider table). The wire kind never changes once published (v1).
#define PACT_OPS(X)                                                                                           \
  X(input, "input", 0, 0, false, false, source, exact, none, none, "")                                        \
  X(parameter, "parameter", 0, 0, false, false, source, exact, none, none, "")                                \
  X(constant, "constant", 0, 0, false, false, source, exact, none, none, "")                                  \
  X(add, "add", 2, 2, true, false, kernel, reduction, none, in0 | in1, "dd")                                  \
  X(sub, "sub", 2, 2, true, false, kernel, reduction, none, in0, "dd")                                        \
  X(mul, "mul", 2, 2, true, false, kernel, reduction, in0 | in1, none, "dd")                                  \
  X(div, "div", 2, 2, true, false, kernel, reduction, in0 | in1, none, "dd")                                  \
  X(neg, "neg", 1, 1, true, false, kernel, exact, none, none, "d")                                            \
  X(matmul, "matmul", 2, 2, true, false, kernel, contraction, in0 | in1, none, "dd")                          \
  X(linear, "linear", 2, 3, true, false, kernel, contraction, in0 | in1, none, "dwb")                         \
  X(linear_int8, "linear_int8", 3, 4, false, false, kernel, contraction, none, none, "dcwb")                  \
  X(linear_bf16, "linear_bf16", 2, 3, false, false, kernel, contraction, none, none, "dcb")                   \
  X(relu, "relu", 1, 1, true, false, kernel, exact, out, none, "d")                                           \
  X(gelu, "gelu", 1, 1, true, false, kernel, transcendental, in0 | out, none, "d")                            \
  X(silu, "silu", 1, 1, true, false, kernel, transcendental, in0, none, "d")                                  \
  X(tanh, "tanh", 1, 1, true, false, kernel, transcendental, out, none, "d")                                  \
  X(sigmoid, "sigmoid", 1, 1, true, false, kernel, transcendental, out, none, "d")                            \
  X(hardswish, "hardswish", 1, 1, true, false, kernel, exact, in0, none, "d")                                 \
  X(hardsigmoid, "hardsigmoid", 1, 1, true, false, kernel, exact, in0, none, "d")                             \
  X(clamp, "clamp", 1, 1, true, false, kernel, exact, in0, none, "d")                                         \
  X(exp, "exp", 1, 1, true, false, kernel, transcendental, out, none, "d")                                    \
  X(log, "log", 1, 1, true, false, kernel, transcendental, in0, none, "d")                                    \
  X(sqrt, "sqrt", 1, 1, true, false, kernel, transcendental, out, none, "d")                                  \
  X(sin, "sin", 1, 1, true, false, kernel, transcendental, in0, none, "d")                                    \
  X(cos, "cos", 1, 1, true, false, kernel, transcendental, in0, none, "d")                                    \
  X(tan, "tan", 1, 1, true, false, kernel, transcendental, out, none, "d")                                    \
  X(pow, "pow", 2, 2, true, false, kernel, transcendental, in0 | in1, none, "dd")                             \
  X(where, "where", 3, 3, true, false, kernel, exact, in0, none, "mdd")                                       \
  X(eq, "eq", 2, 2, nograd, false, kernel, exact, none, none, "dd")                                           \
  X(ne, "ne", 2, 2, nograd, false, kernel, exact, none, none, "dd")                                           \
  X(lt, "lt", 2, 2, nograd, false, kernel, exact, none, none, "dd")                                           \
  X(le, "le", 2, 2, nograd, false, kernel, exact, none, none, "dd")                                           \
  X(gt, "gt", 2, 2, nograd, false, kernel, exact, none, none, "dd")                                           \
  X(ge, "ge", 2, 2, nograd, false, kernel, exact, none, none, "dd")                                           \
  X(triu, "triu", 1, 1, true, false, kernel, exact, none, none, "d")                                          \
  X(tril, "tril", 1, 1, true, false, kernel, exact, none, none, "d")                                          \
  X(cumsum, "cumsum", 1, 1, true, false, kernel, reduction, none, none, "d")                                  \
  X(argmax, "argmax", 1, 1, nograd, false, kernel, exact, none, none, "d")                                    \
  X(topk, "topk", 1, 1, true, false, kernel, exact, in0, none, "d")                                           \
  X(topk_indices, "topk_indices", 1, 1, nograd, false, kernel, exact, none, none, "d")                        \
  X(cast, "cast", 1, 1, true, false, kernel, exact, none, none, "c")                                          \
  X(full_like, "full_like", 1, 1, nograd, false, kernel, exact, none, none, "c")                              \
  X(arange, "arange", 0, 0, nograd, false, kernel, exact, none, none, "")                                     \
  X(gather, "gather", 2, 2, true, false, kernel, reduction, in1, none, "di")                                  \
  X(index_select, "index_select", 2, 2, true, false, kernel, reduction, in1, none, "di")                      \
  X(index_copy, "index_copy", 3, 3, true, false, kernel, exact, in1, none, "did")                             \
  X(interpolate, "interpolate", 1, 1, true, false, kernel, reduction, none, none, "d")                        \
  X(softmax, "softmax", 1, 1, true, false, kernel, reduction, out, none, "d")                                 \
  X(log_softmax, "log_softmax", 1, 1, true, false, kernel, reduction, out, none, "d")                         \
  X(cross_entropy, "cross_entropy", 2, 2, true, false, kernel, reduction, in0 | in1, none, "di")              \
  X(mse_loss, "mse_loss", 2, 2, true, false, kernel, reduction, in0 | in1, none, "dd")                        \
  X(layer_norm, "layer_norm", 1, 3, true, false, kernel, reduction, in0 | in1, none, "dwb")                   \
  X(rms_norm, "rms_norm", 1, 2, true, false, kernel, reduction, in0 | in1, none, "dw")                        \
  X(rotary_embedding, "rotary_embedding", 3, 3, true, false, kernel, reduction, in0 | in1 | in2, none, "ddd") \
  X(batch_norm, "batch_norm", 5, 5, true, true, kernel, reduction, in0 | in1 | in3 | in4, none, "dwbss")      \
  X(dropout, "dropout", 1, 1, true, true, kernel, exact, none, none, "d")                                     \
  X(embedding, "embedding", 2, 2, true, false, kernel, exact, in1, none, "wi")                                \
  X(scaled_dot_product_attention, "scaled_dot_product_attention", 3, 4, true, false, kernel, contraction,     \
    in0 | in1 | in2 | in3, none, "dddm")                                                                      \
  X(conv2d, "conv2d", 2, 3, true, false, kernel, contraction, in0 | in1, none, "dwb")                         \
  X(conv2d_activation, "conv2d_activation", 2, 4, false, false, kernel, contraction, none, none, "dwbd")      \
  X(conv2d_nhwc, "conv2d_nhwc", 2, 4, false, false, kernel, contraction, none, none, "dwbd")                  \
  X(max_pool2d, "max_pool2d", 1, 1, true, false, kernel, exact, in0, none, "d")                               \
  X(avg_pool2d, "avg_pool2d", 1, 1, true, false, kernel, reduction, in0, none, "d")                           \
  X(adaptive_avg_pool2d, "adaptive_avg_pool2d", 1, 1, true, false, kernel, reduction, none, none, "d")        \
  X(reshape, "reshape", 1, 1, true, false, view, exact, none, in0, "d")                                       \
  X(permute, "permute", 1, 1, true, false, view, exact, none, none, "d")                                      \
  X(transpose, "transpose", 1, 1, true, false, view, exact, none, none, "d")                                  \
  X(flatten, "flatten", 1, 1, true, false, view, exact, none, in0, "d")                                       \
  X(concat, "concat", 1, -1, true, false, kernel, exact, none, none, "d")                                     \
  X(slice, "slice", 1, 1, true, false, view, exact, none, none, "d")                                          \
  X(sum, "sum", 1, 1, true, false, kernel, reduction, in0, none, "d")                                         \
  X(mean, "mean", 1, 1, true, false, kernel, reduction, in0, none, "d")                                       \
  X(max, "max", 1, 1, true, false, kernel, exact, in0 | out, none, "d")                                       \
  X(output, "output", 1, 1, true, false, sink, exact, none, none, "d")                                        \
  X(accumulate_grad, "accumulate_grad", 2, 2, false, false, update, exact, none, none, "ud")                  \
  X(batch_norm_stats, "batch_norm_stats", 3, 3, false, false, update, reduction, none, none, "uud")           \
  X(sgd, "sgd", 2, 3, false, false, update, reduction, none, none, "udu")                                     \
  X(adam, "adam", 4, 4, false, false, update, transcendental, none, none, "uduu")                             \
  X(allreduce_mean, "allreduce_mean", 1, 1, false, false, collective, reduction, none, none, "u")

enum class OpTag : std::uint8_t {
#define PACT_OP_ENUM(tag, kind, lo, hi, vjp, mode, role, tol, saves, pass, roles) tag,
  PACT_OPS(PACT_OP_ENUM)
#undef PACT_OP_ENUM
};

#define PACT_OP_COUNT_ONE(...) +1
inline constexpr int kOpCount = 0 PACT_OPS(PACT_OP_COUNT_ONE);
#undef PACT_OP_COUNT_ONE
static_assert(kOpCount == 79, "op list changed: update docs/ops.md (pact ops --markdown) and the op sweep");

/// What executing a node of the op does.
enum class OpRole : std::uint8_t { source, view, kernel, sink, update, collective };

/// Bits of the saves and passthrough columns (Note [Op table]): operand k, and the forward output.
namespace operand {
inline constexpr std::uint32_t none = 0;
inline constexpr std::uint32_t in0 = 1u << 0, in1 = 1u << 1, in2 = 1u << 2, in3 = 1u << 3, in4 = 1u << 4;
inline constexpr std::uint32_t out = 1u << 16;
}  // namespace operand

/// What one operand of an op is (the input-roles column).
enum class InputRole : std::uint8_t { data, weight, bias, running_statistic, index, mask, state, any };

/// A comparison tolerance: |candidate - reference| <= abs + rel * max(1, max|reference|), elementwise.
struct Tolerance {
  double abs = 0;
  double rel = 0;
};

/// Tolerance classes (Note [Op table]): exact ops reproduce IEEE results; transcendental ops may differ
/// in the last bits of libm; reductions and contractions differ by accumulation order.
enum class ToleranceClass : std::uint8_t { exact, transcendental, reduction, contraction };

/// The dtype and shape of one value.
struct TensorType {
  DType dtype = DType::f32;
  Dims shape;
  bool operator==(const TensorType&) const = default;
};

/// Infers the output type from input types and attributes; throws pact::Error naming the op and operand.
using ShapeRule = TensorType (*)(std::span<const TensorType> inputs, const Attributes& attrs);
/// Floating-point operations of one forward evaluation (SPEC §9 convention: 2 per multiply-add).
using FlopRule = std::int64_t (*)(std::span<const TensorType> inputs, const TensorType& output,
                                  const Attributes& attrs);

/// One row of the table.
struct OpInfo {
  OpTag tag;
  std::string_view kind;  ///< the fixed v1 wire string
  int min_arity;
  int max_arity;  ///< -1: variadic
  bool has_vjp;
  bool gradient_free;   ///< no gradient flows through it (the VJP column's nograd)
  bool mode_dependent;  ///< behaves differently in training and evaluation (dropout, batch_norm)
  OpRole role;
  ToleranceClass tolerance_class;
  std::span<const AttrSpec> attributes;
  ShapeRule shape;
  FlopRule flops;
  std::uint32_t saves;        ///< operand bits the VJP reads (Note [Op table])
  std::uint32_t passthrough;  ///< operand bits whose gradient is the cotangent itself
  std::string_view roles;     ///< one letter per operand (Note [Op table])

  /// True when the VJP reads input `k` (the tape retains it).
  bool saves_input(std::size_t k) const noexcept { return k < 16 && ((saves >> k) & 1u) != 0; }
  /// True when the VJP reads the forward output (the tape retains it).
  bool saves_output() const noexcept { return (saves & operand::out) != 0; }
  /// True when input `k`'s gradient is the cotangent re-described, whenever the element counts agree.
  bool passes_through(std::size_t k) const noexcept { return k < 16 && ((passthrough >> k) & 1u) != 0; }
  /// The role of operand `k` (the last letter repeats for variadic ops).
  InputRole input_role(std::size_t k) const noexcept;

  /// True when planning admits a kernel for a node of this op: kernel ops, and view ops, whose node in a
  /// planned graph materialises its result through a kernel (the eager session keeps a zero-copy view
  /// where one exists, through the same admitted kernel). Sources and sinks execute nothing.
  bool runtime_relevant() const noexcept { return role == OpRole::kernel || role == OpRole::view; }
  /// Forward comparison tolerance for results of `dtype` (implementationDefined vs fixedLeft; Note [16-bit
  /// tolerances] for bf16 and f16). fixedLeft vs fixedLeft comparisons are bitwise.
  Tolerance tolerance(DType dtype = DType::f32) const noexcept;
  /// VJP comparison tolerance for results of `dtype`.
  Tolerance vjp_tolerance(DType dtype = DType::f32) const noexcept;
  /// True when each forward result element is one IEEE basic operation on its operands' elements (add, sub,
  /// mul, div, sqrt) or one of them moved or negated (neg, relu): on bf16 or f16 operands such an op's result
  /// is the correctly rounded value of the exact result, bit for bit (Note [16-bit tolerances]).
  bool correctly_rounded() const noexcept;
};

/// Every op, in tag order.
std::span<const OpInfo> op_table() noexcept;
/// The row of a tag.
const OpInfo& op_info(OpTag tag) noexcept;
/// The v1 wire kind of a tag.
std::string_view op_kind(OpTag tag) noexcept;
/// Parses a v1 wire kind; an unknown string throws pact::Error(parse_error) naming it.
OpTag parse_op_kind(std::string_view kind);
/// True for the maps: ops of one operand that compute each output element from the input element at its
/// index alone, with no dimension or shape attribute (relu, silu, exp, clamp, ...). What moves an input's
/// axes moves the output's the same way (a batch axis, a channels-last layout).
bool elementwise_map(OpTag tag) noexcept;

/// Checks arity and the attribute schema (required present, types match, no unknown names), then runs
/// the shape rule. Throws pact::Error naming the op.
TensorType infer_type(OpTag tag, std::span<const TensorType> inputs, const Attributes& attrs);
/// The FLOP estimate of one forward evaluation.
std::int64_t estimate_flops(OpTag tag, std::span<const TensorType> inputs, const TensorType& output,
                            const Attributes& attrs);

/// The outcome of comparing a candidate with a reference under a tolerance.
struct Agreement {
  bool within = true;        ///< every element within abs + rel * scale
  double max_abs_error = 0;  ///< largest |candidate - reference| (a NaN against a number: infinity)
  double scale = 1;          ///< max(1, largest finite |reference|)
  std::size_t worst = 0;     ///< index of the largest error
  /// max_abs_error / scale, the figure the PyTorch parity check reports.
  double relative_error() const noexcept { return max_abs_error / scale; }
};

/// The one tolerance comparison (SPEC §14: tolerances are the op table's), used by the op sweep,
/// falsification and the PyTorch parity check: elementwise |candidate - reference| <= abs + rel * scale,
/// where equal values (both NaN, or the same infinity) agree. Differing sizes are invalid_argument.
Agreement compare(std::span<const double> candidate, std::span<const double> reference, Tolerance tolerance);

/// Number of elements of a shape (product of extents). For shapes infer_type accepted, which never overflow.
std::int64_t numel(const Dims& shape) noexcept;
/// The element count, or nullopt when an extent is negative or the product overflows int64.
std::optional<std::int64_t> checked_numel(const Dims& shape) noexcept;
/// NumPy/PyTorch broadcast of two shapes; throws invalid_argument naming `op` and both shapes.
Dims broadcast_shapes(std::string_view op, const Dims& a, const Dims& b);
/// Normalises a possibly negative dimension index against `rank`; throws invalid_argument.
int normalize_dim(std::string_view op, std::int64_t dim, int rank);

}  // namespace pact::ops
