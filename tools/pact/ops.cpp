// `pact ops [--markdown]`: the op table, one wire kind a line, or the catalogue docs/ops.md holds.

#include <cstdio>
#include <memory>
#include <string>

#include "pact/ops/catalogue.hpp"
#include "pact/ops/op_table.hpp"
#include "tools/pact/command.hpp"

namespace pact::cli {

namespace {

const bool registered = register_command("ops", [](CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  auto* ops_cmd = app.add_subcommand("ops", "list the op table");
  ops_cmd->add_flag("--markdown", *markdown, "print the catalogue as docs/ops.md holds it");
  return std::vector<Runner>{{ops_cmd, [markdown] {
                                if (*markdown) {
                                  std::fputs(ops::render_catalogue_markdown().c_str(), stdout);
                                } else {
                                  for (const auto& op : ops::op_table())
                                    std::printf("%s\n", std::string(op.kind).c_str());
                                }
                                return 0;
                              }}};
});

}  // namespace

}  // namespace pact::cli
