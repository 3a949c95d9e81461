#pragma once
// The GPU benchmarks' timer: the median of `reps` runs of f, each timed by CUDA events recorded on the
// device's stream, after three warm-ups; and their inputs, normal values on the device.

#include <algorithm>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/core/tensor.hpp"

namespace pact::bench {

/// The device, or null after printing the benchmark's one JSON line that says why it skipped.
inline CudaDevice* device_or_skip() {
  CudaDevice* dev = CudaDevice::get();
  if (dev == nullptr) std::printf("{\"skipped\": \"no CUDA device: %s\"}\n", CudaDevice::unavailable_reason().c_str());
  return dev;
}

inline Tensor device_normal(const Dims& shape, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = nd(rng);
  return Tensor::from_values<float>(shape, std::span<const float>(v)).transfer_to(cuda_provider());
}

template <class F>
double median_ms(CudaDevice& dev, int reps, F&& f) {
  const CudaDriver& d = dev.driver();
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    void *start = nullptr, *stop = nullptr;
    dev.check(d.event_create(&start, 0), "bench.event");
    dev.check(d.event_create(&stop, 0), "bench.event");
    dev.check(d.event_record(start, dev.stream()), "bench.event");
    f();
    dev.check(d.event_record(stop, dev.stream()), "bench.event");
    dev.check(d.event_synchronize(stop), "bench.event");
    float elapsed = 0;
    dev.check(d.event_elapsed_time(&elapsed, start, stop), "bench.event");
    ms.push_back(elapsed);
    d.event_destroy(start);
    d.event_destroy(stop);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace pact::bench
