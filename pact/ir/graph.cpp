#include "pact/ir/graph.hpp"

#include <fmt/format.h>

#include <map>
#include <queue>
#include <unordered_map>

#include "pact/core/file.hpp"

namespace pact::ir {

std::optional<std::string> Graph::binding_mismatch(const Node& n, DType dtype, const Dims& shape) {
  if (dtype == n.type.dtype && shape == n.type.shape) return std::nullopt;
  return fmt::format("'{}' is bound to {}{}; the graph declares {}{}", n.id, dtype_name(dtype), shape.to_string(),
                     dtype_name(n.type.dtype), n.type.shape.to_string());
}

const Node* Graph::find(std::string_view id) const noexcept {
  for (const auto& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

namespace {

[[noreturn]] void bad_node(ErrorCode code, const std::string& id, const std::string& why) {
  throw_error(code, "ir.validate", fmt::format("node '{}': {}", id, why));
}

}  // namespace

Graph validate(std::vector<Node> nodes, std::vector<std::string> outputs) {
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id.empty())
      throw_error(ErrorCode::invalid_argument, "ir.validate", fmt::format("node {} has an empty id", i));
    if (!index.emplace(nodes[i].id, i).second) bad_node(ErrorCode::invalid_argument, nodes[i].id, "duplicate id");
    if (ops::op_info(nodes[i].op).role == ops::OpRole::update) {
      bad_node(ErrorCode::invalid_argument, nodes[i].id,
               fmt::format("op '{}' updates state in place; no graph holds one (the planner admits it for a "
                           "training plan)",
                           ops::op_kind(nodes[i].op)));
    }
  }
  // Dangling references, then a topological order (Kahn); anything left over sits on a cycle.
  std::vector<std::vector<std::size_t>> users(nodes.size());
  std::vector<std::size_t> pending(nodes.size(), 0);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& in : nodes[i].inputs) {
      auto it = index.find(in);
      if (it == index.end())
        bad_node(ErrorCode::invalid_argument, nodes[i].id, fmt::format("input '{}' does not exist", in));
      users[it->second].push_back(i);
      ++pending[i];
    }
  }
  // Kahn's algorithm taking the lowest index first, so a list already in dependency order keeps its order
  // (and a wire round trip reproduces the document).
  std::vector<std::size_t> order;
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  while (!ready.empty()) {
    const std::size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (std::size_t u : users[i]) {
      if (--pending[u] == 0) ready.push(u);
    }
  }
  if (order.size() != nodes.size()) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (pending[i] != 0) bad_node(ErrorCode::invalid_argument, nodes[i].id, "lies on a cycle");
    }
  }
  Graph g;
  g.nodes.reserve(nodes.size());
  std::unordered_map<std::string, std::size_t> placed;
  for (std::size_t i : order) {
    Node n = std::move(nodes[i]);
    const auto& info = ops::op_info(n.op);
    std::vector<ops::TensorType> in_types;
    in_types.reserve(n.inputs.size());
    for (const auto& in : n.inputs) in_types.push_back(g.nodes[placed.at(in)].type);
    ops::TensorType inferred;
    try {
      inferred = ops::infer_type(n.op, in_types, n.attrs);
    } catch (const Error& e) {
      bad_node(e.code(), n.id, e.what());
    }
    if (n.type_declared && !(n.type == inferred)) {
      bad_node(
          ErrorCode::invalid_argument, n.id,
          fmt::format("declared type {}{} but the {} shape rule gives {}{}", dtype_name(n.type.dtype),
                      n.type.shape.to_string(), info.kind, dtype_name(inferred.dtype), inferred.shape.to_string()));
    }
    if (n.op != ops::OpTag::parameter && (n.differentiable || n.buffer)) {
      bad_node(ErrorCode::invalid_argument, n.id, "only parameters carry differentiable/buffer flags");
    }
    if (n.buffer && n.differentiable) bad_node(ErrorCode::invalid_argument, n.id, "a buffer is not differentiable");
    n.type = inferred;
    placed.emplace(n.id, g.nodes.size());
    g.nodes.push_back(std::move(n));
  }
  if (outputs.empty()) throw_error(ErrorCode::invalid_argument, "ir.validate", "the graph names no outputs");
  for (const auto& o : outputs) {
    if (!placed.count(o))
      throw_error(ErrorCode::invalid_argument, "ir.validate", fmt::format("output '{}' does not exist", o));
  }
  g.outputs = std::move(outputs);
  return g;
}

// ---- wire format v1 ----------------------------------------------------------------------------------

namespace {

[[noreturn]] void bad_field(const std::string& where, const std::string& field, const std::string& why) {
  throw_error(ErrorCode::parse_error, "ir.parse", fmt::format("{}: {}: {}", where, field, why));
}

ops::AttrValue attr_from_json(const std::string& where, const std::string& field, const Json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) {
    const auto i = json_int64(v);
    if (!i) bad_field(where, field, "integer beyond int64");
    return *i;
  }
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::vector<std::int64_t> list;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const auto x = json_int64(v[i]);
      if (!x) bad_field(where, fmt::format("{}[{}]", field, i), "lists hold int64 integers only");
      list.push_back(*x);
    }
    return list;
  }
  bad_field(where, field, fmt::format("unsupported attribute value of type {}", v.type_name()));
}

const Json& require(const std::string& where, const Json& obj, const std::string& path, const char* key) {
  if (!obj.is_object() || !obj.contains(key)) bad_field(where, path + "." + key, "missing");
  return obj.at(key);
}

}  // namespace

Json attributes_to_json(const ops::Attributes& attrs) {
  Json out = Json::object();
  for (const auto& [k, v] : attrs.values()) out[k] = std::visit([](const auto& x) { return Json(x); }, v);
  return out;
}

ops::Attributes attributes_from_json(const Json& attrs, std::string_view where_view, std::string_view field) {
  const std::string where(where_view), path(field);
  if (!attrs.is_object()) bad_field(where, path, "not an object");
  ops::Attributes out;
  for (const auto& [key, value] : attrs.items()) out.set(key, attr_from_json(where, path + "." + key, value));
  return out;
}

Graph parse_graph(std::string_view json_text, std::string_view where_view) {
  const std::string where(where_view);
  Json doc = parse_json(json_text, where);
  if (!doc.is_object()) bad_field(where, "$", "the document is not an object");
  const Json& format = require(where, doc, "$", "format");
  if (!format.is_string() || format.get<std::string>() != kWireFormat) {
    bad_field(where, "$.format", fmt::format("expected \"{}\"", kWireFormat));
  }
  const Json& jnodes = require(where, doc, "$", "nodes");
  if (!jnodes.is_array()) bad_field(where, "$.nodes", "not an array");
  if (jnodes.size() > kMaxGraphNodes)
    bad_field(where, "$.nodes",
              fmt::format("{} nodes; the limit is {} (docs/limits.md)", jnodes.size(), kMaxGraphNodes));
  std::vector<Node> nodes;
  nodes.reserve(jnodes.size());
  for (std::size_t i = 0; i < jnodes.size(); ++i) {
    const Json& jn = jnodes[i];
    const std::string path = fmt::format("$.nodes[{}]", i);
    if (!jn.is_object()) bad_field(where, path, "not an object");
    for (const auto& item : jn.items()) {
      const std::string& key = item.key();
      static const char* known[] = {"id", "kind", "inputs", "attrs", "type", "differentiable", "buffer"};
      if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return key == k; }) ==
          std::end(known)) {
        bad_field(where, path + "." + key, "unknown field");
      }
    }
    Node n;
    const Json& id = require(where, jn, path, "id");
    if (!id.is_string()) bad_field(where, path + ".id", "not a string");
    n.id = id.get<std::string>();
    if (has_control_characters(n.id)) bad_field(where, path + ".id", "a node id holds a control character");
    const std::string npath = fmt::format("{} (node '{}')", path, n.id);
    const Json& kind = require(where, jn, npath, "kind");
    if (!kind.is_string()) bad_field(where, npath + ".kind", "not a string");
    try {
      n.op = ops::parse_op_kind(kind.get<std::string>());
    } catch (const Error&) {
      bad_field(where, npath + ".kind", fmt::format("unknown op kind '{}'", kind.get<std::string>()));
    }
    if (jn.contains("inputs")) {
      const Json& ins = jn.at("inputs");
      if (!ins.is_array()) bad_field(where, npath + ".inputs", "not an array");
      for (std::size_t k = 0; k < ins.size(); ++k) {
        if (!ins[k].is_string()) bad_field(where, fmt::format("{}.inputs[{}]", npath, k), "not a node id string");
        n.inputs.push_back(ins[k].get<std::string>());
      }
    }
    if (jn.contains("attrs")) n.attrs = attributes_from_json(jn.at("attrs"), where, npath + ".attrs");
    if (jn.contains("type")) {
      n.type_declared = true;
      const Json& t = jn.at("type");
      const Json& dt = require(where, t, npath + ".type", "dtype");
      const Json& sh = require(where, t, npath + ".type", "shape");
      if (!dt.is_string()) bad_field(where, npath + ".type.dtype", "not a string");
      try {
        n.type.dtype = parse_dtype(dt.get<std::string>());
      } catch (const Error& e) {
        bad_field(where, npath + ".type.dtype", e.what());
      }
      if (!sh.is_array() || sh.size() > static_cast<std::size_t>(kMaxRank))
        bad_field(where, npath + ".type.shape", "not a shape");
      for (const auto& e : sh) {
        const auto x = json_int64(e);
        if (!x || *x < 0) bad_field(where, npath + ".type.shape", "extents are non-negative int64 integers");
        n.type.shape.push_back(*x);
      }
    }
    for (const char* flag : {"differentiable", "buffer"}) {
      if (jn.contains(flag)) {
        if (!jn.at(flag).is_boolean()) bad_field(where, npath + "." + flag, "not a boolean");
        (std::string_view(flag) == "buffer" ? n.buffer : n.differentiable) = jn.at(flag).get<bool>();
      }
    }
    nodes.push_back(std::move(n));
  }
  const Json& jout = require(where, doc, "$", "outputs");
  if (!jout.is_array()) bad_field(where, "$.outputs", "not an array");
  std::vector<std::string> outputs;
  for (std::size_t i = 0; i < jout.size(); ++i) {
    if (!jout[i].is_string()) bad_field(where, fmt::format("$.outputs[{}]", i), "not a node id string");
    outputs.push_back(jout[i].get<std::string>());
  }
  return validate(std::move(nodes), std::move(outputs));
}

Graph load_graph(const std::string& path) { return parse_graph(read_file(path, "ir.load"), path); }

Json to_json(const Graph& g) {
  Json nodes = Json::array();
  for (const auto& n : g.nodes) {
    Json jn{{"id", n.id}, {"kind", std::string(ops::op_kind(n.op))}};
    if (!n.inputs.empty()) jn["inputs"] = n.inputs;
    if (!n.attrs.values().empty()) jn["attrs"] = attributes_to_json(n.attrs);
    jn["type"] = Json{{"dtype", std::string(dtype_name(n.type.dtype))},
                      {"shape", std::vector<std::int64_t>(n.type.shape.begin(), n.type.shape.end())}};
    if (n.differentiable) jn["differentiable"] = true;
    if (n.buffer) jn["buffer"] = true;
    nodes.push_back(std::move(jn));
  }
  return Json{{"format", std::string(kWireFormat)}, {"nodes", nodes}, {"outputs", g.outputs}};
}

// ---- builder -----------------------------------------------------------------------------------------

namespace {
ops::Attributes source_attrs(const Dims& shape, DType dtype) {
  return ops::Attributes{{"shape", std::vector<std::int64_t>(shape.begin(), shape.end())},
                         {"dtype", std::string(dtype_name(dtype))}};
}
}  // namespace

std::string GraphBuilder::input(std::string id, Dims shape, DType dtype) {
  nodes_.push_back(Node{id, ops::OpTag::input, {}, source_attrs(shape, dtype), {}, false, false, false});
  return id;
}
Node parameter_node(std::string id, const Dims& shape, DType dtype, bool differentiable, bool buffer) {
  return Node{std::move(id), ops::OpTag::parameter, {}, source_attrs(shape, dtype), {}, false, differentiable, buffer};
}

std::string GraphBuilder::parameter(std::string id, Dims shape, DType dtype, bool differentiable) {
  nodes_.push_back(parameter_node(id, shape, dtype, differentiable));
  return id;
}
std::string GraphBuilder::buffer(std::string id, Dims shape, DType dtype) {
  nodes_.push_back(parameter_node(id, shape, dtype, false, true));
  return id;
}
std::string GraphBuilder::op(std::string id, ops::OpTag tag, std::vector<std::string> inputs, ops::Attributes attrs) {
  nodes_.push_back(Node{id, tag, std::move(inputs), std::move(attrs), {}, false, false, false});
  return id;
}
void GraphBuilder::output(std::string id) { outputs_.push_back(std::move(id)); }
Graph GraphBuilder::build() const { return validate(nodes_, outputs_); }

}  // namespace pact::ir
