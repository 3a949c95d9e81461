#pragma once
/// The process's CUDA device (SPEC §4, seed 001): device 0's primary context, made current on every thread
/// that calls the driver through it, one non-blocking stream that every Pact copy, allocation and kernel is
/// ordered on, and the device's stream-ordered memory pool kept as a cache (its release threshold is
/// raised, so freed blocks are reused rather than returned to the driver between steps).
///
/// Completion is proven by CUDA events: fence() records one on the stream, and a Completion answers
/// whether the work before it finished (cuEventQuery) or waits for it. A driver error during a launch, a
/// copy or a wait poisons the device: from then on every call fails with ErrorCode::poisoned, and storage
/// released afterwards is retained (never freed), because no completion can be proven for it.
///
/// The CUDA provider (cuda_provider(), pact/core/provider.hpp) is this device's storage when a driver and a
/// device are present; the CUDA kernels (pact/kernels/cuda) launch through launch().

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "pact/core/cuda_driver.hpp"

namespace pact {

/// Proof that the device work enqueued before it has finished: a recorded CUDA event.
class Completion {
 public:
  Completion() = default;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  Completion(Completion&& other) noexcept;
  Completion& operator=(Completion&& other) noexcept;
  ~Completion();
  /// True when the device reports the work done (cuEventQuery). A driver error poisons the device and
  /// answers false: an unproven completion is never a finished one.
  bool done() const;
  /// Waits for the work (cuEventSynchronize); throws poisoned when the driver cannot prove it finished.
  void wait() const;

 private:
  friend class CudaDevice;
  explicit Completion(void* event) : event_(event) {}
  void* event_ = nullptr;
};

class CudaDevice {
 public:
  /// Device 0, opened on first use (thread-safe); nullptr when this machine has no usable driver or device
  /// (why: unavailable_reason()).
  static CudaDevice* get();
  /// Why get() returned nullptr: the probe's summary or the driver's refusal. Empty when a device is open.
  static const std::string& unavailable_reason();
  /// Opens the process's device through `driver` instead of the system's libcuda (the CUDA emulator of
  /// tests/gpu/emulator, which runs the kernels' device code on the host). Only before the first get(),
  /// from a test binary's start: `internal` afterwards. `driver` lives for the process.
  static void open_with(const CudaDriver& driver);

  const CudaDriver& driver() const noexcept { return driver_; }
  /// The stream every Pact operation on this device is ordered on.
  void* stream() const noexcept { return stream_; }
  /// "NVIDIA H200 (sm_90, 132 SMs, 143771 MiB, driver 13.0)".
  const std::string& description() const noexcept { return description_; }
  int compute_capability() const noexcept { return major_ * 10 + minor_; }
  int multiprocessors() const noexcept { return sms_; }

  /// Makes the primary context current on the calling thread (once per thread).
  void make_current() const;
  /// Throws ErrorCode::poisoned, naming `what`, when an earlier failure poisoned the device.
  void require_healthy(std::string_view what) const;
  /// Checks a driver result: a failure poisons the device and throws poisoned naming `what` and the result.
  void check(int result, std::string_view what) const;
  bool poisoned() const noexcept { return poisoned_.load(); }
  /// Poisons the device from outside: work on its storage ran where its completion could not be proven (a
  /// sealed launch whose wait failed), so nothing further is authorized and every later release is retained.
  void poison() const noexcept { poisoned_.store(true); }

  /// Stream-ordered allocation from the device's pool; out_of_memory when the device has no room.
  std::uint64_t allocate(std::uint64_t bytes);
  /// Stream-ordered release: the block returns to the pool after every earlier operation on the stream. On a
  /// poisoned device, or when the driver refuses, the block is retained (counted), never freed.
  void release(std::uint64_t address) noexcept;
  /// Blocks the retained (never freed) releases.
  std::uint64_t retained_blocks() const noexcept { return retained_.load(); }

  /// Copies, ordered on the stream. The host-side ones return when the bytes have arrived.
  void copy_to_host(std::byte* dst, std::uint64_t src, std::uint64_t bytes);
  void copy_from_host(std::uint64_t dst, const std::byte* src, std::uint64_t bytes);
  void copy_within(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes);
  void clear(std::uint64_t dst, std::uint64_t bytes);

  /// Records an event after the work enqueued so far.
  Completion fence();
  /// Waits until every operation enqueued on the stream has finished, then raises a failed deferred check.
  void synchronize();

  /// A device-side index check whose verdict the host reads with its next wait (Note [Deferred checks] in
  /// cuda_device.cpp): calls `launch` with the address of a zeroed i64 mark that its kernel sets to ~i
  /// (atomicMax) for the first index i of `operand` outside [0, bound). The marks come back with the next
  /// copy_to_host or synchronize(), in the same wait, and the first one set raises index_out_of_range there,
  /// naming `op`, the operand and the index, as the CPU kernels do at the op.
  template <class Launch>
  void checked_launch(std::string_view op, std::string_view operand, std::int64_t bound, Launch&& launch) {
    std::lock_guard lock(checks_mutex_);
    launch(deferred_mark(op, operand, bound));
  }
  /// Deferred checks launched and not yet read (tests).
  std::size_t pending_checks() const;

  /// Launches `function` (a CUfunction) on the stream. The parameters are cuLaunchKernel's.
  void launch(void* function, std::uint32_t grid_x, std::uint32_t grid_y, std::uint32_t grid_z, std::uint32_t block_x,
              std::uint32_t block_y, std::uint32_t block_z, std::uint32_t shared_bytes, void** params,
              std::string_view what);

  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;
  ~CudaDevice() = default;  // the process's device lives until exit; the driver tears the context down

 private:
  explicit CudaDevice(const CudaDriver& driver);
  struct PendingCheck {
    std::string op, operand;
    std::int64_t bound;
  };
  /// The next mark's address, recorded as pending (checks_mutex_ held; a full set of marks is read first).
  std::uint64_t deferred_mark(std::string_view op, std::string_view operand, std::int64_t bound);
  /// Enqueues the pending marks' read-back into `marks` and their clearing (checks_mutex_ held); returns the
  /// checks they answer. The caller waits on the stream, then calls raise_failed.
  std::vector<PendingCheck> enqueue_mark_read(std::vector<std::int64_t>& marks);
  static void raise_failed(const std::vector<PendingCheck>& checks, const std::vector<std::int64_t>& marks);
  const CudaDriver& driver_;
  void* context_ = nullptr;
  void* stream_ = nullptr;
  int device_ = 0;
  int major_ = 0, minor_ = 0, sms_ = 0;
  std::string description_;
  mutable std::atomic<bool> poisoned_{false};
  std::atomic<std::uint64_t> retained_{0};
  mutable std::mutex checks_mutex_;
  std::vector<PendingCheck> pending_;  ///< mark k answers pending_[k]
  std::uint64_t marks_ = 0;            ///< the device's marks (kMarks i64), zeroed; allocated on first use
};

}  // namespace pact
