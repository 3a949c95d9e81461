// --svg, --depth and --collapse: the picture options pact capture, pact plan and pact run share.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "pact/contract/check.hpp"
#include "pact/core/file.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

picture::Picture capture_picture(const capture::StructureCapture& capture, std::string title,
                                 const std::map<std::string, std::string>* module_of) {
  picture::Picture p;
  p.title = std::move(title);
  p.structure_only = capture.structure_only;
  if (capture.structure_only) p.banner = std::string(capture::kBanner);
  std::set<std::string> drawn;
  for (const auto& s : capture.sources) {
    if (s.kind != runtime::SourceKind::input) continue;
    p.nodes.push_back(
        picture::Node{s.name, "input", s.module, {}, 0, contract::describe_type(s.type), "", "", "", "", ""});
    drawn.insert(s.name);
  }
  for (const auto& o : capture.ops) {
    picture::Node n{
        o.id, std::string(ops::op_kind(o.op)), o.module, {}, 0, contract::describe_type(o.type), "", "", "", "", ""};
    if (n.module.empty() && module_of != nullptr) {
      if (auto it = module_of->find(o.id); it != module_of->end()) n.module = it->second;
    }
    for (const auto& in : o.inputs) {
      if (drawn.count(in)) {
        n.inputs.push_back(in);
      } else {
        ++n.weights;
      }
    }
    drawn.insert(o.id);
    p.nodes.push_back(std::move(n));
  }
  p.outputs = capture.outputs;
  return p;
}

void add_picture_options(CLI::App* command, PictureArgs& args) {
  command->add_option("--svg", args.svg, "draw the graph (Graphviz SVG): modules as clusters, shapes on edges")
      ->group("Pictures");
  command->add_option("--depth", args.depth, "with --svg: module nesting drawn; deeper modules are single nodes")
      ->check(CLI::Range(0, 64))
      ->group("Pictures");
  command
      ->add_option("--collapse", args.collapse,
                   "with --svg: modules drawn as single nodes, by path, `*` for one component (layers.*)")
      ->delimiter(',')
      ->group("Pictures");
}

void require_picture_destination(const PictureArgs& args, std::string_view command) {
  if (args.svg.empty() && (args.depth >= 0 || !args.collapse.empty()))
    throw_error(ErrorCode::invalid_argument, std::string(command),
                "--depth and --collapse shape the --svg picture: give --svg FILE");
  if (!args.svg.empty()) require_writable_destination(args.svg, std::string(command) + " --svg");
}

void write_picture(const PictureArgs& args, const picture::Picture& p, bool quiet) {
  if (args.svg.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  picture::write_svg(args.svg, p, picture::DrawOptions{args.depth, args.collapse});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!quiet) std::printf("drew %s (%zu nodes) in %.2f s\n", args.svg.c_str(), p.nodes.size(), s);
}

}  // namespace pact::cli
