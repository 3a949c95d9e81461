#include "pact/core/cpu.hpp"

#include <cpuid.h>
#include <cpuinfo.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

// The first line of a sysfs file; "" when it cannot be read.
std::string sysfs_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return {};
  return line;
}

// A decimal number at the front of `text`, which it consumes; nullopt when there is none or it exceeds `max`.
std::optional<std::uint64_t> leading_number(std::string_view& text, std::uint64_t max) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end == text.data() || v > max) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return v;
}

// How many CPUs a sysfs CPU list names ("0-3,8,10-11" is seven); 0 for anything malformed.
int cpu_list_count(std::string_view list) {
  constexpr std::uint64_t kMaxCpu = 1 << 20;
  std::uint64_t n = 0;
  while (!list.empty()) {
    const auto lo = leading_number(list, kMaxCpu);
    if (!lo) return 0;
    std::uint64_t hi = *lo;
    if (!list.empty() && list.front() == '-') {
      list.remove_prefix(1);
      const auto h = leading_number(list, kMaxCpu);
      if (!h || *h < *lo) return 0;
      hi = *h;
    }
    n += hi - *lo + 1;
    if (n > kMaxCpu) return 0;
    if (list.empty()) break;
    if (list.front() != ',' || list.size() == 1) return 0;
    list.remove_prefix(1);
  }
  return static_cast<int>(n);
}

// A sysfs cache size ("48K", "32768K", "1M"): bytes, or 0 for anything else (or more than 4 GiB).
std::size_t cache_size(std::string_view text) {
  const auto n = leading_number(text, std::uint64_t{1} << 32);
  if (!n || *n == 0) return 0;
  const int shift = text.empty() ? 0 : text == "K" ? 10 : text == "M" ? 20 : text == "G" ? 30 : -1;
  if (shift < 0 || (*n << shift) > (std::uint64_t{1} << 32)) return 0;
  return static_cast<std::size_t>(*n << shift);
}

const char* const kLinuxCpu0 = "/sys/devices/system/cpu/cpu0";

// What libcpuinfo reports, into f; false, changing nothing, when it cannot initialise.
bool libcpuinfo_facts(CpuFacts& f) {
  if (!cpuinfo_initialize()) return false;
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
  return true;
}

// Without libcpuinfo the conservative defaults stand (portable kernels only); the caches come from Linux
// wherever it describes them.
CpuFacts detect() {
  CpuFacts f;
  libcpuinfo_facts(f);
  if (read_linux_caches(kLinuxCpu0, f)) f.cache_source = "linux";
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

// Note [Caches from Linux]
// The cache sizes come from Linux's description of CPU 0's caches (/sys/devices/system/cpu/cpu0/cache/
// index*/: level, type, size, shared_cpu_list) where it exists, and from libcpuinfo otherwise. The kernel
// decodes the CPU's own cache-descriptor leaves (CPUID 4, or 0x8000001D on AMD) for every CPU it runs on;
// libcpuinfo's release here (2022) falls back to guesses on CPUs newer than it: on a Zen 5 (family 26) it
// reported a 32 KiB L1d, a 512 KiB L2 and no L3 for 48 KiB, 1 MiB and 32 MiB, and the GEMM's blocking, derived
// from those sizes, cut a 2048-wide B into blocks of 304 columns (the no-L3 fallback), repacking A for each.
// The same directory gives the threads per core (cpu0/topology/thread_siblings_list), where libcpuinfo took
// two single-thread cores for one core with two threads.
bool read_linux_caches(const std::string& cpu_dir, CpuFacts& f) {
  const std::string cpu0 = cpu_dir + "/";
  bool found = false;
  const int siblings = cpu_list_count(sysfs_line(cpu0 + "topology/thread_siblings_list"));
  const int threads_per_core = std::max(1, siblings);
  for (int index = 0; index < 8; ++index) {
    const std::string dir = cpu0 + "cache/index" + std::to_string(index) + "/";
    const std::string level = sysfs_line(dir + "level"), type = sysfs_line(dir + "type");
    const std::size_t size = cache_size(sysfs_line(dir + "size"));
    const int sharing = cpu_list_count(sysfs_line(dir + "shared_cpu_list"));
    if (level.empty() || size == 0 || sharing == 0 || type == "Instruction") continue;
    if (level == "1" && type == "Data") {
      f.l1d = size;
    } else if (level == "2") {
      f.l2 = size / static_cast<std::size_t>(std::max(1, sharing / threads_per_core));
    } else if (level == "3") {
      f.l3 = size;
      f.l3_sharing = sharing;
    } else {
      continue;
    }
    found = true;
  }
  if (found && siblings > 0) f.cores = std::max(1, f.logical / threads_per_core);
  return found;
}

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
  return fmt::format(
      "{}, {} core(s) / {} thread(s), L1d {} KiB, L2 {} KiB, L3 {} KiB (from {}); ISA best {}, active {}{}{}{}",
      f.model, f.cores, f.logical, f.l1d >> 10, f.l2 >> 10, f.l3 >> 10, f.cache_source, isa_name(f.best),
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
