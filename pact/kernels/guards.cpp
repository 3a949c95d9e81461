#include "pact/kernels/guards.hpp"

#include <array>

namespace pact::kernels {

namespace {
std::array<std::atomic<std::uint64_t>, 4> g_hits{};
const Guard kGuards[] = {
    {"kernel.shape_rule", "the handler's output has exactly the type the op's shape rule infers", &g_hits[0]},
    {"kernel.input_device", "every input lives on the handler's device", &g_hits[1]},
    {"kernel.prepared_layout", "inputs are read through checked prepared access of the handler's dtype", &g_hits[2]},
    {"kernel.vjp_shapes", "grad_output matches the output, and each gradient matches its input", &g_hits[3]},
};
}  // namespace

std::span<const Guard> guards() noexcept { return kGuards; }

const Guard* find_guard(std::string_view id) noexcept {
  for (const auto& g : kGuards) {
    if (g.id == id) return &g;
  }
  return nullptr;
}

void hit(std::size_t guard_index) noexcept { g_hits[guard_index].fetch_add(1, std::memory_order_relaxed); }

}  // namespace pact::kernels
