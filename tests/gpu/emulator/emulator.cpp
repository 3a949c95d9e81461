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
int sgemm(void*, int ta, int tb, int m, int n, int k, const float* alpha, const float* a, int lda, const float* b,
          int ldb, const float* beta, float* c, int ldc) {
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

// The test binary's device and cuBLAS are the emulator's, installed before any test asks for either.
[[maybe_unused]] const bool g_installed =
    (CudaDevice::open_with(driver()), kernels::use_cublas(emulated_cublas()), true);

}  // namespace

}  // namespace pact::emu
