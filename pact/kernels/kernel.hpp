#pragma once
/// The kernel interface: a handler is the executable forward (and VJP) of one op on one provider and
/// device. Capsules (pact/contract) state the contracts; handlers implement them; binding checks that
/// op, provider and device agree (SPEC §6).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/tensor.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::kernels {

/// Per-call execution state a kernel may read.
struct KernelContext {
  bool training = false;   ///< mode-dependent ops: dropout active, batch_norm uses batch statistics
  std::uint64_t seed = 0;  ///< dropout mask seed (forward and VJP must see the same seed)
  /// VJP only: bit i set when the caller wants input i's gradient. A VJP may return nullopt for an input
  /// whose bit is clear (the GEMM ops skip that product: the gradient of a model's input batch is never
  /// needed in training); the gradients it does return are the same either way.
  std::uint64_t wanted_grads = ~std::uint64_t{0};
  bool wants_grad(std::size_t input) const noexcept { return input >= 64 || ((wanted_grads >> input) & 1u) != 0; }
};

/// Forward: inputs (any checked layout) -> a new contiguous output owner (one OperationOutput allocation).
using ForwardFn = Tensor (*)(std::span<const TensorView> inputs, const ops::Attributes& attrs,
                             const KernelContext& ctx);
/// VJP: inputs, forward output and output cotangent -> one gradient per input, nullopt for inputs that
/// are not differentiable (indices, targets, running statistics).
using VjpFn = std::vector<std::optional<Tensor>> (*)(std::span<const TensorView> inputs, const TensorView& output,
                                                     const TensorView& grad_output, const ops::Attributes& attrs,
                                                     const KernelContext& ctx);

/// Update (ops of role update, Note [Op table]): writes new values into `state`, the op's role-u operands in
/// operand order, in place, reading `read`, the other operands in operand order.
using UpdateFn = void (*)(std::span<Tensor* const> state, std::span<const TensorView> read,
                          const ops::Attributes& attrs);

/// One executable handler.
struct Handler {
  ops::OpTag op;
  std::string_view provider;  ///< "reference", "native", "blas"
  DeviceKind device;
  ForwardFn forward;
  VjpFn vjp;                     ///< nullptr when the op has no VJP
  std::string_view source_file;  ///< provenance: file that defines the handler
  std::string_view symbol;       ///< provenance: the handler's symbol
  UpdateFn update = nullptr;     ///< an update op's in-place function (forward and vjp are then null)
  /// A kernel op whose result may instead be written into operand 0 (its one state operand; the rest are
  /// read): the same values forward computes, with no new allocation. The executor runs it when nothing
  /// else holds operand 0 (Note [Donated operands] in pact/runtime/executor.cpp). nullptr for most ops.
  UpdateFn in_place = nullptr;
};

/// The reference provider: plain loops, left folds in index order (numerical policy fixedLeft).
std::span<const Handler> reference_handlers();
/// The native provider: blocked SIMD GEMM, fused kernels, OpenMP (numerical policy implementationDefined).
std::span<const Handler> native_handlers();
/// True when the native provider's f32 kernel for `op` runs code of the SIMD dispatch table
/// (pact/core/simd_dispatch.hpp), so at the active ISA level; its other kernels are loops compiled for the
/// build's baseline. The plan audit and `pact run --time-nodes` report the level from it.
bool native_dispatches_simd(ops::OpTag op) noexcept;
/// The half provider: bf16 and f16 nodes of the ops language and vision models spend their time in, stored
/// in 16 bits and computed in f32 by the native kernels (Note [Half provider] in pact/kernels/cpu/half.cpp).
std::span<const Handler> half_handlers();
/// True for every op the half provider serves: its conversions are SIMD dispatch table families.
bool half_dispatches_simd(ops::OpTag op) noexcept;
/// The BLAS provider: matmul, linear and conv2d through OpenBLAS cblas_sgemm (trusted external boundary).
std::span<const Handler> blas_handlers();
/// The collective ops' row (provider mpi): admitted by plans, run by a train::Communicator, never called
/// (pact/kernels/cpu/collective.cpp).
std::span<const Handler> collective_handlers();
/// The CUDA provider's handlers (pact/kernels/cuda/cuda_kernels.cpp): f32 forward and VJP over device
/// tensors, launched on the CUDA device's stream. They refuse typed (no_device) without a device or in a
/// build without the kernels (PACT_WITH_CUDA=OFF).
std::span<const Handler> cuda_handlers();
/// The cuBLAS provider's handlers (trustedExternal): matmul, linear and conv2d over device tensors, the cuda
/// handlers' code with the matrix products through cuBLAS SGEMM (pact/kernels/cublas.hpp). They refuse
/// typed without a device (no_device) or without cuBLAS (unsupported).
std::span<const Handler> cublas_handlers();
/// The cuBLASLt provider's handler (trustedExternal): linear over device tensors with its product through
/// cuBLASLt (pact/kernels/cublaslt.hpp), the bias added in the product's epilogue and its gradient reduced in
/// the weight gradient's (Pact's kernels where cuBLASLt offers no such epilogue). It refuses typed without a
/// device (no_device) or without cuBLASLt (unsupported).
std::span<const Handler> cublaslt_handlers();
/// The cuDNN provider's handler (trustedExternal): conv2d over device tensors with its convolution, the
/// input's and the filter's gradients by cuDNN (pact/kernels/cudnn.hpp), the bias by Pact's kernels. It
/// refuses typed without a device (no_device) or without cuDNN (unsupported).
std::span<const Handler> cudnn_handlers();
/// True when this build embeds the CUDA kernels (nvcc was found: PACT_WITH_CUDA).
bool cuda_kernels_built() noexcept;
/// "loaded on NVIDIA H200 (...)", or why the CUDA kernels cannot run here.
std::string cuda_kernels_status();
/// The LibTorch provider's handlers (trustedExternal, forward only); empty unless built with
/// -DPACT_WITH_LIBTORCH=ON.
std::span<const Handler> libtorch_handlers();
/// True when this build links LibTorch.
bool libtorch_built() noexcept;

/// Falsification: while a substitution lives, binding (contract::handler_for) resolves `original` to
/// `mutant`, which must have the same op, provider and device, so that a plan or a session admitted in
/// its scope runs the mutant wherever the original would run. Tests use it to show that a capsule's
/// kernel carries weight: swapped for a failing one, the step that runs it fails. Substitutions nest;
/// the innermost wins; each ends with its guard.
class ScopedHandlerSubstitution {
 public:
  ScopedHandlerSubstitution(const Handler& original, const Handler& mutant);
  ~ScopedHandlerSubstitution();
  ScopedHandlerSubstitution(const ScopedHandlerSubstitution&) = delete;
  ScopedHandlerSubstitution& operator=(const ScopedHandlerSubstitution&) = delete;

 private:
  const Handler* original_;
};
/// The handler binding resolves `h` to: the innermost live substitution's mutant, or `h` itself.
const Handler& substituted(const Handler& h) noexcept;

/// Multiply-accumulates the contraction kernels performed in this process so far, counted where they
/// compute, from the extents they actually run over: the native GEMM and GEMV, the call into OpenBLAS, the
/// direct depthwise convolution, and the reference loops (which skip padding taps). A real capture takes
/// the difference around each op as its measured work (capture::discharge), independently of the op
/// table's FLOP rule that made the estimate. Relaxed and process-wide: work on other threads counts too.
std::uint64_t macs_performed() noexcept;
/// Adds to macs_performed(); the kernels call it once per call, never per multiply.
void count_macs(std::int64_t macs) noexcept;

/// The handler of `op` in `handlers`, or nullptr.
const Handler* find_handler(std::span<const Handler> handlers, ops::OpTag op) noexcept;

/// Runs a handler's forward after inferring the output type with the op's shape rule (typed errors name
/// the op and operand). The result has exactly the inferred type.
Tensor run_forward(const Handler& handler, std::span<const TensorView> inputs, const ops::Attributes& attrs,
                   const KernelContext& ctx = {});
/// The view a transpose, permute or slice derives from its input (checked, zero copy; the input itself
/// for any other op). Handlers materialise it; the eager session keeps it (view_result).
TensorView derive_view(ops::OpTag op, const TensorView& x, const ops::Attributes& a);
/// A view op's result (reshape, flatten, transpose, permute, slice) as a view of its input, zero copy,
/// when one exists: reshape and flatten need a contiguous input, the others always have one. It has the
/// shape rule's type, and bad attributes are the shape rule's typed errors. nullopt for any other op, or
/// when the result needs a copy (the handler then makes it).
std::optional<TensorView> view_result(ops::OpTag op, const TensorView& x, const ops::Attributes& a);

/// Runs an update op's handler after checking its operands (state and read, split by the op's roles) with
/// the op's shape rule: typed errors name the op and operand, and nothing is written when one is raised.
/// State tensors must be contiguous host owners no view or other operand aliases.
void run_update(const Handler& handler, std::span<Tensor* const> state, std::span<const TensorView> read,
                const ops::Attributes& attrs);

/// Runs a handler's in-place forward (Handler::in_place): `x` becomes what forward would return for (x,
/// read...). The operands are checked with the op's shape rule, whose output type must be x's own, and x
/// must be a contiguous host owner nothing else aliases; typed errors name the op, and nothing is written
/// when one is raised.
void run_in_place(const Handler& handler, Tensor& x, std::span<const TensorView> read, const ops::Attributes& attrs);
/// Runs a handler's VJP after checking grad_output against the output's type.
std::vector<std::optional<Tensor>> run_vjp(const Handler& handler, std::span<const TensorView> inputs,
                                           const TensorView& output, const TensorView& grad_output,
                                           const ops::Attributes& attrs, const KernelContext& ctx = {});

}  // namespace pact::kernels
