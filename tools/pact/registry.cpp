// The CLI's command registry and its one parse-and-dispatch (tools/pact/command.hpp): main() and the
// Python module's pact.cli both run a command line through run_command_line.

#include <algorithm>
#include <map>
#include <string>

#include "pact/core/cpu.hpp"
#include "pact/core/error.hpp"
#include "tools/pact/command.hpp"

namespace pact::cli {

namespace {
std::map<std::string, Registration, std::less<>>& registry() {
  static std::map<std::string, Registration, std::less<>> r;
  return r;
}
}  // namespace

bool register_command(std::string_view name, Registration registration) {
  return registry().emplace(std::string(name), std::move(registration)).second;
}

std::vector<std::pair<std::string_view, Registration>> registered_commands() {
  std::vector<std::pair<std::string_view, Registration>> all;
  for (const auto& [name, registration] : registry()) all.emplace_back(name, registration);
  return all;
}

int run_command_line(std::vector<std::string> args, ParseErrors parse_errors) {
  // A PACT_ISA that names no level is refused before anything runs (a typo must not measure the wrong
  // kernels); a level above the CPU's is reported on stderr and the CPU's best runs (pact/core/cpu.hpp).
  if (const std::string_view isa = requested_isa(); !isa.empty() && !parse_isa(isa))
    throw_error(ErrorCode::invalid_argument, "PACT_ISA",
                "'" + std::string(isa) + "' is not an ISA level (portable, avx2, avx512)");
  CLI::App app{"pact: a tensor runtime in which every kernel carries a contract"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows every option's default
  app.set_version_flag("--version", [] { return "pact 0.1.0\ncpu: " + describe_cpu(); });
  std::vector<Runner> runners;
  for (const auto& [name, registration] : registered_commands()) {
    for (auto& r : registration(app)) runners.push_back(std::move(r));
  }
  try {
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
    app.parse(args);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (parse_errors == ParseErrors::print) return app.exit(e);
    throw_error(ErrorCode::invalid_argument, "pact", e.what());
  }
  for (const auto& r : runners) {
    if (*r.command) return r.run();
  }
  return 0;
}

}  // namespace pact::cli
