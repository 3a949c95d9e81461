// One training step of the char transformer on the device (issue 26 goal: at least as fast as PyTorch eager
// on the same GPU; scripts/gpu-check.sh times PyTorch's step of the same model in the same run): the
// TrainingSession under cuda-checked, at the size of bench/train_step_bench.cpp's CPU figure (d_model 128,
// 4 heads, ffn 512, seq 64, batch 16, vocabulary 96). Each step reads its loss back, so a step's wall time
// is its device time plus the host's share. Prints one JSON line: {"case": ..., "pact_ms": ...}. Not a test.
//
// usage: pact_bench_gpu_train_step

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/train/trainer.hpp"

int main() {
  using namespace pact;
  if (CudaDevice::get() == nullptr) {
    std::printf("{\"skipped\": \"no CUDA device: %s\"}\n", CudaDevice::unavailable_reason().c_str());
    return 0;
  }
  constexpr std::int64_t batch = 16, t = 64, vocab = 96, d = 128, heads = 4;
  train::Objective o;
  o.graph = [](std::int64_t b) { return train::char_transformer(b, t, vocab, d, heads); };
  o.options.lr = 1e-3;
  o.options.profile = "cuda-checked";
  train::TrainingSession session(o, train::init_parameters(o.graph(batch), 0));
  std::mt19937 rng(0);
  std::vector<std::int64_t> xv(static_cast<std::size_t>(batch * t)), yv(xv.size());
  for (auto& v : xv) v = static_cast<std::int64_t>(rng() % vocab);
  for (auto& v : yv) v = static_cast<std::int64_t>(rng() % vocab);
  train::OptimizerState optimizer;
  auto step = [&] {
    auto r = session.step_batch(Tensor::from_values<std::int64_t>(Dims{batch, t}, xv),
                                Tensor::from_values<std::int64_t>(Dims{batch * t}, yv), std::move(optimizer));
    optimizer = std::move(r.state);
    return r.loss;
  };
  for (int i = 0; i < 5; ++i) step();  // plan, pool and module warm-up
  std::vector<double> ms;
  double loss = 0;
  for (int i = 0; i < 30; ++i) {
    const auto start = std::chrono::steady_clock::now();
    loss = step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("{\"case\": \"char transformer step d128-h4-f512-s64-b16\", \"pact_ms\": %.4f, \"loss\": %.4f}\n",
              ms[ms.size() / 2], loss);
  return 0;
}
