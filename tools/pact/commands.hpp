#pragma once
/// The CLI's subcommands. Each returns the process exit code; errors are pact::Error.

#include <string>

namespace pact::cli {

/// `pact demo`: a short tour of the storage model (owners, views, groups, ledgers).
int run_demo();
/// `pact digest FILE --domain D`: canonical JSON digest of a JSON file.
int run_digest(const std::string& path, const std::string& domain);

}  // namespace pact::cli
