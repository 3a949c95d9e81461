#include "pact/contract/provider_table.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "pact/kernels/sealed.hpp"

namespace pact::contract {

namespace {

using EK = EvidenceKind;

// The table (Note [Provider table]). Shape and layout evidence of the CPU rows are the runtime guards
// every handler call passes through (kernels::run_forward); forward-value and VJP evidence are the op
// oracle's tests (each provider's kernels against PyTorch's float64 values, tests/kernels/oracle_test.cpp;
// the native one at every ISA level the CPU runs), or the trusted boundary of an external library.
// Determinism is not value evidence: OpSweep.ReferenceIsBitwiseDeterministic backs the fixedLeft policy. The trusted
// boundary covers the external call only: the blas capsules' own code around cblas_sgemm (packing, im2col, bias, the
// VJP's products) is Pact's, so their layout descriptor cites the test suite that holds it to the reference.
constexpr ProviderRow kRows[] = {
    {"reference",
     "reference",
     DeviceKind::cpu,
     Trust::checked,
     NumericalPolicy::fixedLeft,
     3,
     nullptr,
     DTypeSet{DType::f32, DType::f64},
     DTypeSet{DType::f32, DType::f64, DType::i64, DType::i32},
     {EK::runtimeGuard, EK::runtimeGuard, EK::testSuite, EK::testSuite},
     {"kernel.shape_rule", "kernel.prepared_layout", "OpOracle.ReferenceMatchesPyTorchFloat64",
      "OpOracle.ReferenceMatchesPyTorchFloat64"},
     &kernels::reference_handlers,
     HandlerSelection::all,
     {},
     false},
    {"native",
     "native",
     DeviceKind::cpu,
     Trust::checked,
     NumericalPolicy::implementationDefined,
     2,
     &kernels::native_dispatches_simd,
     DTypeSet{DType::f32},
     DTypeSet{DType::f32, DType::f64, DType::i64, DType::i32},
     {EK::runtimeGuard, EK::runtimeGuard, EK::testSuite, EK::testSuite},
     {"kernel.shape_rule", "kernel.prepared_layout", "OpOracle.NativeMatchesPyTorchFloat64",
      "OpOracle.NativeMatchesPyTorchFloat64"},
     &kernels::native_handlers,
     HandlerSelection::all_but_attention,
     {},
     false},
    {"attention",
     "native",
     DeviceKind::cpu,
     Trust::checked,
     NumericalPolicy::implementationDefined,
     2,
     &kernels::native_dispatches_simd,
     DTypeSet{DType::f32},
     DTypeSet{},
     {EK::runtimeGuard, EK::runtimeGuard, EK::testSuite, EK::testSuite},
     {"kernel.shape_rule", "kernel.prepared_layout", "OpOracle.NativeMatchesPyTorchFloat64",
      "OpOracle.NativeMatchesPyTorchFloat64"},
     &kernels::native_handlers,
     HandlerSelection::attention_only,
     {},
     false},
    {"half",
     "half",
     DeviceKind::cpu,
     Trust::checked,
     NumericalPolicy::implementationDefined,
     2,
     &kernels::half_dispatches_simd,
     DTypeSet{DType::bf16, DType::f16},
     DTypeSet{DType::bf16, DType::f16},
     {EK::runtimeGuard, EK::runtimeGuard, EK::testSuite, EK::testSuite},
     {"kernel.shape_rule", "kernel.prepared_layout", "OpOracle.HalfMatchesPyTorchFloat64",
      "OpOracle.HalfMatchesPyTorchFloat64"},
     &kernels::half_handlers,
     HandlerSelection::all,
     {},
     false},
    {"blas",
     "blas",
     DeviceKind::cpu,
     Trust::trustedExternal,
     NumericalPolicy::implementationDefined,
     0,
     nullptr,
     DTypeSet{DType::f32},
     DTypeSet{},
     {EK::runtimeGuard, EK::testSuite, EK::trustedBoundary, EK::trustedBoundary},
     {"kernel.shape_rule", "OpOracle.BlasMatchesPyTorchFloat64", "openblas.cblas_sgemm", "openblas.cblas_sgemm"},
     &kernels::blas_handlers,
     HandlerSelection::all,
     {},
     false},
    // cuDNN: conv2d with its convolutions through cuDNN (trusted boundary cudnn.convolution), preferred under
    // cuda-external; present only once cuDNN loads on a device (cuda.cudnn_loaded, a runtime guard).
    {"cudnn",
     "cudnn",
     DeviceKind::cuda,
     Trust::trustedExternal,
     NumericalPolicy::implementationDefined,
     0,
     nullptr,
     DTypeSet{DType::f32},
     DTypeSet{},
     {EK::runtimeGuard, EK::runtimeGuard, EK::trustedBoundary, EK::trustedBoundary},
     {"cuda.device_present", "cuda.cudnn_loaded", "cudnn.convolution", "cudnn.convolution"},
     &kernels::cudnn_handlers,
     HandlerSelection::all,
     {},
     false},
    // cuBLASLt: linear with its product, its bias and its bias's gradient through cublasLtMatmul and its
    // epilogues (trusted boundary cublaslt.matmul), preferred under cuda-external for linear; present only once
    // cuBLASLt loads on a device (cuda.cublaslt_loaded, a runtime guard).
    {"cublaslt",
     "cublaslt",
     DeviceKind::cuda,
     Trust::trustedExternal,
     NumericalPolicy::implementationDefined,
     0,
     nullptr,
     DTypeSet{DType::f32},
     DTypeSet{},
     {EK::runtimeGuard, EK::runtimeGuard, EK::trustedBoundary, EK::trustedBoundary},
     {"cuda.device_present", "cuda.cublaslt_loaded", "cublaslt.matmul", "cublaslt.matmul"},
     &kernels::cublaslt_handlers,
     HandlerSelection::all,
     {},
     false},
    // cuBLAS: the cuda handlers' code with its products through cublasSgemm (trusted boundary cublas.sgemm),
    // preferred under cuda-external for the GEMM ops; present only once cuBLAS loads on a device
    // (cuda.cublas_loaded, a runtime guard the resolver checks).
    {"cublas",
     "cublas",
     DeviceKind::cuda,
     Trust::trustedExternal,
     NumericalPolicy::implementationDefined,
     0,
     nullptr,
     DTypeSet{DType::f32},
     DTypeSet{},
     {EK::runtimeGuard, EK::runtimeGuard, EK::trustedBoundary, EK::trustedBoundary},
     {"cuda.device_present", "cuda.cublas_loaded", "cublas.sgemm", "cublas.sgemm"},
     &kernels::cublas_handlers,
     HandlerSelection::all,
     {},
     false},
    {"cuda",
     "cuda",
     DeviceKind::cuda,
     Trust::checked,
     NumericalPolicy::implementationDefined,
     1,
     nullptr,
     DTypeSet{DType::f32},
     DTypeSet{DType::f32},
     {EK::runtimeGuard, EK::runtimeGuard, EK::runtimeGuard, EK::runtimeGuard},
     {"cuda.device_present", "cuda.device_present", "cuda.device_present", "cuda.device_present"},
     &kernels::cuda_handlers,
     HandlerSelection::all,
     {},
     false},
    {"libtorch",
     "libtorch",
     DeviceKind::cpu,
     Trust::trustedExternal,
     NumericalPolicy::implementationDefined,
     1,
     nullptr,
     DTypeSet{DType::f32},
     DTypeSet{},
     {EK::runtimeGuard, EK::runtimeGuard, EK::trustedBoundary, EK::notApplicable},
     {"kernel.shape_rule", "kernel.prepared_layout", "libtorch.aten", ""},
     &kernels::libtorch_handlers,
     HandlerSelection::all,
     {},
     false},
    // The collective rows (Note [Provider table]): data-parallel training's gradient mean, run by the
    // session's train::Communicator over Open MPI (pact/dist), a trusted external boundary. mpi sums in the
    // order MPI_Iallreduce chooses; mpi_ordered folds the ranks' buffers left to right in rank order
    // (bitwise repeatable: the cpu-deterministic-mpi row).
    {"mpi",
     "mpi",
     DeviceKind::cpu,
     Trust::trustedExternal,
     NumericalPolicy::implementationDefined,
     0,
     nullptr,
     DTypeSet{DType::f32, DType::f64},
     DTypeSet{},
     {EK::runtimeGuard, EK::runtimeGuard, EK::trustedBoundary, EK::notApplicable},
     {"kernel.shape_rule", "kernel.prepared_layout", "mpi.allreduce", ""},
     &kernels::collective_handlers,
     HandlerSelection::all,
     {},
     true},
    {"mpi_ordered",
     "mpi",
     DeviceKind::cpu,
     Trust::trustedExternal,
     NumericalPolicy::fixedLeft,
     0,
     nullptr,
     DTypeSet{DType::f32, DType::f64},
     DTypeSet{},
     {EK::runtimeGuard, EK::runtimeGuard, EK::trustedBoundary, EK::notApplicable},
     {"kernel.shape_rule", "kernel.prepared_layout", "mpi.allreduce", ""},
     &kernels::collective_handlers,
     HandlerSelection::all,
     {},
     true},
};

bool keeps(HandlerSelection s, ops::OpTag op) {
  const bool attention = op == ops::OpTag::scaled_dot_product_attention;
  return s == HandlerSelection::all || (s == HandlerSelection::attention_only) == attention;
}

Capsule capsule_for(const ProviderRow& row, ops::OpTag op, bool vjp, std::string_view source_file,
                    std::string_view symbol) {
  const auto& info = ops::op_info(op);
  const DTypeSet served = info.role == ops::OpRole::view ? row.view_dtypes : row.dtypes;
  const std::string dtypes = served.to_string();
  Capsule c;
  c.name = fmt::format("{}.{}", row.module, info.kind);
  c.op = op;
  c.provider = std::string(row.provider);
  c.device = row.device;
  c.trust = row.trust;
  c.forward = true;
  c.vjp = vjp;
  c.dtypes = served;
  auto evidence = [&](int i) { return Evidence{row.evidence_kinds[i], std::string(row.evidence_ids[i])}; };
  const bool cpu = row.device == DeviceKind::cpu;
  const bool own_code_tested = row.evidence_kinds[1] == EvidenceKind::testSuite;
  c.descriptors = {
      ContractDescriptor{DescriptorKind::shape, fmt::format("output type = {} shape rule", info.kind), evidence(0)},
      ContractDescriptor{DescriptorKind::layout,
                         !cpu ? "contiguous device buffers"
                         : own_code_tested
                             ? "inputs read through checked prepared access; Pact's own code around the external "
                               "call (packing, im2col, bias) agrees with PyTorch's float64 values"
                             : "inputs read through checked prepared access; output contiguous",
                         evidence(1)},
      ContractDescriptor{DescriptorKind::forward_value,
                         fmt::format("forward value of {} ({}) within the op's tolerance", info.kind, dtypes),
                         evidence(2)},
      vjp ? ContractDescriptor{DescriptorKind::vjp,
                               fmt::format("VJP of {} ({}) within the op's VJP tolerance", info.kind, dtypes),
                               evidence(3)}
          : ContractDescriptor{DescriptorKind::vjp, "no VJP", {EvidenceKind::notApplicable, ""}},
  };
  c.numerical_policy = row.policy;
  // The symbol as the symbol table names it (the lockstep test checks it with nm).
  c.provenance = row.handlers != nullptr
                     ? Provenance{std::string(source_file), std::string(symbol)}
                     : Provenance{"pact/contract/provider_table.cpp", "pact::contract::provider_table"};
  return c;
}

CapsuleModule module_from(const ProviderRow& row) {
  CapsuleModule m{std::string(row.module), {}};
  if (row.handlers == nullptr) {
    for (ops::OpTag op : row.declared_ops) m.capsules.push_back(capsule_for(row, op, ops::op_info(op).has_vjp, "", ""));
    return m;
  }
  for (const auto& h : row.handlers()) {
    if (keeps(row.selection, h.op))
      m.capsules.push_back(capsule_for(row, h.op, h.vjp != nullptr, h.source_file, h.symbol));
  }
  return m;
}

}  // namespace

std::span<const ProviderRow> provider_table() noexcept { return kRows; }

const ProviderRow* provider_row(std::string_view module) noexcept {
  for (const auto& r : kRows) {
    if (r.module == module) return &r;
  }
  return nullptr;
}

const CapsuleModule& capsule_module(std::string_view module) {
  // Built once per row; references stay valid for the process (std::map nodes never move).
  static std::mutex mu;
  static std::map<std::string, CapsuleModule, std::less<>> built;
  std::lock_guard lock(mu);
  if (auto it = built.find(module); it != built.end()) return it->second;
  const ProviderRow* row = provider_row(module);
  if (row == nullptr) {
    throw_error(ErrorCode::invalid_argument, "provider_table", fmt::format("no capsule module '{}'", module));
  }
  return built.emplace(std::string(module), module_from(*row)).first->second;
}

const kernels::Handler* find_capsule_handler(const Capsule& capsule) noexcept {
  for (const auto& row : kRows) {
    if (row.handlers == nullptr || row.provider != capsule.provider || row.device != capsule.device) continue;
    if (const auto* h = kernels::find_handler(row.handlers(), capsule.op)) return h;
  }
  // The sealed provider has no row: its capsules are made from an admitted publication at run time
  // (pact/kernels/sealed.hpp), and bind the handler of their op.
  if (capsule.provider == "sealed" && capsule.device == DeviceKind::cuda)
    return kernels::find_handler(kernels::sealed_handlers(), capsule.op);
  return nullptr;
}

}  // namespace pact::contract
