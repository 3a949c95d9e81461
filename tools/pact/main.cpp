// The pact command line: every subcommand registers itself from its own file (tools/pact/command.hpp);
// main builds the app from the registry, parses and runs the chosen command. Every failure prints one
// line, "pact: error: <what>", and exits non-zero.

#include <malloc.h>

#include <cstdio>
#include <exception>
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

}  // namespace pact::cli

namespace {

int run(int argc, char** argv) {
  // A PACT_ISA that names no level is refused before anything runs (a typo must not measure the wrong
  // kernels); a level above the CPU's is reported on stderr and the CPU's best runs (pact/core/cpu.hpp).
  if (const std::string_view isa = pact::requested_isa(); !isa.empty() && !pact::parse_isa(isa))
    pact::throw_error(pact::ErrorCode::invalid_argument, "PACT_ISA",
                      "'" + std::string(isa) + "' is not an ISA level (portable, avx2, avx512)");
  CLI::App app{"pact: a tensor runtime in which every kernel carries a contract"};
  app.require_subcommand(1);
  app.option_defaults()->always_capture_default();  // --help shows every option's default
  app.set_version_flag("--version", [] { return "pact 0.1.0\ncpu: " + pact::describe_cpu(); });
  std::vector<pact::cli::Runner> runners;
  for (const auto& [name, registration] : pact::cli::registered_commands()) {
    for (auto& r : registration(app)) runners.push_back(std::move(r));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const auto& r : runners) {
    if (*r.command) return r.run();
  }
  return 0;
}

// Note [Host allocator settings]
// A run allocates and frees many host buffers of 128 KiB to a few MiB (a prefill's activations, each
// node's output). glibc serves those from mmap at first and returns freed heap tops to the system, so the
// next buffer of the size is fresh pages again, and on a VM each page fault is costly: a 512-token
// prefill of a 125M Llama took 0.66-1.47 s from run to run with glibc's defaults and 0.75 s every time with
// buffers up to 32 MiB kept in the heap (bench/llm_vs_torch.py, Zen 5, one thread). The same advice PyTorch
// gives for CPU inference (a caching allocator such as jemalloc); a program embedding the library chooses
// its own allocator settings.
void keep_freed_host_memory() noexcept {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: larger buffers (weights) are still mapped
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_host_memory();
  try {
    return run(argc, argv);
  } catch (const pact::Error& e) {
    std::fprintf(stderr, "pact: error: %s\n", e.what());
  } catch (const std::bad_alloc&) {  // an allocation no parser or allocator turned into a typed error
    std::fprintf(stderr, "pact: error: [pact] out_of_memory: the host could not allocate what this command needs\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pact: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "pact: error: an unknown exception\n");
  }
  return 1;
}
