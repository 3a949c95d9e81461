// `pact report RUN_DIR`: rebuilds a run's report.html from its report.json (and graph.svg).

#include "pact/picture/report.hpp"

#include <cstdio>
#include <memory>

#include "tools/pact/command.hpp"

namespace pact::cli {

namespace {

const bool registered = register_command("report", [](CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("report", "rebuild a pact train run's report.html from its report.json");
  cmd->add_option("run_dir", *dir, "the run directory (runs/<timestamp>)")->required();
  return std::vector<Runner>{{cmd, [dir] {
                                std::printf("wrote %s\n", picture::rebuild_run_report(*dir).c_str());
                                return 0;
                              }}};
});

}  // namespace

}  // namespace pact::cli
