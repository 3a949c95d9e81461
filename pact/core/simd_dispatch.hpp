#pragma once
/// The one dispatch table of SIMD code (issue 18). Every function compiled for an ISA level above the
/// build's baseline is written with PACT_TARGET_AVX2 or PACT_TARGET_AVX512 and reached through a
/// simd::Table, which picks the variant of the active level (pact/core/cpu.hpp: the CPU's best, or lower
/// under PACT_ISA) at each call. No kernel tests a CPU feature itself, and target_clones, raw target
/// attributes and __builtin_cpu_supports appear nowhere else: tests/core/simd_dispatch_test.cpp scans the
/// sources and fails on a target function that is not registered here.
///
/// Two ways to write a family (levels: portable, avx2, avx512, avx512_bf16; pact/core/cpu.hpp):
///   - auto-vectorised code: one PACT_SIMD_INLINE body, compiled once per level by PACT_SIMD_VARIANTS
///     (the body is inlined into a wrapper carrying each level's target, so the vectoriser sees the
///     level's registers);
///   - intrinsics: one function per level, registered by name in a Table (PACT_SIMD_FN(f) gives the
///     pointer and its name). Helpers such a function calls are PACT_SIMD_INLINE with the same target,
///     and the compiler refuses to inline them anywhere the target is not available.
/// A family may leave a level out (a null entry): the next lower level serves it. An ARM level would
/// be one more column and one more target macro.

#include <array>
#include <string_view>
#include <utility>
#include <vector>

#include "pact/core/cpu.hpp"

#define PACT_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define PACT_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c")))
#define PACT_TARGET_AVX512_BF16 __attribute__((target("avx512bf16,avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,f16c")))
#define PACT_SIMD_INLINE __attribute__((always_inline)) inline

namespace pact::simd {

/// A registered family: its name and, per level (portable, avx2, avx512, avx512_bf16), the symbols that implement
/// it, space-separated ("" where the level is left to the one below).
struct Family {
  std::string_view name;
  std::array<std::string_view, kIsaCount> symbols;
  /// The level a call runs at when `isa` is active: the highest level at or below it with symbols.
  Isa serves(Isa isa) const noexcept {
    for (int l = static_cast<int>(isa); l > 0; --l)
      if (!symbols[static_cast<std::size_t>(l)].empty()) return static_cast<Isa>(l);
    return Isa::portable;
  }
};

/// Records a family (Table's constructor does; static initialisation, so before main).
void register_family(const Family& family);
/// Every family registered in this process, by name.
std::vector<Family> families();

/// A value per level, the active level's returned by get(). T is a function pointer (call the table
/// like the function) or a pointer to a descriptor of several functions (GEMM's micro-kernels).
template <class T>
class Table {
 public:
  struct Entry {
    T value{};
    std::string_view symbols;  ///< the implementing symbols, space-separated
  };
  /// `portable` must be given; the others may be {} (the level below serves).
  Table(std::string_view name, Entry portable, Entry avx2, Entry avx512, Entry avx512_bf16 = {})
      : entries_{portable, avx2, avx512, avx512_bf16} {
    register_family(family_for(name));
  }
  T get() const noexcept { return entries_[static_cast<std::size_t>(level())].value; }
  /// The level get() picks now.
  Isa level() const noexcept { return served(active_isa()); }
  /// The value of one level (and the level that actually serves it).
  T at(Isa isa) const noexcept { return entries_[static_cast<std::size_t>(served(isa))].value; }
  template <class... A>
  decltype(auto) operator()(A&&... args) const {
    return get()(std::forward<A>(args)...);
  }

 private:
  Isa served(Isa isa) const noexcept {
    for (int l = static_cast<int>(isa); l > 0; --l)
      if (entries_[static_cast<std::size_t>(l)].value) return static_cast<Isa>(l);
    return Isa::portable;
  }
  Family family_for(std::string_view name) const {
    Family f{name, {}};
    for (std::size_t l = 0; l < entries_.size(); ++l)
      f.symbols[l] = l == 0 || entries_[l].value ? entries_[l].symbols : std::string_view{};
    return f;
  }
  std::array<Entry, kIsaCount> entries_;
};

/// The per-level wrappers of an always-inline body (PACT_SIMD_VARIANTS).
template <auto Body>
struct Variants;
template <class R, class... A, R (*Body)(A...)>
struct Variants<Body> {
  static R portable(A... a) { return Body(a...); }
  PACT_TARGET_AVX2 static R avx2(A... a) { return Body(a...); }
  PACT_TARGET_AVX512 static R avx512(A... a) { return Body(a...); }
};

}  // namespace pact::simd

/// A function pointer and its name, for a Table entry.
#define PACT_SIMD_FN(f) \
  { &(f), #f }

/// Defines `name`, a Table callable like `body`, with `body` compiled for every level.
#define PACT_SIMD_VARIANTS(name, body)                              \
  const ::pact::simd::Table<decltype(&(body))> name {               \
#name, {&::pact::simd::Variants < &(body)> ::portable, #body }, \
            {&::pact::simd::Variants < &(body)> ::avx2, #body }, {  \
      &::pact::simd::Variants<&(body)>::avx512, #body               \
    }                                                               \
  }
