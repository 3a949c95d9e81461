// Element traversal of a 1024x1024 f32 tensor (issue: storage core; seed 001 p1-element-access-baseline):
// raw pointer loop, prepared contiguous span, prepared strided cursor over the transposed view,
// hand-written transposed loop, checked random get(). Each benchmark sums every element once.
// Goals: span within 1.05x of the raw loop; strided cursor within 1.3x of the hand-written transposed loop.
//
//   cmake --preset bench && cmake --build --preset bench && ./build/bench/bench/pact_bench_traversal
//       --benchmark_repetitions=9 --benchmark_enable_random_interleaving=true  (one line)

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <numeric>
#include <vector>

#include "bench_main.hpp"
#include "pact/core/core.hpp"

namespace {

constexpr std::int64_t kN = 1024;

pact::Tensor& tensor() {
  static pact::Tensor t = [] {
    std::vector<float> v(kN * kN);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.25f;
    return pact::Tensor::from_values<float>(pact::Dims{kN, kN}, std::span<const float>(v));
  }();
  return t;
}

// The raw baseline gets its own plain buffer with the same values.
const std::vector<float>& raw() {
  static std::vector<float> v = [] {
    std::vector<float> r(kN * kN);
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(i % 97) * 0.25f;
    return r;
  }();
  return v;
}

void finish(benchmark::State& state, float sum) {
  benchmark::DoNotOptimize(sum);
  state.counters["items"] = static_cast<double>(kN * kN);
}

void raw_loop(benchmark::State& state) {
  const float* p = raw().data();
  float sum = 0;
  for (auto _ : state) {
    sum = 0;
    for (std::int64_t i = 0; i < kN * kN; ++i) sum += p[i];
    benchmark::DoNotOptimize(sum);
  }
  finish(state, sum);
}

void prepared_span(benchmark::State& state) {
  float sum = 0;
  for (auto _ : state) {
    auto prepared = tensor().prepare_host<float>();  // one preparation per traversal
    sum = 0;
    for (float x : std::get<pact::PreparedContiguousRead<float>>(prepared.value()).as_span()) sum += x;
    benchmark::DoNotOptimize(sum);
  }
  finish(state, sum);
}

void handwritten_transposed(benchmark::State& state) {
  const float* p = raw().data();
  float sum = 0;
  for (auto _ : state) {
    sum = 0;
    for (std::int64_t j = 0; j < kN; ++j)
      for (std::int64_t i = 0; i < kN; ++i) sum += p[i * kN + j];
    benchmark::DoNotOptimize(sum);
  }
  finish(state, sum);
}

void prepared_strided_cursor(benchmark::State& state) {
  float sum = 0;
  for (auto _ : state) {
    auto prepared = tensor().transpose(0, 1).prepare_host<float>();
    auto cursor = std::get<pact::PreparedStridedRead<float>>(prepared.value()).cursor();
    sum = 0;
    while (const float* x = cursor.next()) sum += *x;
    benchmark::DoNotOptimize(sum);
  }
  finish(state, sum);
}

void prepared_strided_for_each(benchmark::State& state) {
  float sum = 0;
  for (auto _ : state) {
    auto prepared = tensor().transpose(0, 1).prepare_host<float>();
    sum = 0;
    std::get<pact::PreparedStridedRead<float>>(prepared.value()).for_each([&](float x) { sum += x; });
    benchmark::DoNotOptimize(sum);
  }
  finish(state, sum);
}

void checked_get(benchmark::State& state) {
  float sum = 0;
  pact::TensorView view = tensor().as_view();
  for (auto _ : state) {
    sum = 0;
    for (std::int64_t i = 0; i < kN; ++i)
      for (std::int64_t j = 0; j < kN; ++j) sum += static_cast<float>(view.get(pact::Dims{i, j}).real);
    benchmark::DoNotOptimize(sum);
  }
  finish(state, sum);
}

BENCHMARK(raw_loop)->Unit(benchmark::kNanosecond);
BENCHMARK(prepared_span)->Unit(benchmark::kNanosecond);
BENCHMARK(handwritten_transposed)->Unit(benchmark::kNanosecond);
BENCHMARK(prepared_strided_cursor)->Unit(benchmark::kNanosecond);
BENCHMARK(prepared_strided_for_each)->Unit(benchmark::kNanosecond);
BENCHMARK(checked_get)->Unit(benchmark::kNanosecond);

}  // namespace

int main(int argc, char** argv) {
  return pact::bench::run(argc, argv, "element_traversal", "ns_per_element",
                          {{"span_vs_raw", "prepared_span", "raw_loop", 1.05},
                           {"cursor_vs_transposed_loop", "prepared_strided_cursor", "handwritten_transposed", 1.3},
                           {"for_each_vs_transposed_loop", "prepared_strided_for_each", "handwritten_transposed", 1.3},
                           {"checked_get_vs_raw", "checked_get", "raw_loop", 1000.0}});
}
