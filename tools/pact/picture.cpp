// --svg, --depth and --collapse: the picture options pact capture, pact plan and pact run share.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "pact/core/file.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

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
