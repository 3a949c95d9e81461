#pragma once
/// The one place that knows the CPU (issue 18): its model, the vector ISA level it can run, the core count
/// and cache sizes, detected once through libcpuinfo (the library PyTorch and XNNPACK use). Kernel
/// blocking derives from these caches, and every SIMD kernel is chosen through the ISA level here
/// (pact/core/simd_dispatch.hpp), never through a cpu-feature test of its own.
///
/// The active level is the CPU's best, or lower where the environment variable PACT_ISA
/// (portable | avx2 | avx512 | avx512_bf16) asks for it, so that every variant a machine can run is testable on it.
/// An ARM level (neon, sve) would be one more enumerator, ordered after portable in its own family.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pact {

/// The vector ISA levels Pact's kernels are written for, lowest first. Each level includes the ones
/// below it: avx2 is AVX2 + FMA + F16C, avx512 is AVX-512 F/VL/DQ/BW (Skylake-X and later, Zen 4 and
/// later), avx512_bf16 adds AVX-512 BF16 (vcvtne2ps2bf16, vdpbf16ps: Cooper Lake, Sapphire Rapids, Zen 4).
/// A family without an avx512_bf16 variant runs its avx512 one there.
enum class Isa : int { portable = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3 };
inline constexpr int kIsaCount = 4;
inline constexpr std::array<Isa, kIsaCount> kIsaLevels{Isa::portable, Isa::avx2, Isa::avx512, Isa::avx512_bf16};

/// "portable", "avx2", "avx512", "avx512_bf16".
std::string_view isa_name(Isa isa) noexcept;
/// The level named `name`; nullopt for anything else.
std::optional<Isa> parse_isa(std::string_view name) noexcept;

/// What libcpuinfo found, with the caches as Linux describes them where it does (Note [Caches from Linux] in
/// cpu.cpp). Sizes are bytes; a cache the CPU does not report is 0.
struct CpuFacts {
  std::string model;           ///< the package name ("AMD EPYC 9454", "Intel Xeon Gold 6338"), or "unknown"
  Isa best = Isa::portable;    ///< the highest level the CPU runs
  bool avx512_bf16 = false;    ///< AVX-512 BF16 (vdpbf16ps): the avx512_bf16 level
  bool avx512_vnni = false;    ///< AVX-512 VNNI (vpdpbusd): what int8 kernels will need
  bool avx_vnni = false;       ///< AVX-VNNI (the VEX encoding, on AVX2-only CPUs since Alder Lake / Zen 5)
  int cores = 1;               ///< physical cores
  int logical = 1;             ///< logical processors
  std::size_t l1d = 32 << 10;  ///< L1 data cache per core
  std::size_t l2 = 512 << 10;  ///< L2 per core
  std::size_t l3 = 0;          ///< L3 of the first cluster (shared by l3_sharing logical processors)
  int l3_sharing = 1;
  std::string cache_source = "libcpuinfo";  ///< where the sizes came from: "linux" (sysfs) or "libcpuinfo"
  bool detected = false;  ///< false when libcpuinfo could not initialise (the defaults above then stand)
};

/// Overrides f's cache sizes (and its core count, from the threads per core) with those Linux describes
/// under cpu_dir (/sys/devices/system/cpu/cpu0 for cpu_facts(): cache/index*/{level,type,size,
/// shared_cpu_list}, topology/thread_siblings_list). Entries that are missing or malformed are skipped;
/// returns false, changing nothing, when no cache entry could be read.
bool read_linux_caches(const std::string& cpu_dir, CpuFacts& f);

/// The facts, detected on first use (thread-safe).
const CpuFacts& cpu_facts();

/// The level kernels run at now: the CPU's best, or the lower level PACT_ISA names. A PACT_ISA naming a
/// level the CPU cannot run, or no level at all, is refused: the process prints why once and keeps the
/// CPU's best (a forced level must never be silently higher than the machine).
Isa active_isa() noexcept;
/// True when the CPU can run `isa`.
bool cpu_runs(Isa isa) noexcept;
/// Sets the active level (tests and benchmarks sweep every level); false, and no change, when the CPU
/// cannot run it. Not meant to be called while kernels run on other threads.
bool set_active_isa(Isa isa) noexcept;
/// What PACT_ISA asked for ("" when unset), for reports.
std::string_view requested_isa() noexcept;

/// Sets the active level for a scope and restores the previous one after it.
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa) noexcept : previous_(active_isa()), ok_(set_active_isa(isa)) {}
  ~ScopedIsa() { set_active_isa(previous_); }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;
  /// False when the CPU cannot run the level (the previous one stays active).
  bool active() const noexcept { return ok_; }

 private:
  Isa previous_;
  bool ok_;
};

/// One line: model, cores, caches, best and active level, extensions.
std::string describe_cpu();

/// Bytes this process can still allocate, as far as the host says before it is tried: the smaller of the
/// kernel's estimate of available memory (MemAvailable) and what the address-space limit (RLIMIT_AS)
/// leaves beyond the current virtual size. Readers check large allocations they can estimate against it,
/// so that a document too large for the machine is refused typed before the memory is spent (a partly
/// built JSON document cannot even be destroyed once memory runs out).
std::uint64_t host_memory_budget() noexcept;

}  // namespace pact
