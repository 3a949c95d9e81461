#include "pact/ops/op_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>

#include "pact/core/checked_math.hpp"

namespace pact::ops {

// ---- helpers ---------------------------------------------------------------------------------------

std::int64_t numel(const Dims& shape) noexcept {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  return n;
}

std::optional<std::int64_t> checked_numel(const Dims& shape) noexcept {
  std::int64_t n = 1;
  for (auto e : shape) {
    if (e < 0) return std::nullopt;
    const auto k = core::checked_mul(n, e);
    if (!k) return std::nullopt;
    n = *k;
  }
  return n;
}

Dims broadcast_shapes(std::string_view op, const Dims& a, const Dims& b) {
  const int rank = std::max(a.size(), b.size());
  Dims out;
  for (int i = 0; i < rank; ++i) {
    const int ia = a.size() - rank + i;
    const int ib = b.size() - rank + i;
    const std::int64_t ea = ia >= 0 ? a[ia] : 1;
    const std::int64_t eb = ib >= 0 ? b[ib] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      throw_error(ErrorCode::invalid_argument, std::string(op),
                  fmt::format("shapes {} and {} do not broadcast (dimension {})", a.to_string(), b.to_string(), i));
    }
    out.push_back(ea == 1 ? eb : ea);
  }
  return out;
}

int normalize_dim(std::string_view op, std::int64_t dim, int rank) {
  const std::int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= std::max(rank, 1)) {
    throw_error(ErrorCode::invalid_argument, std::string(op),
                fmt::format("dim {} out of range for rank {}", dim, rank));
  }
  return static_cast<int>(d);
}

namespace {

[[noreturn]] void bad(std::string_view op, const std::string& why) {
  throw_error(ErrorCode::invalid_argument, std::string(op), why);
}

void require_float(std::string_view op, const TensorType& t, std::string_view operand) {
  if (!is_floating(t.dtype)) {
    bad(op, fmt::format("operand '{}' is {}; expected a float (f32, f64, bf16, f16)", operand, dtype_name(t.dtype)));
  }
}

void require_same_dtype(std::string_view op, const TensorType& a, const TensorType& b, std::string_view name_b) {
  if (a.dtype != b.dtype) {
    throw_error(
        ErrorCode::dtype_mismatch, std::string(op),
        fmt::format("operand '{}' is {}, the first operand {}", name_b, dtype_name(b.dtype), dtype_name(a.dtype)));
  }
}

void require_rank(std::string_view op, const TensorType& t, std::string_view operand, int lo, int hi) {
  if (t.shape.size() < lo || t.shape.size() > hi) {
    bad(op, fmt::format("operand '{}' has shape {}; expected rank {}..{}", operand, t.shape.to_string(), lo, hi));
  }
}

Dims dims_of(std::string_view op, const std::vector<std::int64_t>& v, std::string_view what) {
  if (v.size() > static_cast<std::size_t>(kMaxRank))
    bad(op, fmt::format("'{}' has more than {} entries", what, kMaxRank));
  return Dims(std::span<const std::int64_t>(v));
}

std::pair<std::int64_t, std::int64_t> pair_attr(std::string_view op, const Attributes& attrs, std::string_view name,
                                                std::vector<std::int64_t> fallback) {
  auto v = attrs.get_ints(op, name, fallback);
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) bad(op, fmt::format("attribute '{}' needs 1 or 2 entries, got {}", name, v.size()));
  return {v[0], v[1]};
}

// ---- attribute schemas -----------------------------------------------------------------------------

constexpr AttrSpec kSourceAttrs[] = {{"shape", AttrType::i64_list, true}, {"dtype", AttrType::string, false}};
constexpr AttrSpec kGeluAttrs[] = {{"approximate", AttrType::string, false}};
constexpr AttrSpec kClampAttrs[] = {{"min", AttrType::f64, false}, {"max", AttrType::f64, false}};
constexpr AttrSpec kDimAttrs[] = {{"dim", AttrType::i64, false}};
constexpr AttrSpec kCrossEntropyAttrs[] = {{"reduction", AttrType::string, false},
                                           {"ignore_index", AttrType::i64, false}};
constexpr AttrSpec kReductionAttrs[] = {{"reduction", AttrType::string, false}};
constexpr AttrSpec kNormAttrs[] = {{"normalized_shape", AttrType::i64_list, true}, {"eps", AttrType::f64, false}};
constexpr AttrSpec kBatchNormAttrs[] = {{"eps", AttrType::f64, false}, {"momentum", AttrType::f64, false}};
constexpr AttrSpec kDropoutAttrs[] = {{"p", AttrType::f64, false}};
constexpr AttrSpec kEmbeddingAttrs[] = {{"padding_idx", AttrType::i64, false}};
constexpr AttrSpec kAttentionAttrs[] = {{"is_causal", AttrType::boolean, false}, {"scale", AttrType::f64, false}};
constexpr AttrSpec kConvAttrs[] = {{"stride", AttrType::i64_list, false},
                                   {"padding", AttrType::i64_list, false},
                                   {"dilation", AttrType::i64_list, false},
                                   {"groups", AttrType::i64, false}};
constexpr AttrSpec kConvActivationAttrs[] = {{"stride", AttrType::i64_list, false},
                                             {"padding", AttrType::i64_list, false},
                                             {"dilation", AttrType::i64_list, false},
                                             {"groups", AttrType::i64, false},
                                             {"activation", AttrType::string, true}};
constexpr AttrSpec kMaxPoolAttrs[] = {{"kernel_size", AttrType::i64_list, true},
                                      {"stride", AttrType::i64_list, false},
                                      {"padding", AttrType::i64_list, false},
                                      {"dilation", AttrType::i64_list, false},
                                      {"ceil_mode", AttrType::boolean, false}};
constexpr AttrSpec kAvgPoolAttrs[] = {{"kernel_size", AttrType::i64_list, true},
                                      {"stride", AttrType::i64_list, false},
                                      {"padding", AttrType::i64_list, false},
                                      {"ceil_mode", AttrType::boolean, false},
                                      {"count_include_pad", AttrType::boolean, false}};
constexpr AttrSpec kAdaptiveAttrs[] = {{"output_size", AttrType::i64_list, true}};
constexpr AttrSpec kReshapeAttrs[] = {{"shape", AttrType::i64_list, true}};
constexpr AttrSpec kPermuteAttrs[] = {{"dims", AttrType::i64_list, true}};
constexpr AttrSpec kTransposeAttrs[] = {{"dim0", AttrType::i64, true}, {"dim1", AttrType::i64, true}};
constexpr AttrSpec kFlattenAttrs[] = {{"start_dim", AttrType::i64, false}, {"end_dim", AttrType::i64, false}};
constexpr AttrSpec kSliceAttrs[] = {{"dim", AttrType::i64, true},
                                    {"start", AttrType::i64, false},
                                    {"end", AttrType::i64, false},
                                    {"step", AttrType::i64, false}};
constexpr AttrSpec kReduceAttrs[] = {{"dims", AttrType::i64_list, false}, {"keepdim", AttrType::boolean, false}};
constexpr AttrSpec kTriangleAttrs[] = {{"diagonal", AttrType::i64, false}};
constexpr AttrSpec kCumsumAttrs[] = {{"dim", AttrType::i64, true}};
constexpr AttrSpec kArgmaxAttrs[] = {{"dim", AttrType::i64, false}, {"keepdim", AttrType::boolean, false}};
constexpr AttrSpec kTopkAttrs[] = {
    {"k", AttrType::i64, true}, {"dim", AttrType::i64, false}, {"largest", AttrType::boolean, false}};
constexpr AttrSpec kCastAttrs[] = {{"dtype", AttrType::string, true}};
constexpr AttrSpec kFullLikeAttrs[] = {{"value", AttrType::f64, true}, {"dtype", AttrType::string, false}};
constexpr AttrSpec kArangeAttrs[] = {{"start", AttrType::f64, false},
                                     {"end", AttrType::f64, true},
                                     {"step", AttrType::f64, false},
                                     {"dtype", AttrType::string, false}};
constexpr AttrSpec kIndexDimAttrs[] = {{"dim", AttrType::i64, true}};
constexpr AttrSpec kInterpolateAttrs[] = {{"size", AttrType::i64_list, true},
                                          {"mode", AttrType::string, false},
                                          {"align_corners", AttrType::boolean, false},
                                          {"scale_h", AttrType::f64, false},
                                          {"scale_w", AttrType::f64, false}};
constexpr AttrSpec kRunningStatsAttrs[] = {{"momentum", AttrType::f64, false}};
constexpr AttrSpec kSgdAttrs[] = {
    {"lr", AttrType::f64, true}, {"momentum", AttrType::f64, false}, {"weight_decay", AttrType::f64, false}};
constexpr AttrSpec kAdamAttrs[] = {
    {"lr", AttrType::f64, true},   {"beta1", AttrType::f64, false},        {"beta2", AttrType::f64, false},
    {"eps", AttrType::f64, false}, {"weight_decay", AttrType::f64, false}, {"decoupled", AttrType::boolean, false},
    {"step", AttrType::i64, true}};

#include "pact/ops/op_shapes.inc"

// ---- FLOP rules (SPEC §9: 2 per multiply-add; elementwise and normalization count their arithmetic) ----

// FLOP estimates saturate at INT64_MAX instead of wrapping (operands are valid shapes, see infer_type).
std::int64_t sat_mul(std::int64_t a, std::int64_t b) noexcept {
  const auto r = core::checked_mul(a, b);
  return r ? *r : std::numeric_limits<std::int64_t>::max();
}
std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
  const auto r = core::checked_add(a, b);
  return r ? *r : std::numeric_limits<std::int64_t>::max();
}
std::int64_t per_output(const TensorType& out, std::int64_t k) { return sat_mul(k, numel(out.shape)); }
std::int64_t flops_none(std::span<const TensorType>, const TensorType&, const Attributes&) { return 0; }
#define PACT_PER_OUTPUT(name, k)                                                                     \
  std::int64_t flops_##name(std::span<const TensorType>, const TensorType& out, const Attributes&) { \
    return per_output(out, k);                                                                       \
  }
PACT_PER_OUTPUT(add, 1)
PACT_PER_OUTPUT(sub, 1)
PACT_PER_OUTPUT(mul, 1)
PACT_PER_OUTPUT(div, 1)
PACT_PER_OUTPUT(neg, 1)
PACT_PER_OUTPUT(relu, 1)
PACT_PER_OUTPUT(gelu, 8)
PACT_PER_OUTPUT(silu, 4)
PACT_PER_OUTPUT(tanh, 4)
PACT_PER_OUTPUT(sigmoid, 4)
PACT_PER_OUTPUT(hardswish, 4)
PACT_PER_OUTPUT(hardsigmoid, 3)
PACT_PER_OUTPUT(clamp, 2)
PACT_PER_OUTPUT(exp, 1)
PACT_PER_OUTPUT(log, 1)
PACT_PER_OUTPUT(sqrt, 1)
PACT_PER_OUTPUT(sin, 1)
PACT_PER_OUTPUT(cos, 1)
PACT_PER_OUTPUT(tan, 1)
PACT_PER_OUTPUT(pow, 1)
PACT_PER_OUTPUT(where, 1)
PACT_PER_OUTPUT(eq, 1)
PACT_PER_OUTPUT(ne, 1)
PACT_PER_OUTPUT(lt, 1)
PACT_PER_OUTPUT(le, 1)
PACT_PER_OUTPUT(gt, 1)
PACT_PER_OUTPUT(ge, 1)
PACT_PER_OUTPUT(cumsum, 1)
PACT_PER_OUTPUT(interpolate, 4)
PACT_PER_OUTPUT(softmax, 5)
PACT_PER_OUTPUT(log_softmax, 5)
PACT_PER_OUTPUT(layer_norm, 8)
PACT_PER_OUTPUT(rms_norm, 5)
PACT_PER_OUTPUT(rotary_embedding, 3)
PACT_PER_OUTPUT(batch_norm, 4)
PACT_PER_OUTPUT(dropout, 1)
#undef PACT_PER_OUTPUT

std::int64_t flops_input_elements(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return numel(in[0].shape);
}
std::int64_t flops_cross_entropy(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return sat_add(sat_mul(5, numel(in[0].shape)), numel(in[1].shape));
}
std::int64_t flops_mse_loss(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return sat_mul(3, numel(in[0].shape));
}
std::int64_t flops_matmul(std::span<const TensorType> in, const TensorType& out, const Attributes&) {
  const Dims& a = in[0].shape;
  const std::int64_t k = a[a.size() - 1];
  return sat_mul(sat_mul(2, numel(out.shape)), k);
}
std::int64_t flops_linear(std::span<const TensorType> in, const TensorType& out, const Attributes&) {
  const std::int64_t k = in[1].shape[1];
  return sat_add(sat_mul(sat_mul(2, numel(out.shape)), k), in.size() == 3 ? numel(out.shape) : 0);
}
std::int64_t flops_linear_int8(std::span<const TensorType> in, const TensorType& out, const Attributes&) {
  const std::int64_t k = in[1].shape[1];  // the dot products, then one scale (and bias) per output
  return sat_add(sat_mul(sat_mul(2, numel(out.shape)), k), numel(out.shape) * (in.size() == 4 ? 2 : 1));
}
std::int64_t flops_linear_bf16(std::span<const TensorType> in, const TensorType& out, const Attributes& a) {
  return flops_linear(in, out, a);  // linear's count: the weight's dtype changes the bytes, not the FLOPs
}
std::int64_t flops_scaled_dot_product_attention(std::span<const TensorType> in, const TensorType& out,
                                                const Attributes&) {
  const Dims& q = in[0].shape;
  const int r = q.size();
  const std::int64_t e = q[r - 1], s = in[1].shape[r - 2];
  const std::int64_t rows = numel(q) / e;  // batch * L
  const std::int64_t ev = out.shape[r - 1];
  const std::int64_t rs = sat_mul(rows, s);  // scores, softmax, values (no causal halving)
  return sat_add(sat_add(sat_mul(sat_mul(2, rs), e), sat_mul(5, rs)), sat_mul(sat_mul(2, rs), ev));
}
std::int64_t flops_conv2d(std::span<const TensorType> in, const TensorType& out, const Attributes&) {
  const Dims& w = in[1].shape;
  const std::int64_t patch = sat_mul(sat_mul(w[1], w[2]), w[3]);
  return sat_add(sat_mul(sat_mul(2, numel(out.shape)), patch), in.size() >= 3 ? numel(out.shape) : 0);
}
// The convolution, its activation, and the residual add where there is one.
std::int64_t flops_conv2d_activation(std::span<const TensorType> in, const TensorType& out, const Attributes& a) {
  return sat_add(flops_conv2d(in, out, a), sat_mul(in.size() == 4 ? 2 : 1, numel(out.shape)));
}
// conv2d_nhwc: the same work with the weight [KH, KW, Cg, O] (its patch is the first three extents).
std::int64_t flops_conv2d_nhwc(std::span<const TensorType> in, const TensorType& out, const Attributes&) {
  const Dims& w = in[1].shape;
  const std::int64_t patch = sat_mul(sat_mul(w[0], w[1]), w[2]);
  const std::int64_t n = numel(out.shape);
  return sat_add(sat_add(sat_mul(sat_mul(2, n), patch), in.size() >= 3 ? n : 0), sat_mul(in.size() == 4 ? 2 : 1, n));
}
std::int64_t flops_pool(std::span<const TensorType>, const TensorType& out, const Attributes& a) {
  auto k = a.get_ints("pool", "kernel_size");
  const std::int64_t window = k.size() == 1 ? sat_mul(k[0], k[0]) : k.size() == 2 ? sat_mul(k[0], k[1]) : 1;
  return sat_mul(numel(out.shape), window);
}
#define flops_input flops_none
#define flops_parameter flops_none
#define flops_constant flops_none
#define flops_embedding flops_none
#define flops_max_pool2d flops_pool
#define flops_avg_pool2d flops_pool
#define flops_adaptive_avg_pool2d flops_input_elements
#define flops_reshape flops_none
#define flops_permute flops_none
#define flops_transpose flops_none
#define flops_flatten flops_none
#define flops_concat flops_none
#define flops_slice flops_none
#define flops_sum flops_input_elements
#define flops_mean flops_input_elements
#define flops_max flops_input_elements
#define flops_output flops_none
#define flops_triu flops_none
#define flops_tril flops_none
#define flops_argmax flops_input_elements
#define flops_topk flops_input_elements
#define flops_topk_indices flops_input_elements
#define flops_cast flops_none
#define flops_full_like flops_none
#define flops_arange flops_none
#define flops_gather flops_none
#define flops_index_select flops_none
#define flops_index_copy flops_none
#define flops_accumulate_grad flops_input_elements
#define flops_allreduce_mean flops_input_elements
std::int64_t flops_batch_norm_stats(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return 3 * numel(in[2].shape) + 6 * numel(in[0].shape);
}
std::int64_t flops_sgd(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return (in.size() == 3 ? 5 : 3) * numel(in[0].shape);
}
std::int64_t flops_adam(std::span<const TensorType> in, const TensorType&, const Attributes&) {
  return 12 * numel(in[0].shape);
}

// Each op's attribute schema (empty span when it has none).
template <std::size_t N>
constexpr std::span<const AttrSpec> span_of(const AttrSpec (&a)[N]) {
  return {a, N};
}
constexpr std::span<const AttrSpec> kEmpty{};
#define attrs_input span_of(kSourceAttrs)
#define attrs_parameter span_of(kSourceAttrs)
#define attrs_constant span_of(kSourceAttrs)
#define attrs_add kEmpty
#define attrs_sub kEmpty
#define attrs_mul kEmpty
#define attrs_div kEmpty
#define attrs_neg kEmpty
#define attrs_matmul kEmpty
#define attrs_linear kEmpty
#define attrs_linear_int8 kEmpty
#define attrs_linear_bf16 kEmpty
#define attrs_relu kEmpty
#define attrs_gelu span_of(kGeluAttrs)
#define attrs_silu kEmpty
#define attrs_tanh kEmpty
#define attrs_sigmoid kEmpty
#define attrs_hardswish kEmpty
#define attrs_hardsigmoid kEmpty
#define attrs_clamp span_of(kClampAttrs)
#define attrs_exp kEmpty
#define attrs_log kEmpty
#define attrs_sqrt kEmpty
#define attrs_sin kEmpty
#define attrs_cos kEmpty
#define attrs_tan kEmpty
#define attrs_pow kEmpty
#define attrs_where kEmpty
#define attrs_eq kEmpty
#define attrs_ne kEmpty
#define attrs_lt kEmpty
#define attrs_le kEmpty
#define attrs_gt kEmpty
#define attrs_ge kEmpty
#define attrs_triu span_of(kTriangleAttrs)
#define attrs_tril span_of(kTriangleAttrs)
#define attrs_cumsum span_of(kCumsumAttrs)
#define attrs_argmax span_of(kArgmaxAttrs)
#define attrs_topk span_of(kTopkAttrs)
#define attrs_topk_indices span_of(kTopkAttrs)
#define attrs_cast span_of(kCastAttrs)
#define attrs_full_like span_of(kFullLikeAttrs)
#define attrs_arange span_of(kArangeAttrs)
#define attrs_gather span_of(kIndexDimAttrs)
#define attrs_index_select span_of(kIndexDimAttrs)
#define attrs_index_copy span_of(kIndexDimAttrs)
#define attrs_interpolate span_of(kInterpolateAttrs)
#define attrs_softmax span_of(kDimAttrs)
#define attrs_log_softmax span_of(kDimAttrs)
#define attrs_cross_entropy span_of(kCrossEntropyAttrs)
#define attrs_mse_loss span_of(kReductionAttrs)
#define attrs_layer_norm span_of(kNormAttrs)
#define attrs_rms_norm span_of(kNormAttrs)
#define attrs_rotary_embedding kEmpty
#define attrs_batch_norm span_of(kBatchNormAttrs)
#define attrs_dropout span_of(kDropoutAttrs)
#define attrs_embedding span_of(kEmbeddingAttrs)
#define attrs_scaled_dot_product_attention span_of(kAttentionAttrs)
#define attrs_conv2d span_of(kConvAttrs)
#define attrs_conv2d_activation span_of(kConvActivationAttrs)
#define attrs_conv2d_nhwc span_of(kConvActivationAttrs)
#define attrs_max_pool2d span_of(kMaxPoolAttrs)
#define attrs_avg_pool2d span_of(kAvgPoolAttrs)
#define attrs_adaptive_avg_pool2d span_of(kAdaptiveAttrs)
#define attrs_reshape span_of(kReshapeAttrs)
#define attrs_permute span_of(kPermuteAttrs)
#define attrs_transpose span_of(kTransposeAttrs)
#define attrs_flatten span_of(kFlattenAttrs)
#define attrs_concat span_of(kDimAttrs)
#define attrs_slice span_of(kSliceAttrs)
#define attrs_sum span_of(kReduceAttrs)
#define attrs_mean span_of(kReduceAttrs)
#define attrs_max span_of(kReduceAttrs)
#define attrs_output kEmpty
#define attrs_accumulate_grad kEmpty
#define attrs_allreduce_mean kEmpty
#define attrs_batch_norm_stats span_of(kRunningStatsAttrs)
#define attrs_sgd span_of(kSgdAttrs)
#define attrs_adam span_of(kAdamAttrs)

using namespace operand;  // the saves and passthrough columns name operands in0..in4, out, none

// The VJP column's three values (Note [Op table]): has a VJP, gradient-free.
#define PACT_VJP_HAS_true true
#define PACT_VJP_HAS_false false
#define PACT_VJP_HAS_nograd false
#define PACT_VJP_FREE_true false
#define PACT_VJP_FREE_false false
#define PACT_VJP_FREE_nograd true
const OpInfo kTable[] = {
#define PACT_OP_ROW(tag, kind, lo, hi, vjp, mode, role, tol, saves, pass, roles) \
  OpInfo{OpTag::tag,                                                             \
         kind,                                                                   \
         lo,                                                                     \
         hi,                                                                     \
         PACT_VJP_HAS_##vjp,                                                     \
         PACT_VJP_FREE_##vjp,                                                    \
         mode,                                                                   \
         OpRole::role,                                                           \
         ToleranceClass::tol,                                                    \
         attrs_##tag,                                                            \
         shape_##tag,                                                            \
         flops_##tag,                                                            \
         saves,                                                                  \
         pass,                                                                   \
         roles},
    PACT_OPS(PACT_OP_ROW)
#undef PACT_OP_ROW
};
static_assert(sizeof(kTable) / sizeof(kTable[0]) == static_cast<std::size_t>(kOpCount));

// The roles column's length: one letter per operand, one for a variadic op (its letter repeats).
constexpr std::size_t roles_length(int max_arity) { return max_arity < 0 ? 1 : static_cast<std::size_t>(max_arity); }

// Every roles string has one letter per operand (a variadic op: at least one), every letter is known.
constexpr bool roles_well_formed() {
#define PACT_OP_ROLES_OK(tag, kind, lo, hi, vjp, mode, role, tol, saves, pass, roles) \
  if (std::string_view(roles).size() != roles_length(hi)) return false;               \
  for (char c : std::string_view(roles))                                              \
    if (std::string_view("dwbsimuc").find(c) == std::string_view::npos) return false; \
  if (hi >= 0 && ((saves | pass) & 0xFFFFu) >= (1u << hi)) return false;
  PACT_OPS(PACT_OP_ROLES_OK)
#undef PACT_OP_ROLES_OK
  return true;
}
static_assert(roles_well_formed(),
              "the op table: one known role letter per operand, saves and passthrough only of operands that exist "
              "(Note [Op table])");

}  // namespace

InputRole OpInfo::input_role(std::size_t k) const noexcept {
  if (roles.empty()) return InputRole::data;
  switch (roles[std::min(k, roles.size() - 1)]) {
    case 'w':
      return InputRole::weight;
    case 'b':
      return InputRole::bias;
    case 's':
      return InputRole::running_statistic;
    case 'i':
      return InputRole::index;
    case 'm':
      return InputRole::mask;
    case 'u':
      return InputRole::state;
    case 'c':
      return InputRole::any;
    default:
      return InputRole::data;
  }
}

Agreement compare(std::span<const double> candidate, std::span<const double> reference, Tolerance tolerance) {
  if (candidate.size() != reference.size()) {
    throw_error(ErrorCode::invalid_argument, "compare",
                fmt::format("{} candidate elements against {} reference elements", candidate.size(), reference.size()));
  }
  Agreement a;
  for (double r : reference) {
    if (std::isfinite(r)) a.scale = std::max(a.scale, std::abs(r));
  }
  const double bound = tolerance.abs + tolerance.rel * a.scale;
  for (std::size_t i = 0; i < candidate.size(); ++i) {
    const double c = candidate[i], r = reference[i];
    const bool same = c == r || (std::isnan(c) && std::isnan(r));
    const double d = same ? 0.0 : std::abs(c - r);
    const double error = std::isnan(d) ? std::numeric_limits<double>::infinity() : d;
    if (error > a.max_abs_error) {
      a.max_abs_error = error;
      a.worst = i;
    }
    if (!(error <= bound)) a.within = false;
  }
  return a;
}

// Note [16-bit tolerances]
// A bf16 or f16 kernel (the half provider) computes in f32 from its 16-bit operands and rounds each result
// once to 16 bits, so its error against exact arithmetic on those same operands is that rounding, half a
// unit in the last place (unit roundoff u: 2^-8 for bf16, 2^-11 for f16), plus the f32 error the f32
// tolerance bounds. A value the VJP reads back (a saved output, rounded) carries one more rounding into
// the gradient, which then sums over rows. The tolerances are the f32 ones widened to a multiple of u per
// class: forward 1 (exact: one rounding), 2 (transcendental), 4 (reduction, contraction: the sum of
// exactly rounded terms, rounded once); VJP 8 and 16.
//
// The tolerances allow a unit roundoff, which a conversion that rounds a tie the wrong way meets. Where
// each result is one IEEE basic operation (OpInfo::correctly_rounded), the rounding is pinned down exactly:
// computed in f32 (p = 24) from 16-bit operands (bf16 p = 8, f16 p = 11) and rounded to nearest even,
// the result is the 16-bit correct rounding of the exact result, since double rounding is innocuous for
// +, -, *, / and sqrt when the wider precision is at least 2p + 2 (Figueroa, "When is double rounding
// innocuous?", 1995). The op sweep and the oracle hold those ops to it bit for bit.
namespace {
double unit_roundoff(DType dtype) noexcept {
  return dtype == DType::bf16 ? 0x1p-8 : dtype == DType::f16 ? 0x1p-11 : 0.0;
}
Tolerance widened(Tolerance t, double u, double multiple) noexcept {
  return {std::max(t.abs, multiple * u), std::max(t.rel, multiple * u)};
}
}  // namespace

Tolerance OpInfo::tolerance(DType dtype) const noexcept {
  Tolerance t{};
  double multiple = 1;
  switch (tolerance_class) {
    case ToleranceClass::exact:
      t = {0.0, 0.0};
      break;
    case ToleranceClass::transcendental:
      t = {1e-6, 4e-6};
      multiple = 2;
      break;
    case ToleranceClass::reduction:
      t = {1e-6, 2e-5};
      multiple = 4;
      break;
    case ToleranceClass::contraction:
      t = {1e-5, 1e-4};
      multiple = 4;
      break;
  }
  const double u = unit_roundoff(dtype);
  return u > 0 ? widened(t, u, multiple) : t;
}

bool OpInfo::correctly_rounded() const noexcept {
  switch (tag) {
    case OpTag::add:
    case OpTag::sub:
    case OpTag::mul:
    case OpTag::div:
    case OpTag::sqrt:
    case OpTag::neg:
    case OpTag::relu:
      return true;
    default:
      return false;
  }
}

Tolerance OpInfo::vjp_tolerance(DType dtype) const noexcept {
  // A VJP accumulates over broadcast or reduced dimensions even for exact forward ops.
  const Tolerance f = tolerance();
  const Tolerance t{std::max(f.abs * 10, 1e-6), std::max(f.rel * 10, 2e-5)};
  const double u = unit_roundoff(dtype);
  return u > 0 ? widened(t, u, tolerance_class == ToleranceClass::exact ? 8 : 16) : t;
}

std::span<const OpInfo> op_table() noexcept { return kTable; }

const OpInfo& op_info(OpTag tag) noexcept { return kTable[static_cast<std::size_t>(tag)]; }

std::string_view op_kind(OpTag tag) noexcept { return op_info(tag).kind; }

bool elementwise_map(OpTag tag) noexcept {
  switch (tag) {
    case OpTag::neg:
    case OpTag::relu:
    case OpTag::gelu:
    case OpTag::silu:
    case OpTag::tanh:
    case OpTag::sigmoid:
    case OpTag::hardswish:
    case OpTag::hardsigmoid:
    case OpTag::clamp:
    case OpTag::exp:
    case OpTag::log:
    case OpTag::sqrt:
    case OpTag::sin:
    case OpTag::cos:
    case OpTag::tan:
      return true;
    default:
      return false;
  }
}

OpTag parse_op_kind(std::string_view kind) {
  for (const auto& row : kTable) {
    if (row.kind == kind) return row.tag;
  }
  throw_error(ErrorCode::parse_error, "op.parse", fmt::format("unknown op kind '{}'", kind));
}

TensorType infer_type(OpTag tag, std::span<const TensorType> inputs, const Attributes& attrs) {
  const OpInfo& info = op_info(tag);
  const auto n = static_cast<int>(inputs.size());
  if (n < info.min_arity || (info.max_arity >= 0 && n > info.max_arity)) {
    throw_error(ErrorCode::invalid_argument, std::string(info.kind),
                info.max_arity < 0 ? fmt::format("takes at least {} inputs, got {}", info.min_arity, n)
                                   : fmt::format("takes {}..{} inputs, got {}", info.min_arity, info.max_arity, n));
  }
  for (const auto& [name, value] : attrs.values()) {
    const std::string& key = name;  // lambdas cannot capture structured bindings before clang 16
    auto spec =
        std::find_if(info.attributes.begin(), info.attributes.end(), [&](const AttrSpec& s) { return s.name == key; });
    if (spec == info.attributes.end()) {
      throw_error(ErrorCode::invalid_argument, std::string(info.kind), fmt::format("unknown attribute '{}'", name));
    }
    const bool widened = spec->type == AttrType::f64 && attr_type_of(value) == AttrType::i64;
    if (attr_type_of(value) != spec->type && !widened) {
      throw_error(ErrorCode::invalid_argument, std::string(info.kind),
                  fmt::format("attribute '{}' is {}, expected {}", name, attr_type_name(attr_type_of(value)),
                              attr_type_name(spec->type)));
    }
  }
  for (const auto& spec : info.attributes) {
    if (spec.required && !attrs.has(spec.name)) {
      throw_error(ErrorCode::invalid_argument, std::string(info.kind),
                  fmt::format("missing attribute '{}'", spec.name));
    }
  }
  // Every shape a rule reads or makes has an element count (and a byte size) that int64 holds, so the
  // rules, the FLOP rules and the kernels' index arithmetic cannot overflow on a hostile model file.
  auto fits = [&](const TensorType& t) {
    const auto n = checked_numel(t.shape);
    return n && core::checked_mul(*n, static_cast<std::int64_t>(dtype_size(t.dtype))).has_value();
  };
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    if (!fits(inputs[k]))
      throw_error(
          ErrorCode::invalid_argument, std::string(info.kind),
          fmt::format("operand {} {} has more elements or bytes than int64 holds", k, inputs[k].shape.to_string()));
  }
  TensorType out = info.shape(inputs, attrs);
  if (!fits(out))
    throw_error(ErrorCode::invalid_argument, std::string(info.kind),
                fmt::format("the output {} has more elements or bytes than int64 holds", out.shape.to_string()));
  return out;
}

std::int64_t estimate_flops(OpTag tag, std::span<const TensorType> inputs, const TensorType& output,
                            const Attributes& attrs) {
  return op_info(tag).flops(inputs, output, attrs);
}

}  // namespace pact::ops
