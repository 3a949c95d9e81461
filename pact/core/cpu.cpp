#include "pact/core/cpu.hpp"

#include <cpuid.h>
#include <cpuinfo.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace pact {

namespace {

// AVX-VNNI (CPUID leaf 7, subleaf 1, EAX bit 4): the one feature this libcpuinfo release (2022) does not
// report. Read directly, here only.
bool cpuid_avx_vnni() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (eax & (1u << 4)) != 0;
}

CpuFacts detect() {
  CpuFacts f;
  if (!cpuinfo_initialize()) return f;  // the conservative defaults, portable kernels only
  f.detected = true;
  if (const cpuinfo_package* p = cpuinfo_get_package(0); p != nullptr && p->name[0] != '\0') f.model = p->name;
  if (f.model.empty()) f.model = "unknown";
  const bool avx2 = cpuinfo_has_x86_avx2() && cpuinfo_has_x86_fma3() && cpuinfo_has_x86_f16c();
  const bool avx512 = avx2 && cpuinfo_has_x86_avx512f() && cpuinfo_has_x86_avx512vl() && cpuinfo_has_x86_avx512dq() &&
                      cpuinfo_has_x86_avx512bw();
  f.avx512_bf16 = avx512 && cpuinfo_has_x86_avx512bf16();
  f.best = f.avx512_bf16 ? Isa::avx512_bf16 : avx512 ? Isa::avx512 : avx2 ? Isa::avx2 : Isa::portable;
  f.avx512_vnni = avx512 && cpuinfo_has_x86_avx512vnni();
  f.avx_vnni = avx2 && cpuid_avx_vnni();
  f.cores = static_cast<int>(std::max<std::uint32_t>(1, cpuinfo_get_cores_count()));
  f.logical = static_cast<int>(std::max<std::uint32_t>(1, cpuinfo_get_processors_count()));
  if (const cpuinfo_cache* c = cpuinfo_get_l1d_cache(0); c != nullptr && c->size > 0) f.l1d = c->size;
  if (const cpuinfo_cache* c = cpuinfo_get_l2_cache(0); c != nullptr && c->size > 0) {
    // An L2 shared by several cores (some Intel Atom clusters) counts per core.
    const std::uint32_t cores_sharing = std::max<std::uint32_t>(1, c->processor_count / (f.logical / f.cores));
    f.l2 = c->size / cores_sharing;
  }
  if (const cpuinfo_cache* c = cpuinfo_get_l3_cache(0); c != nullptr) {
    f.l3 = c->size;
    f.l3_sharing = static_cast<int>(std::max<std::uint32_t>(1, c->processor_count));
  }
  return f;
}

// The level PACT_ISA asks for, clamped to what the CPU runs; a bad value is reported once on stderr and
// ignored (the CPU's best stands).
Isa initial_level() noexcept {
  const CpuFacts& f = cpu_facts();
  const char* env = std::getenv("PACT_ISA");
  if (env == nullptr || *env == '\0') return f.best;
  const std::optional<Isa> want = parse_isa(env);
  if (!want) {
    std::fprintf(stderr, "pact: PACT_ISA=%s is not a level (portable, avx2, avx512, avx512_bf16); using %s\n", env,
                 std::string(isa_name(f.best)).c_str());
    return f.best;
  }
  if (static_cast<int>(*want) > static_cast<int>(f.best)) {
    std::fprintf(stderr, "pact: PACT_ISA=%s: this CPU (%s) runs at most %s; using %s\n", env, f.model.c_str(),
                 std::string(isa_name(f.best)).c_str(), std::string(isa_name(f.best)).c_str());
    return f.best;
  }
  return *want;
}

std::atomic<int>& level() noexcept {
  static std::atomic<int> l{static_cast<int>(initial_level())};
  return l;
}

}  // namespace

std::string_view isa_name(Isa isa) noexcept {
  switch (isa) {
    case Isa::portable:
      return "portable";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
    case Isa::avx512_bf16:
      return "avx512_bf16";
  }
  return "portable";
}

std::optional<Isa> parse_isa(std::string_view name) noexcept {
  for (Isa i : kIsaLevels)
    if (isa_name(i) == name) return i;
  return std::nullopt;
}

const CpuFacts& cpu_facts() {
  static const CpuFacts facts = detect();
  return facts;
}

Isa active_isa() noexcept { return static_cast<Isa>(level().load(std::memory_order_relaxed)); }

bool cpu_runs(Isa isa) noexcept { return static_cast<int>(isa) <= static_cast<int>(cpu_facts().best); }

bool set_active_isa(Isa isa) noexcept {
  if (!cpu_runs(isa)) return false;
  level().store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

std::string_view requested_isa() noexcept {
  const char* env = std::getenv("PACT_ISA");
  return env == nullptr ? std::string_view{} : std::string_view{env};
}

std::string describe_cpu() {
  const CpuFacts& f = cpu_facts();
  std::string ext;
  if (f.avx512_bf16) ext += " avx512_bf16";
  if (f.avx512_vnni) ext += " avx512_vnni";
  if (f.avx_vnni) ext += " avx_vnni";
  return fmt::format("{}, {} core(s) / {} thread(s), L1d {} KiB, L2 {} KiB, L3 {} KiB; ISA best {}, active {}{}{}{}",
                     f.model, f.cores, f.logical, f.l1d >> 10, f.l2 >> 10, f.l3 >> 10, isa_name(f.best),
                     isa_name(active_isa()), ext.empty() ? "" : ";", ext,
                     f.detected ? "" : " (libcpuinfo could not initialise: defaults)");
}

std::uint64_t host_memory_budget() noexcept {
  std::uint64_t budget = std::numeric_limits<std::uint64_t>::max();
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      unsigned long long kib = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        budget = static_cast<std::uint64_t>(kib) * 1024;
        break;
      }
    }
    std::fclose(f);
  }
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    unsigned long long pages = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    const std::uint64_t used = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t left = as.rlim_cur > used ? as.rlim_cur - used : 0;
    budget = std::min(budget, left);
  }
  return budget;
}

}  // namespace pact
