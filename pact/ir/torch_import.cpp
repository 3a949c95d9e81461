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
  std::string s = v.get<std::string>();
  if (has_control_characters(s))
    fail(ErrorCode::parse_error, where, fmt::format("{}.{} holds a control character", path, key));
  return s;
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
    const auto x = json_int64(sizes[i]);
    if (!x || *x < 0) {
      fail(ErrorCode::parse_error, where, fmt::format("{}.sizes[{}] is not a non-negative int64 integer", path, i));
    }
    t.shape.push_back(*x);
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
  return Tensor::full(shape, dtype, value);
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
  /// A tensor list whose entries may be None (aten.index's indices): as_tensors, or as_optional_tensors of
  /// {"as_tensor"} and {"as_none"} entries.
  std::vector<std::optional<std::string>> optional_tensors(std::string_view name) const {
    const Json& a = raw(name);
    std::vector<std::optional<std::string>> out;
    if (a.contains("as_tensors")) {
      for (const auto& t : tensors(name)) out.emplace_back(t);
      return out;
    }
    const Json& list = payload(name, "as_optional_tensors");
    if (!list.is_array()) bad(fmt::format("argument '{}' is not a list", name));
    for (const auto& t : list) {
      if (t.is_object() && t.size() == 1 && t.contains("as_none")) {
        out.emplace_back(std::nullopt);
      } else if (t.is_object() && t.size() == 1 && t.contains("as_tensor")) {
        out.emplace_back(tensor_ref(t["as_tensor"], name));
      } else {
        bad(fmt::format("argument '{}' holds an entry that is neither a tensor nor None", name));
      }
    }
    return out;
  }
  std::int64_t integer(std::string_view name) const {
    const Json& v = payload(name, "as_int");
    const auto x = json_int64(v);
    if (!x) bad(fmt::format("argument '{}' is not an int64 integer", name));
    return *x;
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
      const auto i = json_int64(x);
      if (!i) bad(fmt::format("argument '{}' holds a non-integer or one beyond int64", name));
      out.push_back(*i);
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
#include "pact/ir/torch_lowerings.inc"

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

// The innermost nn.Module path of a node's stack; every frame's class goes into `types` (path -> type; the
// first a path is seen with stands).
std::string innermost_module(const Json& node, std::map<std::string, std::string>& types) {
  auto md = node.find("metadata");
  if (md == node.end() || !md->is_object()) return {};
  auto st = md->find("nn_module_stack");
  if (st == md->end() || !st->is_array() || st->empty()) return {};
  for (const Json& frame : *st) {
    if (!frame.is_object()) continue;
    auto path = frame.find("path");
    auto type = frame.find("type");
    if (path != frame.end() && path->is_string() && type != frame.end() && type->is_string())
      types.emplace(path->get<std::string>(), type->get<std::string>());
  }
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
  if (auto c = doc.find("capture"); c != doc.end() && c->is_object() && c->contains("structure_only")) {
    if (!(*c)["structure_only"].is_boolean())
      fail(ErrorCode::parse_error, where, "capture.structure_only is not a boolean");
    result.structure_only = (*c)["structure_only"].get<bool>();
  }
  const Json& graph = field(doc, "graph", where, "document");
  const Json& nodes = field(graph, "nodes", where, "graph");
  const Json& values = field(graph, "tensor_values", where, "graph");
  const Json& signature = field(doc, "signature", where, "document");
  const Json& in_specs = field(signature, "input_specs", where, "signature");
  const Json& out_specs = field(signature, "output_specs", where, "signature");
  if (!nodes.is_array()) fail(ErrorCode::parse_error, where, "graph.nodes is not a list");
  if (nodes.size() > kMaxGraphNodes) {
    fail(ErrorCode::parse_error, where,
         fmt::format("graph.nodes holds {} nodes; the limit is {} (docs/limits.md)", nodes.size(), kMaxGraphNodes));
  }
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

  // Every operator the importer has no lowering for, all named at once (a user porting a model wants the
  // whole list, not one per attempt): each distinct target, its first node and how many nodes use it.
  {
    struct Missing {
      std::string target, first;
      std::size_t nodes = 0;
    };
    std::vector<Missing> missing;
    const auto& table = lowerings();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto path = fmt::format("graph.nodes[{}]", i);
      const std::string name = string_field(nodes[i], "name", where, path);
      const std::string target = string_field(nodes[i], "target", where, fmt::format("node '{}'", name));
      if (target.rfind("aten.", 0) == 0) {
        const auto rest = target.substr(5);
        if (table.count(rest.substr(0, rest.find('.')))) continue;
      }
      auto it = std::find_if(missing.begin(), missing.end(), [&](const Missing& m) { return m.target == target; });
      if (it == missing.end()) it = missing.insert(missing.end(), Missing{target, name, 0});
      ++it->nodes;
    }
    if (!missing.empty()) {
      std::string list;
      std::size_t total = 0;
      for (const auto& m : missing) {
        list += fmt::format("\n  {} (node '{}'{})", printable(m.target), printable(m.first),
                            m.nodes > 1 ? fmt::format(" and {} more", m.nodes - 1) : std::string());
        total += m.nodes;
      }
      fail(ErrorCode::unsupported, where,
           fmt::format("the importer does not support {} operator{} ({} node{}):{}", missing.size(),
                       missing.size() == 1 ? "" : "s", total, total == 1 ? "" : "s", list));
    }
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
    L.set_module(innermost_module(nodes[i], result.module_type));
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
  TorchBundle bundle{import_torch_graph(read_file(graph_path, kWhere), graph_path), {}};
  if (bundle.model.structure_only) return bundle;  // shapes only: there are no weights to read
  bundle.weights = read_safetensors(dir + "/weights.safetensors");
  check_torch_weights(bundle.model, bundle.weights, dir + "/weights.safetensors");
  return bundle;
}

void require_weights(const TorchImport& model, std::string_view dir, std::string_view what) {
  if (!model.structure_only) return;
  throw_error(ErrorCode::unsupported, std::string(what),
              fmt::format("structure_only_values_unsupported: {} is a structure-only capture (tools/torch_export.py "
                          "--structure-only): it holds shapes "
                          "and no weights; plan and estimate it with pact capture {} --structure-only",
                          dir, dir));
}

}  // namespace pact::ir
