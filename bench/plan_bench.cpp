// Planning a 10,000-node graph under cpu-checked (issue 4 goal: under 50 ms), beside the graph's own
// validation (shape inference) as the in-run baseline.
//
//   cmake --preset bench && cmake --build --preset bench && ./build/bench/bench/pact_bench_plan
//   --benchmark_repetitions=5

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench_main.hpp"
#include "pact/plan/planner.hpp"

namespace {

using namespace pact;

// x -> [linear(w_i) -> relu] repeated: one parameter, one linear and one relu per layer.
std::vector<ir::Node> chain_nodes(int nodes) {
  std::vector<ir::Node> out;
  std::string prev = "x";
  out.push_back(ir::Node{"x",
                         ops::OpTag::input,
                         {},
                         ops::Attributes{{"shape", std::vector<std::int64_t>{8, 64}}},
                         {},
                         false,
                         false,
                         false});
  for (int i = 0; static_cast<int>(out.size()) + 3 <= nodes; ++i) {
    const std::string w = fmt::format("w{}", i), l = fmt::format("l{}", i), r = fmt::format("r{}", i);
    out.push_back(ir::Node{w,
                           ops::OpTag::parameter,
                           {},
                           ops::Attributes{{"shape", std::vector<std::int64_t>{64, 64}}},
                           {},
                           false,
                           true,
                           false});
    out.push_back(ir::Node{l, ops::OpTag::linear, {prev, w}, {}, {}, false, false, false});
    out.push_back(ir::Node{r, ops::OpTag::relu, {l}, {}, {}, false, false, false});
    prev = r;
  }
  out.push_back(ir::Node{"y", ops::OpTag::output, {prev}, {}, {}, false, false, false});
  return out;
}

void validate_10k(benchmark::State& state) {
  const auto nodes = chain_nodes(10000);
  for (auto _ : state) benchmark::DoNotOptimize(ir::validate(nodes, {"y"}));
  state.counters["items"] = 1;
}

void plan_10k(benchmark::State& state) {
  const ir::Graph g = ir::validate(chain_nodes(10000), {"y"});
  const auto profile = contract::builtin_profile("cpu-checked");
  const contract::DefaultEvidenceResolver resolver;
  for (auto _ : state) {
    auto plan = plan::plan_graph(g, profile, resolver);
    if (!plan) state.SkipWithError("plan rejected");
    benchmark::DoNotOptimize(plan);
  }
  state.counters["items"] = 1;
}

BENCHMARK(validate_10k)->Unit(benchmark::kMillisecond);
BENCHMARK(plan_10k)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // Goal: 50 ms absolute; expressed against validation of the same graph for the ratio, with the
  // absolute figure in the case value.
  return pact::bench::run(argc, argv, "plan_10k_nodes", "ns_per_call",
                          {{"plan_over_validate", "plan_10k", "validate_10k", 10.0}});
}
