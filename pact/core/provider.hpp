#pragma once
/// Storage providers (SPEC §4): cpu (aligned host memory), meta (geometry only), cuda (the host-parity
/// stub until a CUDA build with a device exists), fake (counts provider work, for tests).

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

  /// Records one descriptor validation.
  void note_validation() noexcept { counters_.validations.fetch_add(1, std::memory_order_relaxed); }
  /// The provider's counters.
  const ProviderCounters& counters() const noexcept { return counters_; }

 protected:
  Provider() = default;
  ProviderCounters counters_;
};

/// The process-wide cpu provider (aligned host memory).
std::shared_ptr<Provider> cpu_provider();
/// The process-wide meta provider (geometry only; host access refuses with no_host_bytes).
std::shared_ptr<Provider> meta_provider();
/// The process-wide CUDA provider. Without a CUDA build and device this is the host-parity stub,
/// named "cuda-stub": storage is host memory behind an opaque handle, host access refuses
/// (not_host_accessible) exactly as it would on a device, and device bindings are opaque tokens.
std::shared_ptr<Provider> cuda_provider();
/// A new fake provider with its own counters: host-accessible and device-bindable.
std::shared_ptr<Provider> make_fake_provider();
/// A provider of exactly one allocation: `bytes` of host memory at `data` that another runtime allocated
/// and owns (a numpy array's buffer, a DLPack tensor's data), named "external". Its one allocate() hands
/// out that range (any other request is unsupported); deallocate() releases `keeper`, whatever keeps the
/// foreign memory alive, and never frees the bytes. Its alignment is the address's own (at most 64).
/// Storage::import_host is the way to use it.
std::shared_ptr<Provider> make_external_host_provider(std::byte* data, std::uint64_t bytes,
                                                      std::shared_ptr<void> keeper);

}  // namespace pact
