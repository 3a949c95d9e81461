#pragma once
/// The IR (SPEC §7): a graph of nodes (id, op tag, inputs, attributes, output type), named inputs,
/// outputs, parameters and buffers with differentiability flags; the v1 JSON wire format; structural and
/// shape validation; a small builder for models written in code.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/json.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::ir {

struct Node {
  std::string id;
  ops::OpTag op;
  std::vector<std::string> inputs;  ///< ids of the nodes this one reads, in operand order
  ops::Attributes attrs;
  ops::TensorType type;         ///< inferred by validate(); checked against a declared type
  bool type_declared = false;   ///< the document declared `type`: validate() requires it to match
  bool differentiable = false;  ///< parameters: receives gradients; buffers and inputs do not
  bool buffer = false;          ///< parameters only: persistent state that is not optimised (running stats)
};

/// A validated graph: nodes in a topological order, every type inferred by the op table's shape rules.
struct Graph {
  std::vector<Node> nodes;
  std::vector<std::string> outputs;  ///< ids of output nodes

  /// The node with this id, or nullptr.
  const Node* find(std::string_view id) const noexcept;
  /// Why a value of `dtype` and `shape` cannot be bound to source node `n` ("'x' is bound to f64[2, 3];
  /// the graph declares f32[2, 3]"), or nullopt when it can. The one check every runner of a graph uses.
  static std::optional<std::string> binding_mismatch(const Node& n, DType dtype, const Dims& shape);
};

/// The wire format's identity string.
inline constexpr std::string_view kWireFormat = "pact.ir.v1";

/// Most nodes a graph may hold (docs/limits.md); a larger document is refused before its nodes are built.
inline constexpr std::size_t kMaxGraphNodes = 100'000;

/// Parses and validates a v1 wire document. Every failure is pact::Error naming the node or field:
/// malformed JSON (parse_error with byte offset), unknown kind strings, wrong arity, bad attributes,
/// dangling references, cycles, duplicate ids, missing outputs, shape mismatches.
Graph parse_graph(std::string_view json_text, std::string_view where = "graph");
/// Reads a file and parses it; io_error when unreadable.
Graph load_graph(const std::string& path);
/// Attributes as a JSON object (the wire format's "attrs").
Json attributes_to_json(const ops::Attributes& attrs);
/// The wire format's "attrs" object as attributes; a bad value is pact::Error(parse_error) naming `where`
/// and `field`.
ops::Attributes attributes_from_json(const Json& attrs, std::string_view where, std::string_view field);
/// Serialises a graph to the v1 wire format (parse_graph(to_json(g)) reproduces g).
Json to_json(const Graph& graph);

/// Structural and shape validation: unique ids, arity and attribute schemas, inputs that exist, no
/// cycles (nodes are reordered topologically), output nodes that exist, shapes from each op's shape rule
/// (a declared type that differs is a shape mismatch). Returns the validated graph.
Graph validate(std::vector<Node> nodes, std::vector<std::string> outputs);

/// A parameter node as the wire format writes one (attributes "shape" and "dtype"); `buffer` marks
/// persistent state that is not optimised. GraphBuilder and graph rewrites (pact/plan/fusion.hpp) make
/// their parameters with it.
Node parameter_node(std::string id, const Dims& shape, DType dtype, bool differentiable, bool buffer = false);

/// Builds graphs in code: each call adds a node and returns its id.
class GraphBuilder {
 public:
  std::string input(std::string id, Dims shape, DType dtype = DType::f32);
  std::string parameter(std::string id, Dims shape, DType dtype = DType::f32, bool differentiable = true);
  std::string buffer(std::string id, Dims shape, DType dtype = DType::f32);
  std::string op(std::string id, ops::OpTag tag, std::vector<std::string> inputs, ops::Attributes attrs = {});
  void output(std::string id);
  /// Validates and returns the graph.
  Graph build() const;

 private:
  std::vector<Node> nodes_;
  std::vector<std::string> outputs_;
};

}  // namespace pact::ir
