#pragma once
/// The CLI's subcommands. Each returns the process exit code; errors are pact::Error.

#include <cstdint>
#include <string>
#include <vector>

namespace pact::cli {

/// `pact demo`: a short tour of the storage model (owners, views, groups, ledgers).
int run_demo();
/// `pact digest FILE --domain D`: canonical JSON digest of a JSON file.
int run_digest(const std::string& path, const std::string& domain);

/// `pact bench gemm`: native vs OpenBLAS SGEMM, interleaved, best of `repetitions`.
int run_bench_gemm(const std::vector<std::int64_t>& sizes, int threads, int repetitions, bool json);

}  // namespace pact::cli
