// The CUDA provider's handlers (provider "cuda", device cuda): forward and VJP, or the in-place update, of
// the ops in kHandlers (below), f32, over tensors in the CUDA provider's device memory. Host code only: the
// device code is pact/kernels/cuda/kernels.cu, compiled by nvcc into a fatbin embedded in this library
// (pact_cuda_image, built when PACT_WITH_CUDA is on) and loaded through the driver table on first use.
// Every operand is reached through a device binding (DeviceBinding::unsafe_device_address), and every
// launch is ordered on the device's one stream, so the stream-ordered release of an operand's storage
// follows the kernels that read it.
//
// Without a device, or in a build without the fatbin, a handler refuses typed (no_device), naming why.

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/kernels/attention_tile.hpp"
#include "pact/kernels/cublas.hpp"
#include "pact/kernels/cublaslt.hpp"
#include "pact/kernels/cudnn.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/kernels/ranks.hpp"
#include "pact/kernels/spatial.hpp"

extern "C" const unsigned char pact_cuda_image[];
extern "C" const unsigned long long pact_cuda_image_size;

namespace pact::kernels {

namespace cuda {

using GradList = std::vector<std::optional<Tensor>>;
using ops::Attributes;

// kernels.cu's Geometry, the same layout (a kernel parameter passed by value: its bytes are copied as is).
struct Geometry {
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> stride0{};
  std::array<std::int64_t, kMaxRank> stride1{};
};
static_assert(sizeof(Geometry) == 8 + 3 * 8 * kMaxRank, "kernels.cu reads int rank, padding, then three int64 arrays");

struct Module {
  CudaDevice* device = nullptr;
  void* module = nullptr;
  std::map<std::string, void*, std::less<>> functions;
  std::string failure;
};

Module& module() {
  static Module m = [] {
    Module r;
    r.device = CudaDevice::get();
    if (r.device == nullptr) {
      r.failure = fmt::format("no CUDA device: {}", CudaDevice::unavailable_reason());
      return r;
    }
    if (pact_cuda_image_size == 0) {
      r.failure = "this build has no CUDA kernels (configured without nvcc: PACT_WITH_CUDA=OFF)";
      return r;
    }
    r.device->make_current();
    const int rc = r.device->driver().module_load_data(&r.module, pact_cuda_image);
    if (rc != kCudaSuccess) {
      r.failure = fmt::format("the driver refused Pact's CUDA kernels ({}); the device is {}",
                              cuda_result_name(r.device->driver(), rc), r.device->description());
      r.module = nullptr;
    }
    return r;
  }();
  return m;
}

std::mutex& functions_mutex() {
  static std::mutex mu;
  return mu;
}

void* function(std::string_view op, const char* name) {
  Module& m = module();
  if (m.module == nullptr) throw_error(ErrorCode::no_device, std::string(op), m.failure);
  std::lock_guard lock(functions_mutex());
  auto it = m.functions.find(name);
  if (it != m.functions.end()) return it->second;
  void* f = nullptr;
  m.device->make_current();
  m.device->check(m.device->driver().module_get_function(&f, m.module, name), op);
  m.functions.emplace(name, f);
  return f;
}

CudaDevice& device() {
  Module& m = module();
  if (m.device == nullptr) throw_error(ErrorCode::no_device, "cuda", m.failure);
  return *m.device;
}

constexpr std::uint32_t kThreads = 256;

std::uint32_t grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>(blocks, 1, 65535LL * 32));
}

// Who computes a handler's matrix products: Pact's own GEMM kernels (the cuda provider), cuBLAS (the cublas
// provider, a trusted external boundary; the code around the products is the same), cuBLASLt with its bias
// epilogues (the cublaslt provider, which serves linear alone), or, for conv2d, cuDNN's convolutions (the
// cudnn provider, which serves conv2d alone).
enum class GemmEngine { pact, cublas, cublaslt, cudnn };

// The operands of one kernel call: each view's device binding, kept until the launch is enqueued, and any
// contiguous copy made for it (released after the launch: the release is stream-ordered after it).
class Operands {
 public:
  // Refuses (no_device, saying why) before any operand is read when the kernels cannot run here, and
  // (unsupported) when the products are a library's (cuBLAS, cuBLASLt, cuDNN) that cannot be loaded.
  explicit Operands(std::string_view op, GemmEngine engine = GemmEngine::pact) : op_(op), engine_(engine) {
    if (module().module == nullptr) throw_error(ErrorCode::no_device, std::string(op), module().failure);
    if (engine == GemmEngine::cublas && kernels::cublas() == nullptr)
      throw_error(ErrorCode::unsupported, std::string(op), kernels::cublas_unavailable_reason());
    if (engine == GemmEngine::cublaslt && kernels::cublaslt() == nullptr)
      throw_error(ErrorCode::unsupported, std::string(op), kernels::cublaslt_unavailable_reason());
    if (engine == GemmEngine::cudnn && kernels::cudnn() == nullptr)
      throw_error(ErrorCode::unsupported, std::string(op), kernels::cudnn_unavailable_reason());
  }
  // A view's device address; refuses a view outside the CUDA provider or of another dtype than `dtype` (f32
  // data; i64 class targets, contiguous; bool masks).
  std::uint64_t read(const TensorView& v, std::string_view operand, DType dtype = DType::f32) {
    if (v.provider_name() != "cuda") {
      throw_error(ErrorCode::provider_mismatch, std::string(op_),
                  fmt::format("operand '{}' is in {} storage; the cuda kernels read device tensors", operand,
                              v.provider_name()));
    }
    if (v.dtype() != dtype) {
      throw_error(ErrorCode::dtype_mismatch, std::string(op_),
                  fmt::format("operand '{}' is {}; the cuda kernels read it as {}", operand, dtype_name(v.dtype()),
                              dtype_name(dtype)));
    }
    // Index operands are read contiguously: a strided one through a contiguous device copy (the provider's).
    if (dtype == DType::i64 && !v.is_contiguous()) return read(keep(v.duplicate()).as_view(), operand, dtype);
    auto prepared = TensorView(v).prepare_device();
    if (!prepared) throw std::move(prepared).error().error;
    auto bound = DeviceBinding::bind(std::move(prepared).value());
    if (!bound) throw std::move(bound).error().error;
    bindings_.push_back(std::move(bound).value());
    return bindings_.back().unsafe_device_address();
  }
  // The address of a contiguous copy of `v` (v itself when it is contiguous).
  std::uint64_t contiguous(const TensorView& v, std::string_view operand);
  // A new device tensor (zeroed when asked) and its address.
  std::uint64_t write(Tensor& t) {
    auto view = t.as_view_mut();
    auto prepared = std::move(view).prepare_device_mut();
    if (!prepared) throw std::move(prepared).error().error;
    auto bound = DeviceBinding::bind(std::move(prepared).value());
    if (!bound) throw std::move(bound).error().error;
    bindings_.push_back(std::move(bound).value());
    return bindings_.back().unsafe_device_address();
  }
  // A handler's result tensor, owned here until the handler moves it out (`return std::move(out)`): a result
  // owned by a local declared after the Operands would die before its binding when an error unwinds the
  // handler, which seed 001 treats as a fatal use of freed memory; owned here, the binding ends first.
  Tensor& output(const Dims& shape, DType dtype = DType::f32);
  // Keeps a temporary device tensor (a staging product, a flag) alive as long as the bindings made of it.
  Tensor& keep(Tensor t) {
    temporaries_.push_back(std::move(t));
    return temporaries_.back();
  }
  std::string_view op() const noexcept { return op_; }
  GemmEngine engine() const noexcept { return engine_; }

 private:
  std::string_view op_;
  GemmEngine engine_;
  // Declared before the bindings, so the bindings (borrows of these tensors) end first.
  std::deque<Tensor> temporaries_;
  std::vector<DeviceBinding> bindings_;
};

Tensor device_empty(const Dims& shape, DType dtype = DType::f32) {
  return Tensor::empty(shape, dtype, cuda_provider(), AllocationReason::OperationOutput);
}

Tensor& Operands::output(const Dims& shape, DType dtype) { return keep(device_empty(shape, dtype)); }

void launch(std::string_view op, const char* kernel, std::uint32_t grid_x, std::uint32_t grid_y, std::uint32_t grid_z,
            std::uint32_t block, std::vector<void*> params, std::uint32_t shared_bytes = 0) {
  void* f = function(op, kernel);
  if (shared_bytes > 48 * 1024) {  // past the default limit a kernel must opt in
    device().make_current();
    device().check(device().driver().func_set_attribute(f, kCuFuncAttributeMaxDynamicSharedSizeBytes,
                                                        static_cast<int>(shared_bytes)),
                   op);
  }
  device().launch(f, grid_x, grid_y, grid_z, block, 1, 1, shared_bytes, params.data(), op);
}

// A strided traversal of one view in row-major order of its shape.
Geometry strided(const TensorView& v) {
  Geometry g;
  g.rank = v.rank();
  const Dims s = v.shape(), st = v.strides();
  for (int d = 0; d < g.rank; ++d) {
    g.shape[static_cast<std::size_t>(d)] = s[d];
    g.stride0[static_cast<std::size_t>(d)] = st[d];
  }
  return g;
}

// Copies view `v` (at device address `src`) in row-major order of its shape into contiguous `dst`.
void copy_strided(std::string_view op, std::uint64_t dst, std::uint64_t src, const TensorView& v) {
  Geometry g = strided(v);
  std::int64_t n = v.numel();
  int op_code = 0;  // the identity
  if (n > 0) launch(op, "pact_unary_f32", grid_for(n), 1, 1, kThreads, {(void*)&dst, (void*)&src, &g, &n, &op_code});
}

std::uint64_t Operands::contiguous(const TensorView& v, std::string_view operand) {
  const std::uint64_t src = read(v, operand);
  if (v.is_contiguous()) return src;
  Tensor& copy = keep(device_empty(v.shape()));
  const std::uint64_t dst = write(copy);
  copy_strided(op_, dst, src, v);
  return dst;
}

// Sums contiguous `src` (shape `from`) down to `to` (right-aligned broadcast target, each dimension either
// equal or 1) into `dst` (contiguous, to's element count).
void sum_to_shape(Operands& ops, std::uint64_t dst, std::uint64_t src, const Dims& from, const Dims& to) {
  Geometry kept, reduced;
  const int rank = from.size();
  kept.rank = reduced.rank = rank;
  const Dims strides = contiguous_strides(from);
  std::int64_t n = 1, count = 1;
  for (int d = 0; d < rank; ++d) {
    const int td = d - (rank - to.size());
    const std::int64_t target = td >= 0 ? to[td] : 1;
    const auto i = static_cast<std::size_t>(d);
    kept.stride0[i] = reduced.stride0[i] = strides[d];
    if (target == from[d]) {
      kept.shape[i] = from[d];
      reduced.shape[i] = 1;
    } else {
      kept.shape[i] = 1;
      reduced.shape[i] = from[d];
    }
    n *= kept.shape[i];
    count *= reduced.shape[i];
  }
  if (n == 0) return;
  launch(ops.op(), "pact_sum_to_shape_f32", grid_for(n), 1, 1, kThreads, {&dst, &src, &kept, &reduced, &n, &count});
}

// ---- GEMM --------------------------------------------------------------------------------------------------

struct GemmOperand {
  std::uint64_t address;
  std::int64_t row_stride, col_stride;
};

// The GEMM kernel for these operands (kernels.cu): float4 loads where both are row-major with aligned rows,
// k and n multiples of 4; the strided kernel otherwise. PACT_CUDA_GEMM names another vectorized variant (the
// GPU benchmark compares them; an unknown name is refused).
const char* gemm_kernel(const GemmOperand& a, const GemmOperand& b, std::int64_t k, std::int64_t n,
                        const Geometry& batch) {
  bool vec = a.col_stride == 1 && b.col_stride == 1 && a.row_stride % 4 == 0 && b.row_stride % 4 == 0 && k % 4 == 0 &&
             n % 4 == 0 && a.address % 16 == 0 && b.address % 16 == 0;
  for (int d = 0; d < batch.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    vec = vec && batch.stride0[i] % 4 == 0 && batch.stride1[i] % 4 == 0;
  }
  if (!vec) return "pact_gemm_f32";
  // The default first: vec16 (k 16 per stage, two blocks per multiprocessor) was the fastest at 2048 and 4096
  // on an H200 (docs/gpu.md).
  static constexpr const char* kVariants[] = {"pact_gemm_f32_vec16", "pact_gemm_f32_vec8", "pact_gemm_f32_vec8_b1",
                                              "pact_gemm_f32_vec16_b1", "pact_gemm_f32"};
  if (const char* forced = std::getenv("PACT_CUDA_GEMM"); forced != nullptr && *forced != '\0') {
    for (const char* v : kVariants) {
      if (std::string_view(v) == forced) return v;
    }
    throw_error(ErrorCode::invalid_argument, "cuda.gemm",
                fmt::format("PACT_CUDA_GEMM={} names no GEMM kernel", forced));
  }
  return kVariants[0];
}

void* device_pointer(std::uint64_t address) {
  return reinterpret_cast<void*>(address);  // NOLINT(performance-no-int-to-ptr)
}

// ---- the products through cuBLAS (the cublas provider) ----

// cuBLAS's view of a row-major rows x cols operand: column-major storage of its transpose (op N, ld = the
// row stride) when its columns are unit-stride, or of itself (op T, ld = the column stride) when its rows
// are; nullopt for any other strides.
struct CublasOperand {
  int op;
  std::int64_t ld;
};
std::optional<CublasOperand> cublas_view(const GemmOperand& x, std::int64_t rows, std::int64_t cols) {
  if (x.col_stride == 1 && x.row_stride >= std::max<std::int64_t>(cols, 1)) return CublasOperand{0, x.row_stride};
  if (x.row_stride == 1 && x.col_stride >= std::max<std::int64_t>(rows, 1)) return CublasOperand{1, x.col_stride};
  return std::nullopt;
}

// C (rows x n, contiguous) = the bias row in every row, or C + it (`accumulate`).
void add_bias_rows(std::string_view op, std::uint64_t c, std::uint64_t bias, std::int64_t rows, std::int64_t n,
                   bool accumulate) {
  Geometry g;
  g.rank = 2;
  g.shape[0] = rows, g.shape[1] = n;
  g.stride0[0] = accumulate ? n : 0, g.stride0[1] = 1;  // binary: C's own strides; copy: the bias row
  g.stride1[1] = 1;
  std::int64_t count = rows * n;
  int code = 0;
  if (accumulate)
    launch(op, "pact_binary_f32", grid_for(count), 1, 1, kThreads, {&c, &c, &bias, &g, &count, &code});
  else
    launch(op, "pact_unary_f32", grid_for(count), 1, 1, kThreads, {&c, &bias, &g, &count, &code});
}

// gemm's contract through cuBLAS. Row-major C = A B is column-major C^T = B^T A^T, so B is cuBLAS's first
// operand. A batch whose operands advance by one stride each is one strided-batched call, any other
// batch one call per product; bias rows are written into C first and the product added (beta 1).
void cublas_gemm(std::string_view op, std::uint64_t c, GemmOperand a, GemmOperand b, std::uint64_t bias, std::int64_t m,
                 std::int64_t n, std::int64_t k, const Geometry& batch, std::int64_t batches, bool accumulate) {
  const std::optional<CublasOperand> av = cublas_view(a, m, k), bv = cublas_view(b, k, n);
  constexpr std::int64_t kIntMax = 0x7fffffff;
  if (!av || !bv || m > kIntMax || n > kIntMax || k > kIntMax || av->ld > kIntMax || bv->ld > kIntMax)
    throw_error(ErrorCode::unsupported, std::string(op),
                fmt::format("a {} x {} x {} product with strides ({}, {}) and ({}, {}) is not one cuBLAS takes", m, n,
                            k, a.row_stride, a.col_stride, b.row_stride, b.col_stride));
  if (bias != 0) add_bias_rows(op, c, bias, batches * m, n, accumulate);  // then C += A B
  std::vector<std::int64_t> a_off(static_cast<std::size_t>(batches)), b_off(a_off.size());
  for (std::int64_t z = 0; z < batches; ++z) {  // as kernels.cu's offsets(): row-major over the batch shape
    std::int64_t rest = z, oa = 0, ob = 0;
    for (int d = batch.rank - 1; d >= 0; --d) {
      const auto i = static_cast<std::size_t>(d);
      oa += (rest % batch.shape[i]) * batch.stride0[i];
      ob += (rest % batch.shape[i]) * batch.stride1[i];
      rest /= batch.shape[i];
    }
    a_off[static_cast<std::size_t>(z)] = oa;
    b_off[static_cast<std::size_t>(z)] = ob;
  }
  bool uniform = true;
  for (std::size_t z = 1; z < a_off.size() && uniform; ++z)
    uniform = a_off[z] - a_off[z - 1] == a_off[1] - a_off[0] && b_off[z] - b_off[z - 1] == b_off[1] - b_off[0];
  const float one = 1.0f, beta = accumulate || bias != 0 ? 1.0f : 0.0f;
  auto ptr = [](std::uint64_t address, std::int64_t elements) {
    return reinterpret_cast<float*>(address +
                                    static_cast<std::uint64_t>(elements) * 4);  // NOLINT(performance-no-int-to-ptr)
  };
  const Cublas& cb = *kernels::cublas();
  std::lock_guard lock(cb.mutex);
  device().make_current();
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const int lda = static_cast<int>(bv->ld), ldb = static_cast<int>(av->ld);
  auto checked = [&](int status) {
    if (status == 0) return;
    if (status == 13 || status == 14) device().poison();  // EXECUTION_FAILED, INTERNAL_ERROR: the stream is suspect
    throw_error(ErrorCode::internal, std::string(op), fmt::format("cuBLAS SGEMM failed (status {})", status));
  };
  if (batches > 1 && uniform) {
    checked(cb.sgemm_strided_batched(cb.handle, bv->op, av->op, ni, mi, ki, &one, ptr(b.address, b_off[0]), lda,
                                     b_off[1] - b_off[0], ptr(a.address, a_off[0]), ldb, a_off[1] - a_off[0], &beta,
                                     ptr(c, 0), ni, m * n, static_cast<int>(batches)));
    return;
  }
  for (std::int64_t z = 0; z < batches; ++z) {
    const auto i = static_cast<std::size_t>(z);
    checked(cb.sgemm(cb.handle, bv->op, av->op, ni, mi, ki, &one, ptr(b.address, b_off[i]), lda,
                     ptr(a.address, a_off[i]), ldb, &beta, ptr(c, z * m * n), ni));
  }
}

// ---- the products through cuBLASLt (the cublaslt provider: linear, with its epilogues) ----

// The largest power of two (up to 256) that divides a device address: what cuBLASLt's heuristics may assume
// of that operand (their default is 256, which a view at an offset does not have).
std::uint32_t address_alignment(std::uint64_t address) {
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

// One cuBLASLt product's descriptors (the matmul, A's, B's and D's layouts, the preference), destroyed with
// it; the handle is held for the call.
class LtProduct {
 public:
  explicit LtProduct(std::string_view op) : op_(op), lt_(*kernels::cublaslt()), lock_(lt_.mutex) {
    device().make_current();
  }
  ~LtProduct() {
    if (pref != nullptr) lt_.destroy_preference(pref);
    for (void* l : {d, b, a})
      if (l != nullptr) lt_.destroy_layout(l);
    if (desc != nullptr) lt_.destroy_matmul(desc);
  }
  LtProduct(const LtProduct&) = delete;
  LtProduct& operator=(const LtProduct&) = delete;

  // Status 0 or a typed error naming the call; a failed execution leaves the stream suspect.
  void check(int status, const char* call) const {
    if (status == 0) return;
    if (status == 13 || status == 14) device().poison();  // EXECUTION_FAILED, INTERNAL_ERROR
    throw_error(ErrorCode::internal, std::string(op_), fmt::format("{} failed (cuBLASLt status {})", call, status));
  }
  const kernels::CublasLt& lt() const noexcept { return lt_; }

  void* desc = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* d = nullptr;
  void* pref = nullptr;

 private:
  std::string_view op_;
  const kernels::CublasLt& lt_;
  std::lock_guard<std::mutex> lock_;
};

// Row-major C (m x n, contiguous) = A B (+ C when `accumulate`) through cuBLASLt, then `epilogue`:
// kLtEpilogueBias adds `vector` (n floats) to every row of C; kLtEpilogueBgradB writes A's row sums (m floats)
// to `vector`. As for cuBLAS, row-major C = A B is column-major C^T = B^T A^T: B is cuBLASLt's A, A its B,
// so C's columns are D's rows (the bias's length) and A's rows D's columns (BGRADB's, summed over k). False
// when cuBLASLt offers no algorithm for the epilogue, or refuses the one it offered (CUBLAS_STATUS_NOT_SUPPORTED
// from the call: nothing ran); the caller does the epilogue's work instead. A product it offers none for
// without an epilogue is `unsupported`.
bool cublaslt_gemm(Operands& ops, std::uint64_t c, GemmOperand a, GemmOperand b, std::int64_t m, std::int64_t n,
                   std::int64_t k, std::uint32_t epilogue, std::uint64_t vector, bool accumulate) {
  const std::string_view op = ops.op();
  const std::optional<CublasOperand> av = cublas_view(a, m, k), bv = cublas_view(b, k, n);
  if (!av || !bv)
    throw_error(ErrorCode::unsupported, std::string(op),
                fmt::format("a {} x {} x {} product with strides ({}, {}) and ({}, {}) is not one cuBLASLt takes", m, n,
                            k, a.row_stride, a.col_stride, b.row_stride, b.col_stride));
  auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  LtProduct p(op);
  const kernels::CublasLt& lt = p.lt();
  p.check(lt.create_matmul(&p.desc, kernels::kLtComputeF32, kernels::kLtR32F), "cublasLtMatmulDescCreate");
  const std::int32_t trans_a = bv->op, trans_b = av->op;
  p.check(lt.set_matmul_attribute(p.desc, kernels::kLtDescTransA, &trans_a, sizeof trans_a),
          "cublasLtMatmulDescSetAttribute(TRANSA)");
  p.check(lt.set_matmul_attribute(p.desc, kernels::kLtDescTransB, &trans_b, sizeof trans_b),
          "cublasLtMatmulDescSetAttribute(TRANSB)");
  p.check(lt.set_matmul_attribute(p.desc, kernels::kLtDescEpilogue, &epilogue, sizeof epilogue),
          "cublasLtMatmulDescSetAttribute(EPILOGUE)");
  if (epilogue != kernels::kLtEpilogueDefault) {
    const void* pointer = device_pointer(vector);
    p.check(lt.set_matmul_attribute(p.desc, kernels::kLtDescBiasPointer, &pointer, sizeof pointer),
            "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  // The stored matrices: cuBLASLt's A is B^T (n x k) as stored, N, or B itself (k x n), T; its B likewise.
  p.check(lt.create_layout(&p.a, kernels::kLtR32F, bv->op == 0 ? u(n) : u(k), bv->op == 0 ? u(k) : u(n), bv->ld),
          "cublasLtMatrixLayoutCreate(A)");
  p.check(lt.create_layout(&p.b, kernels::kLtR32F, av->op == 0 ? u(k) : u(m), av->op == 0 ? u(m) : u(k), av->ld),
          "cublasLtMatrixLayoutCreate(B)");
  p.check(lt.create_layout(&p.d, kernels::kLtR32F, u(n), u(m), n), "cublasLtMatrixLayoutCreate(D)");
  p.check(lt.create_preference(&p.pref), "cublasLtMatmulPreferenceCreate");
  const std::uint64_t max_workspace = kernels::kLtMaxWorkspace;
  p.check(lt.set_preference_attribute(p.pref, kernels::kLtPrefMaxWorkspace, &max_workspace, sizeof max_workspace),
          "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  for (auto [attribute, address] :
       {std::pair{kernels::kLtPrefAlignmentA, b.address}, std::pair{kernels::kLtPrefAlignmentB, a.address},
        std::pair{kernels::kLtPrefAlignmentC, c}, std::pair{kernels::kLtPrefAlignmentD, c}}) {
    const std::uint32_t alignment = address_alignment(address);
    p.check(lt.set_preference_attribute(p.pref, attribute, &alignment, sizeof alignment),
            "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
  }
  kernels::CublasLtHeuristic best;
  int returned = 0;
  const int status = lt.heuristics(lt.handle, p.desc, p.a, p.b, p.d, p.d, p.pref, 1, &best, &returned);
  if (status == kernels::kLtStatusNotSupported || (status == 0 && (returned < 1 || best.state != 0))) {
    if (epilogue != kernels::kLtEpilogueDefault) return false;
    throw_error(ErrorCode::unsupported, std::string(op),
                fmt::format("cuBLASLt offers no algorithm for a {} x {} x {} f32 product", m, n, k));
  }
  p.check(status, "cublasLtMatmulAlgoGetHeuristic");
  if (best.workspace > max_workspace)
    throw_error(ErrorCode::internal, std::string(op),
                fmt::format("cuBLASLt's algorithm wants {} bytes of workspace, past the {} offered", best.workspace,
                            max_workspace));
  std::uint64_t workspace = 0;
  if (best.workspace > 0)
    workspace = ops.write(ops.keep(device_empty(Dims{static_cast<std::int64_t>((best.workspace + 3) / 4)})));
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  const int ran = lt.matmul(lt.handle, p.desc, &one, device_pointer(b.address), p.a, device_pointer(a.address), p.b,
                            &beta, device_pointer(c), p.d, device_pointer(c), p.d, best.algo, device_pointer(workspace),
                            best.workspace, device().stream());
  // An epilogue the heuristics offered and the call then refuses: nothing ran, the caller does its work.
  if (ran == kernels::kLtStatusNotSupported && epilogue != kernels::kLtEpilogueDefault) return false;
  p.check(ran, "cublasLtMatmul");
  return true;
}

// C[z] (+)= A[z] B[z] (+ bias) over `batch` (shape; stride0/stride1 = A's and B's matrix strides per batch
// index); C contiguous, m x n per batch: Pact's GEMM kernels, or cuBLAS for the cublas provider's handlers.
void gemm(Operands& ops, std::uint64_t c, GemmOperand a, GemmOperand b, std::uint64_t bias, std::int64_t m,
          std::int64_t n, std::int64_t k, Geometry batch, bool accumulate) {
  const std::string_view op = ops.op();
  std::int64_t batches = 1;
  for (int d = 0; d < batch.rank; ++d) batches *= batch.shape[static_cast<std::size_t>(d)];
  if (m == 0 || n == 0 || batches == 0) return;
  if (ops.engine() == GemmEngine::cublas) return cublas_gemm(op, c, a, b, bias, m, n, k, batch, batches, accumulate);
  if (ops.engine() == GemmEngine::cublaslt) {
    if (batches != 1)
      throw_error(ErrorCode::internal, std::string(op), "the cublaslt provider's products are single, not batched");
    if (k == 0) {  // no product: C = bias rows, zeros, or C as it is
      if (!accumulate) device().clear(c, static_cast<std::uint64_t>(m * n) * 4);
      if (bias != 0) add_bias_rows(op, c, bias, m, n, true);
      return;
    }
    if (bias != 0 && cublaslt_gemm(ops, c, a, b, m, n, k, kernels::kLtEpilogueBias, bias, accumulate)) return;
    if (bias != 0) add_bias_rows(op, c, bias, m, n, accumulate);  // no bias epilogue offered: C = bias, then +=
    cublaslt_gemm(ops, c, a, b, m, n, k, kernels::kLtEpilogueDefault, 0, accumulate || bias != 0);
    return;
  }
  if (batches > 65535)
    throw_error(ErrorCode::unsupported, std::string(op),
                fmt::format("{} batched products exceed the cuda GEMM's 65535", batches));
  const void* bias_ptr =
      bias == 0 ? nullptr : reinterpret_cast<const void*>(bias);  // NOLINT(performance-no-int-to-ptr)
  int acc = accumulate ? 1 : 0;
  const auto gx = static_cast<std::uint32_t>((n + 127) / 128), gy = static_cast<std::uint32_t>((m + 127) / 128);
  if (gy > 65535)
    throw_error(ErrorCode::unsupported, std::string(op), fmt::format("{} rows exceed the cuda GEMM's grid", m));
  launch(op, gemm_kernel(a, b, k, n, batch), gx, gy, static_cast<std::uint32_t>(batches), 256,
         {&c, &a.address, &b.address, &bias_ptr, &m, &n, &k, &a.row_stride, &a.col_stride, &b.row_stride, &b.col_stride,
          &batch, &acc});
}

Geometry no_batch() { return Geometry{}; }

// matmul's operands in matrix form: [batch..., m, k] x [batch..., k, n], 1-D operands promoted.
struct MatmulForm {
  Dims a_matrix, b_matrix;  // a's and b's shapes in matrix form (with their own batch dims)
  Dims batch;               // the broadcast batch
  std::int64_t m, n, k;
};

MatmulForm matmul_form(const Dims& as, const Dims& bs) {
  MatmulForm f;
  f.a_matrix = as.size() == 1 ? Dims{1, as[0]} : as;
  f.b_matrix = bs.size() == 1 ? Dims{bs[0], 1} : bs;
  f.m = f.a_matrix[f.a_matrix.size() - 2];
  f.k = f.a_matrix[f.a_matrix.size() - 1];
  f.n = f.b_matrix[f.b_matrix.size() - 1];
  Dims ab, bb;
  for (int i = 0; i < f.a_matrix.size() - 2; ++i) ab.push_back(f.a_matrix[i]);
  for (int i = 0; i < f.b_matrix.size() - 2; ++i) bb.push_back(f.b_matrix[i]);
  f.batch = ops::broadcast_shapes("matmul", ab, bb);
  return f;
}

// The batch geometry of two contiguous matrix-form operands over the broadcast batch: each operand's stride
// per batch index is its matrix size times its own contiguous batch stride, 0 where it broadcasts.
Geometry batch_geometry(const Dims& batch, const Dims& x, std::int64_t x_matrix, const Dims& y, std::int64_t y_matrix) {
  Geometry g;
  g.rank = batch.size();
  auto strides_of = [&](const Dims& full, std::int64_t matrix, auto& out) {
    const int own = full.size() - 2;  // the operand's batch rank
    std::int64_t stride = matrix;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int od = d - (g.rank - own);
      const std::int64_t size = od >= 0 ? full[od] : 1;
      out[static_cast<std::size_t>(d)] = size == 1 ? 0 : stride;
      stride *= size;
    }
  };
  for (int d = 0; d < g.rank; ++d) g.shape[static_cast<std::size_t>(d)] = batch[d];
  strides_of(x, x_matrix, g.stride0);
  strides_of(y, y_matrix, g.stride1);
  return g;
}

Dims with_matrix(const Dims& batch, std::int64_t rows, std::int64_t cols) {
  Dims d = batch;
  d.push_back(rows);
  d.push_back(cols);
  return d;
}

// ---- handlers ------------------------------------------------------------------------------------------------

// One operand of a broadcasting elementwise kernel: its device address, shape and element strides.
struct Elementwise {
  std::uint64_t address;
  Dims shape, strides;
};

Elementwise contiguous_operand(std::uint64_t address, const Dims& shape) {
  return {address, shape, contiguous_strides(shape)};
}

// out (contiguous, `shape`) = x op y, x and y broadcast to `shape`: 0 add, 1 mul, 2 sub, 3 div.
void binary(Operands& ops, std::uint64_t out, const Dims& shape, const Elementwise& x, const Elementwise& y, int code) {
  Geometry g;
  g.rank = shape.size();
  for (int d = 0; d < g.rank; ++d) {
    const auto i = static_cast<std::size_t>(d);
    g.shape[i] = shape[d];
    const int dx = d - (g.rank - x.shape.size()), dy = d - (g.rank - y.shape.size());
    g.stride0[i] = dx >= 0 && x.shape[dx] != 1 ? x.strides[dx] : 0;
    g.stride1[i] = dy >= 0 && y.shape[dy] != 1 ? y.strides[dy] : 0;
  }
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  std::uint64_t xa = x.address, ya = y.address;
  if (n > 0) launch(ops.op(), "pact_binary_f32", grid_for(n), 1, 1, kThreads, {&out, &xa, &ya, &g, &n, &code});
}

void unary(Operands& ops, std::uint64_t out, const Elementwise& x, int code) {
  Geometry g;
  g.rank = x.shape.size();
  for (int d = 0; d < g.rank; ++d) {
    g.shape[static_cast<std::size_t>(d)] = x.shape[d];
    g.stride0[static_cast<std::size_t>(d)] = x.strides[d];
  }
  std::int64_t n = 1;
  for (auto e : x.shape) n *= e;
  std::uint64_t xa = x.address;
  if (n > 0) launch(ops.op(), "pact_unary_f32", grid_for(n), 1, 1, kThreads, {&out, &xa, &g, &n, &code});
}

Elementwise view_operand(Operands& ops, const TensorView& v, std::string_view name) {
  return {ops.read(v, name), v.shape(), v.strides()};
}

Tensor binary_forward(const char* op, int code, std::span<const TensorView> in) {
  Operands ops(op);
  const Dims shape = ops::broadcast_shapes(op, in[0].shape(), in[1].shape());
  const Elementwise a = view_operand(ops, in[0], "a"), b = view_operand(ops, in[1], "b");
  Tensor& out = ops.output(shape);
  binary(ops, ops.write(out), shape, a, b, code);
  return std::move(out);
}

// The gradient of a broadcast operand: `full` (the output's shape, contiguous) summed to `target`'s shape,
// negated when asked, into a new tensor.
Tensor reduced_gradient(Operands& ops, std::uint64_t full, const Dims& out_shape, const Dims& target, bool negate) {
  Tensor& result = ops.output(target);
  const std::uint64_t r = ops.write(result);
  if (!negate) {
    sum_to_shape(ops, r, full, out_shape, target);
    return std::move(result);
  }
  Tensor& summed = ops.keep(device_empty(target));
  const std::uint64_t sa = ops.write(summed);
  sum_to_shape(ops, sa, full, out_shape, target);
  unary(ops, r, contiguous_operand(sa, target), 2);
  return std::move(result);
}

// add (0), mul (1), sub (2), div (3): the VJP of each operand over the broadcast output shape. Reads only
// what the op table saves (add, sub: the cotangent; mul, div: both operands), never the forward output.
GradList binary_vjp(const char* op, int code, std::span<const TensorView> in, const TensorView& grad,
                    const KernelContext& ctx) {
  GradList r;
  Operands ops(op);
  const Dims shape = grad.shape();
  const Elementwise g = contiguous_operand(ops.contiguous(grad, "grad_output"), shape);
  auto full_product = [&](const Elementwise& x, const Elementwise& y, int c) {
    Tensor& t = ops.keep(device_empty(shape));
    const std::uint64_t ta = ops.write(t);
    binary(ops, ta, shape, x, y, c);
    return contiguous_operand(ta, shape);
  };
  for (std::size_t i = 0; i < 2; ++i) {
    if (!ctx.wants_grad(i)) {
      r.emplace_back(std::nullopt);
      continue;
    }
    std::uint64_t full = g.address;  // add, sub: the cotangent itself
    if (code == 1) {
      full = full_product(g, view_operand(ops, in[1 - i], i == 0 ? "b" : "a"), 1).address;  // g b, g a
    } else if (code == 3 && i == 0) {
      full = full_product(g, view_operand(ops, in[1], "b"), 3).address;  // g / b
    } else if (code == 3) {
      // d(a / b)/db = -g a / b^2 = -(g / b) (a / b)
      const Elementwise a = view_operand(ops, in[0], "a"), b = view_operand(ops, in[1], "b");
      full = full_product(full_product(g, b, 3), full_product(a, b, 3), 1).address;
    }
    r.emplace_back(reduced_gradient(ops, full, shape, in[i].shape(), i == 1 && (code == 2 || code == 3)));
  }
  return r;
}

// The unary ops' codes in kernels.cu.
int unary_code(ops::OpTag op, const Attributes& a) {
  switch (op) {
    case ops::OpTag::relu:
      return 1;
    case ops::OpTag::neg:
      return 2;
    case ops::OpTag::gelu:
      return a.get_string("gelu", "approximate", std::string("none")) == "tanh" ? 4 : 3;
    case ops::OpTag::silu:
      return 5;
    case ops::OpTag::tanh:
      return 6;
    case ops::OpTag::sigmoid:
      return 7;
    case ops::OpTag::exp:
      return 8;
    default:
      throw_error(ErrorCode::internal, "cuda", "not a unary op of the cuda provider");
  }
}

Tensor unary_forward(ops::OpTag tag, std::span<const TensorView> in, const Attributes& a) {
  const std::string op(ops::op_kind(tag));
  Operands ops(op);
  const Elementwise x = view_operand(ops, in[0], "x");
  Tensor& out = ops.output(in[0].shape());
  unary(ops, ops.write(out), x, unary_code(tag, a));
  return std::move(out);
}

GradList unary_vjp(ops::OpTag tag, std::span<const TensorView> in, const TensorView& y, const TensorView& grad,
                   const Attributes& a) {
  const std::string op(ops::op_kind(tag));
  GradList r;
  Operands ops(op);
  // Only what the op table saves is real (Note [Op table]); the slope reads nothing else: relu, tanh,
  // sigmoid and exp read the output, gelu and silu the input, neg neither.
  const ops::OpInfo& info = ops::op_info(tag);
  std::uint64_t g = ops.contiguous(grad, "grad_output");
  std::uint64_t x = info.saves_input(0) ? ops.contiguous(in[0], "x") : g;
  std::uint64_t yy = info.saves_output() ? ops.contiguous(y, "output") : x;
  if (!info.saves_input(0)) x = yy;
  Tensor& gx = ops.output(in[0].shape());
  std::uint64_t o = ops.write(gx);
  std::int64_t n = gx.numel();
  int code = unary_code(tag, a);
  if (n > 0) launch(op, "pact_unary_grad_f32", grid_for(n), 1, 1, kThreads, {&o, &x, &yy, &g, &n, &code});
  r.emplace_back(std::move(gx));
  return r;
}

#define PACT_CUDA_BINARY(opname, code)                                                                             \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes&, const KernelContext&) {               \
    return binary_forward(#opname, code, in);                                                                      \
  }                                                                                                                \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes&, \
                        const KernelContext& ctx) {                                                                \
    return binary_vjp(#opname, code, in, g, ctx);                                                                  \
  }
PACT_CUDA_BINARY(add, 0)
PACT_CUDA_BINARY(mul, 1)
PACT_CUDA_BINARY(sub, 2)
PACT_CUDA_BINARY(div, 3)
#undef PACT_CUDA_BINARY

#define PACT_CUDA_UNARY(opname)                                                                                        \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {                 \
    return unary_forward(ops::OpTag::opname, in, a);                                                                   \
  }                                                                                                                    \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a, \
                        const KernelContext&) {                                                                        \
    return unary_vjp(ops::OpTag::opname, in, y, g, a);                                                                 \
  }
PACT_CUDA_UNARY(relu)
PACT_CUDA_UNARY(neg)
PACT_CUDA_UNARY(gelu)
PACT_CUDA_UNARY(silu)
PACT_CUDA_UNARY(tanh)
PACT_CUDA_UNARY(sigmoid)
PACT_CUDA_UNARY(exp)
#undef PACT_CUDA_UNARY

Tensor matmul_forward_on(GemmEngine engine, std::span<const TensorView> in, const Attributes&, const KernelContext&) {
  Operands ops("matmul", engine);
  const MatmulForm f = matmul_form(in[0].shape(), in[1].shape());
  const std::uint64_t a = ops.contiguous(in[0], "a"), b = ops.contiguous(in[1], "b");
  const Dims out_shape =
      ops::infer_type(ops::OpTag::matmul,
                      std::vector<ops::TensorType>{{DType::f32, in[0].shape()}, {DType::f32, in[1].shape()}}, {})
          .shape;
  Tensor& out = ops.output(out_shape);
  const std::uint64_t o = ops.write(out);
  if (f.k == 0) {
    device().clear(o, static_cast<std::uint64_t>(out.numel()) * 4);
    return std::move(out);
  }
  gemm(ops, o, {a, f.k, 1}, {b, f.n, 1}, 0, f.m, f.n, f.k,
       batch_geometry(f.batch, f.a_matrix, f.m * f.k, f.b_matrix, f.k * f.n), false);
  return std::move(out);
}

GradList matmul_vjp_on(GemmEngine engine, std::span<const TensorView> in, const TensorView&, const TensorView& grad,
                       const Attributes&, const KernelContext& ctx) {
  GradList r;
  Operands ops("matmul", engine);
  const MatmulForm f = matmul_form(in[0].shape(), in[1].shape());
  const std::uint64_t a = ops.contiguous(in[0], "a"), b = ops.contiguous(in[1], "b");
  const std::uint64_t g = ops.contiguous(grad, "grad_output");
  const Dims g_form = with_matrix(f.batch, f.m, f.n);
  // dA[z] = G[z] B[z]^T over the broadcast batch, then summed over the batch dimensions A broadcasts.
  for (int which = 0; which < 2; ++which) {
    if (!ctx.wants_grad(static_cast<std::size_t>(which))) {
      r.emplace_back(std::nullopt);
      continue;
    }
    const Dims& own = which == 0 ? f.a_matrix : f.b_matrix;
    const Dims full = which == 0 ? with_matrix(f.batch, f.m, f.k) : with_matrix(f.batch, f.k, f.n);
    Tensor& result = ops.output(in[static_cast<std::size_t>(which)].shape());
    const std::uint64_t result_address = ops.write(result);
    const Tensor* staging = nullptr;
    std::uint64_t target = result_address;
    if (!(full == own)) {
      Tensor& st = ops.keep(device_empty(full));
      staging = &st;
      target = ops.write(st);
    }
    if (f.n == 0 || f.m == 0 || (which == 0 ? f.k : f.n) == 0) {
      device().clear(target, static_cast<std::uint64_t>(staging ? staging->numel() : result.numel()) * 4);
    } else if (which == 0) {
      gemm(ops, target, {g, f.n, 1}, {b, 1, f.n}, 0, f.m, f.k, f.n,
           batch_geometry(f.batch, g_form, f.m * f.n, f.b_matrix, f.k * f.n), false);
    } else {
      gemm(ops, target, {a, 1, f.k}, {g, f.n, 1}, 0, f.k, f.n, f.m,
           batch_geometry(f.batch, f.a_matrix, f.m * f.k, g_form, f.m * f.n), false);
    }
    if (staging) sum_to_shape(ops, result_address, target, full, own);
    r.emplace_back(std::move(result));
  }
  return r;
}

Tensor linear_forward_on(GemmEngine engine, std::span<const TensorView> in, const Attributes&, const KernelContext&) {
  Operands ops("linear", engine);
  const std::int64_t out_f = in[1].shape()[0], in_f = in[1].shape()[1];
  const std::int64_t rows = in_f == 0 ? in[0].numel() == 0 ? 0 : 1 : in[0].numel() / in_f;
  const std::uint64_t x = ops.contiguous(in[0], "x"), w = ops.contiguous(in[1], "weight");
  const std::uint64_t bias = in.size() == 3 ? ops.contiguous(in[2], "bias") : 0;
  Dims out_shape = in[0].shape();
  out_shape[out_shape.size() - 1] = out_f;
  Tensor& out = ops.output(out_shape);
  const std::uint64_t o = ops.write(out);
  if (in_f == 0) {
    // y = bias broadcast (or zeros): x W^T is empty
    device().clear(o, static_cast<std::uint64_t>(out.numel()) * 4);
    if (bias != 0 && out.numel() > 0) {
      Geometry g;
      g.rank = 2;
      g.shape[0] = out.numel() / out_f, g.shape[1] = out_f;
      g.stride0[0] = out_f, g.stride0[1] = 1, g.stride1[1] = 1;
      std::int64_t n = out.numel();
      int op_code = 0;
      launch("linear", "pact_binary_f32", grid_for(n), 1, 1, kThreads,
             {(void*)&o, (void*)&o, (void*)&bias, &g, &n, &op_code});
    }
    return std::move(out);
  }
  gemm(ops, o, {x, in_f, 1}, {w, 1, in_f}, bias, rows, out_f, in_f, no_batch(), false);
  return std::move(out);
}

GradList linear_vjp_on(GemmEngine engine, std::span<const TensorView> in, const TensorView&, const TensorView& grad,
                       const Attributes&, const KernelContext& ctx) {
  GradList r;
  Operands ops("linear", engine);
  const std::int64_t out_f = in[1].shape()[0], in_f = in[1].shape()[1];
  const std::int64_t rows = out_f == 0 ? 0 : grad.numel() / out_f;
  const std::uint64_t x = ops.contiguous(in[0], "x"), w = ops.contiguous(in[1], "weight");
  const std::uint64_t g = ops.contiguous(grad, "grad_output");
  // Each wanted gradient: zeros when its product is empty (no output features, or no rows), else `compute`.
  auto product = [&](std::size_t which, const Dims& shape, bool empty, auto&& compute) {
    if (!ctx.wants_grad(which)) {
      r.emplace_back(std::nullopt);
      return;
    }
    Tensor& t = ops.output(shape);
    const std::uint64_t ta = ops.write(t);
    if (empty)
      device().clear(ta, static_cast<std::uint64_t>(t.numel()) * 4);
    else
      compute(ta);
    r.emplace_back(std::move(t));
  };
  product(0, in[0].shape(), out_f == 0, [&](std::uint64_t ta) {
    gemm(ops, ta, {g, out_f, 1}, {w, in_f, 1}, 0, rows, in_f, out_f, no_batch(), false);  // G W
  });
  // Through cuBLASLt, the bias's gradient (G's column sums: G^T's row sums) comes from the weight's product,
  // in its epilogue (BGRADB), where cuBLASLt offers that.
  const bool fuse = engine == GemmEngine::cublaslt && in.size() == 3 && ctx.wants_grad(1) && ctx.wants_grad(2) &&
                    rows > 0 && out_f > 0 && in_f > 0;
  Tensor* bias_grad = fuse ? &ops.output(in[2].shape()) : nullptr;
  const std::uint64_t bias_grad_address = fuse ? ops.write(*bias_grad) : 0;
  bool bias_fused = false;
  product(1, in[1].shape(), rows == 0, [&](std::uint64_t ta) {
    const GemmOperand gt{g, 1, out_f}, xm{x, in_f, 1};  // G^T X
    if (fuse)
      bias_fused =
          cublaslt_gemm(ops, ta, gt, xm, out_f, in_f, rows, kernels::kLtEpilogueBgradB, bias_grad_address, false);
    if (!bias_fused) gemm(ops, ta, gt, xm, 0, out_f, in_f, rows, no_batch(), false);
  });
  if (fuse) {
    if (!bias_fused) sum_to_shape(ops, bias_grad_address, g, Dims{rows, out_f}, Dims{out_f});
    r.emplace_back(std::move(*bias_grad));
  } else if (in.size() == 3) {
    product(2, in[2].shape(), rows == 0, [&](std::uint64_t ta) {
      sum_to_shape(ops, ta, g, Dims{rows, out_f}, Dims{out_f});
    });
  }
  return r;
}

struct AxisSplit {
  std::int64_t outer = 1, axis = 1, inner = 1;
};
AxisSplit split_softmax(const char* op, const TensorView& x, const Attributes& a) {
  AxisSplit s;
  if (x.rank() == 0) return s;
  const int dim = ops::normalize_dim(op, a.get_int(op, "dim", -1), x.rank());
  const Dims shape = x.shape();
  for (int d = 0; d < dim; ++d) s.outer *= shape[d];
  s.axis = shape[dim];
  for (int d = dim + 1; d < x.rank(); ++d) s.inner *= shape[d];
  return s;
}

Tensor softmax_like_forward(const char* op, int log_form, std::span<const TensorView> in, const Attributes& a) {
  Operands ops(op);
  AxisSplit s = split_softmax(op, in[0], a);
  std::uint64_t x = ops.contiguous(in[0], "x");
  Tensor& out = ops.output(in[0].shape());
  std::uint64_t o = ops.write(out);
  const std::int64_t rows = s.outer * s.inner;
  if (rows > 0 && s.axis > 0)
    launch(op, "pact_softmax_f32", static_cast<std::uint32_t>(rows), 1, 1, kThreads,
           {&o, &x, &s.outer, &s.axis, &s.inner, &log_form});
  return std::move(out);
}

GradList softmax_like_vjp(const char* op, int log_form, std::span<const TensorView> in, const TensorView& y,
                          const TensorView& grad, const Attributes& a) {
  GradList r;
  Operands ops(op);
  AxisSplit s = split_softmax(op, in[0], a);
  std::uint64_t yy = ops.contiguous(y, "output"), g = ops.contiguous(grad, "grad_output");
  Tensor& gx = ops.output(in[0].shape());
  std::uint64_t o = ops.write(gx);
  const std::int64_t rows = s.outer * s.inner;
  if (rows > 0 && s.axis > 0)
    launch(op, "pact_softmax_grad_f32", static_cast<std::uint32_t>(rows), 1, 1, kThreads,
           {&o, &yy, &g, &s.outer, &s.axis, &s.inner, &log_form});
  r.emplace_back(std::move(gx));
  return r;
}

Tensor softmax_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  return softmax_like_forward("softmax", 0, in, a);
}
GradList softmax_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                     const KernelContext&) {
  return softmax_like_vjp("softmax", 0, in, y, g, a);
}
Tensor log_softmax_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  return softmax_like_forward("log_softmax", 1, in, a);
}
GradList log_softmax_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                         const KernelContext&) {
  return softmax_like_vjp("log_softmax", 1, in, y, g, a);
}

// ---- layer and rms norm: one block per row of the normalized width ----

std::int64_t norm_width(const char* op, const Attributes& a) {
  std::int64_t w = 1;
  for (auto e : a.get_ints(op, "normalized_shape")) w *= e;
  return w;
}

Tensor norm_forward(const char* op, int rms, std::span<const TensorView> in, const Attributes& a) {
  Operands ops(op);
  std::int64_t width = norm_width(op, a);
  const std::int64_t rows = width == 0 ? 0 : in[0].numel() / width;
  float eps = static_cast<float>(a.get_float(op, "eps", rms != 0 ? 1e-6 : 1e-5));
  std::uint64_t x = ops.contiguous(in[0], "x");
  const void* w = in.size() > 1 ? reinterpret_cast<const void*>(ops.contiguous(in[1], "weight"))
                                : nullptr;  // NOLINT(performance-no-int-to-ptr)
  const void* b = in.size() > 2 ? reinterpret_cast<const void*>(ops.contiguous(in[2], "bias"))
                                : nullptr;  // NOLINT(performance-no-int-to-ptr)
  Tensor& out = ops.output(in[0].shape());
  std::uint64_t o = ops.write(out);
  if (rows > 0 && width > 0)
    launch(op, "pact_norm_f32", static_cast<std::uint32_t>(rows), 1, 1, kThreads, {&o, &x, &w, &b, &width, &eps, &rms});
  return std::move(out);
}

GradList norm_vjp(const char* op, int rms, std::span<const TensorView> in, const TensorView& grad, const Attributes& a,
                  const KernelContext& ctx) {
  GradList r;
  Operands ops(op);
  std::int64_t width = norm_width(op, a);
  const std::int64_t rows = width == 0 ? 0 : in[0].numel() / width;
  float eps = static_cast<float>(a.get_float(op, "eps", rms != 0 ? 1e-6 : 1e-5));
  std::uint64_t x = ops.contiguous(in[0], "x"), g = ops.contiguous(grad, "grad_output");
  const void* w = in.size() > 1 ? reinterpret_cast<const void*>(ops.contiguous(in[1], "weight"))
                                : nullptr;  // NOLINT(performance-no-int-to-ptr)
  Tensor& gx = ops.output(in[0].shape());
  std::uint64_t o = ops.write(gx);
  Tensor& gxhat = ops.keep(device_empty(in[0].shape()));
  std::uint64_t h = ops.write(gxhat);
  if (rows > 0 && width > 0)
    launch(op, "pact_norm_grad_f32", static_cast<std::uint32_t>(rows), 1, 1, kThreads,
           {&o, &h, &x, &w, &g, &width, &eps, &rms});
  r.emplace_back(std::move(gx));
  // The weight's gradient sums g * xhat over the rows, the bias's sums g.
  for (std::size_t i = 1; i < in.size(); ++i) {
    if (!ctx.wants_grad(i)) {
      r.emplace_back(std::nullopt);
      continue;
    }
    Tensor& gp = ops.output(in[i].shape());
    std::uint64_t pa = ops.write(gp);
    if (rows == 0)
      device().clear(pa, static_cast<std::uint64_t>(gp.numel()) * 4);
    else
      sum_to_shape(ops, pa, i == 1 ? h : g, Dims{rows, width}, Dims{width});
    r.emplace_back(std::move(gp));
  }
  return r;
}

Tensor layer_norm_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  return norm_forward("layer_norm", 0, in, a);
}
GradList layer_norm_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes& a,
                        const KernelContext& ctx) {
  return norm_vjp("layer_norm", 0, in, g, a, ctx);
}
Tensor rms_norm_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  return norm_forward("rms_norm", 1, in, a);
}
GradList rms_norm_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes& a,
                      const KernelContext& ctx) {
  return norm_vjp("rms_norm", 1, in, g, a, ctx);
}

enum class Reduction { none, sum, mean };
Reduction reduction_of(const Attributes& a) {
  const std::string r = a.get_string("cross_entropy", "reduction", std::string("mean"));
  return r == "none" ? Reduction::none : r == "sum" ? Reduction::sum : Reduction::mean;
}

// Per-row losses and counted flags of cross entropy (kept by the operands), with a device-side check of every
// target.
struct RowLosses {
  Tensor* losses = nullptr;
  Tensor* counted = nullptr;
  std::uint64_t losses_address = 0, counted_address = 0;
};

// `losses_out`: the tensor the row losses go to (the result of reduction none), or null for a kept temporary.
RowLosses cross_entropy_rows(Operands& ops, std::uint64_t x, std::uint64_t t, std::int64_t rows, std::int64_t classes,
                             std::int64_t ignore, Tensor* losses_out) {
  RowLosses r;
  r.losses = losses_out != nullptr ? losses_out : &ops.keep(device_empty(Dims{rows}));
  r.counted = &ops.keep(device_empty(Dims{rows}));
  r.losses_address = ops.write(*r.losses);
  r.counted_address = ops.write(*r.counted);
  // A target outside the classes is the caller's error, raised with the next wait (a deferred check).
  device().checked_launch("cross_entropy", "target", classes, [&](std::uint64_t bad_address) {
    if (rows > 0)
      launch("cross_entropy", "pact_cross_entropy_rows_f32", static_cast<std::uint32_t>(rows), 1, 1, kThreads,
             {&r.losses_address, &r.counted_address, &x, &t, &classes, &ignore, &bad_address});
  });
  return r;
}

Tensor cross_entropy_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  Operands ops("cross_entropy");
  const std::int64_t classes = in[0].shape()[in[0].rank() - 1];
  const std::int64_t rows = in[0].rank() == 2 ? in[0].shape()[0] : 1;
  const std::int64_t ignore = a.get_int("cross_entropy", "ignore_index", -100);
  const Reduction red = reduction_of(a);
  const std::uint64_t x = ops.contiguous(in[0], "logits"), t = ops.read(in[1], "target", DType::i64);
  if (red == Reduction::none) {
    // [rows] losses, or one loss of a single row of logits (a scalar)
    Tensor& out = ops.output(in[0].rank() == 2 ? Dims{rows} : Dims{});
    (void)cross_entropy_rows(ops, x, t, rows, classes, ignore, &out);
    return std::move(out);
  }
  RowLosses rl = cross_entropy_rows(ops, x, t, rows, classes, ignore, nullptr);
  Tensor& out = ops.output(Dims{});
  const std::uint64_t o = ops.write(out);
  const std::uint64_t weights = red == Reduction::mean ? rl.counted_address : 0;
  const void* w = weights == 0 ? nullptr : reinterpret_cast<const void*>(weights);  // NOLINT(performance-no-int-to-ptr)
  std::int64_t n = rows;
  launch("cross_entropy", "pact_sum_f32", 1, 1, 1, 1024, {(void*)&o, &rl.losses_address, &w, &n});
  return std::move(out);
}

GradList cross_entropy_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& grad,
                           const Attributes& a, const KernelContext&) {
  GradList r;
  Operands ops("cross_entropy");
  const std::int64_t classes = in[0].shape()[in[0].rank() - 1];
  const std::int64_t rows = in[0].rank() == 2 ? in[0].shape()[0] : 1;
  const std::int64_t ignore = a.get_int("cross_entropy", "ignore_index", -100);
  const Reduction red = reduction_of(a);
  const std::uint64_t x = ops.contiguous(in[0], "logits"), t = ops.read(in[1], "target", DType::i64);
  const std::uint64_t g = ops.contiguous(grad, "grad_output");
  RowLosses rl = cross_entropy_rows(ops, x, t, rows, classes, ignore, nullptr);
  std::uint64_t count_address = ops.write(ops.keep(device_empty(Dims{})));
  std::int64_t n = rows;
  const void* no_weights = nullptr;
  launch("cross_entropy", "pact_sum_f32", 1, 1, 1, 1024, {&count_address, &rl.counted_address, &no_weights, &n});
  Tensor& gx = ops.output(in[0].shape());
  const std::uint64_t o = ops.write(gx);
  int mode = red == Reduction::none ? 0 : red == Reduction::sum ? 1 : 2;
  std::int64_t cls = classes, ign = ignore;
  if (rows > 0 && classes > 0)
    launch("cross_entropy", "pact_cross_entropy_grad_f32", static_cast<std::uint32_t>(rows), 1, 1, kThreads,
           {(void*)&o, (void*)&x, (void*)&t, (void*)&g, &count_address, &cls, &ign, &mode});
  r.emplace_back(std::move(gx));
  r.emplace_back(std::nullopt);  // class indices are not differentiable
  return r;
}

// ---- scaled dot-product attention: fused forward, VJP through the probabilities ----

// The fused forward's shared memory is opted into past the default 48 KiB up to sm_80's and sm_90's common
// limit (a head width of about 200 floats); wider heads go through the probabilities.
constexpr std::int64_t kFusedAttentionMaxShared = 163 * 1024;

struct AttentionForm {
  std::int64_t batch = 1, l = 0, s = 0, e = 0, ev = 0;
  int causal = 0, mask_kind = 0;
  float scale = 1.0f;
  Geometry mask_geometry;
  const void* mask = nullptr;
};

AttentionForm attention_form(Operands& ops, std::span<const TensorView> in, const Attributes& a) {
  constexpr const char* op = "scaled_dot_product_attention";
  AttentionForm f;
  const Dims q = in[0].shape(), k = in[1].shape(), v = in[2].shape();
  const int r = q.size();
  for (int d = 0; d < r - 2; ++d) f.batch *= q[d];
  f.l = q[r - 2];
  f.e = q[r - 1];
  f.s = k[r - 2];
  f.ev = v[r - 1];
  f.causal = a.get_bool(op, "is_causal", false) ? 1 : 0;
  f.scale = static_cast<float>(a.get_float(op, "scale", 1.0 / std::sqrt(static_cast<double>(f.e))));
  if (in.size() == 4) {
    const TensorView& m = in[3];
    const bool boolean = m.dtype() == DType::boolean;
    f.mask = reinterpret_cast<const void*>(
        ops.read(m, "mask", boolean ? DType::boolean : DType::f32));  // NOLINT(performance-no-int-to-ptr)
    f.mask_kind = boolean ? 2 : 1;
    // The mask's strides broadcast over the scores [batch..., L, S], flattened.
    Dims scores = q;
    scores[r - 1] = f.s;
    f.mask_geometry.rank = r;
    const Dims ms = m.shape(), st = m.strides();
    for (int d = 0; d < r; ++d) {
      const auto i = static_cast<std::size_t>(d);
      f.mask_geometry.shape[i] = scores[d];
      const int md = d - (r - ms.size());
      f.mask_geometry.stride0[i] = md >= 0 && ms[md] != 1 ? st[md] : 0;
    }
  }
  return f;
}

Geometry flat_batch(std::int64_t batch, std::int64_t a_matrix, std::int64_t b_matrix) {
  Geometry g;
  g.rank = 1;
  g.shape[0] = batch;
  g.stride0[0] = a_matrix;
  g.stride1[0] = b_matrix;
  return g;
}

// Note [Attention in chunks]
// Where attention goes through its probabilities (the VJP; the forward for heads the fused kernel does not
// take), P and dP are made a chunk of query rows at a time into buffers of at most attention_chunk_bytes()
// each, so their memory does not grow with batch x L x S (4 GiB per buffer for 64 heads at sequence 4096):
// whole batch entries where one entry's [L, S] fits, else rows of one entry. Each chunk's dQ rows are its
// own; dK and dV sum over the row chunks of an entry (the first writes, the rest accumulate).
struct AttentionChunk {
  std::int64_t b0 = 0, nb = 0, l0 = 0, nl = 0;  // batch entries [b0, b0 + nb), query rows [l0, l0 + nl)
  // Element offsets of the chunk's first query row in a [batch, L, width] operand, and of its first batch
  // entry in a [batch, S, width] one.
  std::int64_t rows_at(const AttentionForm& f, std::int64_t width) const { return (b0 * f.l + l0) * width; }
  std::int64_t keys_at(const AttentionForm& f, std::int64_t width) const { return b0 * f.s * width; }
};

// 512 MiB, or PACT_CUDA_ATTENTION_CHUNK_BYTES (a whole number of bytes, at least one row: tests force small
// chunks with it).
std::int64_t attention_chunk_bytes() {
  const char* v = std::getenv("PACT_CUDA_ATTENTION_CHUNK_BYTES");
  if (v == nullptr || *v == '\0') return std::int64_t{512} << 20;
  char* end = nullptr;
  const long long bytes = std::strtoll(v, &end, 10);
  if (*end != '\0' || bytes < 1)
    throw_error(ErrorCode::invalid_argument, "scaled_dot_product_attention",
                fmt::format("PACT_CUDA_ATTENTION_CHUNK_BYTES={} is not a positive whole number of bytes", v));
  return bytes;
}

// The chunks of Note [Attention in chunks], in order, and the most query rows one holds.
std::vector<AttentionChunk> attention_chunks(const AttentionForm& f, std::int64_t& most_rows) {
  const std::int64_t budget = attention_chunk_bytes(), row_bytes = std::max<std::int64_t>(f.s, 1) * 4;
  std::vector<AttentionChunk> chunks;
  most_rows = 0;
  if (row_bytes * f.l <= budget) {
    const std::int64_t per = std::max<std::int64_t>(1, budget / std::max<std::int64_t>(row_bytes * f.l, 1));
    for (std::int64_t b0 = 0; b0 < f.batch; b0 += per) chunks.push_back({b0, std::min(per, f.batch - b0), 0, f.l});
  } else {
    const std::int64_t per = std::max<std::int64_t>(1, budget / row_bytes);
    for (std::int64_t b0 = 0; b0 < f.batch; ++b0)
      for (std::int64_t l0 = 0; l0 < f.l; l0 += per) chunks.push_back({b0, 1, l0, std::min(per, f.l - l0)});
  }
  for (const auto& c : chunks) most_rows = std::max(most_rows, c.nb * c.nl);
  return chunks;
}

std::uint64_t at_element(std::uint64_t address, std::int64_t element) {
  return address + static_cast<std::uint64_t>(element) * 4;
}

// P = softmax(scale Q K^T + mask) for chunk c's rows, [nb, nl, S], into p.
void attention_probs(Operands& ops, AttentionForm& f, const AttentionChunk& c, std::uint64_t p, std::uint64_t q,
                     std::uint64_t k) {
  std::int64_t n = c.nb * c.nl * f.s;
  if (n == 0) return;
  if (f.e == 0)
    device().clear(p, static_cast<std::uint64_t>(n) * 4);
  else
    gemm(ops, p, {at_element(q, c.rows_at(f, f.e)), f.e, 1}, {at_element(k, c.keys_at(f, f.e)), 1, f.e}, 0, c.nl, f.s,
         f.e, flat_batch(c.nb, f.l * f.e, f.s * f.e), false);
  std::int64_t first = c.rows_at(f, f.s);
  launch(ops.op(), "pact_attention_scores_f32", grid_for(n), 1, 1, kThreads,
         {&p, &f.mask, &f.mask_geometry, &f.mask_kind, &f.l, &f.s, &n, &first, &f.scale, &f.causal});
  std::int64_t rows = c.nb * c.nl, one = 1;
  int log_form = 0;
  launch(ops.op(), "pact_softmax_f32", static_cast<std::uint32_t>(rows), 1, 1, kThreads,
         {&p, &p, &rows, &f.s, &one, &log_form});
}

Tensor scaled_dot_product_attention_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  constexpr const char* op = "scaled_dot_product_attention";
  Operands ops(op);
  AttentionForm f = attention_form(ops, in, a);
  std::uint64_t q = ops.contiguous(in[0], "query"), k = ops.contiguous(in[1], "key"),
                v = ops.contiguous(in[2], "value");
  Dims out_shape = in[0].shape();
  out_shape[out_shape.size() - 1] = f.ev;
  Tensor& out = ops.output(out_shape);
  std::uint64_t o = ops.write(out);
  if (out.numel() == 0) return std::move(out);
  if (f.s == 0) {  // no keys: each output is an empty sum, 0 (as the reference)
    device().clear(o, static_cast<std::uint64_t>(out.numel()) * 4);
    return std::move(out);
  }
  // The fused kernel (pact/kernels/attention_tile.hpp) where its variant and its shared memory fit.
  using kernels::AttentionTile;
  static constexpr const char* kVariants[] = {"pact_attention_f32_v32", "pact_attention_f32_v64", "",
                                              "pact_attention_f32_v128"};
  const int chunks = kernels::attention_value_chunks(f.ev);
  const std::int64_t shared = kernels::attention_shared_floats(f.e, f.ev) * 4;
  if (chunks != 0 && shared <= kFusedAttentionMaxShared && f.batch <= 65535) {
    launch(op, kVariants[chunks - 1],
           static_cast<std::uint32_t>((f.l + AttentionTile::kRows - 1) / AttentionTile::kRows),
           static_cast<std::uint32_t>(f.batch), 1, AttentionTile::kThreads,
           {&o, &q, &k, &v, &f.mask, &f.mask_geometry, &f.mask_kind, &f.l, &f.s, &f.e, &f.ev, &f.scale, &f.causal},
           static_cast<std::uint32_t>(shared));
    return std::move(out);
  }
  // Wider heads: through the probabilities, O = P V, a chunk of rows at a time (Note [Attention in chunks]).
  std::int64_t most_rows = 0;
  const std::vector<AttentionChunk> row_chunks = attention_chunks(f, most_rows);
  const std::uint64_t p = ops.write(ops.keep(device_empty(Dims{most_rows * f.s})));
  for (const AttentionChunk& c : row_chunks) {
    attention_probs(ops, f, c, p, q, k);
    gemm(ops, at_element(o, c.rows_at(f, f.ev)), {p, f.s, 1}, {at_element(v, c.keys_at(f, f.ev)), f.ev, 1}, 0, c.nl,
         f.ev, f.s, flat_batch(c.nb, c.nl * f.s, f.s * f.ev), false);
  }
  return std::move(out);
}

GradList scaled_dot_product_attention_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& grad,
                                          const Attributes& a, const KernelContext& ctx) {
  constexpr const char* op = "scaled_dot_product_attention";
  GradList r;
  Operands ops(op);
  AttentionForm f = attention_form(ops, in, a);
  std::uint64_t q = ops.contiguous(in[0], "query"), k = ops.contiguous(in[1], "key"),
                v = ops.contiguous(in[2], "value");
  std::uint64_t g = ops.contiguous(grad, "grad_output");
  // The wanted gradients (0: not wanted, or empty); all zeros where there are no scores.
  const bool no_scores = f.batch * f.l * f.s == 0;
  std::uint64_t grads[3] = {0, 0, 0};
  for (std::size_t which = 0; which < 3; ++which) {
    if (!ctx.wants_grad(which)) {
      r.emplace_back(std::nullopt);
      continue;
    }
    Tensor& t = ops.output(in[which].shape());
    const std::uint64_t ta = ops.write(t);
    if (t.numel() > 0 && no_scores) device().clear(ta, static_cast<std::uint64_t>(t.numel()) * 4);
    if (t.numel() > 0 && !no_scores) grads[which] = ta;
    r.emplace_back(std::move(t));
  }
  if (in.size() == 4) r.emplace_back(std::nullopt);  // the mask is not differentiable
  if (no_scores || (grads[0] == 0 && grads[1] == 0 && grads[2] == 0)) return r;
  // Per chunk of query rows (Note [Attention in chunks]): P; dV += P^T G; dP = G V^T, then dS = P (dP -
  // rowsum(dP P)) * scale in place; dQ = dS K; dK += dS^T Q.
  std::int64_t most_rows = 0;
  const std::vector<AttentionChunk> row_chunks = attention_chunks(f, most_rows);
  const std::uint64_t p = ops.write(ops.keep(device_empty(Dims{most_rows * f.s})));
  const bool wants_ds = grads[0] != 0 || grads[1] != 0;
  const std::uint64_t ds = wants_ds ? ops.write(ops.keep(device_empty(Dims{most_rows * f.s}))) : 0;
  for (const AttentionChunk& c : row_chunks) {
    const bool accumulate = c.l0 > 0;  // a later row chunk of the same entry adds to its dK and dV
    const std::uint64_t gc = at_element(g, c.rows_at(f, f.ev)), qc = at_element(q, c.rows_at(f, f.e));
    attention_probs(ops, f, c, p, q, k);
    if (grads[2] != 0)
      gemm(ops, at_element(grads[2], c.keys_at(f, f.ev)), {p, 1, f.s}, {gc, f.ev, 1}, 0, f.s, f.ev, c.nl,
           flat_batch(c.nb, c.nl * f.s, f.l * f.ev), accumulate);
    if (!wants_ds) continue;
    std::int64_t n = c.nb * c.nl * f.s;
    if (f.ev == 0)
      device().clear(ds, static_cast<std::uint64_t>(n) * 4);
    else
      gemm(ops, ds, {gc, f.ev, 1}, {at_element(v, c.keys_at(f, f.ev)), 1, f.ev}, 0, c.nl, f.s, f.ev,
           flat_batch(c.nb, f.l * f.ev, f.s * f.ev), false);
    std::int64_t rows = c.nb * c.nl, one = 1;
    int log_form = 0;
    std::uint64_t pp = p, dsa = ds;
    launch(op, "pact_softmax_grad_f32", static_cast<std::uint32_t>(rows), 1, 1, kThreads,
           {&dsa, &pp, &dsa, &rows, &f.s, &one, &log_form});
    launch(op, "pact_scale_f32", grid_for(n), 1, 1, kThreads, {&dsa, &n, &f.scale});
    if (grads[0] != 0)
      gemm(ops, at_element(grads[0], c.rows_at(f, f.e)), {ds, f.s, 1}, {at_element(k, c.keys_at(f, f.e)), f.e, 1}, 0,
           c.nl, f.e, f.s, flat_batch(c.nb, c.nl * f.s, f.s * f.e), false);
    if (grads[1] != 0)
      gemm(ops, at_element(grads[1], c.keys_at(f, f.e)), {ds, 1, f.s}, {qc, f.e, 1}, 0, f.s, f.e, c.nl,
           flat_batch(c.nb, c.nl * f.s, f.l * f.e), accumulate);
  }
  return r;
}

// ---- embedding ------------------------------------------------------------------------------------------------

// A [rows, dim] table looked up at i64 indices of any shape: the result is the indices' shape plus dim. An
// index outside the table is index_out_of_range naming it, checked on the device (this waits for the lookup).
Tensor embedding_forward(std::span<const TensorView> in, const Attributes&, const KernelContext&) {
  Operands ops("embedding");
  std::int64_t rows = in[0].shape()[0], dim = in[0].shape()[1], n = in[1].numel();
  std::uint64_t w = ops.contiguous(in[0], "weight"), idx = ops.read(in[1], "indices", DType::i64);
  Dims shape = in[1].shape();
  shape.push_back(dim);
  Tensor& out = ops.output(shape);
  std::uint64_t o = ops.write(out);
  device().checked_launch("embedding", "indices", rows, [&](std::uint64_t bad) {
    if (n > 0 && dim > 0)
      launch("embedding", "pact_embedding_f32", grid_for(n * kThreads), 1, 1, kThreads,
             {&o, &w, &idx, &n, &rows, &dim, &bad});
  });
  return std::move(out);
}

// The table's gradient (padding_idx's row zero); the indices get none.
GradList embedding_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& grad, const Attributes& a,
                       const KernelContext&) {
  GradList r;
  Operands ops("embedding");
  std::int64_t rows = in[0].shape()[0], dim = in[0].shape()[1], n = in[1].numel();
  std::int64_t padding = a.get_int("embedding", "padding_idx", -1);
  std::uint64_t g = ops.contiguous(grad, "grad_output"), idx = ops.read(in[1], "indices", DType::i64);
  Tensor& gw = ops.output(in[0].shape());
  std::uint64_t o = ops.write(gw);
  if (rows > 0 && dim > 0)
    launch("embedding", "pact_embedding_grad_f32", grid_for(rows * kThreads), 1, 1, kThreads,
           {&o, &g, &idx, &n, &rows, &dim, &padding});
  r.emplace_back(std::move(gw));
  r.emplace_back(std::nullopt);
  return r;
}

// ---- reductions -------------------------------------------------------------------------------------------------

// sum and mean over `dims` (all when empty), keepdim or not. The result, read as the input's shape with each
// reduced dimension 1 (the same row-major order), is the input summed to that shape in index order; mean
// then scales by 1 / the reduced count. The VJP broadcasts the cotangent back over the reduced dimensions.
struct Reduced {
  Dims kept;               ///< the input's shape with each reduced dimension 1
  std::int64_t count = 1;  ///< elements summed into each result
};
Reduced reduced_shape(const char* op, const Dims& s, const Attributes& a) {
  const auto dims = a.get_ints(op, "dims", std::vector<std::int64_t>{});
  std::vector<bool> reduced(static_cast<std::size_t>(s.size()), dims.empty());
  for (auto d : dims) reduced[static_cast<std::size_t>(ops::normalize_dim(op, d, s.size()))] = true;
  Reduced r;
  r.kept = s;
  for (int d = 0; d < s.size(); ++d) {
    if (!reduced[static_cast<std::size_t>(d)]) continue;
    r.count *= s[d];
    r.kept[d] = 1;
  }
  return r;
}

Tensor reduce_forward(ops::OpTag tag, std::span<const TensorView> in, const Attributes& a) {
  const char* op = tag == ops::OpTag::sum ? "sum" : "mean";
  Operands ops(op);
  const std::uint64_t x = ops.contiguous(in[0], "x");
  const Reduced r = reduced_shape(op, in[0].shape(), a);
  Tensor& out = ops.output(ops::infer_type(tag, std::vector<ops::TensorType>{{DType::f32, in[0].shape()}}, a).shape);
  std::uint64_t o = ops.write(out);
  sum_to_shape(ops, o, x, in[0].shape(), r.kept);
  std::int64_t n = out.numel();
  float factor = 1.0f / static_cast<float>(r.count);
  if (tag == ops::OpTag::mean && n > 0) launch(op, "pact_scale_f32", grid_for(n), 1, 1, kThreads, {&o, &n, &factor});
  return std::move(out);
}

GradList reduce_vjp(ops::OpTag tag, std::span<const TensorView> in, const TensorView& grad, const Attributes& a) {
  const char* op = tag == ops::OpTag::sum ? "sum" : "mean";
  Operands ops(op);
  const Dims s = in[0].shape();
  const Reduced r = reduced_shape(op, s, a);
  Dims strides = contiguous_strides(r.kept);  // the cotangent read in the kept shape, 0 along reduced dims
  for (int d = 0; d < s.size(); ++d) {
    if (r.kept[d] == 1) strides[d] = 0;
  }
  const Elementwise g{ops.contiguous(grad, "grad_output"), s, strides};
  Tensor& gx = ops.output(s);
  std::uint64_t o = ops.write(gx);
  unary(ops, o, g, 0);
  std::int64_t n = gx.numel();
  float factor = 1.0f / static_cast<float>(r.count);
  if (tag == ops::OpTag::mean && n > 0) launch(op, "pact_scale_f32", grid_for(n), 1, 1, kThreads, {&o, &n, &factor});
  GradList result;
  result.emplace_back(std::move(gx));
  return result;
}

#define PACT_CUDA_REDUCE(opname)                                                                                     \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {               \
    return reduce_forward(ops::OpTag::opname, in, a);                                                                \
  }                                                                                                                  \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes& a, \
                        const KernelContext&) {                                                                      \
    return reduce_vjp(ops::OpTag::opname, in, g, a);                                                                 \
  }
PACT_CUDA_REDUCE(sum)
PACT_CUDA_REDUCE(mean)
#undef PACT_CUDA_REDUCE

// ---- views ------------------------------------------------------------------------------------------------------

// A planned view node's result: the view (derive_view, as on the CPU) copied in row-major order into a new
// contiguous tensor of `shape`.
Tensor materialize(Operands& ops, const TensorView& v, const Dims& shape) {
  const std::uint64_t src = ops.read(v, "x");
  Tensor& out = ops.output(shape);
  copy_strided(ops.op(), ops.write(out), src, v);
  return std::move(out);
}

Dims view_shape(ops::OpTag op, const TensorView& x, const Attributes& a) {
  return ops::infer_type(op, std::vector<ops::TensorType>{{x.dtype(), x.shape()}}, a).shape;
}

#define PACT_CUDA_VIEW(opname)                                                                                    \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {            \
    Operands ops(#opname);                                                                                        \
    return materialize(ops, derive_view(ops::OpTag::opname, in[0], a), view_shape(ops::OpTag::opname, in[0], a)); \
  }
PACT_CUDA_VIEW(reshape)
PACT_CUDA_VIEW(flatten)
PACT_CUDA_VIEW(transpose)
PACT_CUDA_VIEW(permute)
#undef PACT_CUDA_VIEW

// reshape, flatten: the cotangent in the input's shape, the same row-major order.
GradList reshape_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes&,
                     const KernelContext&) {
  GradList r;
  Operands ops("reshape");
  r.emplace_back(materialize(ops, g, in[0].shape()));
  return r;
}
GradList flatten_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                     const KernelContext& c) {
  return reshape_vjp(in, y, g, a, c);
}
// transpose: its own inverse.
GradList transpose_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes& a,
                       const KernelContext&) {
  GradList r;
  Operands ops("transpose");
  r.emplace_back(materialize(ops, derive_view(ops::OpTag::transpose, g, a), in[0].shape()));
  return r;
}
// permute: the inverse permutation of the cotangent.
GradList permute_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes& a,
                     const KernelContext&) {
  GradList r;
  Operands ops("permute");
  const auto dims = a.get_ints("permute", "dims");
  const int rank = in[0].rank();
  std::vector<std::int64_t> inverse(dims.size());
  for (int i = 0; i < rank; ++i)
    inverse[static_cast<std::size_t>(ops::normalize_dim("permute", dims[static_cast<std::size_t>(i)], rank))] = i;
  r.emplace_back(materialize(ops, derive_view(ops::OpTag::permute, g, Attributes{{"dims", inverse}}), in[0].shape()));
  return r;
}

// ---- convolution: im2col, then the GEMM kernels per image and group; col2im for the input's gradient ----
//
// The columns of `images` images are [images, C KH KW, OH OW] (kernels.cu's pact_im2col_f32): group grp's rows
// are one [cg KH KW, OH OW] matrix, so each image's and group's product is one GEMM of the batch. The
// batch is cut into chunks whose columns stay under 256 MiB (at least one image each).

std::int64_t images_per_chunk(const ConvGeometry& g) {
  const std::int64_t per_image = std::max<std::int64_t>(g.c * g.kh * g.kw * g.oh * g.ow * 4, 1);
  const std::int64_t by_memory = (std::int64_t{256} << 20) / per_image;
  const std::int64_t by_grid = 65535 / std::max<std::int64_t>(g.groups, 1);  // the GEMM's batch limit
  return std::clamp<std::int64_t>(std::min(by_memory, by_grid), 1, std::max<std::int64_t>(g.n, 1));
}

void im2col(Operands& ops, std::uint64_t cols, std::uint64_t x, ConvGeometry g, std::int64_t n0, std::int64_t images) {
  const std::int64_t total = images * g.c * g.kh * g.kw * g.oh * g.ow;
  if (total > 0) launch(ops.op(), "pact_im2col_f32", grid_for(total), 1, 1, kThreads, {&cols, &x, &g, &n0, &images});
}

// One GEMM batch over `images` images and the groups: a's and b's strides per image and per group.
Geometry image_group_batch(std::int64_t images, std::int64_t groups, std::int64_t a_image, std::int64_t a_group,
                           std::int64_t b_image, std::int64_t b_group) {
  Geometry batch;
  batch.rank = 2;
  batch.shape[0] = images;
  batch.shape[1] = groups;
  batch.stride0[0] = a_image;
  batch.stride0[1] = a_group;
  batch.stride1[0] = b_image;
  batch.stride1[1] = b_group;
  return batch;
}

// out += bias[o] over every image and pixel (0: no bias).
void add_bias(Operands& ops, std::uint64_t out, std::uint64_t bias, const ConvGeometry& g) {
  if (bias == 0) return;
  const Dims shape{g.n, g.o, g.oh, g.ow};
  binary(ops, out, shape, contiguous_operand(out, shape), contiguous_operand(bias, Dims{g.o, 1, 1}), 0);
}

// ---- cuDNN's convolutions (the cudnn provider; pact/kernels/cudnn.hpp) --------------------------------------
//
// One convolution's descriptors (NCHW float input, output and filter; cross-correlation with the geometry's
// padding, stride, dilation and groups, FMA math so no TF32 rounding enters), made and destroyed around each
// call; each call picks the heuristics' best deterministic algorithm (else the best) and gives it the
// workspace it asks for from the device pool.
class CudnnConvolution {
 public:
  CudnnConvolution(std::string_view op, const ConvGeometry& g) : op_(op), dnn_(*kernels::cudnn()), lock_(dnn_.mutex) {
    constexpr std::int64_t kIntMax = 0x7fffffff;
    for (std::int64_t v : {g.n, g.c, g.h, g.w, g.o, g.cg, g.kh, g.kw, g.oh, g.ow, g.ph, g.pw, g.sh, g.sw, g.dh, g.dw})
      if (v > kIntMax)
        throw_error(ErrorCode::unsupported, std::string(op), "a convolution dimension past cuDNN's int range");
    auto i = [](std::int64_t v) { return static_cast<int>(v); };
    device().make_current();
    check(dnn_.create_tensor(&x), "cudnnCreateTensorDescriptor");
    check(dnn_.create_tensor(&y), "cudnnCreateTensorDescriptor");
    check(dnn_.create_filter(&w), "cudnnCreateFilterDescriptor");
    check(dnn_.create_convolution(&conv), "cudnnCreateConvolutionDescriptor");
    check(dnn_.set_tensor_4d(x, kernels::kCudnnNchw, kernels::kCudnnFloat, i(g.n), i(g.c), i(g.h), i(g.w)),
          "cudnnSetTensor4dDescriptor");
    check(dnn_.set_tensor_4d(y, kernels::kCudnnNchw, kernels::kCudnnFloat, i(g.n), i(g.o), i(g.oh), i(g.ow)),
          "cudnnSetTensor4dDescriptor");
    check(dnn_.set_filter_4d(w, kernels::kCudnnFloat, kernels::kCudnnNchw, i(g.o), i(g.cg), i(g.kh), i(g.kw)),
          "cudnnSetFilter4dDescriptor");
    check(dnn_.set_convolution_2d(conv, i(g.ph), i(g.pw), i(g.sh), i(g.sw), i(g.dh), i(g.dw),
                                  kernels::kCudnnCrossCorrelation, kernels::kCudnnFloat),
          "cudnnSetConvolution2dDescriptor");
    check(dnn_.set_group_count(conv, i(g.groups)), "cudnnSetConvolutionGroupCount");
    check(dnn_.set_math_type(conv, kernels::kCudnnFmaMath), "cudnnSetConvolutionMathType");
  }
  ~CudnnConvolution() {
    if (conv != nullptr) dnn_.destroy_convolution(conv);
    if (w != nullptr) dnn_.destroy_filter(w);
    if (y != nullptr) dnn_.destroy_tensor(y);
    if (x != nullptr) dnn_.destroy_tensor(x);
  }
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;

  // Status 0 or a typed error naming the call; a failed execution leaves the stream suspect.
  void check(int status, const char* call) const {
    if (status == 0) return;
    if (status == 4000 || status == 5000) device().poison();  // CUDNN_STATUS_INTERNAL_ERROR, _EXECUTION_FAILED
    throw_error(ErrorCode::internal, std::string(op_), fmt::format("{} failed (cuDNN status {})", call, status));
  }
  // The heuristics' (`find`: requested, returned, results) best deterministic algorithm, else their best.
  template <class Find>
  kernels::CudnnAlgorithm pick(const char* call, Find&& find) const {
    std::array<kernels::CudnnAlgorithm, 8> found{};
    int returned = 0;
    check(find(static_cast<int>(found.size()), &returned, found.data()), call);
    returned = std::clamp(returned, 0, static_cast<int>(found.size()));
    for (bool deterministic : {true, false}) {
      for (int k = 0; k < returned; ++k) {
        const auto& f = found[static_cast<std::size_t>(k)];
        if (f.status == 0 && (!deterministic || f.determinism == kernels::kCudnnDeterministic)) return f;
      }
    }
    throw_error(ErrorCode::unsupported, std::string(op_), fmt::format("{} offered no usable algorithm", call));
  }
  // A workspace of `bytes` from the device pool, kept by `ops` until the call is enqueued (0: none).
  static std::uint64_t workspace(Operands& ops, std::size_t bytes) {
    if (bytes == 0) return 0;
    Tensor& ws = ops.keep(device_empty(Dims{static_cast<std::int64_t>((bytes + 3) / 4)}));
    return ops.write(ws);
  }
  const kernels::Cudnn& dnn() const noexcept { return dnn_; }

  void* x = nullptr;
  void* y = nullptr;
  void* w = nullptr;
  void* conv = nullptr;

 private:
  std::string_view op_;
  const kernels::Cudnn& dnn_;
  std::lock_guard<std::mutex> lock_;  // the handle serves one call at a time
};

// out = x convolved with w by cuDNN (every output element written).
void cudnn_convolve(Operands& ops, std::uint64_t out, std::uint64_t x, std::uint64_t w, const ConvGeometry& g) {
  CudnnConvolution cd(ops.op(), g);
  const auto& d = cd.dnn();
  const kernels::CudnnAlgorithm algo =
      cd.pick("cudnnGetConvolutionForwardAlgorithm_v7", [&](int requested, int* returned, kernels::CudnnAlgorithm* r) {
        return d.forward_algorithms(d.handle, cd.x, cd.w, cd.conv, cd.y, requested, returned, r);
      });
  const std::uint64_t ws = CudnnConvolution::workspace(ops, algo.memory);
  const float one = 1.0f, zero = 0.0f;
  cd.check(d.forward(d.handle, &one, cd.x, device_pointer(x), cd.w, device_pointer(w), cd.conv, algo.algo,
                     device_pointer(ws), algo.memory, &zero, cd.y, device_pointer(out)),
           "cudnnConvolutionForward");
}

// gx = the input's gradient of gy (backward data), gw = the filter's (backward filter); 0 for one not wanted.
void cudnn_convolution_grads(Operands& ops, std::uint64_t gx, std::uint64_t gw, std::uint64_t gy, std::uint64_t x,
                             std::uint64_t w, const ConvGeometry& g) {
  CudnnConvolution cd(ops.op(), g);
  const auto& d = cd.dnn();
  const float one = 1.0f, zero = 0.0f;
  if (gx != 0) {
    const kernels::CudnnAlgorithm algo = cd.pick(
        "cudnnGetConvolutionBackwardDataAlgorithm_v7", [&](int requested, int* returned, kernels::CudnnAlgorithm* r) {
          return d.backward_data_algorithms(d.handle, cd.w, cd.y, cd.conv, cd.x, requested, returned, r);
        });
    const std::uint64_t ws = CudnnConvolution::workspace(ops, algo.memory);
    cd.check(d.backward_data(d.handle, &one, cd.w, device_pointer(w), cd.y, device_pointer(gy), cd.conv, algo.algo,
                             device_pointer(ws), algo.memory, &zero, cd.x, device_pointer(gx)),
             "cudnnConvolutionBackwardData");
  }
  if (gw != 0) {
    const kernels::CudnnAlgorithm algo = cd.pick(
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7", [&](int requested, int* returned, kernels::CudnnAlgorithm* r) {
          return d.backward_filter_algorithms(d.handle, cd.x, cd.y, cd.conv, cd.w, requested, returned, r);
        });
    const std::uint64_t ws = CudnnConvolution::workspace(ops, algo.memory);
    cd.check(d.backward_filter(d.handle, &one, cd.x, device_pointer(x), cd.y, device_pointer(gy), cd.conv, algo.algo,
                               device_pointer(ws), algo.memory, &zero, cd.w, device_pointer(gw)),
             "cudnnConvolutionBackwardFilter");
  }
}

// One input channel per group (depthwise, with or without a channel multiplier): kernels.cu's direct
// pact_conv_depthwise_* kernels, not an im2col GEMM whose inner dimension would be only KH KW.
bool depthwise(const ConvGeometry& g) { return g.cg == 1 && g.groups > 1; }

// out (contiguous [N, O, OH, OW]) = the convolution of x by w (contiguous device operands), plus bias (0:
// none).
void convolve(Operands& ops, std::uint64_t out, std::uint64_t x, std::uint64_t w, std::uint64_t bias,
              const ConvGeometry& g) {
  const std::int64_t k = g.cg * g.kh * g.kw, l = g.oh * g.ow, chunk = images_per_chunk(g);
  if (g.n * g.o * l == 0) return;
  if (k == 0) {  // no taps: only the bias
    device().clear(out, static_cast<std::uint64_t>(g.n * g.o * l) * 4);
  } else if (ops.engine() == GemmEngine::cudnn) {
    cudnn_convolve(ops, out, x, w, g);
  } else if (depthwise(g)) {
    ConvGeometry geo = g;
    launch(ops.op(), "pact_conv_depthwise_f32", grid_for(g.n * g.o * l), 1, 1, kThreads, {&out, &x, &w, &geo});
  } else {
    Tensor& cols = ops.keep(device_empty(Dims{chunk, g.c * g.kh * g.kw, l}));
    const std::uint64_t ca = ops.write(cols);  // reused by every chunk: the stream orders its reads and writes
    for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
      const std::int64_t images = std::min(chunk, g.n - n0);
      im2col(ops, ca, x, g, n0, images);
      gemm(ops, out + static_cast<std::uint64_t>(n0 * g.o * l) * 4, {w, k, 1}, {ca, l, 1}, 0, g.og, l, k,
           image_group_batch(images, g.groups, 0, g.og * k, g.groups * k * l, k * l), false);
    }
  }
  add_bias(ops, out, bias, g);
}

Tensor conv2d_forward_on(GemmEngine engine, std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  Operands ops("conv2d", engine);
  const ConvGeometry g = conv_geometry(in, a);
  const std::uint64_t x = ops.contiguous(in[0], "input"), w = ops.contiguous(in[1], "weight");
  const std::uint64_t b = in.size() == 3 ? ops.contiguous(in[2], "bias") : 0;
  Tensor& out = ops.output(Dims{g.n, g.o, g.oh, g.ow});
  convolve(ops, ops.write(out), x, w, b, g);
  return std::move(out);
}

// The weight's gradient sums, image by image in index order, gy[i, group] (og x OH OW) times the image's
// columns transposed; the input's is col2im of w[group]^T gy[i, group]; the bias's sums gy over images and
// pixels.
GradList conv2d_vjp_on(GemmEngine engine, std::span<const TensorView> in, const TensorView&, const TensorView& grad,
                       const Attributes& a, const KernelContext& ctx) {
  GradList r;
  Operands ops("conv2d", engine);
  const ConvGeometry g = conv_geometry(in, a);
  const std::int64_t k = g.cg * g.kh * g.kw, l = g.oh * g.ow, rows = g.c * g.kh * g.kw, chunk = images_per_chunk(g);
  const std::uint64_t gy = ops.contiguous(grad, "grad_output");
  const bool want_x = ctx.wants_grad(0), want_w = ctx.wants_grad(1);
  const std::uint64_t x = want_w ? ops.contiguous(in[0], "input") : 0;
  const std::uint64_t w = want_x ? ops.contiguous(in[1], "weight") : 0;
  Tensor* gx = nullptr;
  Tensor* gw = nullptr;
  std::uint64_t gxa = 0, gwa = 0;
  if (want_x) {
    gx = &ops.output(in[0].shape());
    gxa = ops.write(*gx);
    if (l == 0 || g.o == 0) device().clear(gxa, static_cast<std::uint64_t>(gx->numel()) * 4);
  }
  if (want_w) {
    gw = &ops.output(in[1].shape());
    gwa = ops.write(*gw);
    if (g.n * l == 0) device().clear(gwa, static_cast<std::uint64_t>(gw->numel()) * 4);
  }
  if (g.n * l * g.o > 0 && k > 0 && ops.engine() == GemmEngine::cudnn) {
    cudnn_convolution_grads(ops, want_x ? gxa : 0, want_w ? gwa : 0, gy, x, w, g);
  } else if (g.n * l * g.o > 0 && depthwise(g)) {
    ConvGeometry geo = g;
    std::uint64_t cotangent = gy, input = x, weight = w;
    if (want_w) {
      launch(ops.op(), "pact_conv_depthwise_weight_grad_f32", static_cast<std::uint32_t>(g.o * g.kh * g.kw), 1, 1,
             kThreads, {&gwa, &cotangent, &input, &geo});
    }
    if (want_x) {
      launch(ops.op(), "pact_conv_depthwise_input_grad_f32", grid_for(g.n * g.c * g.h * g.w), 1, 1, kThreads,
             {&gxa, &cotangent, &weight, &geo});
    }
  } else if (g.n * l * g.o > 0 && (want_x || want_w)) {
    Tensor& cols = ops.keep(device_empty(Dims{chunk, rows, l}));
    const std::uint64_t ca = ops.write(cols);
    for (std::int64_t n0 = 0; n0 < g.n; n0 += chunk) {
      const std::int64_t images = std::min(chunk, g.n - n0);
      const std::uint64_t gy0 = gy + static_cast<std::uint64_t>(n0 * g.o * l) * 4;
      if (want_w) {
        im2col(ops, ca, x, g, n0, images);
        Geometry groups;
        groups.rank = 1;
        groups.shape[0] = g.groups;
        groups.stride0[0] = g.og * l;
        groups.stride1[0] = k * l;
        for (std::int64_t i = 0; i < images; ++i)
          gemm(ops, gwa, {gy0 + static_cast<std::uint64_t>(i * g.o * l) * 4, l, 1},
               {ca + static_cast<std::uint64_t>(i * rows * l) * 4, 1, l}, 0, g.og, k, l, groups, n0 + i > 0);
      }
      if (want_x) {  // the columns' gradient overwrites the columns: the weight's products above read them first
        gemm(ops, ca, {w, 1, k}, {gy0, l, 1}, 0, k, l, g.og,
             image_group_batch(images, g.groups, 0, g.og * k, g.o * l, g.og * l), false);
        std::int64_t n_first = n0, count = images;
        std::uint64_t columns = ca;
        ConvGeometry geo = g;
        const std::int64_t total = images * g.c * g.h * g.w;
        if (total > 0)
          launch(ops.op(), "pact_col2im_f32", grid_for(total), 1, 1, kThreads,
                 {&gxa, &columns, &geo, &n_first, &count});
      }
    }
  }
  r.push_back(gx != nullptr ? std::optional<Tensor>(std::move(*gx)) : std::nullopt);
  r.push_back(gw != nullptr ? std::optional<Tensor>(std::move(*gw)) : std::nullopt);
  if (in.size() == 3) {
    if (!ctx.wants_grad(2)) {
      r.emplace_back(std::nullopt);
    } else {
      Tensor& gb = ops.output(Dims{g.o});
      const std::uint64_t ba = ops.write(gb);
      if (g.n * l == 0)
        device().clear(ba, static_cast<std::uint64_t>(g.o) * 4);
      else
        sum_to_shape(ops, ba, gy, Dims{g.n, g.o, l}, Dims{g.o, 1});
      r.emplace_back(std::move(gb));
    }
  }
  return r;
}

// The handlers of the GEMM ops for both providers: the same code, the products by Pact's kernels (cuda) or by
// cuBLAS (cublas).
#define PACT_CUDA_GEMM_OP(opname)                                                                                      \
  Tensor opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {               \
    return opname##_forward_on(GemmEngine::pact, in, a, c);                                                            \
  }                                                                                                                    \
  GradList opname##_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a, \
                        const KernelContext& c) {                                                                      \
    return opname##_vjp_on(GemmEngine::pact, in, y, g, a, c);                                                          \
  }                                                                                                                    \
  Tensor cublas_##opname##_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {      \
    return opname##_forward_on(GemmEngine::cublas, in, a, c);                                                          \
  }                                                                                                                    \
  GradList cublas_##opname##_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g,             \
                                 const Attributes& a, const KernelContext& c) {                                        \
    return opname##_vjp_on(GemmEngine::cublas, in, y, g, a, c);                                                        \
  }
PACT_CUDA_GEMM_OP(matmul)
PACT_CUDA_GEMM_OP(linear)
PACT_CUDA_GEMM_OP(conv2d)
#undef PACT_CUDA_GEMM_OP

// linear through cuBLASLt (the cublaslt provider): the bias in the product's epilogue, its gradient in the
// weight gradient's.
Tensor cublaslt_linear_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  return linear_forward_on(GemmEngine::cublaslt, in, a, c);
}
GradList cublaslt_linear_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g,
                             const Attributes& a, const KernelContext& c) {
  return linear_vjp_on(GemmEngine::cublaslt, in, y, g, a, c);
}

// conv2d with its convolutions by cuDNN (the cudnn provider); the bias and its gradient as above.
Tensor cudnn_conv2d_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& c) {
  return conv2d_forward_on(GemmEngine::cudnn, in, a, c);
}
GradList cudnn_conv2d_vjp(std::span<const TensorView> in, const TensorView& y, const TensorView& g, const Attributes& a,
                          const KernelContext& c) {
  return conv2d_vjp_on(GemmEngine::cudnn, in, y, g, a, c);
}

// conv2d_activation (inference only): the convolution, plus the residual (a fourth input), then the
// activation, each in place on the output: the unfused answer, as the CPU providers define it.
Tensor conv2d_activation_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  constexpr const char* op = "conv2d_activation";
  Operands ops(op);
  const std::string act = a.get_string(op, "activation");
  const int code = act == "relu" ? 1 : act == "silu" ? 5 : act == "hardswish" ? 9 : act == "relu6" ? 10 : 0;
  if (code == 0 && act != "none")
    throw_error(ErrorCode::invalid_argument, op,
                fmt::format("activation '{}' is not relu, relu6, silu or hardswish", act));
  const ConvGeometry g = conv_geometry(in.first(std::min<std::size_t>(in.size(), 3)), conv_attributes(a));
  const std::uint64_t x = ops.contiguous(in[0], "input"), w = ops.contiguous(in[1], "weight");
  const std::uint64_t b = in.size() >= 3 ? ops.contiguous(in[2], "bias") : 0;
  const Dims shape{g.n, g.o, g.oh, g.ow};
  Tensor& out = ops.output(shape);
  const std::uint64_t o = ops.write(out);
  convolve(ops, o, x, w, b, g);
  if (in.size() == 4)
    binary(ops, o, shape, contiguous_operand(o, shape), contiguous_operand(ops.contiguous(in[3], "residual"), shape),
           0);
  if (code != 0) unary(ops, o, contiguous_operand(o, shape), code);
  return std::move(out);
}

// ---- pooling: one thread per output (forward) or per input element (VJP, a gather) ----

Tensor pool_forward(const char* op, int max, std::span<const TensorView> in, const Attributes& a) {
  Operands ops(op);
  PoolGeometry g = pool_geometry(op, in[0], a);
  std::uint64_t x = ops.contiguous(in[0], "input");
  Dims shape = in[0].shape();
  shape[shape.size() - 2] = g.oh;
  shape[shape.size() - 1] = g.ow;
  Tensor& out = ops.output(shape);
  std::uint64_t o = ops.write(out);
  const std::int64_t total = g.planes * g.oh * g.ow;
  if (total > 0) launch(op, "pact_pool2d_f32", grid_for(total), 1, 1, kThreads, {&o, &x, &g, &max});
  return std::move(out);
}

GradList pool_vjp(const char* op, int max, std::span<const TensorView> in, const TensorView& grad,
                  const Attributes& a) {
  GradList r;
  Operands ops(op);
  PoolGeometry g = pool_geometry(op, in[0], a);
  std::uint64_t x = ops.contiguous(in[0], "input"), gy = ops.contiguous(grad, "grad_output");
  Tensor& gx = ops.output(in[0].shape());
  std::uint64_t o = ops.write(gx);
  const std::int64_t total = g.planes * g.h * g.w;
  if (total > 0) launch(op, "pact_pool2d_grad_f32", grid_for(total), 1, 1, kThreads, {&o, &x, &gy, &g, &max});
  r.emplace_back(std::move(gx));
  return r;
}

Tensor max_pool2d_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  return pool_forward("max_pool2d", 1, in, a);
}
GradList max_pool2d_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes& a,
                        const KernelContext&) {
  return pool_vjp("max_pool2d", 1, in, g, a);
}
Tensor avg_pool2d_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  return pool_forward("avg_pool2d", 0, in, a);
}
GradList avg_pool2d_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& g, const Attributes& a,
                        const KernelContext&) {
  return pool_vjp("avg_pool2d", 0, in, g, a);
}

// adaptive_avg_pool2d: planes of the input's last two dimensions into output_size (the shape rule's).
struct AdaptiveForm {
  Dims out_shape;
  std::int64_t planes, h, w, oh, ow;
};
AdaptiveForm adaptive_form(const TensorView& x, const Attributes& a) {
  AdaptiveForm f;
  f.out_shape =
      ops::infer_type(ops::OpTag::adaptive_avg_pool2d, std::vector<ops::TensorType>{{x.dtype(), x.shape()}}, a).shape;
  const Dims s = x.shape();
  const int r = s.size();
  f.h = s[r - 2];
  f.w = s[r - 1];
  f.oh = f.out_shape[r - 2];
  f.ow = f.out_shape[r - 1];
  f.planes = f.h * f.w == 0 ? 0 : x.numel() / (f.h * f.w);
  return f;
}

Tensor adaptive_avg_pool2d_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext&) {
  Operands ops("adaptive_avg_pool2d");
  AdaptiveForm f = adaptive_form(in[0], a);
  std::uint64_t x = ops.contiguous(in[0], "input");
  Tensor& out = ops.output(f.out_shape);
  std::uint64_t o = ops.write(out);
  if (out.numel() > 0)
    launch(ops.op(), "pact_adaptive_pool_f32", grid_for(out.numel()), 1, 1, kThreads,
           {&o, &x, &f.planes, &f.h, &f.w, &f.oh, &f.ow});
  return std::move(out);
}

// Reads only the cotangent and the input's shape: the op saves nothing (Note [Op table]).
GradList adaptive_avg_pool2d_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& grad,
                                 const Attributes& a, const KernelContext&) {
  GradList r;
  Operands ops("adaptive_avg_pool2d");
  AdaptiveForm f = adaptive_form(in[0], a);
  std::uint64_t gy = ops.contiguous(grad, "grad_output");
  Tensor& gx = ops.output(in[0].shape());
  std::uint64_t o = ops.write(gx);
  if (gx.numel() > 0)
    launch(ops.op(), "pact_adaptive_pool_grad_f32", grid_for(gx.numel()), 1, 1, kThreads,
           {&o, &gy, &f.planes, &f.h, &f.w, &f.oh, &f.ow});
  r.emplace_back(std::move(gx));
  return r;
}

// ---- batch norm: x [N, C, spatial...], statistics per channel (one block each) ----

struct ChannelForm {
  std::int64_t n, c, spatial;
};
ChannelForm channel_form(const TensorView& x) {
  const Dims s = x.shape();
  ChannelForm f{s[0], s[1], 0};
  f.spatial = f.n * f.c == 0 ? 0 : x.numel() / (f.n * f.c);
  return f;
}

// A data-parallel step sums the statistics over the ranks on the host (pact/kernels/ranks.hpp); the device
// kernels compute one rank's, so they refuse such a step rather than normalize by the wrong batch.
void refuse_rank_statistics(std::string_view op, bool training) {
  if (training && batch_norm_ranks() != nullptr)
    throw_error(ErrorCode::unsupported, std::string(op),
                "synchronized batch statistics over data-parallel ranks are not implemented on the cuda provider");
}

// The per-channel mean and 1 / sqrt(var + eps) (kept by the operands): the batch's in training, the running
// statistics' in evaluation.
std::pair<std::uint64_t, std::uint64_t> channel_statistics(Operands& ops, std::uint64_t x,
                                                           std::span<const TensorView> in, const ChannelForm& f,
                                                           const Attributes& a, bool training) {
  std::uint64_t rm = ops.contiguous(in[3], "running_mean"), rv = ops.contiguous(in[4], "running_var");
  Tensor& mean = ops.keep(device_empty(Dims{f.c}));
  Tensor& inv = ops.keep(device_empty(Dims{f.c}));
  std::uint64_t ma = ops.write(mean), ia = ops.write(inv);
  std::int64_t n = f.n, c = f.c, spatial = f.spatial;
  float eps = static_cast<float>(a.get_float("batch_norm", "eps", 1e-5));
  int train = training ? 1 : 0;
  if (c > 0)
    launch(ops.op(), "pact_batch_stats_f32", static_cast<std::uint32_t>(c), 1, 1, kThreads,
           {&ma, &ia, &x, &rm, &rv, &n, &c, &spatial, &eps, &train});
  return {ma, ia};
}

Tensor batch_norm_forward(std::span<const TensorView> in, const Attributes& a, const KernelContext& ctx) {
  Operands ops("batch_norm");
  refuse_rank_statistics(ops.op(), ctx.training);
  ChannelForm f = channel_form(in[0]);
  std::uint64_t x = ops.contiguous(in[0], "x"), w = ops.contiguous(in[1], "weight"), b = ops.contiguous(in[2], "bias");
  auto [mean, inv] = channel_statistics(ops, x, in, f, a, ctx.training);
  Tensor& out = ops.output(in[0].shape());
  std::uint64_t o = ops.write(out);
  std::int64_t total = out.numel();
  if (total > 0)
    launch(ops.op(), "pact_batch_norm_apply_f32", grid_for(total), 1, 1, kThreads,
           {&o, &x, &mean, &inv, &w, &b, &total, &f.c, &f.spatial});
  return std::move(out);
}

// Reads x, the weight and the running statistics, never the bias: the op saves inputs 0, 1, 3 and 4.
GradList batch_norm_vjp(std::span<const TensorView> in, const TensorView&, const TensorView& grad, const Attributes& a,
                        const KernelContext& ctx) {
  GradList r;
  Operands ops("batch_norm");
  refuse_rank_statistics(ops.op(), ctx.training);
  ChannelForm f = channel_form(in[0]);
  std::uint64_t x = ops.contiguous(in[0], "x"), w = ops.contiguous(in[1], "weight"),
                g = ops.contiguous(grad, "grad_output");
  auto [mean, inv] = channel_statistics(ops, x, in, f, a, ctx.training);
  Tensor& gx = ops.output(in[0].shape());
  Tensor& gw = ops.output(Dims{f.c});
  Tensor& gb = ops.output(Dims{f.c});
  std::uint64_t gxa = ops.write(gx), gwa = ops.write(gw), gba = ops.write(gb);
  int train = ctx.training ? 1 : 0;
  if (f.c > 0)
    launch(ops.op(), "pact_batch_norm_grad_f32", static_cast<std::uint32_t>(f.c), 1, 1, kThreads,
           {&gxa, &gwa, &gba, &x, &g, &mean, &inv, &w, &f.n, &f.c, &f.spatial, &train});
  r.emplace_back(std::move(gx));
  r.emplace_back(std::move(gw));
  r.emplace_back(std::move(gb));
  r.emplace_back(std::nullopt);  // running statistics are buffers, not optimization variables
  r.emplace_back(std::nullopt);
  return r;
}

// ---- updates: state operands written in place on the device ----

// A state operand's device address (a contiguous f32 owner in the cuda provider).
std::uint64_t state_address(Operands& ops, Tensor& t, std::string_view operand) {
  if (t.as_view().provider_name() != "cuda" || t.dtype() != DType::f32 || !t.is_contiguous()) {
    throw_error(ErrorCode::provider_mismatch, std::string(ops.op()),
                fmt::format("state operand '{}' must be a contiguous f32 device owner; it is {} {}", operand,
                            t.as_view().provider_name(), dtype_name(t.dtype())));
  }
  return ops.write(t);
}

void accumulate_grad_update(std::span<Tensor* const> state, std::span<const TensorView> read, const Attributes&) {
  Operands ops("accumulate_grad");
  std::uint64_t acc = state_address(ops, *state[0], "accumulated"), g = ops.contiguous(read[0], "gradient");
  std::int64_t n = state[0]->numel();
  if (n > 0) launch("accumulate_grad", "pact_accumulate_f32", grid_for(n), 1, 1, kThreads, {&acc, &g, &n});
}

void sgd_update(std::span<Tensor* const> state, std::span<const TensorView> read, const Attributes& a) {
  Operands ops("sgd");
  std::uint64_t w = state_address(ops, *state[0], "param"), g = ops.contiguous(read[0], "gradient");
  const void* vel = state.size() > 1 ? reinterpret_cast<const void*>(state_address(
                                           ops, *state[1], "velocity"))  // NOLINT(performance-no-int-to-ptr)
                                     : nullptr;
  std::int64_t n = state[0]->numel();
  float lr = static_cast<float>(a.get_float("sgd", "lr")),
        mom = static_cast<float>(a.get_float("sgd", "momentum", 0.0)),
        wd = static_cast<float>(a.get_float("sgd", "weight_decay", 0.0));
  if (n > 0) launch("sgd", "pact_sgd_f32", grid_for(n), 1, 1, kThreads, {&w, &vel, &g, &n, &lr, &mom, &wd});
}

void adam_update(std::span<Tensor* const> state, std::span<const TensorView> read, const Attributes& a) {
  constexpr const char* op = "adam";
  Operands ops(op);
  std::uint64_t w = state_address(ops, *state[0], "param"), m = state_address(ops, *state[1], "exp_avg"),
                v = state_address(ops, *state[2], "exp_avg_sq"), g = ops.contiguous(read[0], "gradient");
  std::int64_t n = state[0]->numel();
  // The constants as the CPU kernel's adam_constants: bias corrections in double, rounded once to f32.
  const double lr = a.get_float(op, "lr"), beta1 = a.get_float(op, "beta1", 0.9),
               beta2 = a.get_float(op, "beta2", 0.999), wd = a.get_float(op, "weight_decay", 0.0);
  const bool decoupled = a.get_bool(op, "decoupled", false);
  const auto t = static_cast<double>(a.get_int(op, "step"));
  const double bc1 = 1.0 - std::pow(beta1, t), bc2 = 1.0 - std::pow(beta2, t);
  float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2),
        eps = static_cast<float>(a.get_float(op, "eps", 1e-8)), step = static_cast<float>(lr / bc1),
        inv = static_cast<float>(1.0 / std::sqrt(bc2)), l2 = decoupled ? 0.0f : static_cast<float>(wd),
        decay = static_cast<float>(decoupled ? 1.0 - lr * wd : 1.0);
  if (n > 0)
    launch(op, "pact_adam_f32", grid_for(n), 1, 1, kThreads,
           {&w, &m, &v, &g, &n, &b1, &b2, &eps, &step, &inv, &l2, &decay});
}

// batch_norm_stats: the running statistics moved toward the batch's, as the CPU kernel (an empty batch leaves
// them as they are).
void batch_norm_stats_update(std::span<Tensor* const> state, std::span<const TensorView> read, const Attributes& a) {
  constexpr const char* op = "batch_norm_stats";
  Operands ops(op);
  refuse_rank_statistics(op, true);
  std::uint64_t mean = state_address(ops, *state[0], "running_mean"),
                var = state_address(ops, *state[1], "running_var");
  std::uint64_t x = ops.contiguous(read[0], "x");
  ChannelForm f = channel_form(read[0]);
  double momentum = a.get_float(op, "momentum", 0.1);
  if (f.n * f.spatial == 0 || f.c == 0) return;
  launch(op, "pact_batch_norm_stats_f32", static_cast<std::uint32_t>(f.c), 1, 1, kThreads,
         {&mean, &var, &x, &f.n, &f.c, &f.spatial, &momentum});
}

#define PACT_CUDA_UPDATE_HANDLER(opname)                                                                  \
  Handler {                                                                                               \
    ops::OpTag::opname, "cuda", DeviceKind::cuda, nullptr, nullptr, "pact/kernels/cuda/cuda_kernels.cpp", \
        "pact::kernels::cuda::" #opname "_update", &opname##_update                                       \
  }

#define PACT_CUDA_HANDLER(opname)                                                        \
  Handler {                                                                              \
    ops::OpTag::opname, "cuda", DeviceKind::cuda, &opname##_forward, &opname##_vjp,      \
        "pact/kernels/cuda/cuda_kernels.cpp", "pact::kernels::cuda::" #opname "_forward" \
  }

const Handler kHandlers[] = {
    PACT_CUDA_HANDLER(matmul),
    PACT_CUDA_HANDLER(linear),
    PACT_CUDA_HANDLER(add),
    PACT_CUDA_HANDLER(sub),
    PACT_CUDA_HANDLER(mul),
    PACT_CUDA_HANDLER(div),
    PACT_CUDA_HANDLER(relu),
    PACT_CUDA_HANDLER(neg),
    PACT_CUDA_HANDLER(gelu),
    PACT_CUDA_HANDLER(silu),
    PACT_CUDA_HANDLER(tanh),
    PACT_CUDA_HANDLER(sigmoid),
    PACT_CUDA_HANDLER(exp),
    PACT_CUDA_HANDLER(softmax),
    PACT_CUDA_HANDLER(log_softmax),
    PACT_CUDA_HANDLER(layer_norm),
    PACT_CUDA_HANDLER(rms_norm),
    PACT_CUDA_HANDLER(cross_entropy),
    PACT_CUDA_HANDLER(scaled_dot_product_attention),
    PACT_CUDA_HANDLER(embedding),
    PACT_CUDA_HANDLER(sum),
    PACT_CUDA_HANDLER(mean),
    PACT_CUDA_HANDLER(reshape),
    PACT_CUDA_HANDLER(flatten),
    PACT_CUDA_HANDLER(transpose),
    PACT_CUDA_HANDLER(permute),
    PACT_CUDA_HANDLER(conv2d),
    Handler{ops::OpTag::conv2d_activation, "cuda", DeviceKind::cuda, &conv2d_activation_forward, nullptr,
            "pact/kernels/cuda/cuda_kernels.cpp", "pact::kernels::cuda::conv2d_activation_forward"},
    PACT_CUDA_HANDLER(max_pool2d),
    PACT_CUDA_HANDLER(avg_pool2d),
    PACT_CUDA_HANDLER(adaptive_avg_pool2d),
    PACT_CUDA_HANDLER(batch_norm),
    PACT_CUDA_UPDATE_HANDLER(batch_norm_stats),
    PACT_CUDA_UPDATE_HANDLER(accumulate_grad),
    PACT_CUDA_UPDATE_HANDLER(sgd),
    PACT_CUDA_UPDATE_HANDLER(adam)};

#define PACT_CUBLAS_HANDLER(opname)                                                                     \
  Handler {                                                                                             \
    ops::OpTag::opname, "cublas", DeviceKind::cuda, &cublas_##opname##_forward, &cublas_##opname##_vjp, \
        "pact/kernels/cuda/cuda_kernels.cpp", "pact::kernels::cuda::cublas_" #opname "_forward"         \
  }

// The cublas provider: the GEMM ops with their products through cuBLAS (pact/kernels/cublas.hpp).
const Handler kCublasHandlers[] = {PACT_CUBLAS_HANDLER(matmul), PACT_CUBLAS_HANDLER(linear),
                                   PACT_CUBLAS_HANDLER(conv2d)};

// The cublaslt provider: linear through cuBLASLt (pact/kernels/cublaslt.hpp).
const Handler kCublasLtHandlers[] = {Handler{ops::OpTag::linear, "cublaslt", DeviceKind::cuda, &cublaslt_linear_forward,
                                             &cublaslt_linear_vjp, "pact/kernels/cuda/cuda_kernels.cpp",
                                             "pact::kernels::cuda::cublaslt_linear_forward"}};

// The cudnn provider: conv2d through cuDNN (pact/kernels/cudnn.hpp).
const Handler kCudnnHandlers[] = {Handler{ops::OpTag::conv2d, "cudnn", DeviceKind::cuda, &cudnn_conv2d_forward,
                                          &cudnn_conv2d_vjp, "pact/kernels/cuda/cuda_kernels.cpp",
                                          "pact::kernels::cuda::cudnn_conv2d_forward"}};

}  // namespace cuda

std::span<const Handler> cuda_handlers() { return cuda::kHandlers; }

std::span<const Handler> cublas_handlers() { return cuda::kCublasHandlers; }

std::span<const Handler> cublaslt_handlers() { return cuda::kCublasLtHandlers; }

std::span<const Handler> cudnn_handlers() { return cuda::kCudnnHandlers; }

bool cuda_kernels_built() noexcept { return pact_cuda_image_size != 0; }

std::string cuda_kernels_status() {
  cuda::Module& m = cuda::module();
  if (m.module != nullptr) return fmt::format("loaded on {}", m.device->description());
  return m.failure;
}

}  // namespace pact::kernels
