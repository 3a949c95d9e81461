// The one SIMD dispatch table (pact/core/simd_dispatch.hpp): every function compiled for a level above
// the baseline is registered in it, no source tests a CPU feature or writes a target attribute of its own,
// and a forced level picks that level's variant (or the next lower one a family has).
//
// This binary links the kernels and the trainer, so every family in the library is registered.

#include "pact/core/simd_dispatch.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "pact/core/cpu.hpp"
#include "pact/kernels/cpu/gemm.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/train/optim.hpp"

namespace pact {
namespace {

namespace fs = std::filesystem;

struct Source {
  std::string path;
  std::string text;
};

// Every C++ source of the library and the CLI (the tests run from the source tree).
std::vector<Source> library_sources() {
  std::vector<Source> out;
  for (const char* root : {"pact", "tools"}) {
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".inc")) continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      out.push_back({e.path().generic_string(), ss.str()});
    }
  }
  return out;
}

bool is_dispatch_home(const std::string& path) {
  return path == "pact/core/simd_dispatch.hpp" || path == "pact/core/cpu.cpp";
}

std::set<std::string> split(std::string_view symbols) {
  std::set<std::string> out;
  std::istringstream in{std::string(symbols)};
  for (std::string s; in >> s;) out.insert(s);
  return out;
}

// The target functions a source defines: (level, name) for each PACT_TARGET_* that is not an always-inline
// helper (those the compiler only inlines where the level's instructions are allowed).
std::vector<std::pair<Isa, std::string>> target_functions(const std::string& text) {
  static const std::regex decl(
      R"(PACT_TARGET_(AVX2|AVX512_BF16|AVX512)\s+((?:PACT_SIMD_INLINE\s+)?)[^(;{]*?(\w+)\s*\()");
  std::vector<std::pair<Isa, std::string>> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it) {
    if ((*it)[2].length() > 0) continue;
    const std::string level = (*it)[1];
    out.emplace_back(level == "AVX2" ? Isa::avx2 : level == "AVX512" ? Isa::avx512 : Isa::avx512_bf16, (*it)[3].str());
  }
  return out;
}

TEST(SimdDispatch, EveryTargetFunctionIsRegisteredAtItsLevel) {
  ASSERT_FALSE(kernels::native_handlers().empty());  // the kernels' families are linked in
  std::map<Isa, std::set<std::string>> registered;
  for (const auto& f : simd::families())
    for (Isa level : kIsaLevels)
      for (const auto& s : split(f.symbols[static_cast<std::size_t>(level)])) registered[level].insert(s);
  int found = 0;
  for (const auto& src : library_sources()) {
    if (is_dispatch_home(src.path)) continue;
    for (const auto& [level, name] : target_functions(src.text)) {
      ++found;
      EXPECT_TRUE(registered[level].contains(name)) << src.path << ": " << name << " is compiled for "
                                                    << isa_name(level) << " but no simd::Table lists it at that level";
    }
  }
  EXPECT_GE(found, 5) << "the scan found too few target functions: is it reading the sources?";
}

TEST(SimdDispatch, NoSourceTestsTheCpuOrSetsATargetOutsideTheTable) {
  const std::regex banned(
      R"(target_clones|__attribute__\s*\(\(\s*target\s*\(|gnu::target|__builtin_cpu_supports|__get_cpuid|cpuinfo_has_)");
  for (const auto& src : library_sources()) {
    if (is_dispatch_home(src.path)) continue;
    std::smatch m;
    EXPECT_FALSE(std::regex_search(src.text, m, banned))
        << src.path << " uses " << m.str() << ": SIMD code goes through pact/core/simd_dispatch.hpp";
  }
}

// The scan itself: a target function missing from the table is found, an inline helper is not, and a
// registered family's symbols all exist in the sources (no stale names).
TEST(SimdDispatch, TheScanFindsAnUnregisteredFunctionAndStaleNames) {
  const auto found = target_functions(
      "PACT_TARGET_AVX2 void rogue_kernel(float* x) {}\n"
      "template <int N>\nPACT_TARGET_AVX512 static float wide_one(const float* a, int n);\n"
      "PACT_TARGET_AVX2 PACT_SIMD_INLINE void helper(const float* a) {}\n");
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0], (std::pair<Isa, std::string>{Isa::avx2, "rogue_kernel"}));
  EXPECT_EQ(found[1], (std::pair<Isa, std::string>{Isa::avx512, "wide_one"}));

  std::string all;
  for (const auto& src : library_sources()) all += src.text;
  for (const auto& f : simd::families())
    for (Isa level : kIsaLevels)
      for (const auto& s : split(f.symbols[static_cast<std::size_t>(level)]))
        EXPECT_TRUE(std::regex_search(all, std::regex("\\b" + s + "\\b")))
            << "family " << f.name << " names " << s << " at " << isa_name(level) << ", which no source defines";
}

TEST(SimdDispatch, FamiliesCoverTheKernelsAndOptimizers) {
  std::set<std::string> names;
  for (const auto& f : simd::families()) names.insert(std::string(f.name));
  for (const char* want : {"sgemm", "strided_copy", "exp_shifted", "norm_forward_rows", "gelu_rows", "adam_f32"})
    EXPECT_TRUE(names.contains(want)) << want;
}

// A forced level picks its own variant, or the next lower one where a family has none (strided_copy has
// no AVX2 variant); a level the CPU cannot run is refused and changes nothing.
TEST(SimdDispatch, AForcedLevelPicksItsVariantOrTheNextLower) {
  const Isa best = cpu_facts().best;
  for (Isa level : kIsaLevels) {
    const ScopedIsa forced(level);
    if (!cpu_runs(level)) {
      EXPECT_FALSE(forced.active());
      EXPECT_EQ(active_isa(), best);
      continue;
    }
    ASSERT_TRUE(forced.active());
    EXPECT_EQ(active_isa(), level);
    // sgemm has no avx512_bf16 variant: its avx512 one serves that level.
    EXPECT_EQ(kernels::cpu::sgemm_variant(), isa_name(level == Isa::avx512_bf16 ? Isa::avx512 : level));
    for (const auto& f : simd::families()) {
      if (f.name == "strided_copy") {
        EXPECT_EQ(f.serves(level), level == Isa::avx2          ? Isa::portable
                                   : level == Isa::avx512_bf16 ? Isa::avx512
                                                               : level);
      }
      if (f.name == "narrow_bf16") {
        EXPECT_EQ(f.serves(level), level);  // one variant per level
      }
    }
  }
  EXPECT_EQ(active_isa(), best);
  EXPECT_FALSE(parse_isa("sse9").has_value());
  EXPECT_EQ(parse_isa("avx2"), Isa::avx2);
  EXPECT_EQ(parse_isa("avx512_bf16"), Isa::avx512_bf16);
}

// The CPU facts are plausible (libcpuinfo ran) and describe_cpu says what the dispatch uses.
TEST(SimdDispatch, CpuFactsAreDetected) {
  const CpuFacts& f = cpu_facts();
  EXPECT_TRUE(f.detected);
  EXPECT_GE(f.cores, 1);
  EXPECT_GE(f.logical, f.cores);
  EXPECT_GE(f.l1d, std::size_t{8} << 10);
  EXPECT_GE(f.l2, f.l1d);
  const std::string d = describe_cpu();
  EXPECT_NE(d.find(f.model), std::string::npos) << d;
  EXPECT_NE(d.find(std::string("active ") + std::string(isa_name(active_isa()))), std::string::npos) << d;
}

// A fake /sys/devices/system/cpu/cpu0: each entry "indexN/file" -> content.
fs::path fake_cpu_dir(const std::string& name, const std::map<std::string, std::string>& files) {
  const fs::path dir = fs::temp_directory_path() / ("pact-cpu-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const auto& [file, content] : files) {
    fs::create_directories((dir / file).parent_path());
    std::ofstream(dir / file) << content << "\n";
  }
  return dir;
}

// Note [Caches from Linux]: the sizes Linux describes replace libcpuinfo's. An L2 shared by the two threads
// of one core counts whole; an L3 names how many processors share it; the threads per core give the cores.
TEST(SimdDispatch, CachesComeFromLinuxWhereItDescribesThem) {
  const fs::path dir = fake_cpu_dir("good", {{"cache/index0/level", "1"},
                                             {"cache/index0/type", "Data"},
                                             {"cache/index0/size", "48K"},
                                             {"cache/index0/shared_cpu_list", "0,8"},
                                             {"cache/index1/level", "1"},
                                             {"cache/index1/type", "Instruction"},
                                             {"cache/index1/size", "32K"},
                                             {"cache/index1/shared_cpu_list", "0,8"},
                                             {"cache/index2/level", "2"},
                                             {"cache/index2/type", "Unified"},
                                             {"cache/index2/size", "1024K"},
                                             {"cache/index2/shared_cpu_list", "0,8"},
                                             {"cache/index3/level", "3"},
                                             {"cache/index3/type", "Unified"},
                                             {"cache/index3/size", "32M"},
                                             {"cache/index3/shared_cpu_list", "0-7,8-15"},
                                             {"topology/thread_siblings_list", "0,8"}});
  CpuFacts f;
  f.logical = 16;
  ASSERT_TRUE(read_linux_caches(dir.string(), f));
  EXPECT_EQ(f.l1d, std::size_t{48} << 10);
  EXPECT_EQ(f.l2, std::size_t{1} << 20);
  EXPECT_EQ(f.l3, std::size_t{32} << 20);
  EXPECT_EQ(f.l3_sharing, 16);
  EXPECT_EQ(f.cores, 8);
  fs::remove_all(dir);

  // On a Linux machine the process's facts come from there (this one's libcpuinfo may disagree).
  if (fs::exists("/sys/devices/system/cpu/cpu0/cache/index0/size")) {
    EXPECT_EQ(cpu_facts().cache_source, "linux") << describe_cpu();
    EXPECT_NE(describe_cpu().find("(from linux)"), std::string::npos) << describe_cpu();
  }
}

// Malformed entries are skipped, never read as sizes; with none readable the facts do not change.
TEST(SimdDispatch, MalformedLinuxCacheEntriesAreSkipped) {
  const fs::path dir = fake_cpu_dir("bad", {{"cache/index0/level", "1"},
                                            {"cache/index0/type", "Data"},
                                            {"cache/index0/size", "48Q"},
                                            {"cache/index0/shared_cpu_list", "0"},
                                            {"cache/index1/level", "2"},
                                            {"cache/index1/type", "Unified"},
                                            {"cache/index1/size", "-1024K"},
                                            {"cache/index1/shared_cpu_list", "0"},
                                            {"cache/index2/level", "3"},
                                            {"cache/index2/type", "Unified"},
                                            {"cache/index2/size", "99999999999M"},
                                            {"cache/index2/shared_cpu_list", "0"},
                                            {"cache/index3/level", "3"},
                                            {"cache/index3/type", "Unified"},
                                            {"cache/index3/size", "8M"},
                                            {"cache/index3/shared_cpu_list", "5-3"},
                                            {"cache/index4/level", "2"},
                                            {"cache/index4/type", "Unified"},
                                            {"cache/index4/size", "2M"},
                                            {"cache/index4/shared_cpu_list", "0-4294967295"},
                                            {"topology/thread_siblings_list", "0,"}});
  CpuFacts f;
  const CpuFacts before = f;
  EXPECT_FALSE(read_linux_caches(dir.string(), f));
  EXPECT_EQ(f.l1d, before.l1d);
  EXPECT_EQ(f.l2, before.l2);
  EXPECT_EQ(f.l3, before.l3);
  EXPECT_EQ(f.cores, before.cores);
  EXPECT_FALSE(read_linux_caches((dir / "absent").string(), f));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pact
