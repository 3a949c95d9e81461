#pragma once
/// Pictures of graphs and plans (issue 24 item 2): a model as Graphviz draws it, modules as nested
/// clusters collapsible to a depth, tensor shapes on the edges, nodes coloured by the provider the plan
/// chose and outlined by the audit's verdict, rejected nodes labelled with the failing obligation. A
/// structure-only capture's picture carries its banner and marks every shape a hypothesis (seed 003: every
/// view of such a capture says so; the CLI builds a capture's Picture, a module beside the pipeline as
/// this one is). `pact capture --svg`, `pact plan --svg` and `pact run --svg` draw them.

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pact/ir/graph.hpp"
#include "pact/plan/planner.hpp"

namespace pact::picture {

/// One value-producing node: an op, or an input. Parameters and constants are not drawn; each op
/// counts the ones it reads.
struct Node {
  std::string id;
  std::string op;                   ///< op kind ("linear"), or "input"
  std::string module;               ///< module path, "" at the top level
  std::vector<std::string> inputs;  ///< drawn producers (ops and inputs) this node reads
  int weights = 0;                  ///< parameters and constants it reads
  std::string type;                 ///< "f32[2, 3]"
  std::string capsule, provider, isa;
  std::string verdict;  ///< "accepted", "rejected", or "" (no plan)
  std::string failing;  ///< a rejected node's first failing obligation and why
};

/// What a picture shows.
struct Picture {
  std::string title;
  std::vector<Node> nodes;  ///< in topological order
  std::vector<std::string> outputs;
  bool structure_only = false;  ///< shapes are hypotheses; the banner says so
  std::string banner;
  /// Module path -> its class ("torchvision.models.resnet.BasicBlock"), where the capture knows it: the
  /// clusters say it, and DrawOptions::collapse may name it.
  std::map<std::string, std::string> module_types;

  /// Appends `node` (its `inputs` and `weights` are filled here) reading `reads`: a value already drawn
  /// becomes an input edge, anything else (a parameter, a constant) counts as one of its weights.
  void add(Node node, const std::vector<std::string>& reads);

 private:
  std::set<std::string> drawn_;
};

/// How to draw it.
struct DrawOptions {
  /// Module nesting drawn as clusters; a node deeper than this is drawn inside one node standing for its
  /// module at this depth. -1: every level.
  int depth = -1;
  /// Modules drawn as single nodes: a module path, a path with `*` for one component ("layers.*"), or a
  /// module class, qualified or by its last name ("Bottleneck").
  std::vector<std::string> collapse;
};

/// The picture of a graph, with the plan's choices and verdicts when `audit` is given.
Picture from_graph(const ir::Graph& graph, std::string title, const plan::PlanAudit* audit = nullptr,
                   const std::map<std::string, std::string>* module_of = nullptr);

/// The Graphviz DOT text of a picture. invalid_argument for a negative depth other than -1.
std::string to_dot(const Picture& picture, const DrawOptions& options);

/// Lays `dot` out with Graphviz's dot engine and renders SVG (libgvc). internal when Graphviz refuses the
/// text (a bug in to_dot), unsupported when its layout or SVG plugin is missing.
std::string render_svg(std::string_view dot);

/// to_dot, render_svg, and the file written atomically (io_error naming `path`); a path ending in .dot gets
/// the DOT text itself, for Graphviz's own tools.
void write_svg(const std::string& path, const Picture& picture, const DrawOptions& options);

}  // namespace pact::picture
