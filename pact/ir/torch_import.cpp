#include "pact/ir/torch_import.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>

#include "pact/core/file.hpp"

namespace pact::ir {

using ops::Attributes;
using ops::OpTag;
using ops::TensorType;

const TorchSource* TorchImport::find_source(std::string_view name) const noexcept {
  for (const auto& s : sources) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

namespace {

constexpr std::string_view kWhere = "torch.import";

[[noreturn]] void fail(ErrorCode code, std::string_view where, const std::string& why) {
  throw_error(code, std::string(kWhere), fmt::format("{}: {}", where, why));
}

const Json& field(const Json& obj, std::string_view key, std::string_view where, const std::string& path) {
  if (!obj.is_object()) fail(ErrorCode::parse_error, where, fmt::format("{} is not an object", path));
  auto it = obj.find(key);
  if (it == obj.end()) fail(ErrorCode::parse_error, where, fmt::format("{} has no field '{}'", path, key));
  return *it;
}

std::string string_field(const Json& obj, std::string_view key, std::string_view where, const std::string& path) {
  const Json& v = field(obj, key, where, path);
  if (!v.is_string()) fail(ErrorCode::parse_error, where, fmt::format("{}.{} is not a string", path, key));
  return v.get<std::string>();
}

TensorType tensor_meta(const Json& meta, std::string_view where, const std::string& path) {
  TensorType t;
  try {
    t.dtype = parse_dtype(string_field(meta, "dtype", where, path));
  } catch (const Error& e) {
    fail(ErrorCode::unsupported, where, fmt::format("{}: {}", path, e.what()));
  }
  const Json& sizes = field(meta, "sizes", where, path);
  if (!sizes.is_array()) fail(ErrorCode::parse_error, where, fmt::format("{}.sizes is not a list", path));
  if (sizes.size() > static_cast<std::size_t>(kMaxRank)) {
    fail(ErrorCode::rank_exceeded, where, fmt::format("{} has rank {} (at most {})", path, sizes.size(), kMaxRank));
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (!sizes[i].is_number_integer() || sizes[i].get<std::int64_t>() < 0) {
      fail(ErrorCode::parse_error, where, fmt::format("{}.sizes[{}] is not a non-negative integer", path, i));
    }
    t.shape.push_back(sizes[i].get<std::int64_t>());
  }
  return t;
}

/// Largest constant the lowering synthesizes (ones for expand, default batch-norm statistics): a capture
/// whose metadata asks for more is refused rather than allowed to exhaust memory.
constexpr std::int64_t kMaxSynthesized = std::int64_t{1} << 24;

/// A tensor of `dtype` and `shape` with every element `value`.
Tensor filled(const Dims& shape, double value, DType dtype) {
  std::int64_t n = 1;
  for (auto e : shape) {
    if (e < 0 || (e > 0 && n > kMaxSynthesized / e)) {
      throw_error(
          ErrorCode::unsupported, std::string(kWhere),
          fmt::format("a lowering constant of shape {} exceeds {} elements", shape.to_string(), kMaxSynthesized));
    }
    n *= e;
  }
  const std::vector<double> values(static_cast<std::size_t>(n), value);
  Tensor t = Tensor::from_values<double>(shape, values);
  if (dtype == DType::f64) return t;
  return t.convert(dtype);
}

// Note [ATen lowering]
// Each ATen node lowers to zero or more op-table nodes. Identity-like targets (clone, contiguous, alias,
// detach, dropout in eval) alias their input. Views (view, reshape, flatten, squeeze, unsqueeze and their
// aliases) become one reshape to the captured output shape. addmm and mm whose second operand is the
// transpose of a 2-D tensor become linear (PyTorch's decomposition of nn.Linear); other matrix products
// become matmul plus scaled adds. Composite activations (hardswish, hardsigmoid, rsqrt, pow by 2 or 0.5)
// become sequences of table ops. Scalars become rank-0 constants of the operand's dtype. Eval-mode
// batch norm maps to batch_norm with its running statistics (never folded, so the weights stay those of
// the state dict). Anything else is unsupported, named with its node and target.

/// Reads one node's schema-named arguments.
class Args {
 public:
  Args(const Json& node, std::string node_name, std::string target, std::string_view where)
      : node_(std::move(node_name)), target_(std::move(target)), where_(where) {
    const Json& inputs = field(node, "inputs", where, fmt::format("node '{}'", node_));
    if (!inputs.is_array()) bad("inputs is not a list");
    for (const auto& in : inputs) {
      const std::string name = string_field(in, "name", where, fmt::format("node '{}' input", node_));
      const Json& arg = field(in, "arg", where, fmt::format("node '{}' input '{}'", node_, name));
      if (!arg.is_object() || arg.size() != 1) bad(fmt::format("argument '{}' is not a one-key object", name));
      if (!args_.emplace(name, &arg).second) bad(fmt::format("argument '{}' repeats", name));
    }
  }

  [[noreturn]] void bad(const std::string& why, ErrorCode code = ErrorCode::parse_error) const {
    fail(code, where_, fmt::format("node '{}' ({}): {}", node_, target_, why));
  }
  [[noreturn]] void unsupported(const std::string& why) const { bad(why, ErrorCode::unsupported); }

  bool has(std::string_view name) const { return args_.count(std::string(name)) != 0; }
  const Json& raw(std::string_view name) const {
    auto it = args_.find(std::string(name));
    if (it == args_.end()) bad(fmt::format("missing argument '{}'", name));
    return *it->second;
  }
  std::string kind(std::string_view name) const { return raw(name).begin().key(); }
  const Json& payload(std::string_view name, std::string_view kind) const {
    const Json& a = raw(name);
    auto it = a.find(kind);
    if (it == a.end()) bad(fmt::format("argument '{}' is {}, expected {}", name, a.begin().key(), kind));
    return *it;
  }
  bool is_none(std::string_view name) const { return !has(name) || raw(name).contains("as_none"); }

  std::string tensor(std::string_view name) const { return tensor_ref(payload(name, "as_tensor"), name); }
  std::optional<std::string> optional_tensor(std::string_view name) const {
    if (is_none(name)) return std::nullopt;
    return tensor(name);
  }
  std::vector<std::string> tensors(std::string_view name) const {
    const Json& a = raw(name);
    std::vector<std::string> out;
    if (a.contains("as_tensors")) {
      const Json& list = a["as_tensors"];
      if (!list.is_array()) bad(fmt::format("argument '{}' is not a list", name));
      for (const auto& t : list) out.push_back(tensor_ref(t, name));
      return out;
    }
    if (a.contains("as_optional_tensors")) {
      for (const auto& t : a["as_optional_tensors"]) {
        if (!t.is_object() || !t.contains("as_tensor")) unsupported(fmt::format("argument '{}' holds a None", name));
        out.push_back(tensor_ref(t["as_tensor"], name));
      }
      return out;
    }
    bad(fmt::format("argument '{}' is {}, expected a tensor list", name, a.begin().key()));
  }
  std::int64_t integer(std::string_view name) const {
    const Json& v = payload(name, "as_int");
    if (!v.is_number_integer()) bad(fmt::format("argument '{}' is not an integer", name));
    return v.get<std::int64_t>();
  }
  std::optional<std::int64_t> optional_integer(std::string_view name) const {
    if (is_none(name)) return std::nullopt;
    return integer(name);
  }
  std::vector<std::int64_t> ints(std::string_view name) const {
    const Json& a = raw(name);
    if (a.contains("as_int")) return {integer(name)};
    const Json& v = payload(name, "as_ints");
    if (!v.is_array()) bad(fmt::format("argument '{}' is not a list", name));
    std::vector<std::int64_t> out;
    for (const auto& x : v) {
      if (!x.is_number_integer()) bad(fmt::format("argument '{}' holds a non-integer", name));
      out.push_back(x.get<std::int64_t>());
    }
    return out;
  }
  bool boolean(std::string_view name) const {
    const Json& v = payload(name, "as_bool");
    if (!v.is_boolean()) bad(fmt::format("argument '{}' is not a boolean", name));
    return v.get<bool>();
  }
  /// as_float or as_int (PyTorch Scalars), with "inf", "-inf" and "nan" spelled as strings.
  double number(std::string_view name) const {
    const Json& a = raw(name);
    const Json* v = nullptr;
    if (a.contains("as_float")) v = &a["as_float"];
    if (a.contains("as_int")) v = &a["as_int"];
    if (a.contains("as_bool")) return a["as_bool"].is_boolean() && a["as_bool"].get<bool>() ? 1.0 : 0.0;
    if (v == nullptr) bad(fmt::format("argument '{}' is {}, expected a number", name, a.begin().key()));
    if (v->is_number()) return v->get<double>();
    if (v->is_string()) {
      const auto s = v->get<std::string>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    bad(fmt::format("argument '{}' is not a number", name));
  }
  std::optional<double> optional_number(std::string_view name) const {
    if (is_none(name)) return std::nullopt;
    return number(name);
  }
  bool is_tensor(std::string_view name) const { return has(name) && raw(name).contains("as_tensor"); }
  std::string string(std::string_view name) const {
    const Json& v = payload(name, "as_string");
    if (!v.is_string()) bad(fmt::format("argument '{}' is not a string", name));
    return v.get<std::string>();
  }

  const std::string& node() const { return node_; }
  const std::string& target() const { return target_; }

 private:
  std::string tensor_ref(const Json& t, std::string_view arg) const {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
      bad(fmt::format("argument '{}' has a malformed tensor reference", arg));
    }
    return t["name"].get<std::string>();
  }

  std::string node_;
  std::string target_;
  std::string_view where_;
  std::unordered_map<std::string, const Json*> args_;
};

/// The lowering state: IR nodes so far, and the IR node (or alias) of every captured tensor.
class Lowering {
 public:
  explicit Lowering(std::string_view where) : where_(where) {}

  std::string_view where() const { return where_; }

  void declare_meta(const std::string& name, const TensorType& t) { meta_[name] = t; }
  const TensorType& meta(const std::string& name, const Args& a) const {
    auto it = meta_.find(name);
    if (it == meta_.end())
      a.bad(fmt::format("tensor '{}' has no entry in tensor_values", name), ErrorCode::invalid_argument);
    return it->second;
  }
  bool has_meta(const std::string& name) const { return meta_.count(name) != 0; }

  /// The IR node of a captured tensor; a reference to a tensor not yet produced is an error.
  std::string value(const std::string& name, const Args& a) const {
    auto it = value_of_.find(name);
    if (it == value_of_.end())
      a.bad(fmt::format("tensor '{}' is not produced before this node", name), ErrorCode::invalid_argument);
    return it->second;
  }
  void define(const std::string& name, std::string id, const std::string& by) {
    if (value_of_.count(name)) {
      fail(ErrorCode::invalid_argument, where_, fmt::format("node '{}': tensor '{}' is produced twice", by, name));
    }
    value_of_[name] = std::move(id);
    produced_by_[name] = by;
  }
  bool defined(const std::string& name) const { return value_of_.count(name) != 0; }

  /// Adds a node with a fresh id derived from `hint`.
  std::string add(const std::string& hint, OpTag op, std::vector<std::string> inputs, Attributes attrs = {}) {
    std::string id = fresh(hint);
    nodes_.push_back(Node{id, op, std::move(inputs), std::move(attrs), {}, false, false, false});
    module_of_[id] = module_;
    return id;
  }
  /// Adds a source node under its exact name.
  void source(const std::string& name, OpTag op, const TensorType& t, bool differentiable, bool buffer) {
    if (!ids_.insert(name).second) {
      fail(ErrorCode::invalid_argument, where_, fmt::format("signature: input '{}' repeats", name));
    }
    nodes_.push_back(Node{name,
                          op,
                          {},
                          Attributes{{"shape", std::vector<std::int64_t>(t.shape.begin(), t.shape.end())},
                                     {"dtype", std::string(dtype_name(t.dtype))}},
                          {},
                          false,
                          differentiable,
                          buffer});
  }
  /// A rank-0 constant of `dtype` holding `v`.
  std::string scalar(double v, DType dtype) {
    const auto key = fmt::format("{}:{}", dtype_name(dtype), v);
    if (auto it = scalars_.find(key); it != scalars_.end()) return it->second;
    if (!is_floating(dtype) && v != std::floor(v)) {
      fail(ErrorCode::unsupported, where_, fmt::format("scalar {} does not fit dtype {}", v, dtype_name(dtype)));
    }
    std::string id = constant("_scalar", filled(Dims{}, v, dtype));
    scalars_[key] = id;
    return id;
  }
  /// A constant node holding `t`.
  std::string constant(const std::string& hint, Tensor t) {
    const TensorType type{t.dtype(), t.shape()};
    std::string id = fresh(hint);
    nodes_.push_back(Node{id,
                          OpTag::constant,
                          {},
                          Attributes{{"shape", std::vector<std::int64_t>(type.shape.begin(), type.shape.end())},
                                     {"dtype", std::string(dtype_name(type.dtype))}},
                          {},
                          false,
                          false,
                          false});
    synthesized_.emplace(id, std::move(t));
    return id;
  }

  void set_module(std::string m) { module_ = std::move(m); }
  void note_transpose(const std::string& id, const std::string& of) { transposed_[id] = of; }
  std::optional<std::string> transpose_source(const std::string& id) const {
    auto it = transposed_.find(id);
    if (it == transposed_.end()) return std::nullopt;
    return it->second;
  }
  const std::map<std::string, std::string>& values() const { return value_of_; }
  const std::map<std::string, std::string>& produced_by() const { return produced_by_; }
  std::vector<Node>& nodes() { return nodes_; }
  std::map<std::string, Tensor>& synthesized() { return synthesized_; }
  std::map<std::string, std::string>& module_of() { return module_of_; }
  const std::map<std::string, TensorType>& metas() const { return meta_; }

 private:
  std::string fresh(const std::string& hint) {
    std::string id = hint;
    for (int i = 1; !ids_.insert(id).second; ++i) id = fmt::format("{}.{}", hint, i);
    return id;
  }

  std::string_view where_;
  std::vector<Node> nodes_;
  std::set<std::string> ids_;
  std::map<std::string, std::string> value_of_;
  std::map<std::string, std::string> produced_by_;
  std::map<std::string, TensorType> meta_;
  std::map<std::string, Tensor> synthesized_;
  std::map<std::string, std::string> scalars_;
  std::map<std::string, std::string> transposed_;
  std::map<std::string, std::string> module_of_;
  std::string module_;
};

/// One ATen node being lowered: its arguments, output names and the lowering state.
struct Step {
  Lowering& L;
  const Args& a;
  const std::vector<std::string>& outs;  ///< captured output names ("" for a None output)

  std::string in(std::string_view arg) const { return L.value(a.tensor(arg), a); }
  const TensorType& in_meta(std::string_view arg) const { return L.meta(a.tensor(arg), a); }
  const std::string& out(std::size_t i = 0) const {
    if (i >= outs.size() || outs[i].empty()) a.bad(fmt::format("output {} is missing", i));
    return outs[i];
  }
  const TensorType& out_meta(std::size_t i = 0) const { return L.meta(out(i), a); }
  /// Defines output i as a new node.
  std::string emit(OpTag op, std::vector<std::string> inputs, Attributes attrs = {}, std::size_t i = 0) {
    std::string id = L.add(out(i), op, std::move(inputs), std::move(attrs));
    L.define(out(i), id, a.node());
    return id;
  }
  /// An intermediate node (not a captured tensor).
  std::string temp(const std::string& suffix, OpTag op, std::vector<std::string> inputs, Attributes attrs = {}) {
    return L.add(fmt::format("{}/{}", out(), suffix), op, std::move(inputs), std::move(attrs));
  }
  void alias(const std::string& id, std::size_t i = 0) { L.define(out(i), id, a.node()); }
  /// A scalar-or-tensor operand as an IR node (scalars become constants of `dtype`).
  std::string operand(std::string_view arg, DType dtype) {
    if (a.is_tensor(arg)) return in(arg);
    return L.scalar(a.number(arg), dtype);
  }
  std::string reshape_to(const std::string& x, const Dims& shape, std::size_t i = 0) {
    return emit(OpTag::reshape, {x}, Attributes{{"shape", std::vector<std::int64_t>(shape.begin(), shape.end())}}, i);
  }
};

std::vector<std::int64_t> pair_of(const Args& a, std::string_view arg, std::vector<std::int64_t> v) {
  if (v.size() == 1) v.push_back(v[0]);
  if (v.size() != 2) a.unsupported(fmt::format("argument '{}' has {} entries; 2-D windows need 1 or 2", arg, v.size()));
  return v;
}

void lower_binary(Step& s, OpTag op) {
  const DType dt = s.out_meta().dtype;
  std::string lhs = s.operand("self", dt);
  std::string rhs = s.operand("other", dt);
  if (s.a.has("alpha") && !s.a.is_none("alpha")) {
    const double alpha = s.a.number("alpha");
    if (alpha != 1.0) rhs = s.temp("alpha", OpTag::mul, {rhs, s.L.scalar(alpha, dt)});
  }
  s.emit(op, {lhs, rhs});
}

void lower_clamp(Step& s, std::optional<double> lo, std::optional<double> hi) {
  Attributes attrs;
  if (lo) attrs.set("min", *lo);
  if (hi) attrs.set("max", *hi);
  s.emit(OpTag::clamp, {s.in("self")}, attrs);
}

/// slice bounds normalised against the extent (PyTorch clamps out-of-range starts and ends).
std::pair<std::int64_t, std::int64_t> clamp_slice(std::int64_t start, std::int64_t end, std::int64_t extent) {
  if (start < 0) start += extent;
  if (end < 0) end += extent;
  start = std::clamp<std::int64_t>(start, 0, extent);
  end = std::clamp<std::int64_t>(end, start, extent);
  return {start, end};
}

/// Splits `x` along `dim` into pieces of the given sizes, defining outputs 0..n-1 (optionally reshaped to
/// their captured shapes, for unbind).
void lower_split(Step& s, const std::vector<std::int64_t>& sizes, std::int64_t dim, bool reshape) {
  const std::string x = s.in("self");
  const auto& shape = s.in_meta("self").shape;
  const int d = ops::normalize_dim(s.a.target(), dim, shape.size());
  std::int64_t start = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (i >= s.outs.size()) s.a.bad(fmt::format("{} pieces but {} outputs", sizes.size(), s.outs.size()));
    if (s.outs[i].empty()) {
      start += sizes[i];
      continue;
    }
    Attributes attrs{{"dim", std::int64_t{d}}, {"start", start}, {"end", start + sizes[i]}};
    if (reshape) {
      std::string piece = s.L.add(fmt::format("{}/slice", s.out(i)), OpTag::slice, {x}, attrs);
      s.reshape_to(piece, s.out_meta(i).shape, i);
    } else {
      s.emit(OpTag::slice, {x}, attrs, i);
    }
    start += sizes[i];
  }
  if (start != shape[d])
    s.a.bad(fmt::format("pieces cover {} of extent {}", start, shape[d]), ErrorCode::invalid_argument);
}

/// Matrix product `a @ b` (+ beta * bias), as linear when b is the transpose of a 2-D weight and the bias
/// (if any) is a vector (nn.Linear's decomposition).
void lower_product(Step& s, const std::string& lhs, const std::string& rhs, std::optional<std::string> bias,
                   bool bias_is_vector, double beta, double alpha) {
  const DType dt = s.out_meta().dtype;
  if (auto w = s.L.transpose_source(rhs); w && alpha == 1.0 && (!bias || (beta == 1.0 && bias_is_vector))) {
    std::vector<std::string> inputs{lhs, *w};
    if (bias) inputs.push_back(*bias);
    s.emit(OpTag::linear, inputs);
    return;
  }
  if (!bias) {
    if (alpha == 1.0) {
      s.emit(OpTag::matmul, {lhs, rhs});
    } else {
      s.emit(OpTag::mul, {s.temp("mm", OpTag::matmul, {lhs, rhs}), s.L.scalar(alpha, dt)});
    }
    return;
  }
  std::string prod = s.temp("mm", OpTag::matmul, {lhs, rhs});
  if (alpha != 1.0) prod = s.temp("alpha", OpTag::mul, {prod, s.L.scalar(alpha, dt)});
  std::string b = *bias;
  if (beta != 1.0) b = s.temp("beta", OpTag::mul, {b, s.L.scalar(beta, dt)});
  s.emit(OpTag::add, {b, prod});
}

using LowerFn = void (*)(Step&);

const std::unordered_map<std::string, LowerFn>& lowerings() {
  static const std::unordered_map<std::string, LowerFn> table = [] {
    std::unordered_map<std::string, LowerFn> t;
    auto identity = [](Step& s) { s.alias(s.in("self")); };
    for (const char* k : {"clone", "contiguous", "alias", "detach", "lift_fresh_copy", "lift_fresh"}) t[k] = identity;
    t["dropout"] = [](Step& s) {
      if (s.a.boolean("train")) s.a.unsupported("training-mode dropout in an inference capture");
      s.alias(s.in("input"));
    };
    t["feature_dropout"] = t["dropout"];
    t["native_dropout"] = [](Step& s) {
      if (!s.a.is_none("train") && s.a.boolean("train"))
        s.a.unsupported("training-mode dropout in an inference capture");
      s.alias(s.in("input"));
      if (s.outs.size() > 1 && !s.outs[1].empty()) s.a.unsupported("the dropout mask is used");
    };
    t["_to_copy"] = [](Step& s) {
      if (s.out_meta().dtype != s.in_meta("self").dtype) s.a.unsupported("a dtype conversion");
      s.alias(s.in("self"));
    };
    t["to"] = t["_to_copy"];

    // Views: one reshape to the captured shape.
    auto view = [](Step& s) { s.reshape_to(s.in("self"), s.out_meta().shape); };
    for (const char* k : {"view", "_unsafe_view", "reshape", "_reshape_alias", "flatten", "unflatten", "squeeze",
                          "unsqueeze", "view_copy"}) {
      t[k] = view;
    }
    t["as_strided"] = [](Step& s) {
      // Only the contiguous reinterpretation that decompositions emit (e.g. after mean over H, W).
      const auto size = s.a.ints("size");
      const auto stride = s.a.ints("stride");
      if (s.a.optional_integer("storage_offset").value_or(0) != 0) s.a.unsupported("as_strided with a storage offset");
      std::int64_t expect = 1;
      for (std::size_t i = size.size(); i-- > 0;) {
        if (size[i] != 1 && stride[i] != expect) s.a.unsupported("as_strided with a non-contiguous stride");
        expect *= size[i];
      }
      if (expect != ops::numel(s.in_meta("self").shape)) s.a.unsupported("as_strided that changes the element count");
      s.reshape_to(s.in("self"), s.out_meta().shape);
    };
    t["t"] = [](Step& s) {
      const auto rank = s.in_meta("self").shape.size();
      if (rank < 2) {
        s.alias(s.in("self"));
        return;
      }
      std::string id =
          s.emit(OpTag::transpose, {s.in("self")}, Attributes{{"dim0", std::int64_t{0}}, {"dim1", std::int64_t{1}}});
      s.L.note_transpose(id, s.in("self"));
    };
    t["transpose"] = [](Step& s) {
      std::string id = s.emit(OpTag::transpose, {s.in("self")},
                              Attributes{{"dim0", s.a.integer("dim0")}, {"dim1", s.a.integer("dim1")}});
      const int r = s.in_meta("self").shape.size();
      if (r == 2) {
        const int d0 = ops::normalize_dim("transpose", s.a.integer("dim0"), r);
        const int d1 = ops::normalize_dim("transpose", s.a.integer("dim1"), r);
        if (d0 != d1) s.L.note_transpose(id, s.in("self"));
      }
    };
    t["permute"] = [](Step& s) { s.emit(OpTag::permute, {s.in("self")}, Attributes{{"dims", s.a.ints("dims")}}); };
    t["expand"] = [](Step& s) {
      // Broadcast by multiplying with ones of the target shape (exact for every finite and non-finite value).
      const auto& shape = s.out_meta().shape;
      if (shape == s.in_meta("self").shape) {
        s.alias(s.in("self"));
        return;
      }
      std::string c = s.L.constant(fmt::format("{}/ones", s.out()), filled(shape, 1.0, s.out_meta().dtype));
      s.emit(OpTag::mul, {s.in("self"), c});
    };

    // Elementwise.
    t["add"] = [](Step& s) { lower_binary(s, OpTag::add); };
    t["sub"] = [](Step& s) { lower_binary(s, OpTag::sub); };
    t["mul"] = [](Step& s) { lower_binary(s, OpTag::mul); };
    t["div"] = [](Step& s) {
      if (s.a.has("rounding_mode") && !s.a.is_none("rounding_mode")) s.a.unsupported("div with a rounding mode");
      lower_binary(s, OpTag::div);
    };
    t["rsub"] = [](Step& s) {  // other - alpha * self
      const DType dt = s.out_meta().dtype;
      std::string self = s.operand("self", dt);
      const double alpha = s.a.has("alpha") ? s.a.number("alpha") : 1.0;
      if (alpha != 1.0) self = s.temp("alpha", OpTag::mul, {self, s.L.scalar(alpha, dt)});
      s.emit(OpTag::sub, {s.operand("other", dt), self});
    };
    t["neg"] = [](Step& s) { s.emit(OpTag::neg, {s.in("self")}); };
    t["relu"] = [](Step& s) { s.emit(OpTag::relu, {s.in("self")}); };
    t["silu"] = [](Step& s) { s.emit(OpTag::silu, {s.in("self")}); };
    t["sigmoid"] = [](Step& s) { s.emit(OpTag::sigmoid, {s.in("self")}); };
    t["tanh"] = [](Step& s) { s.emit(OpTag::tanh, {s.in("self")}); };
    t["exp"] = [](Step& s) { s.emit(OpTag::exp, {s.in("self")}); };
    t["log"] = [](Step& s) { s.emit(OpTag::log, {s.in("self")}); };
    t["sqrt"] = [](Step& s) { s.emit(OpTag::sqrt, {s.in("self")}); };
    t["sin"] = [](Step& s) { s.emit(OpTag::sin, {s.in("self")}); };
    t["rsqrt"] = [](Step& s) {
      std::string r = s.temp("sqrt", OpTag::sqrt, {s.in("self")});
      s.emit(OpTag::div, {s.L.scalar(1.0, s.out_meta().dtype), r});
    };
    t["reciprocal"] = [](Step& s) { s.emit(OpTag::div, {s.L.scalar(1.0, s.out_meta().dtype), s.in("self")}); };
    t["pow"] = [](Step& s) {
      if (!s.a.has("exponent") || s.a.is_tensor("exponent")) s.a.unsupported("pow with a tensor exponent");
      const double e = s.a.number("exponent");
      const std::string x = s.in("self");
      if (e == 1.0) {
        s.alias(x);
      } else if (e == 2.0) {
        s.emit(OpTag::mul, {x, x});
      } else if (e == 0.5) {
        s.emit(OpTag::sqrt, {x});
      } else if (e == -1.0) {
        s.emit(OpTag::div, {s.L.scalar(1.0, s.out_meta().dtype), x});
      } else if (e == -0.5) {
        s.emit(OpTag::div, {s.L.scalar(1.0, s.out_meta().dtype), s.temp("sqrt", OpTag::sqrt, {x})});
      } else {
        s.a.unsupported(fmt::format("pow with exponent {}", e));
      }
    };
    t["gelu"] = [](Step& s) {
      const std::string approx = s.a.has("approximate") ? s.a.string("approximate") : "none";
      if (approx != "none" && approx != "tanh") s.a.unsupported(fmt::format("gelu approximate='{}'", approx));
      s.emit(OpTag::gelu, {s.in("self")}, Attributes{{"approximate", approx}});
    };
    t["hardtanh"] = [](Step& s) { lower_clamp(s, s.a.number("min_val"), s.a.number("max_val")); };
    t["relu6"] = [](Step& s) { lower_clamp(s, 0.0, 6.0); };
    t["clamp"] = [](Step& s) {
      if (s.a.is_tensor("min") || s.a.is_tensor("max")) s.a.unsupported("clamp with tensor bounds");
      lower_clamp(s, s.a.optional_number("min"), s.a.optional_number("max"));
    };
    t["clamp_min"] = [](Step& s) { lower_clamp(s, s.a.number("min"), std::nullopt); };
    t["clamp_max"] = [](Step& s) { lower_clamp(s, std::nullopt, s.a.number("max")); };
    t["hardsigmoid"] = [](Step& s) {  // relu6(x + 3) / 6
      const DType dt = s.out_meta().dtype;
      std::string shifted = s.temp("shift", OpTag::add, {s.in("self"), s.L.scalar(3.0, dt)});
      std::string clamped = s.temp("relu6", OpTag::clamp, {shifted}, Attributes{{"min", 0.0}, {"max", 6.0}});
      s.emit(OpTag::div, {clamped, s.L.scalar(6.0, dt)});
    };
    t["hardswish"] = [](Step& s) {  // x * relu6(x + 3) / 6
      const DType dt = s.out_meta().dtype;
      const std::string x = s.in("self");
      std::string shifted = s.temp("shift", OpTag::add, {x, s.L.scalar(3.0, dt)});
      std::string clamped = s.temp("relu6", OpTag::clamp, {shifted}, Attributes{{"min", 0.0}, {"max", 6.0}});
      std::string gated = s.temp("gate", OpTag::mul, {x, clamped});
      s.emit(OpTag::div, {gated, s.L.scalar(6.0, dt)});
    };

    t["leaky_relu"] = [](Step& s) {  // relu(x) (1 - a) + a x
      const DType dt = s.out_meta().dtype;
      const double slope = s.a.has("negative_slope") ? s.a.number("negative_slope") : 0.01;
      const std::string x = s.in("self");
      std::string pos = s.temp("relu", OpTag::relu, {x});
      std::string scaled_pos = s.temp("pos", OpTag::mul, {pos, s.L.scalar(1.0 - slope, dt)});
      std::string scaled_x = s.temp("lin", OpTag::mul, {x, s.L.scalar(slope, dt)});
      s.emit(OpTag::add, {scaled_pos, scaled_x});
    };
    t["abs"] = [](Step& s) {  // relu(x) + relu(-x)
      const std::string x = s.in("self");
      std::string neg = s.temp("neg", OpTag::neg, {x});
      s.emit(OpTag::add, {s.temp("relu", OpTag::relu, {x}), s.temp("relu_neg", OpTag::relu, {neg})});
    };
    t["elu"] = [](Step& s) {  // scale * (relu(x) + alpha * (exp(min(x, 0) * input_scale) - 1))
      const DType dt = s.out_meta().dtype;
      const double alpha = s.a.has("alpha") ? s.a.number("alpha") : 1.0;
      const double scale = s.a.has("scale") ? s.a.number("scale") : 1.0;
      const double input_scale = s.a.has("input_scale") ? s.a.number("input_scale") : 1.0;
      const std::string x = s.in("self");
      std::string neg_part = s.temp("min0", OpTag::clamp, {x}, Attributes{{"max", 0.0}});
      if (input_scale != 1.0) neg_part = s.temp("input_scale", OpTag::mul, {neg_part, s.L.scalar(input_scale, dt)});
      std::string e = s.temp("exp", OpTag::exp, {neg_part});
      std::string em1 = s.temp("expm1", OpTag::sub, {e, s.L.scalar(1.0, dt)});
      std::string neg = s.temp("alpha", OpTag::mul, {em1, s.L.scalar(alpha, dt)});
      std::string sum = s.temp("sum", OpTag::add, {s.temp("relu", OpTag::relu, {x}), neg});
      if (scale == 1.0) {
        s.alias(sum);
      } else {
        s.emit(OpTag::mul, {sum, s.L.scalar(scale, dt)});
      }
    };
    // softplus(x) = log(1 + exp(beta x)) / beta = (relu(z) + log(1 + exp(-|z|))) / beta with z = beta x,
    // stable for every z; PyTorch returns x itself where z > threshold (a difference below 2e-9 there).
    static constexpr auto softplus = [](Step& s, const std::string& x, double beta, const std::string& tag) {
      const DType dt = s.out_meta().dtype;
      std::string z = beta == 1.0 ? x : s.temp(tag + "beta", OpTag::mul, {x, s.L.scalar(beta, dt)});
      std::string pos = s.temp(tag + "relu", OpTag::relu, {z});
      std::string negz = s.temp(tag + "neg", OpTag::neg, {z});
      std::string abs = s.temp(tag + "abs", OpTag::add, {pos, s.temp(tag + "relu_neg", OpTag::relu, {negz})});
      std::string e = s.temp(tag + "exp", OpTag::exp, {s.temp(tag + "neg_abs", OpTag::neg, {abs})});
      std::string l =
          s.temp(tag + "log1p", OpTag::log, {s.temp(tag + "one_plus", OpTag::add, {e, s.L.scalar(1.0, dt)})});
      std::string sp = s.temp(tag + "softplus", OpTag::add, {pos, l});
      return beta == 1.0 ? sp : s.temp(tag + "unbeta", OpTag::div, {sp, s.L.scalar(beta, dt)});
    };
    t["softplus"] = [](Step& s) {
      const double beta = s.a.has("beta") ? s.a.number("beta") : 1.0;
      if (beta <= 0) s.a.unsupported("softplus with a non-positive beta");
      s.alias(softplus(s, s.in("self"), beta, ""));
    };
    t["mish"] = [](Step& s) {  // x * tanh(softplus(x))
      const std::string x = s.in("self");
      std::string th = s.temp("tanh", OpTag::tanh, {softplus(s, x, 1.0, "")});
      s.emit(OpTag::mul, {x, th});
    };
    t["native_group_norm"] = [](Step& s) {
      // [N, C, *] -> [N, G, C/G * HxW], normalised over the last dim, back to [N, C, *], then per-channel affine.
      const auto& x = s.in_meta("input");
      const std::int64_t n = s.a.integer("N"), c = s.a.integer("C"), hw = s.a.integer("HxW"), g = s.a.integer("group");
      if (g <= 0 || c % g != 0 || x.shape.size() < 2 || x.shape[0] != n || x.shape[1] != c ||
          n * c * hw != ops::numel(x.shape)) {
        s.a.bad(fmt::format("group norm arguments N={} C={} HxW={} group={} do not fit input {}", n, c, hw, g,
                            x.shape.to_string()),
                ErrorCode::invalid_argument);
      }
      const std::int64_t width = c / g * hw;
      std::string grouped = s.temp("grouped", OpTag::reshape, {s.in("input")},
                                   Attributes{{"shape", std::vector<std::int64_t>{n, g, width}}});
      std::string normed =
          s.temp("normed", OpTag::layer_norm, {grouped},
                 Attributes{{"normalized_shape", std::vector<std::int64_t>{width}}, {"eps", s.a.number("eps")}});
      std::vector<std::int64_t> shape(x.shape.begin(), x.shape.end());
      std::string y = s.temp("ungrouped", OpTag::reshape, {normed}, Attributes{{"shape", shape}});
      std::vector<std::int64_t> per_channel(x.shape.size() - 1, 1);
      per_channel[0] = c;
      if (auto w = s.a.optional_tensor("weight")) {
        y = s.temp("scale", OpTag::mul,
                   {y, s.temp("weight", OpTag::reshape, {s.L.value(*w, s.a)}, Attributes{{"shape", per_channel}})});
      }
      if (auto b = s.a.optional_tensor("bias")) {
        y = s.temp("shift", OpTag::add,
                   {y, s.temp("bias", OpTag::reshape, {s.L.value(*b, s.a)}, Attributes{{"shape", per_channel}})});
      }
      s.alias(y);  // mean and rstd (outputs 1 and 2) stay undefined, as for batch norm
    };
    t["pixel_shuffle"] =
        [](Step& s) {  // [N, C r^2, H, W] -> [N, C, r, r, H, W] -> [N, C, H, r, W, r] -> [N, C, H r, W r]
          const auto& x = s.in_meta("self").shape;
          const std::int64_t r = s.a.integer("upscale_factor");
          if (x.size() != 4 || r <= 0 || x[1] % (r * r) != 0)
            s.a.unsupported(fmt::format("pixel_shuffle of {} by {}", x.to_string(), r));
          const std::int64_t c = x[1] / (r * r);
          std::string split = s.temp("split", OpTag::reshape, {s.in("self")},
                                     Attributes{{"shape", std::vector<std::int64_t>{x[0], c, r, r, x[2], x[3]}}});
          std::string perm = s.temp("permute", OpTag::permute, {split},
                                    Attributes{{"dims", std::vector<std::int64_t>{0, 1, 4, 2, 5, 3}}});
          s.reshape_to(perm, s.out_meta().shape);
        };

    // Contractions.
    t["addmm"] = [](Step& s) {
      lower_product(s, s.in("mat1"), s.in("mat2"), s.in("self"), s.in_meta("self").shape.size() == 1,
                    s.a.number("beta"), s.a.number("alpha"));
    };
    t["mm"] = [](Step& s) { lower_product(s, s.in("self"), s.in("mat2"), std::nullopt, false, 1.0, 1.0); };
    t["bmm"] = [](Step& s) { s.emit(OpTag::matmul, {s.in("self"), s.in("mat2")}); };
    t["matmul"] = [](Step& s) { s.emit(OpTag::matmul, {s.in("self"), s.in("other")}); };
    t["baddbmm"] = [](Step& s) {
      lower_product(s, s.in("batch1"), s.in("batch2"), s.in("self"), false, s.a.number("beta"), s.a.number("alpha"));
    };
    t["linear"] = [](Step& s) {
      std::vector<std::string> inputs{s.in("input"), s.in("weight")};
      if (auto b = s.a.optional_tensor("bias")) inputs.push_back(s.L.value(*b, s.a));
      s.emit(OpTag::linear, inputs);
    };
    t["convolution"] = [](Step& s) {
      if (s.a.boolean("transposed")) s.a.unsupported("transposed convolution");
      const auto& x = s.in_meta("input").shape;
      const bool one_d = x.size() == 3;
      if (x.size() != 4 && !one_d) s.a.unsupported(fmt::format("a {}-D convolution input", x.size()));
      auto two = [&](std::string_view arg, std::int64_t pad_value) {
        auto v = s.a.ints(arg);
        if (one_d) {
          if (v.size() != 1) s.a.bad(fmt::format("argument '{}' needs 1 entry for a 1-D convolution", arg));
          return std::vector<std::int64_t>{pad_value, v[0]};
        }
        return pair_of(s.a, arg, v);
      };
      Attributes attrs{{"stride", two("stride", 1)},
                       {"padding", two("padding", 0)},
                       {"dilation", two("dilation", 1)},
                       {"groups", s.a.integer("groups")}};
      std::string input = s.in("input");
      std::string weight = s.in("weight");
      if (one_d) {
        const auto& w = s.in_meta("weight").shape;
        input = s.temp("input2d", OpTag::reshape, {input},
                       Attributes{{"shape", std::vector<std::int64_t>{x[0], x[1], 1, x[2]}}});
        weight = s.temp("weight2d", OpTag::reshape, {weight},
                        Attributes{{"shape", std::vector<std::int64_t>{w[0], w[1], 1, w[2]}}});
      }
      std::vector<std::string> inputs{input, weight};
      if (auto b = s.a.optional_tensor("bias")) inputs.push_back(s.L.value(*b, s.a));
      if (one_d) {
        std::string c = s.temp("conv2d", OpTag::conv2d, inputs, attrs);
        s.reshape_to(c, s.out_meta().shape);
      } else {
        s.emit(OpTag::conv2d, inputs, attrs);
      }
    };
    t["scaled_dot_product_attention"] = [](Step& s) {
      if (s.a.has("dropout_p") && s.a.number("dropout_p") != 0.0) s.a.unsupported("attention dropout");
      std::vector<std::string> inputs{s.in("query"), s.in("key"), s.in("value")};
      if (auto m = s.a.optional_tensor("attn_mask")) inputs.push_back(s.L.value(*m, s.a));
      Attributes attrs{{"is_causal", s.a.has("is_causal") && s.a.boolean("is_causal")}};
      if (s.a.has("scale") && !s.a.is_none("scale")) attrs.set("scale", s.a.number("scale"));
      s.emit(OpTag::scaled_dot_product_attention, inputs, attrs);
    };
    t["embedding"] = [](Step& s) {
      Attributes attrs;
      if (s.a.has("padding_idx") && s.a.integer("padding_idx") >= 0)
        attrs.set("padding_idx", s.a.integer("padding_idx"));
      s.emit(OpTag::embedding, {s.in("weight"), s.in("indices")}, attrs);
    };

    // Normalisation.
    auto batch_norm = [](Step& s) {
      if (s.a.has("training") && s.a.boolean("training"))
        s.a.unsupported("training-mode batch norm in an inference capture");
      const auto& x = s.in_meta("input");
      const Dims c{x.shape.size() >= 2 ? x.shape[1] : 0};
      auto vec = [&](std::string_view arg, double fill) {
        if (auto t = s.a.optional_tensor(arg)) return s.L.value(*t, s.a);
        if (arg == "running_mean" || arg == "running_var") s.a.unsupported("batch norm without running statistics");
        return s.L.constant(fmt::format("{}/{}", s.out(), arg), filled(c, fill, x.dtype));
      };
      std::vector<std::string> inputs{s.in("input"), vec("weight", 1.0), vec("bias", 0.0), vec("running_mean", 0.0),
                                      vec("running_var", 1.0)};
      // save_mean / save_invstd (outputs 1 and 2) stay undefined: only a training backward reads them.
      s.emit(OpTag::batch_norm, inputs, Attributes{{"eps", s.a.number("eps")}, {"momentum", s.a.number("momentum")}});
    };
    t["native_batch_norm"] = batch_norm;
    t["_native_batch_norm_legit_no_training"] = batch_norm;
    t["batch_norm"] = batch_norm;
    t["_batch_norm_impl_index"] = batch_norm;
    auto layer_norm = [](Step& s) {
      const auto ns = s.a.ints("normalized_shape");
      Attributes attrs{{"normalized_shape", ns}, {"eps", s.a.number("eps")}};
      std::vector<std::string> inputs{s.in("input")};
      auto w = s.a.optional_tensor("weight");
      auto b = s.a.optional_tensor("bias");
      if (w || b) {
        const DType dt = s.in_meta("input").dtype;
        Dims shape;
        for (auto e : ns) shape.push_back(e);
        inputs.push_back(w ? s.L.value(*w, s.a)
                           : s.L.constant(fmt::format("{}/weight", s.out()), filled(shape, 1.0, dt)));
        if (b) inputs.push_back(s.L.value(*b, s.a));
      }
      s.emit(OpTag::layer_norm, inputs, attrs);
    };
    t["native_layer_norm"] = layer_norm;
    t["layer_norm"] = layer_norm;
    t["_softmax"] = [](Step& s) { s.emit(OpTag::softmax, {s.in("self")}, Attributes{{"dim", s.a.integer("dim")}}); };
    t["softmax"] = t["_softmax"];
    t["_log_softmax"] = [](Step& s) {
      s.emit(OpTag::log_softmax, {s.in("self")}, Attributes{{"dim", s.a.integer("dim")}});
    };
    t["log_softmax"] = t["_log_softmax"];

    // Pooling and reductions.
    auto max_pool = [](Step& s) {
      const auto k = pair_of(s.a, "kernel_size", s.a.ints("kernel_size"));
      auto stride = s.a.ints("stride");
      Attributes attrs{{"kernel_size", k},
                       {"stride", stride.empty() ? k : pair_of(s.a, "stride", stride)},
                       {"padding", pair_of(s.a, "padding", s.a.ints("padding"))},
                       {"dilation", pair_of(s.a, "dilation", s.a.ints("dilation"))},
                       {"ceil_mode", s.a.boolean("ceil_mode")}};
      // The indices (output 1) stay undefined: a node that reads them fails as reading an unproduced tensor.
      s.emit(OpTag::max_pool2d, {s.in("self")}, attrs);
    };
    t["max_pool2d_with_indices"] = max_pool;
    t["max_pool2d"] = max_pool;
    t["avg_pool2d"] = [](Step& s) {
      if (!s.a.is_none("divisor_override")) s.a.unsupported("avg_pool2d with divisor_override");
      const auto k = pair_of(s.a, "kernel_size", s.a.ints("kernel_size"));
      auto stride = s.a.ints("stride");
      s.emit(OpTag::avg_pool2d, {s.in("self")},
             Attributes{{"kernel_size", k},
                        {"stride", stride.empty() ? k : pair_of(s.a, "stride", stride)},
                        {"padding", pair_of(s.a, "padding", s.a.ints("padding"))},
                        {"ceil_mode", s.a.boolean("ceil_mode")},
                        {"count_include_pad", s.a.boolean("count_include_pad")}});
    };
    t["_adaptive_avg_pool2d"] = [](Step& s) {
      s.emit(OpTag::adaptive_avg_pool2d, {s.in("self")},
             Attributes{{"output_size", pair_of(s.a, "output_size", s.a.ints("output_size"))}});
    };
    t["adaptive_avg_pool2d"] = t["_adaptive_avg_pool2d"];
    static constexpr auto reduce = [](Step& s, OpTag op) {
      if (s.a.has("dtype") && !s.a.is_none("dtype")) s.a.unsupported("a reduction with a dtype");
      Attributes attrs{{"keepdim", s.a.has("keepdim") && s.a.boolean("keepdim")}};
      if (s.a.has("dim") && !s.a.is_none("dim")) attrs.set("dims", s.a.ints("dim"));
      s.emit(op, {s.in("self")}, attrs);
    };
    t["mean"] = [](Step& s) { reduce(s, OpTag::mean); };
    t["sum"] = [](Step& s) { reduce(s, OpTag::sum); };
    t["amax"] = [](Step& s) { reduce(s, OpTag::max); };

    // Structure.
    t["cat"] = [](Step& s) {
      std::vector<std::string> inputs;
      for (const auto& name : s.a.tensors("tensors")) {
        // torch.cat skips empty 1-D tensors; so does this lowering.
        const auto& m = s.L.meta(name, s.a);
        if (m.shape.size() == 1 && m.shape[0] == 0) continue;
        inputs.push_back(s.L.value(name, s.a));
      }
      if (inputs.empty()) s.a.unsupported("cat of empty tensors only");
      s.emit(OpTag::concat, inputs, Attributes{{"dim", s.a.has("dim") ? s.a.integer("dim") : 0}});
    };
    t["concat"] = t["cat"];
    t["stack"] = [](Step& s) {
      std::vector<std::string> inputs;
      const auto names = s.a.tensors("tensors");
      const std::int64_t dim = s.a.has("dim") ? s.a.integer("dim") : 0;
      std::size_t k = 0;
      for (const auto& name : names) {
        const auto& m = s.L.meta(name, s.a).shape;
        const int d = ops::normalize_dim("stack", dim, m.size() + 1);
        Dims shape;
        for (int i = 0; i <= m.size(); ++i) {
          if (i == d) shape.push_back(1);
          if (i < m.size()) shape.push_back(m[i]);
        }
        inputs.push_back(s.temp(fmt::format("unsqueeze{}", k++), OpTag::reshape, {s.L.value(name, s.a)},
                                Attributes{{"shape", std::vector<std::int64_t>(shape.begin(), shape.end())}}));
      }
      s.emit(OpTag::concat, inputs, Attributes{{"dim", dim}});
    };
    t["slice"] = [](Step& s) {
      const auto& shape = s.in_meta("self").shape;
      const std::int64_t dim = s.a.has("dim") ? s.a.integer("dim") : 0;
      const int d = ops::normalize_dim("slice", dim, shape.size());
      const auto start = s.a.optional_integer("start").value_or(0);
      const auto end = s.a.optional_integer("end").value_or(std::numeric_limits<std::int64_t>::max());
      const auto step = s.a.has("step") ? s.a.integer("step") : 1;
      auto [lo, hi] = clamp_slice(start, end, shape[d]);
      if (lo == 0 && hi == shape[d] && step == 1) {
        s.alias(s.in("self"));
        return;
      }
      s.emit(OpTag::slice, {s.in("self")},
             Attributes{{"dim", std::int64_t{d}}, {"start", lo}, {"end", hi}, {"step", step}});
    };
    t["select"] = [](Step& s) {
      const auto& shape = s.in_meta("self").shape;
      const int d = ops::normalize_dim("select", s.a.integer("dim"), shape.size());
      std::int64_t index = s.a.integer("index");
      if (index < -shape[d] || index >= shape[d]) {
        s.a.bad(fmt::format("index {} is out of range for extent {}", index, shape[d]), ErrorCode::index_out_of_range);
      }
      if (index < 0) index += shape[d];
      std::string piece = s.temp("slice", OpTag::slice, {s.in("self")},
                                 Attributes{{"dim", std::int64_t{d}}, {"start", index}, {"end", index + 1}});
      s.reshape_to(piece, s.out_meta().shape);
    };
    t["split"] = [](Step& s) {
      const auto& shape = s.in_meta("self").shape;
      const std::int64_t dim = s.a.has("dim") ? s.a.integer("dim") : 0;
      const int d = ops::normalize_dim("split", dim, shape.size());
      const std::int64_t size = s.a.integer("split_size");
      if (size <= 0) s.a.bad("split_size must be positive", ErrorCode::invalid_argument);
      std::vector<std::int64_t> sizes;
      for (std::int64_t at = 0; at < shape[d]; at += size) sizes.push_back(std::min(size, shape[d] - at));
      lower_split(s, sizes, dim, false);
    };
    t["split_with_sizes"] = [](Step& s) {
      lower_split(s, s.a.ints("split_sizes"), s.a.has("dim") ? s.a.integer("dim") : 0, false);
    };
    t["unbind"] = [](Step& s) {
      const auto& shape = s.in_meta("self").shape;
      const std::int64_t dim = s.a.has("dim") ? s.a.integer("dim") : 0;
      const int d = ops::normalize_dim("unbind", dim, shape.size());
      lower_split(s, std::vector<std::int64_t>(static_cast<std::size_t>(shape[d]), 1), dim, true);
    };
    return t;
  }();
  return table;
}

/// Splits "aten.add.Tensor" into the op packet ("add") and checks the namespace.
std::string packet_of(const std::string& target, const std::string& node, std::string_view where) {
  if (target.rfind("aten.", 0) != 0) {
    fail(ErrorCode::unsupported, where, fmt::format("node '{}': target '{}' is not an ATen operator", node, target));
  }
  const auto rest = target.substr(5);
  const auto dot = rest.find('.');
  return dot == std::string::npos ? rest : rest.substr(0, dot);
}

std::vector<std::string> output_names(const Json& node, std::string_view where, const std::string& path) {
  const Json& outs = field(node, "outputs", where, path);
  if (!outs.is_array()) fail(ErrorCode::parse_error, where, fmt::format("{}.outputs is not a list", path));
  std::vector<std::string> names;
  for (const auto& o : outs) {
    if (o.is_object() && o.contains("as_tensor") && o["as_tensor"].is_object() && o["as_tensor"].contains("name") &&
        o["as_tensor"]["name"].is_string()) {
      names.push_back(o["as_tensor"]["name"].get<std::string>());
    } else if (o.is_object() && o.contains("as_tensors") && o["as_tensors"].is_array()) {
      for (const auto& t : o["as_tensors"]) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
          fail(ErrorCode::parse_error, where, fmt::format("{}.outputs holds a malformed tensor reference", path));
        }
        names.push_back(t["name"].get<std::string>());
      }
    } else if (o.is_object() && o.contains("as_none")) {
      names.emplace_back();
    } else {
      fail(ErrorCode::parse_error, where, fmt::format("{}.outputs holds a malformed entry", path));
    }
  }
  return names;
}

std::string innermost_module(const Json& node) {
  auto md = node.find("metadata");
  if (md == node.end() || !md->is_object()) return {};
  auto st = md->find("nn_module_stack");
  if (st == md->end() || !st->is_array() || st->empty()) return {};
  const Json& last = st->back();
  if (last.is_object() && last.contains("path") && last["path"].is_string()) return last["path"].get<std::string>();
  return {};
}

}  // namespace

TorchImport import_torch_graph(std::string_view json_text, std::string_view where) {
  const Json doc = parse_json(json_text, where);
  if (!doc.is_object()) fail(ErrorCode::parse_error, where, "the document is not an object");
  const std::string schema = string_field(doc, "schema", where, "document");
  if (schema != kTorchExportSchema) {
    fail(ErrorCode::parse_error, where, fmt::format("schema '{}' is not {}", schema, kTorchExportSchema));
  }
  TorchImport result;
  if (auto c = doc.find("capture");
      c != doc.end() && c->is_object() && c->contains("method") && (*c)["method"].is_string()) {
    result.capture_method = (*c)["method"].get<std::string>();
  }
  const Json& graph = field(doc, "graph", where, "document");
  const Json& nodes = field(graph, "nodes", where, "graph");
  const Json& values = field(graph, "tensor_values", where, "graph");
  const Json& signature = field(doc, "signature", where, "document");
  const Json& in_specs = field(signature, "input_specs", where, "signature");
  const Json& out_specs = field(signature, "output_specs", where, "signature");
  if (!nodes.is_array()) fail(ErrorCode::parse_error, where, "graph.nodes is not a list");
  if (!values.is_object()) fail(ErrorCode::parse_error, where, "graph.tensor_values is not an object");
  if (!in_specs.is_array() || !out_specs.is_array())
    fail(ErrorCode::parse_error, where, "signature specs are not lists");

  Lowering L(where);
  for (auto it = values.begin(); it != values.end(); ++it) {
    L.declare_meta(it.key(), tensor_meta(it.value(), where, fmt::format("tensor_values['{}']", it.key())));
  }

  // Sources, in signature order.
  for (std::size_t i = 0; i < in_specs.size(); ++i) {
    const auto path = fmt::format("signature.input_specs[{}]", i);
    TorchSource src;
    src.name = string_field(in_specs[i], "name", where, path);
    const std::string kind = string_field(in_specs[i], "kind", where, path);
    if (kind == "user_input") {
      src.kind = TorchSource::Kind::user_input;
    } else if (kind == "parameter") {
      src.kind = TorchSource::Kind::parameter;
    } else if (kind == "buffer") {
      src.kind = TorchSource::Kind::buffer;
      if (auto p = in_specs[i].find("persistent"); p != in_specs[i].end() && p->is_boolean())
        src.persistent = p->get<bool>();
    } else if (kind == "constant") {
      src.kind = TorchSource::Kind::constant;
    } else {
      fail(ErrorCode::parse_error, where, fmt::format("{}: unknown kind '{}'", path, kind));
    }
    auto m = values.find(src.name);
    if (m == values.end()) {
      fail(ErrorCode::invalid_argument, where,
           fmt::format("{}: input '{}' has no entry in tensor_values", path, src.name));
    }
    src.type = tensor_meta(*m, where, fmt::format("tensor_values['{}']", src.name));
    const OpTag op = src.kind == TorchSource::Kind::user_input ? OpTag::input
                     : src.kind == TorchSource::Kind::constant ? OpTag::constant
                                                               : OpTag::parameter;
    L.source(src.name, op, src.type, src.kind == TorchSource::Kind::parameter && is_floating(src.type.dtype),
             src.kind == TorchSource::Kind::buffer);
    L.define(src.name, src.name, path);
    result.sources.push_back(std::move(src));
  }

  // Nodes, in captured order (each reads only tensors produced before it).
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto path = fmt::format("graph.nodes[{}]", i);
    const std::string name = string_field(nodes[i], "name", where, path);
    const std::string target = string_field(nodes[i], "target", where, fmt::format("node '{}'", name));
    const std::string packet = packet_of(target, name, where);
    const auto outs = output_names(nodes[i], where, fmt::format("node '{}'", name));
    Args args(nodes[i], name, target, where);
    const auto& table = lowerings();
    auto fn = table.find(packet);
    if (fn == table.end()) {
      fail(ErrorCode::unsupported, where,
           fmt::format("node '{}': target '{}' is not supported by the importer", name, target));
    }
    L.set_module(innermost_module(nodes[i]));
    Step step{L, args, outs};
    fn->second(step);
    for (const auto& o : outs) {
      if (!o.empty() && !L.has_meta(o)) {
        fail(ErrorCode::invalid_argument, where,
             fmt::format("node '{}': output '{}' has no entry in tensor_values", name, o));
      }
    }
  }
  result.aten_nodes = nodes.size();

  // Outputs.
  std::vector<std::string> graph_outputs;
  for (std::size_t i = 0; i < out_specs.size(); ++i) {
    const auto path = fmt::format("signature.output_specs[{}]", i);
    TorchOutput out;
    out.name = string_field(out_specs[i], "name", where, path);
    const Json& arg = field(out_specs[i], "arg", where, path);
    const Json& t = field(arg, "as_tensor", where, path + ".arg");
    const std::string tensor = string_field(t, "name", where, path + ".arg.as_tensor");
    auto v = L.values().find(tensor);
    if (v == L.values().end()) {
      fail(ErrorCode::invalid_argument, where,
           fmt::format("{}: output '{}' names tensor '{}', which no node produces", path, out.name, tensor));
    }
    out.node = v->second;
    for (const auto& prev : result.outputs) {
      if (prev.name == out.name)
        fail(ErrorCode::invalid_argument, where, fmt::format("{}: output name '{}' repeats", path, out.name));
    }
    if (std::find(graph_outputs.begin(), graph_outputs.end(), out.node) == graph_outputs.end())
      graph_outputs.push_back(out.node);
    result.outputs.push_back(std::move(out));
  }
  if (result.outputs.empty()) fail(ErrorCode::invalid_argument, where, "the signature names no outputs");

  // Dead-node elimination (user inputs always stay: they are the model's interface).
  auto& all = L.nodes();
  std::unordered_map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < all.size(); ++i) at[all[i].id] = i;
  std::vector<bool> live(all.size(), false);
  std::vector<std::size_t> work;
  work.reserve(graph_outputs.size());
  for (const auto& o : graph_outputs) work.push_back(at.at(o));
  while (!work.empty()) {
    const std::size_t k = work.back();
    work.pop_back();
    if (live[k]) continue;
    live[k] = true;
    for (const auto& in : all[k].inputs) work.push_back(at.at(in));
  }
  std::vector<Node> kept;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (live[i] || all[i].op == OpTag::input) kept.push_back(std::move(all[i]));
  }
  std::set<std::string> kept_ids;
  for (const auto& n : kept) kept_ids.insert(n.id);

  try {
    result.graph = validate(std::move(kept), std::move(graph_outputs));
  } catch (const Error& e) {
    throw_error(e.code(), std::string(kWhere), fmt::format("{}: {}", where, e.what()));
  }

  // Every kept captured tensor must have the type the capture recorded.
  for (const auto& [tensor, id] : L.values()) {
    if (!kept_ids.count(id)) continue;
    const Node* n = result.graph.find(id);
    const TensorType& want = L.metas().at(tensor);
    if (n != nullptr && !(n->type == want)) {
      fail(ErrorCode::invalid_argument, where,
           fmt::format("node '{}': tensor '{}' is captured as {}{} but lowers to {}{}", L.produced_by().at(tensor),
                       tensor, dtype_name(want.dtype), want.shape.to_string(), dtype_name(n->type.dtype),
                       n->type.shape.to_string()));
    }
  }
  for (auto& [id, t] : L.synthesized()) {
    if (kept_ids.count(id)) result.synthesized.emplace(id, std::move(t));
  }
  for (auto& [id, m] : L.module_of()) {
    if (kept_ids.count(id)) result.module_of.emplace(id, m);
  }
  return result;
}

std::vector<std::string> supported_aten_targets() {
  std::vector<std::string> out;
  for (const auto& [k, fn] : lowerings()) out.push_back(k);
  std::sort(out.begin(), out.end());
  return out;
}

void check_torch_weights(const TorchImport& model, const SafetensorsFile& weights, std::string_view where) {
  for (const auto& src : model.sources) {
    if (src.kind == TorchSource::Kind::user_input || model.graph.find(src.name) == nullptr) continue;
    const Tensor* t = weights.find(src.name);
    if (t == nullptr) {
      throw_error(ErrorCode::invalid_argument, std::string(kWhere),
                  fmt::format("{}: weight '{}' is missing", where, src.name));
    }
    if (t->dtype() != src.type.dtype || !(t->shape() == src.type.shape)) {
      throw_error(
          ErrorCode::invalid_argument, std::string(kWhere),
          fmt::format("{}: weight '{}' is {}{} but the graph declares {}{}", where, src.name, dtype_name(t->dtype()),
                      t->shape().to_string(), dtype_name(src.type.dtype), src.type.shape.to_string()));
    }
  }
}

std::map<std::string, TensorView> TorchBundle::state() const {
  std::map<std::string, TensorView> out;
  for (const auto& src : model.sources) {
    if (src.kind == TorchSource::Kind::user_input || model.graph.find(src.name) == nullptr) continue;
    if (const Tensor* t = weights.find(src.name)) out.emplace(src.name, t->as_view());
  }
  for (const auto& [id, t] : model.synthesized) out.emplace(id, t.as_view());
  return out;
}

TorchBundle load_torch_export(const std::string& dir) {
  const std::string graph_path = dir + "/graph.json";
  TorchBundle bundle{import_torch_graph(read_file(graph_path, kWhere), graph_path),
                     read_safetensors(dir + "/weights.safetensors")};
  check_torch_weights(bundle.model, bundle.weights, dir + "/weights.safetensors");
  return bundle;
}

}  // namespace pact::ir
