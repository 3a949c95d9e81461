#pragma once
/// Runtime guards: named checks registered in code. A capsule's runtimeGuard evidence must name a guard
/// in this registry, and the handler path must invoke it (each invocation counts a hit; tests read the
/// counters).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace pact::kernels {

struct Guard {
  std::string_view id;
  std::string_view what;
  std::atomic<std::uint64_t>* hits;
};

/// Every registered guard.
std::span<const Guard> guards() noexcept;
/// The guard with this id, or nullptr.
const Guard* find_guard(std::string_view id) noexcept;

/// Counts one invocation of a guard (by registry index; see guards.cpp for the ids).
void hit(std::size_t guard_index) noexcept;

// Registry indices of the guards the kernel paths invoke.
inline constexpr std::size_t kGuardShapeRule = 0;       ///< "kernel.shape_rule"
inline constexpr std::size_t kGuardInputDevice = 1;     ///< "kernel.input_device"
inline constexpr std::size_t kGuardPreparedLayout = 2;  ///< "kernel.prepared_layout"
inline constexpr std::size_t kGuardVjpShapes = 3;       ///< "kernel.vjp_shapes"

}  // namespace pact::kernels
