#include "pact/kernels/sealed.hpp"

#include <fmt/format.h>

#include <array>
#include <mutex>
#include <utility>

namespace pact::kernels {

namespace {

std::mutex& launcher_mutex() {
  static std::mutex mu;
  return mu;
}

std::shared_ptr<SealedLauncher>& installed() {
  static std::shared_ptr<SealedLauncher> launcher;
  return launcher;
}

Tensor sealed_forward(ops::OpTag op, std::span<const TensorView> inputs, const ops::Attributes& attrs) {
  std::shared_ptr<SealedLauncher> launcher;
  {
    const std::lock_guard lock(launcher_mutex());
    launcher = installed();
  }
  if (launcher == nullptr) {
    throw_error(ErrorCode::no_device, "sealed",
                fmt::format("no sealed publication is installed to run '{}' (pact run --sealed)", ops::op_kind(op)));
  }
  return launcher->forward(op, inputs, attrs);
}

template <std::size_t I>
Tensor forward_of(std::span<const TensorView> inputs, const ops::Attributes& attrs, const KernelContext&) {
  return sealed_forward(static_cast<ops::OpTag>(I), inputs, attrs);
}

template <std::size_t... I>
constexpr std::array<Handler, sizeof...(I)> make_handlers(std::index_sequence<I...>) {
  return {Handler{static_cast<ops::OpTag>(I), "sealed", DeviceKind::cuda, &forward_of<I>, nullptr,
                  "pact/kernels/sealed.cpp", "pact::kernels::sealed_forward"}...};
}

constexpr auto kHandlers = make_handlers(std::make_index_sequence<static_cast<std::size_t>(ops::kOpCount)>{});

}  // namespace

std::shared_ptr<SealedLauncher> install_sealed_launcher(std::shared_ptr<SealedLauncher> launcher) {
  const std::lock_guard lock(launcher_mutex());
  return std::exchange(installed(), std::move(launcher));
}

std::span<const Handler> sealed_handlers() { return kHandlers; }

}  // namespace pact::kernels
