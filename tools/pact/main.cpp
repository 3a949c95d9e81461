// The pact command line: every subcommand registers itself from its own file (tools/pact/command.hpp);
// main builds the app from the registry, parses and runs the chosen command. Every failure prints one
// line, "pact: error: <what>", and exits non-zero.

#include <malloc.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "pact/core/error.hpp"
#include "tools/pact/command.hpp"

namespace {

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
    return pact::cli::run_command_line(std::vector<std::string>(argv + 1, argv + argc), pact::cli::ParseErrors::print);
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
