#pragma once
/// The CLI's command registry: each subcommand's file registers itself (its options and what runs it), so
/// main() only builds the app from the registry, parses and dispatches.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pact/ops/op_table.hpp"

namespace pact::cli {

/// One runnable subcommand: the CLI11 node it was parsed into and what to run when it was chosen.
struct Runner {
  CLI::App* command;
  std::function<int()> run;
};

/// Adds a command (and any nested subcommands) to the app; returns its runners, innermost first, so the
/// first runner whose node was parsed is the one chosen.
using Registration = std::function<std::vector<Runner>(CLI::App& app)>;

/// Registers a top-level command under `name` (commands appear in `pact --help` in name order). Called
/// from a static initializer in the command's own file.
bool register_command(std::string_view name, Registration registration);

/// Every registered command, in name order.
std::vector<std::pair<std::string_view, Registration>> registered_commands();

/// What run_command_line does with a malformed command line: print CLI11's message and usage and return
/// its exit code (the pact program), or throw invalid_argument with the message (a library caller).
enum class ParseErrors { print, throw_error };

/// Parses `args` (without the program name) against every registered command and runs the chosen one;
/// returns its exit code. --help and --version print and return 0. Errors are pact::Error.
int run_command_line(std::vector<std::string> args, ParseErrors parse_errors);

/// The long names of the options the user gave to `command` ("--save"): a command refuses those that do
/// not apply, or takes the rest from elsewhere, only for options actually given.
inline std::set<std::string> given_options(const CLI::App& command) {
  std::set<std::string> given;
  for (const auto* o : command.get_options()) {
    if (o->count() > 0) given.insert(o->get_name());
  }
  return given;
}

/// The bytes a tensor of `type` holds, saturating: a count or size past what 64 bits hold counts as the
/// largest value, so a memory check over it never wraps (pact capture's and pact train's budgets).
inline std::uint64_t tensor_bytes(const ops::TensorType& type) noexcept {
  constexpr std::uint64_t kMax = ~std::uint64_t{0};
  const auto n = ops::checked_numel(type.shape);
  const std::uint64_t size = dtype_size(type.dtype);
  if (!n || (size != 0 && static_cast<std::uint64_t>(*n) > kMax / size)) return kMax;
  return static_cast<std::uint64_t>(*n) * size;
}

/// a + b, or the largest value when the sum does not fit.
inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  return b > ~std::uint64_t{0} - a ? ~std::uint64_t{0} : a + b;
}

}  // namespace pact::cli
