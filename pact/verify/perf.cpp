#include "pact/verify/perf.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>

#include "pact/core/bench_report.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::verify {

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of back-to-back calls lasting at least ~40 ms.
double seconds_per_call(const std::function<void()>& f) {
  f();
  int calls = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) f();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (s >= 0.04 || calls >= (1 << 20)) return s / calls;
    calls *= 2;
  }
}

std::span<const kernels::Handler> handlers_of(const std::string& provider) {
  if (provider == "native") return kernels::native_handlers();
  if (provider == "reference") return kernels::reference_handlers();
  if (provider == "blas") return kernels::blas_handlers();
  throw_error(ErrorCode::invalid_argument, "bench.check", fmt::format("'{}' has no op handlers", provider));
}

Tensor random(const Dims& shape, std::mt19937& rng) {
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<std::size_t>(ops::numel(shape)));
  for (auto& x : v) x = nd(rng);
  return Tensor::from_values<float>(shape, v);
}

}  // namespace

std::vector<PerformanceResult> check_performance(const PerformanceContract& contract, const std::string& only) {
  const OpenBlasBaseline forced = openblas_baseline();
  std::vector<PerformanceResult> out;
  bool matched = only.empty();
  for (const auto& o : contract.obligations) {
    if (!only.empty() && o.id != only) continue;
    matched = true;
    omp_set_num_threads(o.threads);
    kernels::cpu::openblas_threads(o.threads);
    std::function<void()> contender, baseline;
    std::vector<float> a, b, c;
    std::vector<Tensor> inputs;
    ops::Attributes attrs;
    if (o.benchmark == "gemm") {
      const std::int64_t n = o.shape[0];
      std::mt19937 rng(1);
      std::normal_distribution<float> nd;
      a.resize(static_cast<std::size_t>(n * n));
      b.resize(a.size());
      c.resize(a.size());
      for (auto& x : a) x = nd(rng);
      for (auto& x : b) x = nd(rng);
      auto gemm = [&](const std::string& who) -> std::function<void()> {
        if (who == "native")
          return [&, n] { kernels::cpu::sgemm(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false); };
        if (who == "openblas" || who == "blas") {
          return [&, n] { kernels::cpu::openblas_sgemm(n, n, n, a.data(), n, 1, b.data(), n, 1, c.data(), n, false); };
        }
        throw_error(ErrorCode::invalid_argument, "bench.check",
                    fmt::format("{}: gemm has no contender '{}'", o.id, who));
      };
      contender = gemm(o.contender);
      baseline = gemm(o.baseline);
    } else {
      const ops::OpTag op = ops::parse_op_kind(o.benchmark);
      std::mt19937 rng(1);
      const Dims shape(o.shape);
      const std::int64_t last = shape[shape.size() - 1];
      inputs.push_back(random(shape, rng));
      if (op == ops::OpTag::cross_entropy) {
        std::vector<std::int64_t> t(static_cast<std::size_t>(shape[0]));
        for (auto& x : t) x = static_cast<std::int64_t>(rng() % static_cast<unsigned>(last));
        inputs.push_back(Tensor::from_values<std::int64_t>(Dims{shape[0]}, t));
      } else if (op == ops::OpTag::layer_norm || op == ops::OpTag::rms_norm) {
        inputs.push_back(random(Dims{last}, rng));
        if (op == ops::OpTag::layer_norm) inputs.push_back(random(Dims{last}, rng));
        attrs.set("normalized_shape", std::vector<std::int64_t>{last});
      } else if (op == ops::OpTag::matmul) {
        inputs.push_back(random(Dims{last, last}, rng));
      } else if (ops::op_info(op).min_arity != 1) {
        throw_error(ErrorCode::invalid_argument, "bench.check",
                    fmt::format("{}: no input recipe for benchmark '{}'", o.id, o.benchmark));
      }
      auto run = [&](const std::string& who) -> std::function<void()> {
        const kernels::Handler* h = kernels::find_handler(handlers_of(who == "openblas" ? "blas" : who), op);
        if (h == nullptr)
          throw_error(ErrorCode::invalid_argument, "bench.check",
                      fmt::format("{}: provider '{}' has no {} kernel", o.id, who, o.benchmark));
        return [&, h] {
          std::vector<TensorView> v;
          v.reserve(inputs.size());
          for (const auto& t : inputs) v.push_back(t.as_view());
          Tensor y = kernels::run_forward(*h, v, attrs);
          (void)y;
        };
      };
      contender = run(o.contender);
      baseline = run(o.baseline);
    }
    PerformanceResult r{o.id, o.benchmark, o.contender, o.baseline, 1e30, 1e30, 0, o.min_ratio, "", ""};
    for (int rep = 0; rep < o.repetitions; ++rep) {  // interleaved, best of N
      r.contender_seconds = std::min(r.contender_seconds, seconds_per_call(contender));
      r.baseline_seconds = std::min(r.baseline_seconds, seconds_per_call(baseline));
    }
    r.ratio = r.baseline_seconds / r.contender_seconds;
    const bool uses_openblas =
        o.contender == "openblas" || o.contender == "blas" || o.baseline == "openblas" || o.baseline == "blas";
    const bool forced_here = forced.forced && uses_openblas;
    r.verdict = ratio_verdict(r.ratio >= o.min_ratio, forced_here, forced.proxy);
    if (forced_here) r.note = forced.note;
    out.push_back(std::move(r));
  }
  if (!matched)
    throw_error(ErrorCode::invalid_argument, "bench.check", fmt::format("no performance obligation '{}'", only));
  return out;
}

}  // namespace pact::verify
