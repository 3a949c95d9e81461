#pragma once
/// The closed, overflow-checked expression language of device plans (SPEC §11, seed 002 "Validator-owned
/// materialization"): bounded integer arithmetic over live call data — tensor dimensions, strides and
/// element counts, and admitted integer scalars. No pointers, addresses, callbacks or unregistered
/// operations exist in it.
///
///   expr    := term (('+' | '-') term)*
///   term    := unary (('*' | '/' | '%') unary)*
///   unary   := '-' unary | primary
///   primary := INTEGER | '(' expr ')' | call
///   call    := dim(NAME, INDEX) | stride(NAME, INDEX) | numel(NAME) | rank(NAME) | scalar(NAME)
///            | min(expr, expr) | max(expr, expr) | ceil_div(expr, expr)
///
/// INDEX is an integer literal (negative counts from the last dimension). '/' and '%' truncate like C and
/// refuse a zero divisor; ceil_div needs a positive divisor. Every operation is checked against signed
/// 64-bit overflow (layout_overflow). Texts are bounded: 1,024 characters, 256 nodes, nesting depth 32.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/layout.hpp"

namespace pact::seal {

inline constexpr std::size_t kMaxExprChars = 1024;
inline constexpr std::size_t kMaxExprNodes = 256;
inline constexpr int kMaxExprDepth = 32;

/// The live data of one call: tensor geometry by binding name, and admitted integer scalars.
struct TensorGeometry {
  Dims shape;
  Dims strides;  ///< in elements
};
struct CallData {
  std::map<std::string, TensorGeometry, std::less<>> tensors;
  std::map<std::string, std::int64_t, std::less<>> scalars;
};

class Expr {
 public:
  /// Parses; parse_error naming `where` and the character offset.
  static Expr parse(std::string_view text, std::string_view where);
  /// Evaluates against a call: invalid_argument for an unknown name or a dimension out of range,
  /// layout_overflow for overflow, invalid_argument for a zero divisor.
  std::int64_t eval(const CallData& call) const;
  /// The source text.
  const std::string& text() const noexcept { return text_; }
  /// Tensor and scalar names the expression reads (sorted, unique).
  std::vector<std::string> tensor_names() const;
  std::vector<std::string> scalar_names() const;

 private:
  enum class Kind : std::uint8_t {
    constant,
    dim,
    stride,
    numel,
    rank,
    scalar,
    neg,
    add,
    sub,
    mul,
    div,
    mod,
    min,
    max,
    ceil_div
  };
  struct Node {
    Kind kind;
    std::int64_t value = 0;  // constant, or the index of dim/stride
    std::string name;        // tensor or scalar name
    int a = -1, b = -1;      // operands
  };
  friend class ExprParser;
  std::int64_t eval_node(int id, const CallData& call) const;
  std::string text_;
  std::string where_;
  std::vector<Node> nodes_;
  int root_ = -1;
};

}  // namespace pact::seal
