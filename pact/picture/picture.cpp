#include "pact/picture/picture.hpp"

#include <fmt/format.h>
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <unordered_map>

#include "pact/contract/check.hpp"
#include "pact/core/file.hpp"

namespace pact::picture {

namespace {

// Fill colours by provider (the audit's choice); a node without a plan is white.
std::string_view provider_colour(std::string_view provider) {
  if (provider == "reference") return "#e8e8e8";
  if (provider == "native") return "#cfe2ff";
  if (provider == "blas") return "#d1f0d6";
  if (provider == "half") return "#e6d9ff";
  if (provider == "libtorch") return "#ffe0c2";
  if (provider == "cuda") return "#fff3b0";
  if (provider.empty()) return "#ffffff";
  return "#f6e3ef";  // a trusted-external provider of its own (sealed kernels, mpi)
}

// A DOT double-quoted string's content: quotes and backslashes escaped, control characters dropped (names
// come from files). Line breaks are added by the caller as \n.
std::string dot_escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) continue;
    out += c;
  }
  return out;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (!path.empty() && at <= path.size()) {
    const std::size_t dot = std::min(path.find('.', at), path.size());
    parts.emplace_back(path.substr(at, dot - at));
    at = dot + 1;
  }
  return parts;
}

std::string join_path(const std::vector<std::string>& parts, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n && i < parts.size(); ++i) out += (i ? "." : "") + parts[i];
  return out;
}

// True when `path` matches `pattern`: equal, component by component, with `*` for any one component.
bool matches(const std::vector<std::string>& path, const std::vector<std::string>& pattern) {
  if (path.size() != pattern.size()) return false;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (pattern[i] != "*" && pattern[i] != path[i]) return false;
  }
  return true;
}

// The last component of a qualified class name ("torchvision.models.resnet.BasicBlock" -> "BasicBlock").
std::string_view short_type(std::string_view type) {
  const std::size_t dot = type.rfind('.');
  return dot == std::string_view::npos ? type : type.substr(dot + 1);
}

constexpr std::string_view kRejectedStyle = ", color=\"#c00000\", penwidth=2.5, fontcolor=\"#800000\"";

}  // namespace

void Picture::add(Node node, const std::vector<std::string>& reads) {
  node.inputs.clear();
  node.weights = 0;
  for (const auto& in : reads) {
    if (drawn_.count(in)) {
      node.inputs.push_back(in);
    } else {
      ++node.weights;
    }
  }
  drawn_.insert(node.id);
  nodes.push_back(std::move(node));
}

Picture from_graph(const ir::Graph& graph, std::string title, const plan::PlanAudit* audit,
                   const std::map<std::string, std::string>* module_of) {
  Picture p;
  p.title = std::move(title);
  std::unordered_map<std::string, const plan::PlannedKernel*> kernel_of;
  std::unordered_map<std::string, const contract::ObligationReport*> failing_of;
  if (audit != nullptr) {
    for (const auto& k : audit->kernels) {
      if (k.purpose == plan::KernelPurpose::node) kernel_of.emplace(k.node, &k);
    }
    for (const auto& r : audit->check.reports) {
      if (!r.accepted) failing_of.emplace(r.node, &r);  // the first failing obligation of each node
    }
  }
  for (const auto& node : graph.nodes) {
    const bool input = node.op == ops::OpTag::input;
    if (!input && ops::op_info(node.op).role == ops::OpRole::source) continue;  // parameters, constants
    Node n{node.id, input ? "input" : std::string(ops::op_kind(node.op)),
           "",      {},
           0,       contract::describe_type(node.type),
           "",      "",
           "",      "",
           ""};
    if (module_of != nullptr) {
      if (auto it = module_of->find(node.id); it != module_of->end()) n.module = it->second;
    }
    if (audit != nullptr && !input) {
      n.verdict = "accepted";
      if (auto it = kernel_of.find(node.id); it != kernel_of.end() && it->second->capsule != nullptr) {
        n.capsule = it->second->capsule->name;
        n.provider = it->second->capsule->provider;
        n.isa = std::string(plan::capsule_isa(*it->second->capsule));
      } else {
        n.verdict = "rejected";
        n.failing = "no capsule of the profile serves it";
      }
      if (auto it = failing_of.find(node.id); it != failing_of.end()) {
        n.verdict = "rejected";
        n.failing = fmt::format("{}: {}", contract::obligation_name(it->second->obligation), it->second->reason);
      }
    }
    p.add(std::move(n), node.inputs);
  }
  p.outputs = graph.outputs;
  return p;
}

// Note [Picture layout]
// Each node is drawn inside the clusters of its module path, nested; a module of a single node is that
// node, labelled with the module's path, rather than a cluster around it. A node whose module lies deeper than
// the depth, or inside a module the collapse list names, is drawn as the one node standing for that
// module ("layers.3 (41 ops)"); edges between drawn nodes are merged, each labelled with the shape of the
// value that crosses (the first, when several do). A structure-only capture's shapes end in "?": they
// are hypotheses, and the banner is the picture's label.
std::string to_dot(const Picture& picture, const DrawOptions& options) {
  if (options.depth < -1)
    throw_error(ErrorCode::invalid_argument, "picture",
                fmt::format("depth {} is neither -1 (every level) nor a depth", options.depth));
  std::vector<std::vector<std::string>> patterns;
  for (const auto& c : options.collapse) patterns.push_back(split_path(c));
  // True when the collapse list names the module at `prefix`: by its path, or by its class.
  auto collapsed_module = [&](const std::vector<std::string>& prefix) {
    if (std::any_of(patterns.begin(), patterns.end(), [&](const auto& p) { return matches(prefix, p); })) return true;
    auto type = picture.module_types.find(join_path(prefix, prefix.size()));
    if (type == picture.module_types.end()) return false;
    return std::any_of(options.collapse.begin(), options.collapse.end(),
                       [&](const std::string& c) { return c == type->second || c == short_type(type->second); });
  };
  // A module's caption: its path, and its class where known.
  auto module_caption = [&](const std::string& path) {
    auto type = picture.module_types.find(path);
    return type == picture.module_types.end() ? dot_escaped(path)
                                              : dot_escaped(path) + " : " + dot_escaped(short_type(type->second));
  };

  // Where each node is drawn: itself, or the module node standing for it.
  struct Drawn {
    std::string key;                  // DOT node id
    std::vector<std::string> module;  // the clusters it sits in
    const Node* node = nullptr;       // the node itself, or nullptr for a module node
    std::string module_path;          // a module node's path
    int members = 0;
    std::set<std::string> providers;  // a module node's: of its members
    int rejected = 0;                 // a module node's rejected members
  };
  std::unordered_map<std::string, std::size_t> at;  // node id -> index in `drawn`
  std::vector<Drawn> drawn;
  std::unordered_map<std::string, std::size_t> module_node;
  for (const auto& n : picture.nodes) {
    const std::vector<std::string> parts = split_path(n.module);
    // The module node that stands for n: its first `keep` components, or n itself when not collapsed.
    std::size_t keep = parts.size();
    bool collapsed = false;
    if (options.depth >= 0 && parts.size() > static_cast<std::size_t>(options.depth)) {
      keep = static_cast<std::size_t>(options.depth) + 1;
      collapsed = true;
    }
    for (std::size_t k = 1; k <= keep; ++k) {
      const std::vector<std::string> prefix(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(k));
      if (collapsed_module(prefix)) {
        keep = k;
        collapsed = true;
        break;
      }
    }
    if (!collapsed || n.op == "input") {
      at.emplace(n.id, drawn.size());
      drawn.push_back(Drawn{"n" + std::to_string(drawn.size()), parts, &n, "", 1, {}, 0});
      continue;
    }
    const std::string path = join_path(parts, keep);
    auto [it, fresh] = module_node.emplace(path, drawn.size());
    if (fresh) {
      const std::vector<std::string> outer(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(keep - 1));
      drawn.push_back(Drawn{"n" + std::to_string(drawn.size()), outer, nullptr, path, 0, {}, 0});
    }
    Drawn& module = drawn[it->second];
    ++module.members;
    if (!n.provider.empty()) module.providers.insert(n.provider);
    if (n.verdict == "rejected") ++module.rejected;
    at.emplace(n.id, it->second);
  }

  std::string dot = "digraph pact {\n  rankdir=TB;\n  compound=true;\n";
  dot += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  dot += "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n";
  std::string label = dot_escaped(picture.title);
  if (picture.structure_only) label += "\\n" + dot_escaped(picture.banner) + "\\n(shapes marked ? are hypotheses)";
  dot += fmt::format("  labelloc=t;\n  label=\"{}\";\n", label);

  const std::string hypothesis = picture.structure_only ? "?" : "";
  // `module`: the module a node is drawn for when its own single-node cluster was left out.
  auto node_text = [&](const Drawn& d, std::string_view module = {}) {
    if (d.node == nullptr) {  // a collapsed module: its provider's colour when its ops share one
      std::string attrs =
          fmt::format("fillcolor=\"{}\"", d.providers.size() == 1 ? provider_colour(*d.providers.begin()) : "#f4f4f4");
      std::string text = fmt::format("{}\\n({} ops)", module_caption(d.module_path), d.members);
      if (d.rejected > 0) {
        text += fmt::format("\\nREJECTED: {} op(s)", d.rejected);
        attrs += kRejectedStyle;
      }
      return fmt::format("  {} [label=\"{}\", shape=box3d, {}];\n", d.key, text, attrs);
    }
    const Node& n = *d.node;
    if (n.op == "input") {
      return fmt::format("  {} [label=\"{}\\n{}{}\", shape=ellipse, fillcolor=\"#fffbe6\"];\n", d.key,
                         dot_escaped(n.id), dot_escaped(n.type), hypothesis);
    }
    // The op, and the node's name within its module when it says more than the op does.
    std::string_view name = n.id;
    if (!n.module.empty() && name.size() > n.module.size() && name.substr(0, n.module.size() + 1) == n.module + ".")
      name.remove_prefix(n.module.size() + 1);
    std::string text =
        module.empty() ? dot_escaped(n.op) : module_caption(std::string(module)) + "\\n" + dot_escaped(n.op);
    if (name != n.op) text += "\\n" + dot_escaped(name);
    if (!n.capsule.empty())
      text += "\\n" + dot_escaped(n.capsule) + (n.isa.empty() ? "" : " (" + dot_escaped(n.isa) + ")");
    std::string attrs = fmt::format("fillcolor=\"{}\"", provider_colour(n.provider));
    if (n.verdict == "rejected") {
      text += "\\nREJECTED: " + dot_escaped(n.failing.substr(0, 120));
      attrs += kRejectedStyle;
    } else if (n.verdict == "accepted") {
      attrs += ", color=\"#2e7d32\"";
    }
    std::string tooltip = dot_escaped(n.id + ": " + n.type + hypothesis);
    if (n.weights > 0) tooltip += fmt::format(", {} weight(s)", n.weights);
    return fmt::format("  {} [label=\"{}\", tooltip=\"{}\", {}];\n", d.key, text, tooltip, attrs);
  };

  // Clusters: a tree of module paths, each drawn node placed in its innermost one.
  struct Cluster {
    std::map<std::string, Cluster> children;
    std::vector<std::size_t> members;
  };
  Cluster root;
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    Cluster* c = &root;
    for (const auto& part : drawn[i].module) c = &c->children[part];
    c->members.push_back(i);
  }
  int cluster_id = 0;
  std::function<void(const Cluster&, const std::string&, int)> emit = [&](const Cluster& c, const std::string& path,
                                                                          int indent) {
    for (std::size_t i : c.members) dot += std::string(static_cast<std::size_t>(indent), ' ') + node_text(drawn[i]);
    for (const auto& [name, child] : c.children) {
      const std::string full = path.empty() ? name : path + "." + name;
      // A module of one node and no submodules is that node, named by the module: a cluster per op (a
      // PyTorch capture's conv1, bn1, ...) would multiply Graphviz's work for nothing on the page.
      if (child.children.empty() && child.members.size() == 1 && drawn[child.members[0]].node != nullptr) {
        dot += std::string(static_cast<std::size_t>(indent), ' ') + node_text(drawn[child.members[0]], full);
        continue;
      }
      dot +=
          fmt::format("{}subgraph cluster_{} {{\n", std::string(static_cast<std::size_t>(indent), ' '), cluster_id++);
      dot += fmt::format("{}  label=\"{}\"; style=\"rounded\"; color=\"#9e9e9e\"; fontsize=9;\n",
                         std::string(static_cast<std::size_t>(indent), ' '), module_caption(full));
      emit(child, full, indent + 2);
      dot += std::string(static_cast<std::size_t>(indent), ' ') + "}\n";
    }
  };
  emit(root, "", 2);

  // Edges, merged between drawn nodes, labelled with the shape that crosses.
  std::set<std::pair<std::size_t, std::size_t>> edges;
  std::unordered_map<std::string, const Node*> by_id;
  for (const auto& n : picture.nodes) by_id.emplace(n.id, &n);
  for (const auto& n : picture.nodes) {
    const std::size_t to = at.at(n.id);
    for (const auto& in : n.inputs) {
      auto from = at.find(in);
      if (from == at.end() || from->second == to || !edges.insert({from->second, to}).second) continue;
      dot += fmt::format("  {} -> {} [label=\"{}{}\"];\n", drawn[from->second].key, drawn[to].key,
                         dot_escaped(by_id.at(in)->type), hypothesis);
    }
  }
  std::size_t outputs = 0;
  for (const auto& o : picture.outputs) {
    auto it = at.find(o);
    if (it == at.end()) continue;
    dot += fmt::format("  out{} [label=\"output {}\", shape=plaintext, style=\"\"];\n  {} -> out{} [label=\"{}{}\"];\n",
                       outputs, dot_escaped(o), drawn[it->second].key, outputs, dot_escaped(by_id.at(o)->type),
                       hypothesis);
    ++outputs;
  }
  dot += "}\n";
  return dot;
}

std::string render_svg(std::string_view dot) {
  std::unique_ptr<GVC_t, int (*)(GVC_t*)> gvc(gvContext(), gvFreeContext);
  if (!gvc) throw_error(ErrorCode::out_of_memory, "picture.svg", "Graphviz could not start a context");
  const std::string text(dot);
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> graph(agmemread(text.c_str()), agclose);
  if (!graph) throw_error(ErrorCode::internal, "picture.svg", "Graphviz refused the DOT text Pact wrote");
  if (gvLayout(gvc.get(), graph.get(), "dot") != 0)
    throw_error(ErrorCode::unsupported, "picture.svg", "Graphviz's dot layout is not available (graphviz plugins)");
  char* data = nullptr;
  unsigned int length = 0;
  const int rendered = gvRenderData(gvc.get(), graph.get(), "svg", &data, &length);
  std::string svg = rendered == 0 && data != nullptr ? std::string(data, length) : std::string();
  if (data != nullptr) gvFreeRenderData(data);
  gvFreeLayout(gvc.get(), graph.get());
  if (rendered != 0) throw_error(ErrorCode::unsupported, "picture.svg", "Graphviz's SVG renderer is not available");
  return svg;
}

void write_svg(const std::string& path, const Picture& picture, const DrawOptions& options) {
  const std::string dot = to_dot(picture, options);
  const bool dot_only = path.size() >= 4 && path.compare(path.size() - 4, 4, ".dot") == 0;
  write_file_atomic(path, dot_only ? dot : render_svg(dot), "picture.svg");
}

}  // namespace pact::picture
