#include "pact/core/bench_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "pact/core/cpu.hpp"
#include "pact/core/error.hpp"

namespace pact {

BenchReport::BenchReport(std::string benchmark, std::string command)
    : benchmark_(std::move(benchmark)), command_(std::move(command)) {}

void BenchReport::add_case(BenchCase c) { cases_.push_back(std::move(c)); }

void BenchReport::add_ratio(const BenchRatio& r) {
  auto find = [&](const std::string& name) -> const BenchCase& {
    for (const auto& c : cases_) {
      if (c.name == name) return c;
    }
    throw_error(ErrorCode::invalid_argument, "bench.add_ratio", fmt::format("no case named '{}'", name));
  };
  const BenchCase& num = find(r.numerator);
  const BenchCase& den = find(r.denominator);
  const double value = num.value / den.value;
  std::string verdict = std::isfinite(value)
                            ? ratio_verdict(value <= r.goal_max, r.baseline_forced, r.proxy, r.baseline_degraded)
                            : std::string("invalid");
  ratios_.push_back(Json{{"name", r.name},
                         {"numerator", r.numerator},
                         {"denominator", r.denominator},
                         {"value", value},
                         {"goal_max", r.goal_max},
                         {"baseline_forced", r.baseline_forced},
                         {"proxy", r.baseline_forced && r.proxy},
                         {"baseline_degraded", r.baseline_degraded},
                         {"verdict", verdict}});
}

std::string ratio_verdict(bool met, bool baseline_forced, bool proxy, bool baseline_degraded) {
  if ((baseline_forced && !proxy) || baseline_degraded) return "invalid";
  if (!met) return "fail";
  return baseline_forced ? "proxy" : "pass";
}

Isa openblas_kernel_level(std::string_view corename) noexcept {
  std::string c(corename);
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (c == "skylakex" || c == "cooperlake" || c == "sapphirerapids") return Isa::avx512;
  if (c == "haswell" || c == "zen") return Isa::avx2;
  return Isa::portable;
}

OpenBlasBaseline openblas_baseline(std::string_view corename) {
  OpenBlasBaseline b;
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  if (core == nullptr) {
    // The CPU's best level, counting every AVX-512 level as avx512 (OpenBLAS's SGEMM has no bf16 level).
    const Isa cpu = std::min(cpu_facts().best, Isa::avx512);
    const Isa kernel = openblas_kernel_level(corename);
    b.degraded = kernel < cpu;
    if (b.degraded)
      b.note = fmt::format(
          "OpenBLAS chose its {} kernel ({}) on a CPU that runs {}: a degraded baseline; "
          "force OPENBLAS_CORETYPE={} with PACT_ISA={} for a matched proxy",
          corename, isa_name(kernel), isa_name(cpu), cpu == Isa::avx512 ? "SkylakeX" : "Haswell", isa_name(cpu));
    return b;
  }
  b.forced = true;
  const std::string c(core);
  const Isa level = active_isa();
  const Isa kernel = openblas_kernel_level(c);
  b.proxy = !requested_isa().empty() && kernel != Isa::portable && std::min(level, Isa::avx512) == kernel;
  b.note = b.proxy ? fmt::format("proxy: OPENBLAS_CORETYPE={} against PACT_ISA={}", c, isa_name(level))
                   : fmt::format("OpenBLAS kernel forced by OPENBLAS_CORETYPE={} (unmatched: Pact runs {})", c,
                                 isa_name(level));
  return b;
}

Json BenchReport::to_json() const {
  Json cases = Json::array();
  for (const auto& c : cases_) {
    cases.push_back(Json{{"name", c.name},
                         {"contender", c.contender},
                         {"metric", c.metric},
                         {"unit", c.unit},
                         {"value", c.value},
                         {"repetitions", c.repetitions}});
  }
  return Json{{"schema", "pact.bench.v1"},          {"benchmark", benchmark_}, {"command", command_},
              {"environment", bench_environment()}, {"cases", cases},          {"ratios", ratios_}};
}

Json bench_environment() {
  Json env;
  const char* omp = std::getenv("OMP_NUM_THREADS");
  env["threads"] = omp ? std::atoi(omp) : static_cast<int>(std::thread::hardware_concurrency());
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  env["openblas_coretype"] = core ? Json(core) : Json(nullptr);
#if defined(__clang__)
  env["compiler"] = fmt::format("clang {}.{}", __clang_major__, __clang_minor__);
#elif defined(__GNUC__)
  env["compiler"] = fmt::format("g++ {}.{}", __GNUC__, __GNUC_MINOR__);
#else
  env["compiler"] = "unknown";
#endif
#ifdef NDEBUG
  env["build_type"] = "release";
#else
  env["build_type"] = "debug";
#endif
  return env;
}

void validate_bench_report(const Json& report) {
  auto fail = [](const std::string& field, const std::string& why) {
    throw_error(ErrorCode::parse_error, "bench.validate", fmt::format("{}: {}", field, why));
  };
  auto require = [&](const Json& obj, const std::string& path, const char* key, Json::value_t type) -> const Json& {
    if (!obj.is_object() || !obj.contains(key)) fail(path + "." + key, "missing");
    const Json& v = obj.at(key);
    bool ok = v.type() == type || (type == Json::value_t::number_float && v.is_number()) ||
              (type == Json::value_t::number_integer && v.is_number_integer());
    if (!ok) fail(path + "." + key, fmt::format("expected {}, got {}", Json(type).type_name(), v.type_name()));
    return v;
  };
  if (!report.is_object()) fail("$", "not an object");
  if (require(report, "$", "schema", Json::value_t::string) != "pact.bench.v1") fail("$.schema", "not pact.bench.v1");
  require(report, "$", "benchmark", Json::value_t::string);
  require(report, "$", "command", Json::value_t::string);
  const Json& env = require(report, "$", "environment", Json::value_t::object);
  require(env, "$.environment", "threads", Json::value_t::number_integer);
  if (!env.contains("openblas_coretype")) fail("$.environment.openblas_coretype", "missing");
  std::vector<std::string> names;
  const Json& cases = require(report, "$", "cases", Json::value_t::array);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::string p = fmt::format("$.cases[{}]", i);
    names.push_back(require(cases[i], p, "name", Json::value_t::string).get<std::string>());
    for (const char* k : {"contender", "metric", "unit"}) require(cases[i], p, k, Json::value_t::string);
    require(cases[i], p, "value", Json::value_t::number_float);
    require(cases[i], p, "repetitions", Json::value_t::number_integer);
  }
  const Json& ratios = require(report, "$", "ratios", Json::value_t::array);
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    std::string p = fmt::format("$.ratios[{}]", i);
    require(ratios[i], p, "name", Json::value_t::string);
    for (const char* k : {"numerator", "denominator"}) {
      auto n = require(ratios[i], p, k, Json::value_t::string).get<std::string>();
      if (std::find(names.begin(), names.end(), n) == names.end()) fail(p + "." + k, "names no case");
    }
    require(ratios[i], p, "value", Json::value_t::number_float);
    require(ratios[i], p, "goal_max", Json::value_t::number_float);
    require(ratios[i], p, "baseline_forced", Json::value_t::boolean);
    auto verdict = require(ratios[i], p, "verdict", Json::value_t::string).get<std::string>();
    if (verdict != "pass" && verdict != "fail" && verdict != "proxy" && verdict != "invalid")
      fail(p + ".verdict", "not pass|fail|proxy|invalid");
    const bool forced = ratios[i]["baseline_forced"].get<bool>();
    const bool proxy = ratios[i].contains("proxy") && ratios[i]["proxy"].is_boolean() && ratios[i]["proxy"].get<bool>();
    if (forced && verdict == "pass") fail(p + ".verdict", "a forced baseline is never pass");
    if (forced && !proxy && verdict != "invalid") fail(p + ".verdict", "an unmatched forced baseline must be invalid");
    if (!forced && (proxy || verdict == "proxy")) fail(p + ".verdict", "proxy without a forced baseline");
    if (ratios[i].contains("baseline_degraded")) {
      const Json& d = ratios[i]["baseline_degraded"];
      if (!d.is_boolean()) fail(p + ".baseline_degraded", fmt::format("expected boolean, got {}", d.type_name()));
      if (d.get<bool>() && verdict != "invalid") fail(p + ".verdict", "a degraded baseline must be invalid");
    }
  }
}

}  // namespace pact
