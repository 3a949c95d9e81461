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
#include <vector>

#include "bench/gpu/timing.hpp"
#include "bench/transformer_step.hpp"
#include "pact/core/cuda_device.hpp"

int main() {
  using namespace pact;
  if (bench::device_or_skip() == nullptr) return 0;
  bench::TransformerStep fixture("cuda-checked");
  auto step = [&] { return fixture.step(); };
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
