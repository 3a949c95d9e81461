#pragma once
/// The sealed provider's handlers (SPEC §11, issue 26 item 5): one per op of the op table, provider
/// "sealed", device cuda, forward only. Each launches through the process's installed SealedLauncher
/// (pact/seal/sealed_kernels.hpp: an admitted publication and the binding file that maps ops onto its
/// exports) and refuses typed (no_device) when none is installed.
///
/// No provider-table row makes capsules for them: a sealed provider serves exactly the ops its publication
/// binds, so its capsules are made at run time from the admitted publication (seal::SealedKernels::module)
/// and find their handler here (contract::find_capsule_handler).

#include <memory>
#include <span>

#include "pact/kernels/kernel.hpp"

namespace pact::kernels {

/// Runs one op's forward on a sealed kernel: allocates the result and launches.
class SealedLauncher {
 public:
  virtual ~SealedLauncher() = default;
  virtual Tensor forward(ops::OpTag op, std::span<const TensorView> inputs, const ops::Attributes& attrs) = 0;
};

/// Installs the process's launcher (one direct-artifact authority per process; nullptr uninstalls) and
/// returns the one it replaces.
std::shared_ptr<SealedLauncher> install_sealed_launcher(std::shared_ptr<SealedLauncher> launcher);

/// The sealed provider's handlers, one per op tag.
std::span<const Handler> sealed_handlers();

}  // namespace pact::kernels
