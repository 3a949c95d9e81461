#pragma once
/// Storage providers (SPEC §4): cpu (aligned host memory), meta (geometry only), cuda (the device's memory
/// where a CUDA driver and device are present, pact/core/cuda_device.hpp; otherwise the host-parity stub),
/// fake (counts provider work, for tests).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace pact {

/// Where a descriptor's elements live.
enum class DeviceKind : std::uint8_t { cpu, meta, cuda };

/// "cpu", "meta", "cuda".
std::string_view device_name(DeviceKind device) noexcept;

/// A provider's opaque record of one physical allocation. `handle` identifies it to the provider;
/// nothing outside the provider interprets it.
struct ProviderAllocation {
  std::uint64_t handle = 0;
  std::uint64_t bytes = 0;
  void* opaque = nullptr;      ///< provider-private state; never read outside the provider
  std::uint64_t capacity = 0;  ///< provider-private: bytes actually reserved
};

/// Counters a provider keeps of the work it was asked to do. Tests use them to show that provider
/// work is per preparation, never per element.
struct ProviderCounters {
  std::atomic<std::uint64_t> validations{0};       ///< descriptor checks against this provider
  std::atomic<std::uint64_t> mappings{0};          ///< host mappings (prepare_host*)
  std::atomic<std::uint64_t> synchronizations{0};  ///< waits before host access
  std::atomic<std::uint64_t> dispatches{0};        ///< device bindings dispatched
  std::atomic<std::uint64_t> attachments{0};       ///< prepared bindings attached (bind)
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> deallocations{0};
};

/// A storage provider. Implementations live in provider.cpp; the set is closed (cpu, meta, cuda stub,
/// fake). Shared by std::shared_ptr: holding one grants lifetime, never authority over storage.
class Provider {
 public:
  virtual ~Provider() = default;
  Provider(const Provider&) = delete;
  Provider& operator=(const Provider&) = delete;

  /// The name reports print: "cpu", "meta", "cuda-stub", "fake".
  virtual std::string_view name() const noexcept = 0;
  /// The placement of descriptors over this provider's storage.
  virtual DeviceKind device() const noexcept = 0;
  /// True when prepare_host may map this provider's storage.
  virtual bool host_accessible() const noexcept = 0;
  /// True when prepare_device may bind this provider's storage.
  virtual bool device_bindable() const noexcept = 0;
  /// True when this provider keeps bytes at all (meta does not).
  virtual bool has_bytes() const noexcept { return true; }
  /// Alignment of every allocation's first byte.
  virtual std::uint64_t alignment() const noexcept { return 64; }

  /// Allocates `bytes`; throws pact::Error(out_of_memory) when the host cannot (allocation_failed for other
  /// refusals).
  virtual ProviderAllocation allocate(std::uint64_t bytes) = 0;
  /// Releases an allocation exactly once (called by RootResource's destructor).
  virtual void deallocate(const ProviderAllocation& allocation) noexcept = 0;

  /// Maps an allocation for host access and returns its first byte. Called once per preparation.
  /// Providers without host access throw no_host_bytes / not_host_accessible.
  virtual std::byte* map_host(const ProviderAllocation& allocation) = 0;
  /// Waits until no pending device work touches the allocation. Called once per host preparation.
  virtual void synchronize(const ProviderAllocation& allocation) = 0;
  /// Produces an opaque binding token for device access to an allocation; throws unsupported.
  virtual std::uint64_t bind_device(const ProviderAllocation& allocation) = 0;
  /// Attaches a prepared binding for use by device work (binding-time provider work only: no validation,
  /// no request, key or range). Throws pact::Error when the provider refuses; nothing is enqueued.
  virtual void attach(std::uint64_t binding) {
    (void)binding;
    counters_.attachments.fetch_add(1, std::memory_order_relaxed);
  }
  /// Fake provider only (tests): the next `count` attach() calls fail. Others throw unsupported.
  virtual void fail_next_attachments(int count);
  /// Records one dispatch of work over prepared bindings.
  virtual void dispatch() { counters_.dispatches.fetch_add(1, std::memory_order_relaxed); }

  /// unsafe_copy_base: the first byte of an allocation as this provider's own copy engine sees it.
  /// Used only by duplicate/transfer inside the core. The pointer is valid while the allocation lives
  /// and must never escape the copy routine. Throws no_host_bytes for meta.
  virtual std::byte* unsafe_copy_base(const ProviderAllocation& allocation) = 0;

  /// True when unsafe_copy_base is host memory the core may memcpy: every provider but a real device's,
  /// whose bytes move only through copy_out, copy_in, copy_within and clear (each ordered on the device).
  virtual bool host_copy_engine() const noexcept { return true; }
  /// Device providers: `bytes` bytes at `offset` into `src` copied to host memory at `dst`; complete on
  /// return. Host providers throw unsupported (the core copies their bytes itself).
  virtual void copy_out(std::byte* dst, const ProviderAllocation& src, std::uint64_t offset, std::uint64_t bytes);
  /// Device providers: host bytes copied into `dst` at `offset`; the host buffer may be reused on return.
  virtual void copy_in(const ProviderAllocation& dst, std::uint64_t offset, const std::byte* src, std::uint64_t bytes);
  /// Device providers: a copy between two of this provider's allocations.
  virtual void copy_within(const ProviderAllocation& dst, std::uint64_t dst_offset, const ProviderAllocation& src,
                           std::uint64_t src_offset, std::uint64_t bytes);
  /// Device providers: zeroes `bytes` bytes at `offset`.
  virtual void clear(const ProviderAllocation& dst, std::uint64_t offset, std::uint64_t bytes);

  /// Records one descriptor validation.
  void note_validation() noexcept { counters_.validations.fetch_add(1, std::memory_order_relaxed); }
  /// The provider's counters.
  const ProviderCounters& counters() const noexcept { return counters_; }

 protected:
  Provider() = default;
  ProviderCounters counters_;
};

/// Whether host allocations carry guard bands (PACT_HOST_GUARD=1 in the environment at the first host
/// allocation; Note [Guard bands] in provider.cpp): each block exactly its size between bands of a
/// signalling-NaN pattern, which read as NaN and are checked when the block is released (a write outside it
/// aborts). For the
/// op sweep and the mutation gate; off otherwise.
bool host_guard_bands() noexcept;

/// The process-wide cpu provider (aligned host memory).
std::shared_ptr<Provider> cpu_provider();
/// The process-wide meta provider (geometry only; host access refuses with no_host_bytes).
std::shared_ptr<Provider> meta_provider();
/// The process-wide CUDA provider. Where the driver reports a device (CudaDevice::get()) it is "cuda":
/// stream-ordered device memory from the device's caching pool, no host access (not_host_accessible),
/// copies through the driver, and a device binding whose token is the allocation's device address.
/// Without a driver or device it is the host-parity stub, named "cuda-stub": storage is host memory
/// behind an opaque handle, host access refuses exactly as it would on a device, and device bindings
/// are opaque tokens.
std::shared_ptr<Provider> cuda_provider();
/// The process-wide provider of `device`'s memory: cpu_provider(), meta_provider() or cuda_provider().
std::shared_ptr<Provider> provider_for(DeviceKind device);
/// A new fake provider with its own counters: host-accessible and device-bindable.
std::shared_ptr<Provider> make_fake_provider();
/// A new fake device provider (tests): host memory that the core may not touch (host_copy_engine false,
/// no host access), whose copy_out / copy_in / copy_within / clear copy bytes as a device's driver would, so
/// the core's staged device copies run on a machine without a GPU. Named "fake-device", placed on cuda.
std::shared_ptr<Provider> make_fake_device_provider();
/// A provider of exactly one allocation: `bytes` of host memory at `data` that another runtime allocated
/// and owns (a numpy array's buffer, a DLPack tensor's data), named "external". Its one allocate() hands
/// out that range (any other request is unsupported); deallocate() releases `keeper`, whatever keeps the
/// foreign memory alive, and never frees the bytes. Its alignment is the address's own (at most 64).
/// Storage::import_host is the way to use it.
std::shared_ptr<Provider> make_external_host_provider(std::byte* data, std::uint64_t bytes,
                                                      std::shared_ptr<void> keeper);

}  // namespace pact
