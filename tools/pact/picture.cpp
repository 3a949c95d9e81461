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
                                 const ir::TorchImport* import) {
  picture::Picture p;
  p.title = std::move(title);
  p.structure_only = capture.structure_only;
  if (capture.structure_only) p.banner = std::string(capture::kBanner);
  for (const auto& s : capture.sources) {
    if (s.kind != runtime::SourceKind::input) continue;
    p.add(picture::Node{s.name, "input", s.module, {}, 0, contract::describe_type(s.type), "", "", "", "", ""}, {});
  }
  for (const auto& o : capture.ops) {
    picture::Node n{
        o.id, std::string(ops::op_kind(o.op)), o.module, {}, 0, contract::describe_type(o.type), "", "", "", "", ""};
    if (n.module.empty() && import != nullptr) {
      if (auto it = import->module_of.find(o.id); it != import->module_of.end()) n.module = it->second;
    }
    p.add(std::move(n), o.inputs);
  }
  p.outputs = capture.outputs;
  if (import != nullptr) p.module_types = import->module_type;
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
                   "with --svg: modules drawn as single nodes, by path (`*` for one component: layers.*) or by "
                   "class (Bottleneck)")
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
