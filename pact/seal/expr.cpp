#include "pact/seal/expr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

namespace pact::seal {

class ExprParser {
 public:
  ExprParser(std::string_view text, std::string_view where, Expr& out) : s_(text), where_(where), out_(out) {}

  void run() {
    if (s_.size() > kMaxExprChars) fail(fmt::format("the expression is longer than {} characters", kMaxExprChars));
    out_.root_ = expr(0);
    skip();
    if (pos_ != s_.size()) fail(fmt::format("unexpected '{}'", s_[pos_]));
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw_error(ErrorCode::parse_error, "seal.expr", fmt::format("{}: character {}: {}", where_, pos_, why));
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(fmt::format("expected '{}'", c));
  }
  int add(Expr::Node n) {
    if (out_.nodes_.size() >= kMaxExprNodes) fail(fmt::format("more than {} nodes", kMaxExprNodes));
    out_.nodes_.push_back(std::move(n));
    return static_cast<int>(out_.nodes_.size() - 1);
  }
  void depth_check(int depth) const {
    if (depth > kMaxExprDepth) fail(fmt::format("nested deeper than {}", kMaxExprDepth));
  }
  int expr(int depth) {
    depth_check(depth);
    int left = term(depth + 1);
    for (;;) {
      if (eat('+')) {
        left = add({Expr::Kind::add, 0, {}, left, term(depth + 1)});
      } else if (eat('-')) {
        left = add({Expr::Kind::sub, 0, {}, left, term(depth + 1)});
      } else {
        return left;
      }
    }
  }
  int term(int depth) {
    depth_check(depth);
    int left = unary(depth + 1);
    for (;;) {
      if (eat('*')) {
        left = add({Expr::Kind::mul, 0, {}, left, unary(depth + 1)});
      } else if (eat('/')) {
        left = add({Expr::Kind::div, 0, {}, left, unary(depth + 1)});
      } else if (eat('%')) {
        left = add({Expr::Kind::mod, 0, {}, left, unary(depth + 1)});
      } else {
        return left;
      }
    }
  }
  int unary(int depth) {
    depth_check(depth);
    if (eat('-')) return add({Expr::Kind::neg, 0, {}, unary(depth + 1), -1});
    return primary(depth + 1);
  }
  std::int64_t integer() {
    skip();
    const bool negative = pos_ < s_.size() && s_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) fail("expected an integer");
    std::int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const int digit = s_[pos_++] - '0';
      if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10) fail("integer literal out of range");
      v = v * 10 + digit;
    }
    return negative ? -v : v;
  }
  std::string identifier() {
    skip();
    const std::size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '.'))
      ++pos_;
    if (start == pos_ || std::isdigit(static_cast<unsigned char>(s_[start]))) fail("expected a name");
    return std::string(s_.substr(start, pos_ - start));
  }
  int primary(int depth) {
    depth_check(depth);
    skip();
    if (eat('(')) {
      const int inner = expr(depth + 1);
      expect(')');
      return inner;
    }
    if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])))
      return add({Expr::Kind::constant, integer(), {}, -1, -1});
    const std::string fn = identifier();
    expect('(');
    int node = -1;
    if (fn == "dim" || fn == "stride") {
      std::string name = identifier();
      expect(',');
      const std::int64_t index = integer();
      node = add({fn == "dim" ? Expr::Kind::dim : Expr::Kind::stride, index, std::move(name), -1, -1});
    } else if (fn == "numel" || fn == "rank" || fn == "scalar") {
      std::string name = identifier();
      node = add({fn == "numel"  ? Expr::Kind::numel
                  : fn == "rank" ? Expr::Kind::rank
                                 : Expr::Kind::scalar,
                  0, std::move(name), -1, -1});
    } else if (fn == "min" || fn == "max" || fn == "ceil_div") {
      const int a = expr(depth + 1);
      expect(',');
      const int b = expr(depth + 1);
      node = add({fn == "min" ? Expr::Kind::min : fn == "max" ? Expr::Kind::max : Expr::Kind::ceil_div, 0, {}, a, b});
    } else {
      fail(fmt::format("'{}' is not an operation of the expression language", fn));
    }
    expect(')');
    return node;
  }

  std::string_view s_;
  std::string_view where_;
  Expr& out_;
  std::size_t pos_ = 0;
};

Expr Expr::parse(std::string_view text, std::string_view where) {
  Expr e;
  e.text_ = std::string(text);
  e.where_ = std::string(where);
  ExprParser(text, where, e).run();
  return e;
}

namespace {

[[noreturn]] void overflow(const std::string& text, const char* what) {
  throw_error(ErrorCode::layout_overflow, "seal.expr", fmt::format("'{}': {} overflows 64-bit integers", text, what));
}

const TensorGeometry& tensor_of(const CallData& call, const std::string& name, const std::string& text) {
  auto it = call.tensors.find(name);
  if (it == call.tensors.end())
    throw_error(ErrorCode::invalid_argument, "seal.expr", fmt::format("'{}': no tensor '{}' in the call", text, name));
  return it->second;
}

int axis(const TensorGeometry& t, std::int64_t index, const std::string& name, const std::string& text) {
  const std::int64_t r = t.shape.size();
  const std::int64_t a = index < 0 ? index + r : index;
  if (a < 0 || a >= r) {
    throw_error(ErrorCode::invalid_argument, "seal.expr",
                fmt::format("'{}': dimension {} of '{}' (rank {})", text, index, name, r));
  }
  return static_cast<int>(a);
}

}  // namespace

std::int64_t Expr::eval_node(int id, const CallData& call) const {
  const Node& n = nodes_[static_cast<std::size_t>(id)];
  std::int64_t r = 0;
  switch (n.kind) {
    case Kind::constant:
      return n.value;
    case Kind::dim: {
      const auto& t = tensor_of(call, n.name, text_);
      return t.shape[axis(t, n.value, n.name, text_)];
    }
    case Kind::stride: {
      const auto& t = tensor_of(call, n.name, text_);
      if (t.strides.size() != t.shape.size())
        throw_error(ErrorCode::invalid_argument, "seal.expr", fmt::format("'{}': '{}' has no strides", text_, n.name));
      return t.strides[axis(t, n.value, n.name, text_)];
    }
    case Kind::numel: {
      const auto& t = tensor_of(call, n.name, text_);
      std::int64_t c = 1;
      for (int d = 0; d < t.shape.size(); ++d) {
        if (__builtin_mul_overflow(c, t.shape[d], &c)) overflow(text_, "an element count");
      }
      return c;
    }
    case Kind::rank:
      return tensor_of(call, n.name, text_).shape.size();
    case Kind::scalar: {
      auto it = call.scalars.find(n.name);
      if (it == call.scalars.end())
        throw_error(ErrorCode::invalid_argument, "seal.expr",
                    fmt::format("'{}': no admitted scalar '{}'", text_, n.name));
      return it->second;
    }
    case Kind::neg: {
      const std::int64_t a = eval_node(n.a, call);
      if (__builtin_sub_overflow(std::int64_t{0}, a, &r)) overflow(text_, "a negation");
      return r;
    }
    default:
      break;
  }
  const std::int64_t a = eval_node(n.a, call), b = eval_node(n.b, call);
  switch (n.kind) {
    case Kind::add:
      if (__builtin_add_overflow(a, b, &r)) overflow(text_, "a sum");
      return r;
    case Kind::sub:
      if (__builtin_sub_overflow(a, b, &r)) overflow(text_, "a difference");
      return r;
    case Kind::mul:
      if (__builtin_mul_overflow(a, b, &r)) overflow(text_, "a product");
      return r;
    case Kind::div:
    case Kind::mod:
      if (b == 0) throw_error(ErrorCode::invalid_argument, "seal.expr", fmt::format("'{}': division by zero", text_));
      if (a == std::numeric_limits<std::int64_t>::min() && b == -1) overflow(text_, "a quotient");
      return n.kind == Kind::div ? a / b : a % b;
    case Kind::min:
      return std::min(a, b);
    case Kind::max:
      return std::max(a, b);
    case Kind::ceil_div: {
      if (b <= 0)
        throw_error(ErrorCode::invalid_argument, "seal.expr",
                    fmt::format("'{}': ceil_div needs a positive divisor, got {}", text_, b));
      const std::int64_t q = a / b, rem = a % b;
      return q + (rem > 0 ? 1 : 0);
    }
    default:
      break;
  }
  throw_error(ErrorCode::invalid_argument, "seal.expr", "unknown node");
}

std::int64_t Expr::eval(const CallData& call) const { return eval_node(root_, call); }

std::vector<std::string> Expr::tensor_names() const {
  std::set<std::string> names;
  for (const auto& n : nodes_) {
    if (n.kind == Kind::dim || n.kind == Kind::stride || n.kind == Kind::numel || n.kind == Kind::rank)
      names.insert(n.name);
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> Expr::scalar_names() const {
  std::set<std::string> names;
  for (const auto& n : nodes_) {
    if (n.kind == Kind::scalar) names.insert(n.name);
  }
  return {names.begin(), names.end()};
}

}  // namespace pact::seal
