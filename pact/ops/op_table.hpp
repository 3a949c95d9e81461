#pragma once
/// The op table (SPEC §5): every op declared once with its tag, fixed v1 wire kind string, arity,
/// attribute schema, shape rule, FLOP rule, comparison tolerance, VJP and mode flags. IR parsing,
/// planning, capture estimates, kernels, tests and CLI listings all read it from here.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "pact/core/dtype.hpp"
#include "pact/core/layout.hpp"
#include "pact/ops/attributes.hpp"

namespace pact::ops {

// Note [Op table]
// Columns: tag, v1 wire kind, min arity, max arity (-1: variadic), has VJP, mode-dependent, role,
// tolerance class. Roles: source (input, parameter, constant: no kernel, no inputs), view (pure
// re-description of its input's bytes), kernel (computes new values), sink (output). Only kernel ops
// are runtime-relevant for planning. The wire kind never changes once published (v1).
#define PACT_OPS(X)                                                                                       \
  X(input, "input", 0, 0, false, false, source, exact)                                                    \
  X(parameter, "parameter", 0, 0, false, false, source, exact)                                            \
  X(constant, "constant", 0, 0, false, false, source, exact)                                              \
  X(add, "add", 2, 2, true, false, kernel, reduction)                                                     \
  X(sub, "sub", 2, 2, true, false, kernel, reduction)                                                     \
  X(mul, "mul", 2, 2, true, false, kernel, reduction)                                                     \
  X(div, "div", 2, 2, true, false, kernel, reduction)                                                     \
  X(neg, "neg", 1, 1, true, false, kernel, exact)                                                         \
  X(matmul, "matmul", 2, 2, true, false, kernel, contraction)                                             \
  X(linear, "linear", 2, 3, true, false, kernel, contraction)                                             \
  X(relu, "relu", 1, 1, true, false, kernel, exact)                                                       \
  X(gelu, "gelu", 1, 1, true, false, kernel, transcendental)                                              \
  X(silu, "silu", 1, 1, true, false, kernel, transcendental)                                              \
  X(tanh, "tanh", 1, 1, true, false, kernel, transcendental)                                              \
  X(sigmoid, "sigmoid", 1, 1, true, false, kernel, transcendental)                                        \
  X(clamp, "clamp", 1, 1, true, false, kernel, exact)                                                     \
  X(exp, "exp", 1, 1, true, false, kernel, transcendental)                                                \
  X(log, "log", 1, 1, true, false, kernel, transcendental)                                                \
  X(sqrt, "sqrt", 1, 1, true, false, kernel, transcendental)                                              \
  X(softmax, "softmax", 1, 1, true, false, kernel, reduction)                                             \
  X(log_softmax, "log_softmax", 1, 1, true, false, kernel, reduction)                                     \
  X(cross_entropy, "cross_entropy", 2, 2, true, false, kernel, reduction)                                 \
  X(mse_loss, "mse_loss", 2, 2, true, false, kernel, reduction)                                           \
  X(layer_norm, "layer_norm", 1, 3, true, false, kernel, reduction)                                       \
  X(rms_norm, "rms_norm", 1, 2, true, false, kernel, reduction)                                           \
  X(batch_norm, "batch_norm", 5, 5, true, true, kernel, reduction)                                        \
  X(dropout, "dropout", 1, 1, true, true, kernel, exact)                                                  \
  X(embedding, "embedding", 2, 2, true, false, kernel, exact)                                             \
  X(scaled_dot_product_attention, "scaled_dot_product_attention", 3, 4, true, false, kernel, contraction) \
  X(conv2d, "conv2d", 2, 3, true, false, kernel, contraction)                                             \
  X(max_pool2d, "max_pool2d", 1, 1, true, false, kernel, exact)                                           \
  X(avg_pool2d, "avg_pool2d", 1, 1, true, false, kernel, reduction)                                       \
  X(adaptive_avg_pool2d, "adaptive_avg_pool2d", 1, 1, true, false, kernel, reduction)                     \
  X(reshape, "reshape", 1, 1, true, false, view, exact)                                                   \
  X(permute, "permute", 1, 1, true, false, view, exact)                                                   \
  X(transpose, "transpose", 1, 1, true, false, view, exact)                                               \
  X(flatten, "flatten", 1, 1, true, false, view, exact)                                                   \
  X(concat, "concat", 1, -1, true, false, kernel, exact)                                                  \
  X(slice, "slice", 1, 1, true, false, view, exact)                                                       \
  X(sum, "sum", 1, 1, true, false, kernel, reduction)                                                     \
  X(mean, "mean", 1, 1, true, false, kernel, reduction)                                                   \
  X(max, "max", 1, 1, true, false, kernel, exact)                                                         \
  X(output, "output", 1, 1, true, false, sink, exact)

enum class OpTag : std::uint8_t {
#define PACT_OP_ENUM(tag, kind, lo, hi, vjp, mode, role, tol) tag,
  PACT_OPS(PACT_OP_ENUM)
#undef PACT_OP_ENUM
};

#define PACT_OP_COUNT_ONE(...) +1
inline constexpr int kOpCount = 0 PACT_OPS(PACT_OP_COUNT_ONE);
#undef PACT_OP_COUNT_ONE
static_assert(kOpCount == 43, "op list changed: update docs/ops.md (pact ops --markdown) and the op sweep");

/// What executing a node of the op does.
enum class OpRole : std::uint8_t { source, view, kernel, sink };

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
  bool mode_dependent;  ///< behaves differently in training and evaluation (dropout, batch_norm)
  OpRole role;
  ToleranceClass tolerance_class;
  std::span<const AttrSpec> attributes;
  ShapeRule shape;
  FlopRule flops;

  /// True when planning admits a kernel for a node of this op: kernel ops, and view ops, whose node in a
  /// planned graph materialises its result through a kernel (the eager session keeps a zero-copy view
  /// where one exists, through the same admitted kernel). Sources and sinks execute nothing.
  bool runtime_relevant() const noexcept { return role == OpRole::kernel || role == OpRole::view; }
  /// Forward comparison tolerance for f32 (implementationDefined vs fixedLeft). fixedLeft vs fixedLeft
  /// comparisons are bitwise.
  Tolerance tolerance() const noexcept;
  /// VJP comparison tolerance for f32.
  Tolerance vjp_tolerance() const noexcept;
};

/// Every op, in tag order.
std::span<const OpInfo> op_table() noexcept;
/// The row of a tag.
const OpInfo& op_info(OpTag tag) noexcept;
/// The v1 wire kind of a tag.
std::string_view op_kind(OpTag tag) noexcept;
/// Parses a v1 wire kind; an unknown string throws pact::Error(parse_error) naming it.
OpTag parse_op_kind(std::string_view kind);

/// Checks arity and the attribute schema (required present, types match, no unknown names), then runs
/// the shape rule. Throws pact::Error naming the op.
TensorType infer_type(OpTag tag, std::span<const TensorType> inputs, const Attributes& attrs);
/// The FLOP estimate of one forward evaluation.
std::int64_t estimate_flops(OpTag tag, std::span<const TensorType> inputs, const TensorType& output,
                            const Attributes& attrs);

/// Number of elements of a shape (product of extents).
std::int64_t numel(const Dims& shape) noexcept;
/// NumPy/PyTorch broadcast of two shapes; throws invalid_argument naming `op` and both shapes.
Dims broadcast_shapes(std::string_view op, const Dims& a, const Dims& b);
/// Normalises a possibly negative dimension index against `rank`; throws invalid_argument.
int normalize_dim(std::string_view op, std::int64_t dim, int rank);

}  // namespace pact::ops
