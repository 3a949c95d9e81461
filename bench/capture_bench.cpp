// Structure-only capture of the Llama-7B-shaped model (issue 7 goal: under 0.5 s and 64 MB resident),
// beside the in-run baseline of the op table's shape inference alone over the same op sequence (the
// floor any capture pays). Most of the difference is the two canonical-JSON digests a capture always
// computes (structure_digests); the goal that matters is the absolute 500 ms.
//
//   cmake --preset bench && cmake --build --preset bench && ./build/bench/bench/pact_bench_capture
//   --benchmark_repetitions=5 /usr/bin/time -v ./build/release/bin/pact capture llama --config 7b --structure-only
//   (maximum resident set size)

#include <benchmark/benchmark.h>

#include "bench_main.hpp"
#include "pact/capture/capture.hpp"
#include "pact/capture/llama.hpp"

namespace {

using namespace pact;

void capture_llama_7b(benchmark::State& state) {
  const auto model = capture::llama_model(capture::llama_config("7b"));
  for (auto _ : state) benchmark::DoNotOptimize(capture::capture(model, {}));
}

void shape_inference_only(benchmark::State& state) {
  const auto c = capture::capture(capture::llama_model(capture::llama_config("7b")), {});
  std::map<std::string, ops::TensorType> types;
  for (const auto& s : c.sources) types[s.name] = s.type;
  std::vector<std::vector<ops::TensorType>> inputs;
  for (const auto& o : c.ops) {
    std::vector<ops::TensorType> in;
    for (const auto& id : o.inputs) in.push_back(types.count(id) ? types.at(id) : c.find_op(id)->type);
    inputs.push_back(std::move(in));
  }
  for (auto _ : state) {
    for (std::size_t i = 0; i < c.ops.size(); ++i)
      benchmark::DoNotOptimize(ops::infer_type(c.ops[i].op, inputs[i], c.ops[i].attrs));
  }
}

BENCHMARK(capture_llama_7b)->Unit(benchmark::kMillisecond);
BENCHMARK(shape_inference_only)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  return pact::bench::run(argc, argv, "capture_llama_7b", "ns_per_call",
                          {{"capture_over_shape_inference", "capture_llama_7b", "shape_inference_only", 1000.0}});
}
