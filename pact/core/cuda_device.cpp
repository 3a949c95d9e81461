#include "pact/core/cuda_device.hpp"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <utility>
#include <vector>

#include "pact/core/cuda_probe.hpp"
#include "pact/core/error.hpp"

namespace pact {

namespace {

struct Opened {
  CudaDevice* device = nullptr;
  std::string why;
};

}  // namespace

CudaDevice::CudaDevice(const CudaDriver& driver) : driver_(driver) {
  auto need = [&](int result, std::string_view what) {
    if (result != kCudaSuccess)
      throw_error(ErrorCode::no_device, "cuda.device",
                  fmt::format("{} failed: {}", what, cuda_result_name(driver_, result)));
  };
  need(driver_.init(0), "cuInit");
  int count = 0;
  need(driver_.device_get_count(&count), "cuDeviceGetCount");
  if (count < 1) throw_error(ErrorCode::no_device, "cuda.device", "the CUDA driver reports no device");
  need(driver_.device_get(&device_, 0), "cuDeviceGet");
  need(driver_.primary_ctx_retain(&context_, device_), "cuDevicePrimaryCtxRetain");
  need(driver_.ctx_set_current(context_), "cuCtxSetCurrent");
  need(driver_.device_get_attribute(&major_, kCuDeviceAttributeComputeCapabilityMajor, device_), "compute capability");
  need(driver_.device_get_attribute(&minor_, kCuDeviceAttributeComputeCapabilityMinor, device_), "compute capability");
  need(driver_.device_get_attribute(&sms_, kCuDeviceAttributeMultiprocessorCount, device_), "multiprocessor count");
  need(driver_.stream_create(&stream_, kCuStreamNonBlocking), "cuStreamCreate");
  // The pool keeps what is freed (a training step frees and re-allocates the same sizes every step).
  void* pool = nullptr;
  need(driver_.device_get_default_mem_pool(&pool, device_), "cuDeviceGetDefaultMemPool");
  std::uint64_t threshold = std::numeric_limits<std::uint64_t>::max();
  need(driver_.mem_pool_set_attribute(pool, kCuMempoolAttrReleaseThreshold, &threshold), "cuMemPoolSetAttribute");
  std::array<char, 256> name{};
  need(driver_.device_get_name(name.data(), static_cast<int>(name.size()) - 1, device_), "cuDeviceGetName");
  std::size_t total = 0;
  need(driver_.device_total_mem(&total, device_), "cuDeviceTotalMem");
  int version = 0;
  need(driver_.driver_get_version(&version), "cuDriverGetVersion");
  description_ = fmt::format("{} (sm_{}{}, {} SMs, {} MiB, driver API {}.{})", name.data(), major_, minor_, sms_,
                             total >> 20, version / 1000, (version % 1000) / 10);
}

namespace {
std::atomic<const CudaDriver*> g_driver_override{nullptr};
std::atomic<bool> g_device_opened{false};
}  // namespace

void CudaDevice::open_with(const CudaDriver& driver) {
  if (g_device_opened.load())
    throw_error(ErrorCode::internal, "cuda.device", "open_with after the device was opened: call it first");
  g_driver_override.store(&driver);
}

CudaDevice* CudaDevice::get() {
  static const Opened opened = [] {
    g_device_opened.store(true);
    Opened o;
    if (const CudaDriver* driver = g_driver_override.load()) {
      try {
        o.device = new CudaDevice(*driver);  // lives for the process
      } catch (const Error& e) {
        o.why = e.what();
      }
      return o;
    }
    if (probe_cuda().devices < 1) {
      o.why = probe_cuda().summary;
      return o;
    }
    try {
      o.device = new CudaDevice(load_cuda_driver());  // lives for the process (streams outlive statics)
    } catch (const Error& e) {
      o.why = e.what();
    }
    return o;
  }();
  return opened.device;
}

const std::string& CudaDevice::unavailable_reason() {
  static const std::string none;
  static const std::string why = [] {
    if (get() != nullptr) return std::string();
    if (probe_cuda().devices < 1) return probe_cuda().summary;
    try {
      (void)load_cuda_driver();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("the CUDA device could not be opened");
  }();
  return get() != nullptr ? none : why;
}

void CudaDevice::make_current() const {
  thread_local const CudaDevice* current = nullptr;
  if (current == this) return;
  check(driver_.ctx_set_current(context_), "cuCtxSetCurrent");
  current = this;
}

void CudaDevice::require_healthy(std::string_view what) const {
  if (poisoned_.load())
    throw_error(ErrorCode::poisoned, std::string(what),
                "an earlier CUDA failure poisoned the device; no further device work is authorized");
}

void CudaDevice::check(int result, std::string_view what) const {
  if (result == kCudaSuccess) return;
  poisoned_.store(true);
  throw_error(ErrorCode::poisoned, std::string(what),
              fmt::format("the CUDA driver returned {}; the device is poisoned", cuda_result_name(driver_, result)));
}

std::uint64_t CudaDevice::allocate(std::uint64_t bytes) {
  require_healthy("cuda.allocate");
  make_current();
  std::uint64_t address = 0;
  const int rc = driver_.mem_alloc_async(&address, bytes == 0 ? 1 : bytes, stream_);
  if (rc == kCudaErrorOutOfMemory) {
    throw_error(ErrorCode::out_of_memory, "cuda.allocate",
                fmt::format("the device could not allocate {} bytes", bytes));
  }
  check(rc, "cuda.allocate");
  return address;
}

void CudaDevice::release(std::uint64_t address) noexcept {
  // No completion can be proven after a failure: the block is retained, never handed back for reuse.
  if (poisoned_.load()) {
    retained_.fetch_add(1);
    return;
  }
  thread_local const CudaDevice* current = nullptr;
  if (current != this) {
    if (driver_.ctx_set_current(context_) != kCudaSuccess) {
      retained_.fetch_add(1);
      return;
    }
    current = this;
  }
  if (driver_.mem_free_async(address, stream_) != kCudaSuccess) {
    poisoned_.store(true);
    retained_.fetch_add(1);
  }
}

// Note [Deferred checks]
// An index operand's range is known only on the device. Reading each op's verdict back at the op would make
// the host wait for the device at every embedding and cross entropy (three waits of a char-transformer
// training step's seven), so the verdicts travel with the next wait the host makes anyway: a kernel sets its
// mark, the marks are copied back with the next copy to the host (the loss, an output) or synchronize(), in
// the same stream wait, and cleared behind it, and the first failed one raises there. The bad index never
// reaches memory (the kernels skip it) and no value reaches the host before its checks are read. A mark is
// taken and its kernel enqueued under checks_mutex_, and the marks are read and cleared under it, so on the
// one stream every kernel that writes a mark runs after the clearing of that mark's previous use.
namespace {
constexpr std::size_t kMarks = 1024;
}

std::uint64_t CudaDevice::deferred_mark(std::string_view op, std::string_view operand, std::int64_t bound) {
  require_healthy(op);
  make_current();
  if (marks_ == 0) {
    marks_ = allocate(kMarks * sizeof(std::int64_t));
    check(driver_.memset_d8_async(marks_, 0, kMarks * sizeof(std::int64_t), stream_), "cuda.checks");
  }
  if (pending_.size() == kMarks) {  // every mark in use: read them now
    std::vector<std::int64_t> marks;
    const std::vector<PendingCheck> checks = enqueue_mark_read(marks);
    check(driver_.stream_synchronize(stream_), "cuda.checks");
    raise_failed(checks, marks);
  }
  pending_.push_back(PendingCheck{std::string(op), std::string(operand), bound});
  return marks_ + (pending_.size() - 1) * sizeof(std::int64_t);
}

std::vector<CudaDevice::PendingCheck> CudaDevice::enqueue_mark_read(std::vector<std::int64_t>& marks) {
  std::vector<PendingCheck> checks;
  checks.swap(pending_);
  if (checks.empty()) return checks;
  const std::size_t bytes = checks.size() * sizeof(std::int64_t);
  marks.assign(checks.size(), 0);
  check(driver_.memcpy_dtoh_async(marks.data(), marks_, bytes, stream_), "cuda.checks");
  check(driver_.memset_d8_async(marks_, 0, bytes, stream_), "cuda.checks");
  return checks;
}

void CudaDevice::raise_failed(const std::vector<PendingCheck>& checks, const std::vector<std::int64_t>& marks) {
  for (std::size_t k = 0; k < checks.size(); ++k) {
    if (marks[k] == 0) continue;
    throw_error(ErrorCode::index_out_of_range, checks[k].op,
                fmt::format("operand '{}'[{}] is outside [0, {})", checks[k].operand, ~marks[k], checks[k].bound));
  }
}

std::size_t CudaDevice::pending_checks() const {
  std::lock_guard lock(checks_mutex_);
  return pending_.size();
}

void CudaDevice::copy_to_host(std::byte* dst, std::uint64_t src, std::uint64_t bytes) {
  require_healthy("cuda.copy_to_host");
  make_current();
  std::vector<std::int64_t> marks;
  std::vector<PendingCheck> checks;
  {
    std::lock_guard lock(checks_mutex_);
    check(driver_.memcpy_dtoh_async(dst, src, bytes, stream_), "cuda.copy_to_host");
    checks = enqueue_mark_read(marks);
  }
  check(driver_.stream_synchronize(stream_), "cuda.copy_to_host");
  raise_failed(checks, marks);
}

void CudaDevice::copy_from_host(std::uint64_t dst, const std::byte* src, std::uint64_t bytes) {
  require_healthy("cuda.copy_from_host");
  make_current();
  check(driver_.memcpy_htod_async(dst, src, bytes, stream_), "cuda.copy_from_host");
  // The host buffer may be freed when this returns: the copy must have read it.
  check(driver_.stream_synchronize(stream_), "cuda.copy_from_host");
}

void CudaDevice::copy_within(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
  require_healthy("cuda.copy_within");
  make_current();
  check(driver_.memcpy_dtod_async(dst, src, bytes, stream_), "cuda.copy_within");
}

void CudaDevice::clear(std::uint64_t dst, std::uint64_t bytes) {
  require_healthy("cuda.clear");
  make_current();
  check(driver_.memset_d8_async(dst, 0, bytes, stream_), "cuda.clear");
}

Completion CudaDevice::fence() {
  require_healthy("cuda.fence");
  make_current();
  void* event = nullptr;
  check(driver_.event_create(&event, kCuEventDefault), "cuda.fence");
  const int rc = driver_.event_record(event, stream_);
  if (rc != kCudaSuccess) {
    driver_.event_destroy(event);
    check(rc, "cuda.fence");
  }
  return Completion(event);
}

void CudaDevice::synchronize() {
  require_healthy("cuda.synchronize");
  make_current();
  std::vector<std::int64_t> marks;
  std::vector<PendingCheck> checks;
  {
    std::lock_guard lock(checks_mutex_);
    checks = enqueue_mark_read(marks);
  }
  check(driver_.stream_synchronize(stream_), "cuda.synchronize");
  raise_failed(checks, marks);
}

void CudaDevice::launch(void* function, std::uint32_t grid_x, std::uint32_t grid_y, std::uint32_t grid_z,
                        std::uint32_t block_x, std::uint32_t block_y, std::uint32_t block_z, std::uint32_t shared_bytes,
                        void** params, std::string_view what) {
  require_healthy(what);
  make_current();
  if (grid_x == 0 || grid_y == 0 || grid_z == 0) return;  // nothing to compute
  check(driver_.launch_kernel(function, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes, stream_,
                              params, nullptr),
        what);
}

Completion::Completion(Completion&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
Completion& Completion::operator=(Completion&& other) noexcept {
  if (this != &other) {
    Completion dropped(std::move(*this));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}
Completion::~Completion() {
  if (event_ != nullptr) {
    if (CudaDevice* d = CudaDevice::get()) d->driver().event_destroy(event_);
  }
}

bool Completion::done() const {
  if (event_ == nullptr) return true;
  CudaDevice* d = CudaDevice::get();
  if (d == nullptr || d->poisoned()) return false;
  d->make_current();
  const int rc = d->driver().event_query(event_);
  if (rc == kCudaSuccess) return true;
  if (rc != kCudaErrorNotReady) {
    try {
      d->check(rc, "cuda.completion");
    } catch (const Error&) {
      return false;  // poisoned: unproven
    }
  }
  return false;
}

void Completion::wait() const {
  if (event_ == nullptr) return;
  CudaDevice* d = CudaDevice::get();
  if (d == nullptr) throw_error(ErrorCode::no_device, "cuda.completion", "no CUDA device");
  d->require_healthy("cuda.completion");
  d->make_current();
  d->check(d->driver().event_synchronize(event_), "cuda.completion");
}

}  // namespace pact
