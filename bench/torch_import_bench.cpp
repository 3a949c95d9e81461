// Importing a PyTorch capture (issue 6 goal: a 1 MB-weight model under 100 ms), beside the in-run
// baseline of what any importer must do: parse graph.json as JSON and read the safetensors weights.
//
//   PYTHONPATH=bench/models /usr/bin/python3 tools/torch_export.py torchvision_zoo:mlp_1mb --input-shape 8,256 -o
//   /tmp/mlp1mb cmake --preset bench && cmake --build --preset bench PACT_TORCH_CAPTURE=/tmp/mlp1mb
//   ./build/bench/bench/pact_bench_torch_import --benchmark_repetitions=5
// Without PACT_TORCH_CAPTURE it uses tests/fixtures/torch/small_cnn.

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "bench_main.hpp"
#include "pact/ir/torch_import.hpp"

namespace {

using namespace pact;

std::string capture_dir() {
  const char* dir = std::getenv("PACT_TORCH_CAPTURE");
  return dir != nullptr ? dir : "tests/fixtures/torch/small_cnn";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void load_capture(benchmark::State& state) {
  const std::string dir = capture_dir();
  for (auto _ : state) benchmark::DoNotOptimize(ir::load_torch_export(dir));
}

void lower_graph_only(benchmark::State& state) {
  const std::string text = read_text(capture_dir() + "/graph.json");
  for (auto _ : state) benchmark::DoNotOptimize(ir::import_torch_graph(text));
}

void baseline_parse_json_and_read_weights(benchmark::State& state) {
  const std::string dir = capture_dir();
  for (auto _ : state) {
    benchmark::DoNotOptimize(parse_json(read_text(dir + "/graph.json"), "graph.json"));
    benchmark::DoNotOptimize(ir::read_safetensors(dir + "/weights.safetensors"));
  }
}

BENCHMARK(load_capture)->Unit(benchmark::kMillisecond);
BENCHMARK(lower_graph_only)->Unit(benchmark::kMillisecond);
BENCHMARK(baseline_parse_json_and_read_weights)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // Goal: 100 ms absolute for a 1 MB-weight model; the ratio says what the lowering adds to the
  // unavoidable parsing.
  return pact::bench::run(argc, argv, "torch_import", "ns_per_call",
                          {{"import_over_parse", "load_capture", "baseline_parse_json_and_read_weights", 3.0}});
}
