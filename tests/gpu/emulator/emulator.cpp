// The CUDA emulator's runtime and stand-in driver (emulator.hpp).

#include "tests/gpu/emulator/emulator.hpp"

#include <setjmp.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "pact/core/cuda_device.hpp"
#include "pact/kernels/cublas.hpp"
#include "pact/kernels/cublaslt.hpp"
#include "pact/kernels/cudnn.hpp"

namespace pact::emu {

namespace {
constexpr int kNotFound = 500;      // CUDA_ERROR_NOT_FOUND
constexpr int kLaunchFailed = 719;  // CUDA_ERROR_LAUNCH_FAILED
}  // namespace

thread_local Dim3 thread_index;
thread_local Dim3 block_index;
Dim3 block_dim;
Dim3 grid_dim;

namespace {

// Note [Emulated blocks]
// A block's threads are fibers (ucontext) run by the launching thread: each runs until it reaches a
// barrier (__syncthreads: the block's; __syncwarp and the shuffles: its warp's) or returns, then the next
// runnable one runs. A barrier releases its waiters once every thread it covers is waiting there or has
// returned (a returned thread counts as arrived, as an exited one does on the device). Nothing runs in
// parallel, so a kernel's result cannot depend on the host's scheduling, and a barrier no thread can
// complete is reported (CUDA_ERROR_LAUNCH_FAILED) instead of hanging.
enum class Wait : std::uint8_t { none, block, warp, done };
// A fiber is entered the first time through its ucontext (setcontext), and after that, like the scheduler,
// through _setjmp/_longjmp, which save no signal mask: no system call per switch.
struct Fiber {
  ucontext_t context{};
  std::jmp_buf resume{};
  bool started = false;
  std::vector<char> stack;
  Wait wait = Wait::none;
};
struct Block {
  std::vector<Fiber> fibers;
  std::jmp_buf scheduler{};
  unsigned current = 0;
  std::vector<float> float_slots;
  std::vector<double> double_slots;
  std::vector<float> dynamic;
  const Kernel* kernel = nullptr;
  void** params = nullptr;
};
Block g_block;
std::mutex g_launch_mutex;  // one launch at a time, as on the one stream
std::atomic<std::uint64_t> g_launches{0}, g_waits{0}, g_allocations{0}, g_to_host{0}, g_to_device{0};
constexpr std::size_t kStack = 128 * 1024;  // a kernel thread's frames are small

void arrive(Wait kind) {
  Fiber& f = g_block.fibers[g_block.current];
  f.wait = kind;
  if (_setjmp(f.resume) == 0) _longjmp(g_block.scheduler, 1);
}

template <class T>
T exchange(std::vector<T>& slots, T v, int lane_mask) {
  const unsigned t = g_block.current, warp = t / 32, lane = t % 32;
  slots[t] = v;
  syncwarp();
  const T r = slots[warp * 32 + (lane ^ static_cast<unsigned>(lane_mask))];
  syncwarp();
  return r;
}

void fiber_main() {
  g_block.kernel->thunk(g_block.params);
  g_block.fibers[g_block.current].wait = Wait::done;
  _longjmp(g_block.scheduler, 1);
}

// Runs fiber `f` (the current thread) until it waits at a barrier or returns. Its own frame, so no variable of
// the scheduler's loop lives across the _setjmp.
[[gnu::noinline]] void run_until_it_waits(Fiber& f) {
  if (_setjmp(g_block.scheduler) != 0) return;
  if (!f.started) {
    f.started = true;
    setcontext(&f.context);
  }
  _longjmp(f.resume, 1);
}

// Runs one block to its end; false when its threads wait at barriers none of them can complete.
bool run_block(unsigned threads) {
  const unsigned bx = block_dim.x, by = block_dim.y;
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = g_block.fibers[t];
    f.wait = Wait::none;
    f.started = false;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.data();
    f.context.uc_stack.ss_size = f.stack.size();
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
  }
  for (;;) {
    bool ran = false;
    for (unsigned t = 0; t < threads; ++t) {
      if (g_block.fibers[t].wait != Wait::none) continue;
      g_block.current = t;
      thread_index = {t % bx, (t / bx) % by, t / (bx * by)};
      run_until_it_waits(g_block.fibers[t]);
      ran = true;
    }
    if (ran) continue;
    // Everyone waits or is done: release what can be released.
    bool all_done = true, released = false;
    for (unsigned w = 0; w < threads / 32; ++w) {  // a warp whose every lane waits at the warp barrier or is done
      bool waiting = false, complete = true;
      for (unsigned t = w * 32; t < w * 32 + 32; ++t) {
        const Wait k = g_block.fibers[t].wait;
        waiting = waiting || k == Wait::warp;
        complete = complete && (k == Wait::warp || k == Wait::done);
      }
      if (waiting && complete) {
        for (unsigned t = w * 32; t < w * 32 + 32; ++t)
          if (g_block.fibers[t].wait == Wait::warp) g_block.fibers[t].wait = Wait::none;
        released = true;
      }
    }
    if (released) continue;
    bool block_waiting = false, block_complete = true;
    for (unsigned t = 0; t < threads; ++t) {
      const Wait k = g_block.fibers[t].wait;
      all_done = all_done && k == Wait::done;
      block_waiting = block_waiting || k == Wait::block;
      block_complete = block_complete && (k == Wait::block || k == Wait::done);
    }
    if (all_done) return true;
    if (!(block_waiting && block_complete)) return false;
    for (unsigned t = 0; t < threads; ++t)
      if (g_block.fibers[t].wait == Wait::block) g_block.fibers[t].wait = Wait::none;
  }
}

int launch(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
           unsigned shared_bytes, void*, void** params, void**) {
  const auto* kernel = static_cast<const Kernel*>(function);
  const unsigned threads = bx * by * bz;
  // Pact's kernels launch whole warps; the emulator's warps need them.
  if (kernel == nullptr || threads == 0 || threads > 1024 || threads % 32 != 0) return kCudaErrorInvalidValue;
  std::lock_guard lock(g_launch_mutex);
  block_dim = {bx, by, bz};
  grid_dim = {gx, gy, gz};
  if (g_block.fibers.size() < threads) {
    g_block.fibers.resize(threads);
    for (auto& f : g_block.fibers) f.stack.resize(kStack);
  }
  g_block.float_slots.assign(threads, 0.0f);
  g_block.double_slots.assign(threads, 0.0);
  g_block.dynamic.assign(shared_bytes / sizeof(float) + 4, 0.0f);
  g_block.kernel = kernel;
  g_block.params = params;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        block_index = {x, y, z};
        if (!run_block(threads)) return kLaunchFailed;
      }
  ++g_launches;
  return kCudaSuccess;
}

// Device memory is host memory, 256-byte aligned as cuMemAlloc's.
int allocate(std::uint64_t* pointer, std::size_t bytes) {
  ++g_allocations;
  void* p = std::aligned_alloc(256, ((bytes + 255) / 256) * 256 + 256);
  if (p == nullptr) return kCudaErrorOutOfMemory;
  *pointer = reinterpret_cast<std::uint64_t>(p);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  return kCudaSuccess;
}
int release(std::uint64_t pointer) {
  std::free(reinterpret_cast<void*>(pointer));  // NOLINT(performance-no-int-to-ptr)
  return kCudaSuccess;
}
void* at(std::uint64_t address) { return reinterpret_cast<void*>(address); }  // NOLINT(performance-no-int-to-ptr)

int token_object;  // the context, stream, pool, module and events are this address

CudaDriver make_driver() {
  CudaDriver d;
  d.init = [](unsigned) { return kCudaSuccess; };
  d.device_get_count = [](int* n) { return *n = 1, kCudaSuccess; };
  d.device_get = [](int* dev, int) { return *dev = 0, kCudaSuccess; };
  d.primary_ctx_retain = [](void** ctx, int) { return *ctx = &token_object, kCudaSuccess; };
  d.primary_ctx_release = [](int) { return kCudaSuccess; };
  d.ctx_set_current = [](void*) { return kCudaSuccess; };
  d.driver_get_version = [](int* v) { return *v = 13000, kCudaSuccess; };
  d.device_get_attribute = [](int* value, int attribute, int) {
    *value = attribute == kCuDeviceAttributeComputeCapabilityMajor   ? 9
             : attribute == kCuDeviceAttributeComputeCapabilityMinor ? 0
                                                                     : 4;
    return kCudaSuccess;
  };
  d.device_get_name = [](char* name, int length, int) {
    std::strncpy(name, "Pact CUDA emulator", static_cast<std::size_t>(length));
    return kCudaSuccess;
  };
  d.device_total_mem = [](std::size_t* bytes, int) { return *bytes = std::size_t{8} << 30, kCudaSuccess; };
  d.device_get_default_mem_pool = [](void** pool, int) { return *pool = &token_object, kCudaSuccess; };
  d.mem_pool_set_attribute = [](void*, int, void*) { return kCudaSuccess; };
  d.stream_create = [](void** stream, unsigned) { return *stream = &token_object, kCudaSuccess; };
  d.stream_destroy = [](void*) { return kCudaSuccess; };
  d.stream_synchronize = [](void*) { return ++g_waits, kCudaSuccess; };
  d.mem_alloc = allocate;
  d.mem_free = [](std::uint64_t p) { return ++g_waits, release(p); };
  d.mem_alloc_async = [](std::uint64_t* p, std::size_t bytes, void*) { return allocate(p, bytes); };
  d.mem_free_async = [](std::uint64_t p, void*) { return release(p); };
  d.memcpy_htod = [](std::uint64_t dst, const void* src, std::size_t n) {
    return ++g_waits, ++g_to_device, std::memcpy(at(dst), src, n), kCudaSuccess;
  };
  d.memcpy_dtoh = [](void* dst, std::uint64_t src, std::size_t n) {
    return ++g_waits, ++g_to_host, std::memcpy(dst, at(src), n), kCudaSuccess;
  };
  d.memcpy_htod_async = [](std::uint64_t dst, const void* src, std::size_t n, void*) {
    return ++g_to_device, std::memcpy(at(dst), src, n), kCudaSuccess;
  };
  d.memcpy_dtoh_async = [](void* dst, std::uint64_t src, std::size_t n, void*) {
    return ++g_to_host, std::memcpy(dst, at(src), n), kCudaSuccess;
  };
  d.memcpy_dtod_async = [](std::uint64_t dst, std::uint64_t src, std::size_t n, void*) {
    return std::memmove(at(dst), at(src), n), kCudaSuccess;
  };
  d.memset_d8 = [](std::uint64_t dst, unsigned char v, std::size_t n) {
    return ++g_waits, std::memset(at(dst), v, n), kCudaSuccess;
  };
  d.memset_d8_async = [](std::uint64_t dst, unsigned char v, std::size_t n, void*) {
    return std::memset(at(dst), v, n), kCudaSuccess;
  };
  d.event_create = [](void** e, unsigned) { return *e = &token_object, kCudaSuccess; };
  d.event_record = [](void*, void*) { return kCudaSuccess; };
  d.event_query = [](void*) { return kCudaSuccess; };
  d.event_synchronize = [](void*) { return ++g_waits, kCudaSuccess; };
  d.event_elapsed_time = [](float* ms, void*, void*) { return *ms = 0.0f, kCudaSuccess; };
  d.event_destroy = [](void*) { return kCudaSuccess; };
  d.module_load_data = [](void** module, const void*) { return *module = &token_object, kCudaSuccess; };
  d.module_unload = [](void*) { return kCudaSuccess; };
  d.module_get_function = [](void** f, void*, const char* name) {
    const Kernel* k = find_kernel(name);
    if (k == nullptr) return kNotFound;
    *f = const_cast<Kernel*>(k);  // NOLINT(cppcoreguidelines-pro-type-const-cast): an opaque CUfunction
    return kCudaSuccess;
  };
  d.func_set_attribute = [](void*, int, int) { return kCudaSuccess; };
  d.launch_kernel = launch;
  d.get_error_name = [](int result, const char** name) {
    *name = result == kNotFound       ? "CUDA_ERROR_NOT_FOUND"
            : result == kLaunchFailed ? "CUDA_ERROR_LAUNCH_FAILED (threads wait at a barrier none can complete)"
                                      : "CUDA_ERROR_INVALID_VALUE";
    return kCudaSuccess;
  };
  return d;
}

}  // namespace

void syncthreads() { arrive(Wait::block); }
void syncwarp() { arrive(Wait::warp); }
float shfl_xor(float v, int lane_mask) { return exchange(g_block.float_slots, v, lane_mask); }
double shfl_xor(double v, int lane_mask) { return exchange(g_block.double_slots, v, lane_mask); }
float* dynamic_shared() { return g_block.dynamic.data(); }

const CudaDriver& driver() {
  static const CudaDriver d = make_driver();
  return d;
}

Tally tally() {
  return Tally{g_launches.load(), g_waits.load(), g_allocations.load(), g_to_host.load(), g_to_device.load()};
}

namespace {

// cuBLAS SGEMM's contract on host memory (column-major, op 0 = N, 1 = T), with its argument checks
// (CUBLAS_STATUS_INVALID_VALUE = 7), so the cublas provider's mapping of row-major products onto it is held
// to the reference like every other handler.
std::atomic<int> g_cublas_skip{0}, g_cublas_failure{0};

int sgemm(void*, int ta, int tb, int m, int n, int k, const float* alpha, const float* a, int lda, const float* b,
          int ldb, const float* beta, float* c, int ldc) {
  if (g_cublas_failure.load() != 0 && g_cublas_skip.fetch_sub(1) == 0) return g_cublas_failure.exchange(0);
  const bool bad_op = (ta != 0 && ta != 1) || (tb != 0 && tb != 1);
  if (bad_op || m < 0 || n < 0 || k < 0 || lda < std::max(1, ta == 0 ? m : k) || ldb < std::max(1, tb == 0 ? k : n) ||
      ldc < std::max(1, m))
    return 7;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int p = 0; p < k; ++p) {
        const float x = ta == 0 ? a[i + static_cast<std::int64_t>(p) * lda] : a[p + static_cast<std::int64_t>(i) * lda];
        const float y = tb == 0 ? b[p + static_cast<std::int64_t>(j) * ldb] : b[j + static_cast<std::int64_t>(p) * ldb];
        acc += x * y;
      }
      float& dst = c[i + static_cast<std::int64_t>(j) * ldc];
      dst = *alpha * acc + (*beta == 0.0f ? 0.0f : *beta * dst);  // beta 0: C is not read, as cuBLAS's
    }
  return 0;
}

int sgemm_strided_batched(void* handle, int ta, int tb, int m, int n, int k, const float* alpha, const float* a,
                          int lda, long long stride_a, const float* b, int ldb, long long stride_b, const float* beta,
                          float* c, int ldc, long long stride_c, int batches) {
  if (batches < 0) return 7;
  for (int z = 0; z < batches; ++z) {
    if (const int status = sgemm(handle, ta, tb, m, n, k, alpha, a + z * stride_a, lda, b + z * stride_b, ldb, beta,
                                 c + z * stride_c, ldc);
        status != 0)
      return status;
  }
  return 0;
}

kernels::Cublas& emulated_cublas() {
  static kernels::Cublas table;  // holds a mutex: filled in place
  table.handle = &token_object;
  table.create = [](void** h) { return *h = &token_object, 0; };
  table.destroy = [](void*) { return 0; };
  table.set_stream = [](void*, void*) { return 0; };
  table.sgemm = sgemm;
  table.sgemm_strided_batched = sgemm_strided_batched;
  return table;
}

// cuBLASLt's matmul on host memory (column-major; D = alpha op(A) op(B) + beta C, then the epilogue), with
// the argument checks the cublaslt provider must pass (CUBLAS_STATUS_INVALID_VALUE = 7): plain f32 compute
// and scale (no TF32), f32 layouts that agree with the operations, an epilogue of DEFAULT, BIAS or BGRADB with
// its vector set, the algorithm and workspace the heuristics offered, Pact's stream, and addresses as aligned
// as the preference said (256 bytes unless it said less: an algorithm may assume what it was told).
constexpr int kLtInvalid = 7;
constexpr std::uint64_t kLtAlgo = 0x1a57, kLtWorkspace = 4096;

struct LtLayout {
  int dtype = -1;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
};
struct LtMatmul {
  int compute = 0, scale = 0;
  std::int32_t trans_a = 0, trans_b = 0;
  std::uint32_t epilogue = kernels::kLtEpilogueDefault;
  void* vector = nullptr;
};
struct LtPreference {
  std::uint64_t max_workspace = 0;
  std::uint32_t alignment[4] = {256, 256, 256, 256};  // A, B, C, D
};
std::atomic<std::int64_t> g_lt_descriptors{0};
std::atomic<int> g_lt_failure{0};
std::atomic<int> g_lt_refuse_epilogues{0};  // 1: the heuristics refuse them, 2: the matmul does

template <class D>
int lt_destroy(void* desc) {
  delete static_cast<D*>(desc);
  --g_lt_descriptors;
  return 0;
}

// The product's extents (m x n over k) when the descriptors agree; false otherwise.
bool lt_extents(const LtMatmul& mm, const LtLayout& a, const LtLayout& b, const LtLayout& c, const LtLayout& d,
                std::uint64_t& m, std::uint64_t& n, std::uint64_t& k) {
  if (mm.compute != kernels::kLtComputeF32 || mm.scale != kernels::kLtR32F) return false;
  for (const LtLayout* l : {&a, &b, &c, &d})
    if (l->dtype != kernels::kLtR32F || l->ld < std::max<std::int64_t>(1, static_cast<std::int64_t>(l->rows)))
      return false;
  if ((mm.trans_a != 0 && mm.trans_a != 1) || (mm.trans_b != 0 && mm.trans_b != 1)) return false;
  m = mm.trans_a == 0 ? a.rows : a.cols;
  k = mm.trans_a == 0 ? a.cols : a.rows;
  n = mm.trans_b == 0 ? b.cols : b.rows;
  const std::uint64_t kb = mm.trans_b == 0 ? b.rows : b.cols;
  const bool epilogue_ok =
      mm.epilogue == kernels::kLtEpilogueDefault ||
      ((mm.epilogue == kernels::kLtEpilogueBias || mm.epilogue == kernels::kLtEpilogueBgradB) && mm.vector != nullptr);
  return kb == k && c.rows == m && c.cols == n && d.rows == m && d.cols == n && c.ld == d.ld && epilogue_ok;
}

int lt_heuristics(void*, void* desc, void* ad, void* bd, void* cd, void* dd, void* pref, int requested,
                  kernels::CublasLtHeuristic* results, int* returned) {
  const auto& mm = *static_cast<LtMatmul*>(desc);
  const auto& p = *static_cast<LtPreference*>(pref);
  std::uint64_t m = 0, n = 0, k = 0;
  if (!lt_extents(mm, *static_cast<LtLayout*>(ad), *static_cast<LtLayout*>(bd), *static_cast<LtLayout*>(cd),
                  *static_cast<LtLayout*>(dd), m, n, k) ||
      requested < 1)
    return kLtInvalid;
  *returned = 0;
  if (g_lt_refuse_epilogues.load() == 1 && mm.epilogue != kernels::kLtEpilogueDefault)
    return kernels::kLtStatusNotSupported;
  kernels::CublasLtHeuristic h;
  h.algo[0] = kLtAlgo;
  h.algo[1] = mm.epilogue;
  for (int i = 0; i < 4; ++i) h.algo[2 + i] = p.alignment[i];
  h.workspace = p.max_workspace >= kLtWorkspace ? kLtWorkspace : 0;
  h.algo[6] = h.workspace;
  results[0] = h;
  *returned = 1;
  return 0;
}

int lt_matmul(void*, void* desc, const void* alpha, const void* a, void* ad, const void* b, void* bd, const void* beta,
              const void* c, void* cd, void* d, void* dd, const std::uint64_t* algo, void* workspace,
              std::size_t workspace_bytes, void* stream) {
  if (const int status = g_lt_failure.exchange(0); status != 0) return status;
  const auto& mm = *static_cast<LtMatmul*>(desc);
  const auto& al = *static_cast<LtLayout*>(ad);
  const auto& bl = *static_cast<LtLayout*>(bd);
  const auto& dl = *static_cast<LtLayout*>(dd);
  std::uint64_t m = 0, n = 0, k = 0;
  if (!lt_extents(mm, al, bl, *static_cast<LtLayout*>(cd), dl, m, n, k)) return kLtInvalid;
  // The offered algorithm for this epilogue, its workspace, Pact's stream, and the alignments it assumes.
  if (algo[0] != kLtAlgo || algo[1] != mm.epilogue || stream != CudaDevice::get()->stream()) return kLtInvalid;
  if (workspace_bytes < algo[6] || (algo[6] > 0 && workspace == nullptr)) return kLtInvalid;
  if (g_lt_refuse_epilogues.load() == 2 && mm.epilogue != kernels::kLtEpilogueDefault)
    return kernels::kLtStatusNotSupported;
  const void* pointers[4] = {a, b, c, d};
  for (int i = 0; i < 4; ++i)
    if (reinterpret_cast<std::uintptr_t>(pointers[i]) % algo[2 + i] != 0) return kLtInvalid;
  const auto* av = static_cast<const float*>(a);
  const auto* bv = static_cast<const float*>(b);
  const auto* cv = static_cast<const float*>(c);
  auto* dv = static_cast<float*>(d);
  const float alpha_v = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  auto op_a = [&](std::uint64_t i, std::uint64_t p) {
    return mm.trans_a == 0 ? av[i + p * static_cast<std::uint64_t>(al.ld)]
                           : av[p + i * static_cast<std::uint64_t>(al.ld)];
  };
  auto op_b = [&](std::uint64_t p, std::uint64_t j) {
    return mm.trans_b == 0 ? bv[p + j * static_cast<std::uint64_t>(bl.ld)]
                           : bv[j + p * static_cast<std::uint64_t>(bl.ld)];
  };
  const auto ld = static_cast<std::uint64_t>(dl.ld);
  auto* vector = static_cast<float*>(mm.vector);
  std::vector<float> out(static_cast<std::size_t>(m * n));
  for (std::uint64_t j = 0; j < n; ++j)
    for (std::uint64_t i = 0; i < m; ++i) {
      double acc = 0;
      for (std::uint64_t p = 0; p < k; ++p) acc += static_cast<double>(op_a(i, p)) * op_b(p, j);
      float v = alpha_v * static_cast<float>(acc) + (be == 0.0f ? 0.0f : be * cv[i + j * ld]);  // beta 0: C unread
      if (mm.epilogue == kernels::kLtEpilogueBias) v += vector[i];
      out[static_cast<std::size_t>(i + j * m)] = v;
    }
  if (mm.epilogue == kernels::kLtEpilogueBgradB) {
    for (std::uint64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::uint64_t p = 0; p < k; ++p) sum += op_b(p, j);
      vector[j] = static_cast<float>(sum);
    }
  }
  for (std::uint64_t j = 0; j < n; ++j)
    for (std::uint64_t i = 0; i < m; ++i) dv[i + j * ld] = out[static_cast<std::size_t>(i + j * m)];
  return 0;
}

kernels::CublasLt& emulated_cublaslt() {
  static kernels::CublasLt table;  // holds a mutex: filled in place
  table.handle = &token_object;
  table.create = [](void** h) { return *h = &token_object, 0; };
  table.destroy = [](void*) { return 0; };
  table.create_matmul = [](void** desc, int compute, int scale) {
    *desc = new LtMatmul{compute, scale};
    ++g_lt_descriptors;
    return 0;
  };
  table.set_matmul_attribute = [](void* desc, int attribute, const void* value, std::size_t bytes) {
    auto& mm = *static_cast<LtMatmul*>(desc);
    auto take = [&](auto& field) {
      if (bytes != sizeof field) return kLtInvalid;
      std::memcpy(&field, value, bytes);
      return 0;
    };
    switch (attribute) {
      case kernels::kLtDescTransA:
        return take(mm.trans_a);
      case kernels::kLtDescTransB:
        return take(mm.trans_b);
      case kernels::kLtDescEpilogue:
        return take(mm.epilogue);
      case kernels::kLtDescBiasPointer:
        return take(mm.vector);
      default:
        return kLtInvalid;
    }
  };
  table.destroy_matmul = lt_destroy<LtMatmul>;
  table.create_layout = [](void** layout, int dtype, std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
    *layout = new LtLayout{dtype, rows, cols, ld};
    ++g_lt_descriptors;
    return 0;
  };
  table.destroy_layout = lt_destroy<LtLayout>;
  table.create_preference = [](void** pref) {
    *pref = new LtPreference;
    ++g_lt_descriptors;
    return 0;
  };
  table.set_preference_attribute = [](void* pref, int attribute, const void* value, std::size_t bytes) {
    auto& p = *static_cast<LtPreference*>(pref);
    if (attribute == kernels::kLtPrefMaxWorkspace && bytes == sizeof p.max_workspace)
      return std::memcpy(&p.max_workspace, value, bytes), 0;
    if (attribute >= kernels::kLtPrefAlignmentA && attribute <= kernels::kLtPrefAlignmentD &&
        bytes == sizeof(std::uint32_t))
      return std::memcpy(&p.alignment[attribute - kernels::kLtPrefAlignmentA], value, bytes), 0;
    return kLtInvalid;
  };
  table.destroy_preference = lt_destroy<LtPreference>;
  table.heuristics = lt_heuristics;
  table.matmul = lt_matmul;
  return table;
}

// cuDNN's descriptor-based convolution on host memory, with the argument checks the cudnn provider must pass
// (CUDNN_STATUS_BAD_PARAM = 2000): NCHW float tensors and filters, cross-correlation in float, FMA math (the
// provider's rule: no TF32), shapes that agree with the convolution, and the algorithm and workspace the
// heuristics offered. The heuristics offer a non-deterministic algorithm first, then a deterministic one that
// needs a workspace, then one that fails; the provider must take the deterministic one.
constexpr int kBadParam = 2000, kDeterministicAlgo = 7;
constexpr std::size_t kDeterministicWorkspace = 96;

struct TensorDesc {
  int n = 0, c = 0, h = 0, w = 0;
  bool set = false;
};
struct FilterDesc {
  int k = 0, c = 0, h = 0, w = 0;
  bool set = false;
};
struct ConvDesc {
  int ph = 0, pw = 0, sh = 0, sw = 0, dh = 0, dw = 0, groups = 1, math = 0;
  bool set = false;
};
std::atomic<std::int64_t> g_cudnn_descriptors{0};

template <class D>
int create(void** desc) {
  *desc = new D();
  ++g_cudnn_descriptors;
  return 0;
}
template <class D>
int destroy(void* desc) {
  delete static_cast<D*>(desc);
  --g_cudnn_descriptors;
  return 0;
}

// The output extent of one spatial dimension, as cuDNN's convolution computes it.
int extent(int in, int pad, int kernel, int stride, int dilation) {
  return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

// True when x, w, y and the convolution are set and agree (groups divide the channels, y's extents follow).
bool consistent(void* xd, void* wd, void* cd, void* yd) {
  const auto& x = *static_cast<TensorDesc*>(xd);
  const auto& w = *static_cast<FilterDesc*>(wd);
  const auto& c = *static_cast<ConvDesc*>(cd);
  const auto& y = *static_cast<TensorDesc*>(yd);
  return x.set && w.set && c.set && y.set && c.math == kernels::kCudnnFmaMath && x.c == w.c * c.groups &&
         w.k % c.groups == 0 && y.n == x.n && y.c == w.k && y.h == extent(x.h, c.ph, w.h, c.sh, c.dh) &&
         y.w == extent(x.w, c.pw, w.w, c.sw, c.dw);
}

int algorithms(void* xd, void* wd, void* cd, void* yd, int requested, int* returned, kernels::CudnnAlgorithm* results) {
  if (!consistent(xd, wd, cd, yd) || requested < 3) return kBadParam;
  results[0] = kernels::CudnnAlgorithm{1, 0, 0.1f, 512, 0, kernels::kCudnnFmaMath, {0, 0, 0}};
  results[1] = kernels::CudnnAlgorithm{
      kDeterministicAlgo,     0,        0.2f, kDeterministicWorkspace, kernels::kCudnnDeterministic,
      kernels::kCudnnFmaMath, {0, 0, 0}};
  results[2] = kernels::CudnnAlgorithm{3, 3000, -1.0f, 0, kernels::kCudnnDeterministic, 0, {0, 0, 0}};
  *returned = 3;
  return 0;
}

// Visits every (image, output channel, y, x, input channel of the group, tap) pair of the convolution with
// the offsets of the input element and the weight it multiplies into the output element.
template <class F>
void each_tap(void* xd, void* wd, void* cd, void* yd, F&& f) {
  const auto& x = *static_cast<TensorDesc*>(xd);
  const auto& w = *static_cast<FilterDesc*>(wd);
  const auto& c = *static_cast<ConvDesc*>(cd);
  const auto& y = *static_cast<TensorDesc*>(yd);
  const int og = w.k / c.groups;
  for (int n = 0; n < y.n; ++n)
    for (int o = 0; o < y.c; ++o)
      for (int oy = 0; oy < y.h; ++oy)
        for (int ox = 0; ox < y.w; ++ox)
          for (int ci = 0; ci < w.c; ++ci)
            for (int ky = 0; ky < w.h; ++ky)
              for (int kx = 0; kx < w.w; ++kx) {
                const int iy = oy * c.sh - c.ph + ky * c.dh, ix = ox * c.sw - c.pw + kx * c.dw;
                if (iy < 0 || iy >= x.h || ix < 0 || ix >= x.w) continue;
                const std::int64_t xo =
                    ((static_cast<std::int64_t>(n) * x.c + (o / og) * w.c + ci) * x.h + iy) * x.w + ix;
                const std::int64_t wo = ((static_cast<std::int64_t>(o) * w.c + ci) * w.h + ky) * w.w + kx;
                const std::int64_t yo = ((static_cast<std::int64_t>(n) * y.c + o) * y.h + oy) * y.w + ox;
                f(xo, wo, yo);
              }
}

// dst = alpha * acc + beta * dst over `count` elements (beta 0: dst is not read).
void blend(float* dst, const std::vector<double>& acc, const void* alpha, const void* beta) {
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  for (std::size_t i = 0; i < acc.size(); ++i)
    dst[i] = a * static_cast<float>(acc[i]) + (b == 0.0f ? 0.0f : b * dst[i]);
}

std::atomic<int> g_cudnn_failure{0};

// The offered algorithm and its workspace; a failure a test asked for (fail_next_cudnn_call) comes first.
int offered(int algo, const void* workspace, std::size_t bytes) {
  if (const int status = g_cudnn_failure.exchange(0); status != 0) return status;
  return algo == kDeterministicAlgo && workspace != nullptr && bytes >= kDeterministicWorkspace ? 0 : kBadParam;
}

std::int64_t count(void* desc) {
  const auto& t = *static_cast<TensorDesc*>(desc);
  return static_cast<std::int64_t>(t.n) * t.c * t.h * t.w;
}
std::int64_t filter_count(void* desc) {
  const auto& f = *static_cast<FilterDesc*>(desc);
  return static_cast<std::int64_t>(f.k) * f.c * f.h * f.w;
}

kernels::Cudnn& emulated_cudnn() {
  static kernels::Cudnn table;  // holds a mutex: filled in place
  table.handle = &token_object;
  table.create = [](void** h) { return *h = &token_object, 0; };
  table.destroy = [](void*) { return 0; };
  table.set_stream = [](void*, void*) { return 0; };
  table.create_tensor = create<TensorDesc>;
  table.destroy_tensor = destroy<TensorDesc>;
  table.create_filter = create<FilterDesc>;
  table.destroy_filter = destroy<FilterDesc>;
  table.create_convolution = create<ConvDesc>;
  table.destroy_convolution = destroy<ConvDesc>;
  table.set_tensor_4d = [](void* d, int format, int dtype, int n, int c, int h, int w) {
    if (format != kernels::kCudnnNchw || dtype != kernels::kCudnnFloat || n < 1 || c < 1 || h < 1 || w < 1)
      return kBadParam;
    *static_cast<TensorDesc*>(d) = TensorDesc{n, c, h, w, true};
    return 0;
  };
  table.set_filter_4d = [](void* d, int dtype, int format, int k, int c, int h, int w) {
    if (format != kernels::kCudnnNchw || dtype != kernels::kCudnnFloat || k < 1 || c < 1 || h < 1 || w < 1)
      return kBadParam;
    *static_cast<FilterDesc*>(d) = FilterDesc{k, c, h, w, true};
    return 0;
  };
  table.set_convolution_2d = [](void* d, int ph, int pw, int sh, int sw, int dh, int dw, int mode, int compute) {
    if (mode != kernels::kCudnnCrossCorrelation || compute != kernels::kCudnnFloat || ph < 0 || pw < 0 || sh < 1 ||
        sw < 1 || dh < 1 || dw < 1)
      return kBadParam;
    auto& c = *static_cast<ConvDesc*>(d);
    c.ph = ph, c.pw = pw, c.sh = sh, c.sw = sw, c.dh = dh, c.dw = dw, c.set = true;
    return 0;
  };
  table.set_group_count = [](void* d, int groups) {
    if (groups < 1) return kBadParam;
    static_cast<ConvDesc*>(d)->groups = groups;
    return 0;
  };
  table.set_math_type = [](void* d, int math) { return static_cast<ConvDesc*>(d)->math = math, 0; };
  table.forward_algorithms = [](void*, void* x, void* w, void* c, void* y, int requested, int* returned,
                                kernels::CudnnAlgorithm* r) { return algorithms(x, w, c, y, requested, returned, r); };
  table.backward_data_algorithms = [](void*, void* w, void* dy, void* c, void* dx, int requested, int* returned,
                                      kernels::CudnnAlgorithm* r) {
    return algorithms(dx, w, c, dy, requested, returned, r);
  };
  table.backward_filter_algorithms = [](void*, void* x, void* dy, void* c, void* dw, int requested, int* returned,
                                        kernels::CudnnAlgorithm* r) {
    return algorithms(x, dw, c, dy, requested, returned, r);
  };
  table.forward = [](void*, const void* alpha, void* xd, const void* x, void* wd, const void* w, void* cd, int algo,
                     void* ws, std::size_t ws_bytes, const void* beta, void* yd, void* y) {
    if (!consistent(xd, wd, cd, yd)) return kBadParam;
    if (const int status = offered(algo, ws, ws_bytes); status != 0) return status;
    std::vector<double> acc(static_cast<std::size_t>(count(yd)), 0.0);
    const auto* xv = static_cast<const float*>(x);
    const auto* wv = static_cast<const float*>(w);
    each_tap(xd, wd, cd, yd, [&](std::int64_t xo, std::int64_t wo, std::int64_t yo) {
      acc[static_cast<std::size_t>(yo)] += static_cast<double>(xv[xo]) * wv[wo];
    });
    blend(static_cast<float*>(y), acc, alpha, beta);
    return 0;
  };
  table.backward_data = [](void*, const void* alpha, void* wd, const void* w, void* dyd, const void* dy, void* cd,
                           int algo, void* ws, std::size_t ws_bytes, const void* beta, void* dxd, void* dx) {
    if (!consistent(dxd, wd, cd, dyd)) return kBadParam;
    if (const int status = offered(algo, ws, ws_bytes); status != 0) return status;
    std::vector<double> acc(static_cast<std::size_t>(count(dxd)), 0.0);
    const auto* wv = static_cast<const float*>(w);
    const auto* gv = static_cast<const float*>(dy);
    each_tap(dxd, wd, cd, dyd, [&](std::int64_t xo, std::int64_t wo, std::int64_t yo) {
      acc[static_cast<std::size_t>(xo)] += static_cast<double>(gv[yo]) * wv[wo];
    });
    blend(static_cast<float*>(dx), acc, alpha, beta);
    return 0;
  };
  table.backward_filter = [](void*, const void* alpha, void* xd, const void* x, void* dyd, const void* dy, void* cd,
                             int algo, void* ws, std::size_t ws_bytes, const void* beta, void* dwd, void* dw) {
    if (!consistent(xd, dwd, cd, dyd)) return kBadParam;
    if (const int status = offered(algo, ws, ws_bytes); status != 0) return status;
    std::vector<double> acc(static_cast<std::size_t>(filter_count(dwd)), 0.0);
    const auto* xv = static_cast<const float*>(x);
    const auto* gv = static_cast<const float*>(dy);
    each_tap(xd, dwd, cd, dyd, [&](std::int64_t xo, std::int64_t wo, std::int64_t yo) {
      acc[static_cast<std::size_t>(wo)] += static_cast<double>(gv[yo]) * xv[xo];
    });
    blend(static_cast<float*>(dw), acc, alpha, beta);
    return 0;
  };
  return table;
}

// The test binary's device, cuBLAS, cuBLASLt and cuDNN are the emulator's, installed before any test asks for them.
[[maybe_unused]] const bool g_installed =
    (CudaDevice::open_with(driver()), kernels::use_cublas(emulated_cublas()),
     kernels::use_cublaslt(emulated_cublaslt()), kernels::use_cudnn(emulated_cudnn()), true);

}  // namespace

std::int64_t cudnn_descriptors_alive() { return g_cudnn_descriptors.load(); }

void fail_next_cudnn_call(int status) { g_cudnn_failure.store(status); }

std::int64_t cublaslt_descriptors_alive() { return g_lt_descriptors.load(); }

void fail_next_cublaslt_matmul(int status) { g_lt_failure.store(status); }

void cublaslt_refuse_epilogues(EpilogueRefusal refusal) { g_lt_refuse_epilogues.store(static_cast<int>(refusal)); }

void fail_cublas_call(int skip, int status) {
  g_cublas_skip.store(skip);
  g_cublas_failure.store(status);
}

}  // namespace pact::emu
