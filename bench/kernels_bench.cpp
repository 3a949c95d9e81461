// Kernel benchmarks, each contender beside the reference provider in the same run: softmax,
// cross_entropy (forward + backward), layer_norm (and its backward), gelu, conv2d (the ResNet-18 stem) and attention;
// and 16-bit linear layers (the half provider) beside the native f32 ones: a language model's decode step (one row
// against a 4096 x 4096 weight) and a prefill (64 rows against 1024 x 1024).
// Goals (issue 3): fused softmax / cross-entropy at least 3x faster than the reference provider; (issue 22)
// a 16-bit decode step at most 0.75 of the f32 one's time (it reads half the bytes), a prefill at most 1.5;
// an int8-weight decode step at most 0.5 (a quarter of the bytes), a prefill at most 1.5.
//
//   cmake --preset bench && cmake --build --preset bench &&
//   ./build/bench/bench/pact_bench_kernels --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true

#include <benchmark/benchmark.h>

#include <random>

#include "bench_main.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/kernel.hpp"

namespace {

using namespace pact;

Tensor random_tensor(const Dims& shape, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<std::size_t>(ops::numel(shape)));
  for (auto& x : v) x = nd(rng);
  return Tensor::from_values<float>(shape, std::span<const float>(v));
}

Tensor class_targets(std::int64_t rows, std::int64_t classes) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) t[static_cast<std::size_t>(i)] = (i * 7919) % classes;
  return Tensor::from_values<std::int64_t>(Dims{rows}, std::span<const std::int64_t>(t));
}

const kernels::Handler& handler(bool native, ops::OpTag op) {
  return *kernels::find_handler(native ? kernels::native_handlers() : kernels::reference_handlers(), op);
}

void softmax(benchmark::State& state, bool native) {
  Tensor x = random_tensor(Dims{256, 1024}, 1);
  const auto& h = handler(native, ops::OpTag::softmax);
  for (auto _ : state) benchmark::DoNotOptimize(h.forward(std::vector{x.as_view()}, {}, {}));
  state.counters["items"] = 1;
}

void cross_entropy_step(benchmark::State& state, bool native) {
  Tensor x = random_tensor(Dims{512, 1000}, 2);
  Tensor t = class_targets(512, 1000);
  Tensor g = Tensor::from_values<float>(Dims{}, std::vector<float>{1.0f});
  const auto& h = handler(native, ops::OpTag::cross_entropy);
  for (auto _ : state) {
    std::vector<TensorView> in{x.as_view(), t.as_view()};
    Tensor y = h.forward(in, {}, {});
    benchmark::DoNotOptimize(h.vjp(in, y.as_view(), g.as_view(), {}, {}));
  }
  state.counters["items"] = 1;
}

// gelu (exact) forward and backward on the char transformer step's [1024, 512] activation.
void gelu(benchmark::State& state, bool native, bool backward) {
  Tensor x = random_tensor(Dims{1024, 512}, 17), g = random_tensor(Dims{1024, 512}, 18);
  const auto& h = handler(native, ops::OpTag::gelu);
  const std::vector<TensorView> in{x.as_view()};
  Tensor y = h.forward(in, {}, {});
  for (auto _ : state) {
    if (backward) {
      benchmark::DoNotOptimize(h.vjp(in, y.as_view(), g.as_view(), {}, {}));
    } else {
      benchmark::DoNotOptimize(h.forward(in, {}, {}));
    }
  }
  state.counters["items"] = 1;
}

void layer_norm(benchmark::State& state, bool native) {
  Tensor x = random_tensor(Dims{256, 1024}, 3), w = random_tensor(Dims{1024}, 4), b = random_tensor(Dims{1024}, 5);
  const ops::Attributes a{{"normalized_shape", std::vector<std::int64_t>{1024}}};
  const auto& h = handler(native, ops::OpTag::layer_norm);
  for (auto _ : state) benchmark::DoNotOptimize(h.forward(std::vector{x.as_view(), w.as_view(), b.as_view()}, a, {}));
  state.counters["items"] = 1;
}

// layer_norm's backward on the char transformer step's [1024, 128] rows (three of them a step).
void layer_norm_backward(benchmark::State& state, bool native) {
  Tensor x = random_tensor(Dims{1024, 128}, 19), w = random_tensor(Dims{128}, 20), b = random_tensor(Dims{128}, 21),
         g = random_tensor(Dims{1024, 128}, 22);
  const ops::Attributes a{{"normalized_shape", std::vector<std::int64_t>{128}}};
  const auto& h = handler(native, ops::OpTag::layer_norm);
  const std::vector<TensorView> in{x.as_view(), w.as_view(), b.as_view()};
  Tensor y = h.forward(in, a, {});
  for (auto _ : state) benchmark::DoNotOptimize(h.vjp(in, y.as_view(), g.as_view(), a, {}));
  state.counters["items"] = 1;
}

// The char transformer step's attention (batch 16, 4 heads, 64 tokens, head width 32, causal): forward
// and VJP, as a step runs them.
void attention_step(benchmark::State& state, bool native) {
  Tensor q = random_tensor(Dims{16, 4, 64, 32}, 23), k = random_tensor(Dims{16, 4, 64, 32}, 24),
         v = random_tensor(Dims{16, 4, 64, 32}, 25), g = random_tensor(Dims{16, 4, 64, 32}, 26);
  const ops::Attributes a{{"is_causal", true}};
  const auto& h = handler(native, ops::OpTag::scaled_dot_product_attention);
  const std::vector<TensorView> in{q.as_view(), k.as_view(), v.as_view()};
  for (auto _ : state) {
    Tensor y = h.forward(in, a, {});
    benchmark::DoNotOptimize(h.vjp(in, y.as_view(), g.as_view(), a, {}));
  }
  state.counters["items"] = 1;
}

void conv2d_stem(benchmark::State& state, bool native) {
  Tensor x = random_tensor(Dims{1, 3, 224, 224}, 6), w = random_tensor(Dims{64, 3, 7, 7}, 7);
  const ops::Attributes a{{"stride", std::vector<std::int64_t>{2}}, {"padding", std::vector<std::int64_t>{3}}};
  const auto& h = handler(native, ops::OpTag::conv2d);
  for (auto _ : state) benchmark::DoNotOptimize(h.forward(std::vector{x.as_view(), w.as_view()}, a, {}));
  state.counters["items"] = 1;
}

void attention(benchmark::State& state, bool native) {
  Tensor q = random_tensor(Dims{8, 256, 64}, 8), k = random_tensor(Dims{8, 256, 64}, 9),
         v = random_tensor(Dims{8, 256, 64}, 10);
  const ops::Attributes a{{"is_causal", true}};
  const auto& h = handler(native, ops::OpTag::scaled_dot_product_attention);
  for (auto _ : state) benchmark::DoNotOptimize(h.forward(std::vector{q.as_view(), k.as_view(), v.as_view()}, a, {}));
  state.counters["items"] = 1;
}

// linear in dtype d: f32 through the native provider, bf16 and f16 through the half provider.
void linear(benchmark::State& state, DType d, std::int64_t rows, std::int64_t features) {
  const Tensor x = random_tensor(Dims{rows, features}, 11).convert(d);
  const Tensor w = random_tensor(Dims{features, features}, 12).convert(d);
  const auto& h = *kernels::find_handler(d == DType::f32 ? kernels::native_handlers() : kernels::half_handlers(),
                                         ops::OpTag::linear);
  for (auto _ : state) benchmark::DoNotOptimize(h.forward(std::vector{x.as_view(), w.as_view()}, {}, {}));
  state.counters["items"] = 1;
}

// linear_int8 (native, f32 activations): the int8 weight with one scale per output feature.
void linear_int8(benchmark::State& state, std::int64_t rows, std::int64_t features) {
  const Tensor x = random_tensor(Dims{rows, features}, 11);
  std::vector<std::int8_t> q(static_cast<std::size_t>(features * features));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<std::int8_t>(static_cast<int>(i * 7919 % 255) - 127);
  const Tensor w = Tensor::from_values<std::int8_t>(Dims{features, features}, q);
  const Tensor s = random_tensor(Dims{features}, 13);
  const auto& h = *kernels::find_handler(kernels::native_handlers(), ops::OpTag::linear_int8);
  for (auto _ : state) benchmark::DoNotOptimize(h.forward(std::vector{x.as_view(), w.as_view(), s.as_view()}, {}, {}));
  state.counters["items"] = 1;
}

// The char transformer training step's linear products (bench/train_step_bench.cpp: 1024 tokens, d 128,
// ffn 512), native sgemm beside OpenBLAS in the same run, in the operand layouts a linear layer uses:
// forward x W^T (B read transposed), input gradient dY W, weight gradient dY^T X (A read transposed).
enum class Layout { forward, input_grad, weight_grad };
void sgemm_shape(benchmark::State& state, bool native, Layout layout, std::int64_t in, std::int64_t out) {
  constexpr std::int64_t tokens = 1024;
  auto random = [](std::int64_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd;
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& e : v) e = nd(rng);
    return v;
  };
  const auto x = random(tokens * in, 14), w = random(out * in, 15), dy = random(tokens * out, 16);
  const float* xp = x.data();
  const float* wp = w.data();
  const float* dyp = dy.data();
  auto gemm = [native](std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t ar, std::int64_t ac,
                       const float* b, std::int64_t br, std::int64_t bc, float* c, std::int64_t ldc) {
    if (native) {
      kernels::cpu::sgemm(m, n, k, a, ar, ac, b, br, bc, c, ldc, false);
    } else {
      kernels::cpu::openblas_sgemm(m, n, k, a, ar, ac, b, br, bc, c, ldc, false);
    }
  };
  std::vector<float> c(static_cast<std::size_t>(std::max(tokens, out) * std::max(in, out)));
  for (auto _ : state) {
    if (layout == Layout::forward) {
      gemm(tokens, out, in, xp, in, 1, wp, 1, in, c.data(), out);
    } else if (layout == Layout::input_grad) {
      gemm(tokens, in, out, dyp, out, 1, wp, in, 1, c.data(), in);
    } else {
      gemm(out, in, tokens, dyp, 1, out, xp, in, 1, c.data(), in);
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(tokens * in * out), benchmark::Counter::kIsIterationInvariantRate);
}

// sgemm_shape/{native,openblas}/{forward,input_grad,weight_grad}/INxOUT, for each of the step's layers.
const bool kSgemmShapes = [] {
  const std::pair<std::int64_t, std::int64_t> layers[] = {{128, 128}, {128, 512}, {512, 128}, {128, 96}};
  const std::pair<Layout, const char*> layouts[] = {
      {Layout::forward, "forward"}, {Layout::input_grad, "input_grad"}, {Layout::weight_grad, "weight_grad"}};
  for (const auto& [in, out] : layers) {
    for (const auto& [layout, name] : layouts) {
      for (const bool native : {true, false}) {
        const std::string id = "sgemm_shape/" + std::string(native ? "native/" : "openblas/") + name + "/" +
                               std::to_string(in) + "x" + std::to_string(out);
        benchmark::RegisterBenchmark(id.c_str(), sgemm_shape, native, layout, in, out)->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

BENCHMARK_CAPTURE(linear, decode_f32, DType::f32, 1, 4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(linear, decode_bf16, DType::bf16, 1, 4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(linear, decode_f16, DType::f16, 1, 4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(linear_int8, decode, 1, 4096)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(linear_int8, prefill, 64, 1024)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(linear, prefill_f32, DType::f32, 64, 1024)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(linear, prefill_bf16, DType::bf16, 64, 1024)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(softmax, native, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(softmax, reference, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(cross_entropy_step, native, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(cross_entropy_step, reference, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gelu, native, true, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gelu, reference, false, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(gelu, native_backward, true, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(layer_norm, native, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(layer_norm, reference, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(layer_norm_backward, native, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(layer_norm_backward, reference, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(attention_step, native, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(attention_step, reference, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(conv2d_stem, native, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(conv2d_stem, reference, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(attention, native, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(attention, reference, false)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  // Goals as time ratios native/reference: <= 1/3 means at least 3x faster.
  return pact::bench::run(
      argc, argv, "cpu_kernels", "ns_per_call",
      {{"softmax_native_over_reference", "softmax/native", "softmax/reference", 1.0 / 3.0},
       {"cross_entropy_native_over_reference", "cross_entropy_step/native", "cross_entropy_step/reference", 1.0 / 3.0},
       {"layer_norm_native_over_reference", "layer_norm/native", "layer_norm/reference", 1.0},
       {"conv2d_stem_native_over_reference", "conv2d_stem/native", "conv2d_stem/reference", 1.0},
       {"attention_native_over_reference", "attention/native", "attention/reference", 1.0},
       {"linear_decode_bf16_over_f32", "linear/decode_bf16", "linear/decode_f32", 0.75},
       {"linear_decode_f16_over_f32", "linear/decode_f16", "linear/decode_f32", 0.75},
       {"linear_prefill_bf16_over_f32", "linear/prefill_bf16", "linear/prefill_f32", 1.5},
       {"linear_int8_decode_over_f32", "linear_int8/decode", "linear/decode_f32", 0.5},
       {"linear_int8_prefill_over_f32", "linear_int8/prefill", "linear/prefill_f32", 1.5}});
}
