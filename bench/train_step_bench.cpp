// One training step (forward, backward, Adam update) through Pact's TrainingSession, for the MLP shapes
// and the TransformerEncoderLayer-sized char transformer that issue 5 compares against PyTorch eager
// (bench/train_step_vs_torch.py runs both in one run).
//
//   ./build/bench/bench/pact_bench_train_step --benchmark_filter='mlp/64-128-10/64'

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <random>

#include "bench_main.hpp"
#include "pact/train/trainer.hpp"
#include "transformer_step.hpp"

namespace {

using namespace pact;

ir::Graph mlp(std::int64_t batch, std::vector<std::int64_t> dims) {
  ir::GraphBuilder b;
  b.input("x", Dims{batch, dims.front()});
  b.input("target", Dims{batch}, DType::i64);
  std::string prev = "x";
  for (std::size_t i = 0; i + 1 < dims.size(); ++i) {
    const std::string w = fmt::format("w{}", i), bias = fmt::format("b{}", i), h = fmt::format("h{}", i);
    b.parameter(w, Dims{dims[i + 1], dims[i]});
    b.parameter(bias, Dims{dims[i + 1]});
    b.op(h, ops::OpTag::linear, {prev, w, bias});
    prev = h;
    if (i + 2 < dims.size()) {
      b.op(h + "r", ops::OpTag::relu, {h});
      prev = h + "r";
    }
  }
  b.op("logits", ops::OpTag::reshape, {prev},
       ops::Attributes{{"shape", std::vector<std::int64_t>{batch, dims.back()}}});
  b.op("loss", ops::OpTag::cross_entropy, {"logits", "target"});
  b.output("logits");
  b.output("loss");
  return b.build();
}

void step(benchmark::State& state, std::vector<std::int64_t> dims, std::int64_t batch) {
  train::Objective o;
  o.graph = [dims](std::int64_t b) { return mlp(b, dims); };
  o.options.lr = 1e-3;
  train::TrainingSession session(o, train::init_parameters(o.graph(batch), 0));
  std::mt19937 rng(0);
  std::normal_distribution<float> nd;
  std::vector<float> xv(static_cast<std::size_t>(batch * dims.front()));
  for (auto& v : xv) v = nd(rng);
  std::vector<std::int64_t> yv(static_cast<std::size_t>(batch));
  for (auto& v : yv) v = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(dims.back()));
  train::OptimizerState optimizer;
  for (auto _ : state) {
    auto r = session.step_batch(Tensor::from_values<float>(Dims{batch, dims.front()}, xv),
                                Tensor::from_values<std::int64_t>(Dims{batch}, yv), std::move(optimizer));
    optimizer = std::move(r.state);
    benchmark::DoNotOptimize(r.loss);
  }
  state.counters["items"] = 1;
}

// The char transformer at TransformerEncoderLayer size (bench/transformer_step.hpp).
void transformer_step(benchmark::State& state) {
  bench::TransformerStep step("cpu-checked");
  for (auto _ : state) benchmark::DoNotOptimize(step.step());
  state.counters["items"] = 1;
}

BENCHMARK(transformer_step)->Name("step/transformer/d128-h4-f512-s64-b16")->Unit(benchmark::kMicrosecond);
// BENCHMARK_CAPTURE stringifies the name, so formatting would change it.
// clang-format off
BENCHMARK_CAPTURE(step, mlp/64-128-10/64, std::vector<std::int64_t>{64, 128, 10}, 64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(step, mlp/784-256-256-10/256, std::vector<std::int64_t>{784, 256, 256, 10}, 256)->Unit(benchmark::kMicrosecond);
// clang-format on

}  // namespace

int main(int argc, char** argv) { return pact::bench::run(argc, argv, "train_step", "ns_per_call", {}); }
