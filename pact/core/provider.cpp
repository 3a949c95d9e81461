#include "pact/core/provider.hpp"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "pact/core/cuda_device.hpp"
#include "pact/core/error.hpp"

namespace pact {

std::string_view device_name(DeviceKind device) noexcept {
  switch (device) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::meta:
      return "meta";
    case DeviceKind::cuda:
      return "cuda";
  }
  return "unknown";
}

namespace {

// Note [One region for the blocks a run passes along]
// An inference allocates each node's output and releases its inputs as it goes, and what it costs on a
// machine whose caches are shared is mostly where those blocks lie: an output written over memory the
// last few nodes just released is still in the cache; one written over memory last touched a whole run
// ago comes from DRAM. Separate blocks, kept for reuse by size, cannot be joined: mobilenet_v2 touched
// 28 MB of distinct activation blocks a run for a 5 MB live peak, and on a shared Zen 4 VM whose copies
// fall from 60-75 GB/s to 10-16 GB/s past about 8 MB, its 16 -> 96 expansion on a 112 x 112 plane took
// 1.3-1.6 ms in the model against 0.5 ms into a buffer in cache (ONNX Runtime, which plans one arena:
// 0.54 ms), and a depthwise layer reading 1.8 MB 0.41 ms against ONNX Runtime's 0.16. So blocks of a page
// or more are carved from one reserved region, the lowest free range that holds them, and released
// ranges join their free neighbours: the next output lands on what was just released, and a run touches
// little more than its live peak (those two layers: 0.93-1.05 and 0.18 ms). Pages, once touched, stay,
// so a training step that releases and re-allocates the same shapes faults no fresh pages (glibc unmaps
// large blocks and trims its heap's top: a small MLP's steps once faulted about 12 pages each, 10-150 us);
// only a free range past kKept has its further pages returned to the system. The region is address space
// until used; a block it cannot hold, or every block where the reservation fails or under a sanitizer
// (whose checks need each block to be an allocation of its own), comes from aligned_alloc.
class Region {
 public:
  static constexpr std::uint64_t kGrain = 64;  // offsets and sizes: whole cache lines
  static constexpr std::uint64_t kKept = std::uint64_t{256} << 20;
  ~Region() {
    if (base_ != nullptr) munmap(base_, size_);
  }
  // The lowest free range of at least `bytes` (a multiple of kGrain), or null.
  std::byte* take(std::uint64_t bytes) {
    if (!reserved()) return nullptr;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      const auto [offset, length] = *it;
      free_.erase(it);
      if (length > bytes) free_.emplace(offset + bytes, length - bytes);
      top_ = std::max(top_, offset + bytes);
      return base_ + offset;
    }
    return nullptr;
  }
  bool holds(const void* p) const noexcept {
    const auto* b = static_cast<const std::byte*>(p);
    return base_ != nullptr && b >= base_ && b < base_ + size_;
  }
  // Returns [p, p + bytes) to the free ranges, joined with the ranges either side of it.
  void give(const void* p, std::uint64_t bytes) {
    std::uint64_t offset = static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - base_), length = bytes;
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && offset + length == next->first) {
      length += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      if (auto before = std::prev(next); before->first + before->second == offset) {
        offset = before->first;
        length += before->second;
        free_.erase(before);
      }
    }
    free_.emplace(offset, length);
    // The whole pages of the range past its first kKept bytes, below the highest end ever handed out (above
    // it nothing was touched, or it was returned already).
    constexpr std::uint64_t kPage = 4096;
    const std::uint64_t from = (offset + kKept + kPage - 1) / kPage * kPage;
    const std::uint64_t to = std::min(offset + length, top_) / kPage * kPage;
    if (length <= kKept || to <= from) return;
    madvise(base_ + from, to - from, MADV_DONTNEED);
    if (offset + length >= top_) top_ = from;
  }

 private:
  bool reserved() {
    if (tried_) return base_ != nullptr;
    tried_ = true;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    // Address space only: the largest of these the process may map.
    for (std::uint64_t size : {std::uint64_t{16} << 30, std::uint64_t{2} << 30, std::uint64_t{256} << 20}) {
      void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) continue;
      base_ = static_cast<std::byte*>(p);
      size_ = size;
      free_.emplace(0, size);
      return true;
    }
#endif
    return false;
  }
  std::byte* base_ = nullptr;
  std::uint64_t size_ = 0, top_ = 0;  // top_: the highest end handed out since its pages were last returned
  bool tried_ = false;
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> length, no two adjacent
};

// Host memory behind an opaque record: the provider keeps the block in ProviderAllocation::opaque,
// which nothing outside the provider reads. Shared by cpu, cuda-stub and fake.
class HostArena {
 public:
  ProviderAllocation allocate(std::string_view who, std::uint64_t bytes, std::uint64_t alignment) {
    // aligned_alloc needs a size multiple of the alignment; zero-byte allocations get one block.
    std::uint64_t rounded = ((bytes + alignment - 1) / alignment) * alignment;
    if (rounded == 0) rounded = alignment;
    if (guarded()) return allocate_guarded(who, bytes, alignment, rounded);
    // Note [One region for the blocks a run passes along]: a page or more from the region, where it has room.
    std::uint64_t capacity = rounded;
    void* p = nullptr;
    if (rounded >= bytes && rounded >= kRegionFrom && rounded <= kRegionTo && Region::kGrain % alignment == 0) {
      capacity = (rounded + Region::kGrain - 1) / Region::kGrain * Region::kGrain;
      std::lock_guard lock(mutex_);
      p = region_.take(capacity);
    }
    if (p == nullptr && rounded >= bytes) {
      p = std::aligned_alloc(alignment, rounded);
      capacity = rounded;
    }
    if (p == nullptr) {
      throw_error(ErrorCode::out_of_memory, fmt::format("{}.allocate", who),
                  fmt::format("the host could not allocate {} bytes", bytes));
    }
    return ProviderAllocation{next_.fetch_add(1, std::memory_order_relaxed) + 1, bytes, p, capacity};
  }
  void deallocate(const ProviderAllocation& allocation, std::uint64_t alignment) noexcept {
    if (guarded()) return deallocate_guarded(allocation, alignment);
    {
      std::lock_guard lock(mutex_);  // the region's first block may be reserved on another thread meanwhile
      if (region_.holds(allocation.opaque)) {
        region_.give(allocation.opaque, allocation.capacity);
        return;
      }
    }
    std::free(allocation.opaque);
  }
  static std::byte* base(const ProviderAllocation& allocation) noexcept {
    return static_cast<std::byte*>(allocation.opaque);
  }

  // Note [Guard bands]: with PACT_HOST_GUARD=1 in the environment (read once, at the first host
  // allocation), every block is its exact size between two bands: `alignment` bytes before it, and from its
  // last byte to one alignment past its rounded size after it. The bands repeat the word 0x7FA5A5A5 in step
  // with the block's aligned base: a signalling NaN as f32 (and bf16's upper half), about 5.6e306 as f64,
  // about 2^31 as an i32 and 2^63 as an i64 index: a kernel that reads outside its input shows in its
  // values. A kernel that writes outside its output is found when the block is released and the process
  // aborts saying where (the mutation gate counts that as a kill). Not 0xFF bytes: those are a quiet NaN,
  // which `band += x` writes back unchanged; arithmetic on a signalling NaN quiets it, so even an
  // accumulation into a band shows. Blocks are never reused, so every allocation's bands are checked.
  static bool guarded() noexcept {
    static const bool on = [] {
      const char* v = std::getenv("PACT_HOST_GUARD");
      return v != nullptr && std::string_view(v) == "1";
    }();
    return on;
  }

 private:
  static constexpr std::uint8_t kBand[4] = {0xA5, 0xA5, 0xA5, 0x7F};  // 0x7FA5A5A5, little-endian
  // Fills or checks bytes [from, to) of a block by their offset from its aligned base; the first byte that
  // differs (its offset), or -1.
  static void fill_band(std::uint8_t* base, std::uint64_t from, std::uint64_t to) noexcept {
    for (std::uint64_t i = from; i < to; ++i) base[i] = kBand[i % 4];
  }
  static std::int64_t band_changed(const std::uint8_t* base, std::uint64_t from, std::uint64_t to) noexcept {
    for (std::uint64_t i = from; i < to; ++i) {
      if (base[i] != kBand[i % 4]) return static_cast<std::int64_t>(i);
    }
    return -1;
  }
  ProviderAllocation allocate_guarded(std::string_view who, std::uint64_t bytes, std::uint64_t alignment,
                                      std::uint64_t rounded) {
    const std::uint64_t total = alignment + rounded + alignment;
    auto* base = total < rounded ? nullptr : static_cast<std::uint8_t*>(std::aligned_alloc(alignment, total));
    if (base == nullptr) {
      throw_error(ErrorCode::out_of_memory, fmt::format("{}.allocate", who),
                  fmt::format("the host could not allocate {} bytes", bytes));
    }
    fill_band(base, 0, alignment);
    fill_band(base, alignment + bytes, total);
    return ProviderAllocation{next_.fetch_add(1, std::memory_order_relaxed) + 1, bytes, base + alignment, total};
  }
  static void deallocate_guarded(const ProviderAllocation& a, std::uint64_t alignment) noexcept {
    auto* data = static_cast<std::uint8_t*>(a.opaque);
    auto* base = data - alignment;
    const std::int64_t before = band_changed(base, 0, alignment),
                       after = band_changed(base, alignment + a.bytes, a.capacity);
    if (before >= 0 || after >= 0) {
      // Found at release: nothing to throw to, and the process's memory is no longer trustworthy.
      const std::int64_t offset = (before >= 0 ? before : after) - static_cast<std::int64_t>(alignment);
      fmt::print(stderr,
                 "pact: a {}-byte host allocation was written outside its bounds (at offset {}, {}); aborting\n",
                 a.bytes, offset, before >= 0 ? "before its start" : "past its end");
      std::abort();
    }
    std::free(base);
  }
  static constexpr std::uint64_t kRegionFrom = 4 * 1024, kRegionTo = std::uint64_t{1} << 40;
  std::atomic<std::uint64_t> next_{0};
  std::mutex mutex_;  // guards region_
  Region region_;
};

// Host memory through the arena: allocation, release, copy base and counters shared by the cpu provider,
// the CUDA host-parity stub and the fake provider, which differ only in what access they offer.
class HostBackedProvider : public Provider {
 public:
  ProviderAllocation allocate(std::uint64_t bytes) override {
    counters_.allocations.fetch_add(1, std::memory_order_relaxed);
    return arena_.allocate(name(), bytes, alignment());
  }
  void deallocate(const ProviderAllocation& a) noexcept override {
    counters_.deallocations.fetch_add(1, std::memory_order_relaxed);
    arena_.deallocate(a, alignment());
  }
  void synchronize(const ProviderAllocation&) override {
    counters_.synchronizations.fetch_add(1, std::memory_order_relaxed);
  }
  std::byte* unsafe_copy_base(const ProviderAllocation& a) override { return arena_.base(a); }

 protected:
  std::byte* counted_map(const ProviderAllocation& a) {
    counters_.mappings.fetch_add(1, std::memory_order_relaxed);
    return arena_.base(a);
  }
  std::uint64_t counted_binding(const ProviderAllocation& a) {
    counters_.mappings.fetch_add(1, std::memory_order_relaxed);
    return a.handle;
  }

 private:
  HostArena arena_;
};

class CpuProvider final : public HostBackedProvider {
 public:
  std::string_view name() const noexcept override { return "cpu"; }
  DeviceKind device() const noexcept override { return DeviceKind::cpu; }
  bool host_accessible() const noexcept override { return true; }
  bool device_bindable() const noexcept override { return false; }
  std::byte* map_host(const ProviderAllocation& a) override { return counted_map(a); }
  std::uint64_t bind_device(const ProviderAllocation&) override {
    throw_error(ErrorCode::unsupported, "cpu.bind_device", "the cpu provider has no device binding; use prepare_host");
  }
};

class MetaProvider final : public Provider {
 public:
  std::string_view name() const noexcept override { return "meta"; }
  DeviceKind device() const noexcept override { return DeviceKind::meta; }
  bool host_accessible() const noexcept override { return false; }
  bool device_bindable() const noexcept override { return false; }
  bool has_bytes() const noexcept override { return false; }
  ProviderAllocation allocate(std::uint64_t bytes) override {
    counters_.allocations.fetch_add(1, std::memory_order_relaxed);
    return ProviderAllocation{++next_, bytes, nullptr, 0};
  }
  void deallocate(const ProviderAllocation&) noexcept override {
    counters_.deallocations.fetch_add(1, std::memory_order_relaxed);
  }
  std::byte* map_host(const ProviderAllocation& a) override { refuse("meta.map_host", a); }
  void synchronize(const ProviderAllocation&) override {}
  std::uint64_t bind_device(const ProviderAllocation& a) override { refuse("meta.bind_device", a); }
  std::byte* unsafe_copy_base(const ProviderAllocation& a) override { refuse("meta.copy", a); }

 private:
  [[noreturn]] static void refuse(const char* op, const ProviderAllocation& a) {
    throw_error(ErrorCode::no_host_bytes, op,
                fmt::format("meta storage has geometry only ({} bytes described, none allocated)", a.bytes));
  }
  std::atomic<std::uint64_t> next_{0};
};

// The CUDA host-parity stub (seed 000's CUDA buffer stub): allocations are host memory behind an opaque
// handle; host access refuses as it would for device memory; bindings are opaque tokens.
class CudaStubProvider final : public HostBackedProvider {
 public:
  std::string_view name() const noexcept override { return "cuda-stub"; }
  DeviceKind device() const noexcept override { return DeviceKind::cuda; }
  bool host_accessible() const noexcept override { return false; }
  bool device_bindable() const noexcept override { return true; }
  std::byte* map_host(const ProviderAllocation& a) override {
    throw_error(ErrorCode::not_host_accessible, "cuda-stub.map_host",
                fmt::format("device allocation {} is not host-accessible; transfer it to cpu", a.handle));
  }
  std::uint64_t bind_device(const ProviderAllocation& a) override { return counted_binding(a); }
};

// The real CUDA provider (pact/core/cuda_device.hpp): device memory from the stream-ordered pool. The
// allocation's handle is its device address, which is also the binding token device work reads; no
// host pointer exists. A release is stream-ordered after every earlier use, and retained when the device
// is poisoned (no completion can be proven).
class CudaDeviceProvider final : public Provider {
 public:
  explicit CudaDeviceProvider(CudaDevice& device) : device_(device) {}
  std::string_view name() const noexcept override { return "cuda"; }
  DeviceKind device() const noexcept override { return DeviceKind::cuda; }
  bool host_accessible() const noexcept override { return false; }
  bool device_bindable() const noexcept override { return true; }
  bool host_copy_engine() const noexcept override { return false; }
  std::uint64_t alignment() const noexcept override { return 256; }
  ProviderAllocation allocate(std::uint64_t bytes) override {
    counters_.allocations.fetch_add(1, std::memory_order_relaxed);
    const std::uint64_t address = device_.allocate(bytes);
    return ProviderAllocation{address, bytes, nullptr, bytes};
  }
  void deallocate(const ProviderAllocation& a) noexcept override {
    counters_.deallocations.fetch_add(1, std::memory_order_relaxed);
    device_.release(a.handle);
  }
  std::byte* map_host(const ProviderAllocation& a) override {
    throw_error(ErrorCode::not_host_accessible, "cuda.map_host",
                fmt::format("device allocation of {} bytes is not host-accessible; transfer it to cpu", a.bytes));
  }
  void synchronize(const ProviderAllocation&) override {
    counters_.synchronizations.fetch_add(1, std::memory_order_relaxed);
    device_.synchronize();
  }
  std::uint64_t bind_device(const ProviderAllocation& a) override {
    counters_.mappings.fetch_add(1, std::memory_order_relaxed);
    return a.handle;
  }
  std::byte* unsafe_copy_base(const ProviderAllocation&) override {
    throw_error(ErrorCode::not_host_accessible, "cuda.copy", "device memory is copied through the driver");
  }
  void copy_out(std::byte* dst, const ProviderAllocation& src, std::uint64_t offset, std::uint64_t bytes) override {
    device_.copy_to_host(dst, src.handle + offset, bytes);
  }
  void copy_in(const ProviderAllocation& dst, std::uint64_t offset, const std::byte* src,
               std::uint64_t bytes) override {
    device_.copy_from_host(dst.handle + offset, src, bytes);
  }
  void copy_within(const ProviderAllocation& dst, std::uint64_t dst_offset, const ProviderAllocation& src,
                   std::uint64_t src_offset, std::uint64_t bytes) override {
    device_.copy_within(dst.handle + dst_offset, src.handle + src_offset, bytes);
  }
  void clear(const ProviderAllocation& dst, std::uint64_t offset, std::uint64_t bytes) override {
    device_.clear(dst.handle + offset, bytes);
  }

 private:
  CudaDevice& device_;
};

class FakeProvider final : public HostBackedProvider {
 public:
  std::string_view name() const noexcept override { return "fake"; }
  DeviceKind device() const noexcept override { return DeviceKind::cpu; }
  bool host_accessible() const noexcept override { return true; }
  bool device_bindable() const noexcept override { return true; }
  std::byte* map_host(const ProviderAllocation& a) override { return counted_map(a); }
  std::uint64_t bind_device(const ProviderAllocation& a) override { return counted_binding(a); }
  void attach(std::uint64_t binding) override {
    if (failures_.load() > 0) {
      failures_.fetch_sub(1);
      throw_error(ErrorCode::unsupported, "fake.attach", fmt::format("injected refusal to attach binding {}", binding));
    }
    Provider::attach(binding);
  }
  void fail_next_attachments(int count) override { failures_.store(count); }

 private:
  std::atomic<int> failures_{0};
};

class FakeDeviceProvider final : public HostBackedProvider {
 public:
  std::string_view name() const noexcept override { return "fake-device"; }
  DeviceKind device() const noexcept override { return DeviceKind::cuda; }
  bool host_accessible() const noexcept override { return false; }
  bool device_bindable() const noexcept override { return true; }
  bool host_copy_engine() const noexcept override { return false; }
  std::byte* map_host(const ProviderAllocation&) override {
    throw_error(ErrorCode::not_host_accessible, "fake-device.map_host", "fake device storage is not host-accessible");
  }
  std::uint64_t bind_device(const ProviderAllocation& a) override { return counted_binding(a); }
  std::byte* unsafe_copy_base(const ProviderAllocation&) override {
    throw_error(ErrorCode::not_host_accessible, "fake-device.copy", "device bytes move only through the copy engine");
  }
  void copy_out(std::byte* dst, const ProviderAllocation& src, std::uint64_t offset, std::uint64_t bytes) override {
    std::memcpy(dst, in_bounds(src, offset, bytes), bytes);
  }
  void copy_in(const ProviderAllocation& dst, std::uint64_t offset, const std::byte* src,
               std::uint64_t bytes) override {
    std::memcpy(in_bounds(dst, offset, bytes), src, bytes);
  }
  void copy_within(const ProviderAllocation& dst, std::uint64_t dst_offset, const ProviderAllocation& src,
                   std::uint64_t src_offset, std::uint64_t bytes) override {
    std::memmove(in_bounds(dst, dst_offset, bytes), in_bounds(src, src_offset, bytes), bytes);
  }
  void clear(const ProviderAllocation& dst, std::uint64_t offset, std::uint64_t bytes) override {
    std::memset(in_bounds(dst, offset, bytes), 0, bytes);
  }

 private:
  // A device's copy engine faults on a range outside the allocation; the fake refuses it typed.
  std::byte* in_bounds(const ProviderAllocation& a, std::uint64_t offset, std::uint64_t bytes) {
    if (offset > a.bytes || bytes > a.bytes - offset)
      throw_error(ErrorCode::out_of_span, "fake-device.copy",
                  fmt::format("[{}, +{}) outside the allocation's {} bytes", offset, bytes, a.bytes));
    return HostBackedProvider::unsafe_copy_base(a) + offset;
  }
};

}  // namespace

void Provider::copy_out(std::byte*, const ProviderAllocation&, std::uint64_t, std::uint64_t) {
  throw_error(ErrorCode::unsupported, "provider.copy_out", fmt::format("{} copies through host memory", name()));
}
void Provider::copy_in(const ProviderAllocation&, std::uint64_t, const std::byte*, std::uint64_t) {
  throw_error(ErrorCode::unsupported, "provider.copy_in", fmt::format("{} copies through host memory", name()));
}
void Provider::copy_within(const ProviderAllocation&, std::uint64_t, const ProviderAllocation&, std::uint64_t,
                           std::uint64_t) {
  throw_error(ErrorCode::unsupported, "provider.copy_within", fmt::format("{} copies through host memory", name()));
}
void Provider::clear(const ProviderAllocation&, std::uint64_t, std::uint64_t) {
  throw_error(ErrorCode::unsupported, "provider.clear", fmt::format("{} clears through host memory", name()));
}

void Provider::fail_next_attachments(int) {
  throw_error(ErrorCode::unsupported, "provider.fail_next_attachments",
              fmt::format("{} takes no injected failures", name()));
}

bool host_guard_bands() noexcept { return HostArena::guarded(); }

std::shared_ptr<Provider> cpu_provider() {
  static auto p = std::make_shared<CpuProvider>();
  return p;
}
std::shared_ptr<Provider> meta_provider() {
  static auto p = std::make_shared<MetaProvider>();
  return p;
}
std::shared_ptr<Provider> cuda_provider() {
  static const std::shared_ptr<Provider> p = []() -> std::shared_ptr<Provider> {
    if (CudaDevice* device = CudaDevice::get()) return std::make_shared<CudaDeviceProvider>(*device);
    return std::make_shared<CudaStubProvider>();
  }();
  return p;
}
std::shared_ptr<Provider> provider_for(DeviceKind device) {
  switch (device) {
    case DeviceKind::cpu:
      return cpu_provider();
    case DeviceKind::meta:
      return meta_provider();
    case DeviceKind::cuda:
      return cuda_provider();
  }
  throw_error(ErrorCode::invalid_argument, "provider_for", "unknown device kind");
}
std::shared_ptr<Provider> make_fake_provider() { return std::make_shared<FakeProvider>(); }
std::shared_ptr<Provider> make_fake_device_provider() { return std::make_shared<FakeDeviceProvider>(); }

namespace {
// Note [External host memory]
// A numpy array or a DLPack tensor handed to Pact keeps its bytes where they are: the root's provider
// serves that one range and, when the root dies, drops the keeper (the binding's reference to the
// foreign owner) instead of freeing. Pact's rules hold over it as over any root: owners are move-only,
// views never outlive the root, and the root keeps the foreign owner alive for as long as any view does.
class ExternalHostProvider final : public Provider {
 public:
  ExternalHostProvider(std::byte* data, std::uint64_t bytes, std::shared_ptr<void> keeper)
      : data_(data), bytes_(bytes), keeper_(std::move(keeper)) {}
  std::string_view name() const noexcept override { return "external"; }
  DeviceKind device() const noexcept override { return DeviceKind::cpu; }
  bool host_accessible() const noexcept override { return true; }
  bool device_bindable() const noexcept override { return false; }
  std::uint64_t alignment() const noexcept override {
    const auto address = reinterpret_cast<std::uintptr_t>(data_);
    if (address == 0) return 64;
    return std::min<std::uint64_t>(64, address & (~address + 1));  // the lowest set bit
  }
  ProviderAllocation allocate(std::uint64_t bytes) override {
    if (handed_out_ || bytes != bytes_)
      throw_error(ErrorCode::unsupported, "external.allocate",
                  fmt::format("external memory is one range of {} bytes, adopted once; it allocates nothing", bytes_));
    handed_out_ = true;
    counters_.allocations.fetch_add(1, std::memory_order_relaxed);
    return ProviderAllocation{1, bytes_, data_, bytes_};
  }
  void deallocate(const ProviderAllocation&) noexcept override {
    counters_.deallocations.fetch_add(1, std::memory_order_relaxed);
    keeper_.reset();
  }
  std::byte* map_host(const ProviderAllocation& a) override {
    counters_.mappings.fetch_add(1, std::memory_order_relaxed);
    return static_cast<std::byte*>(a.opaque);
  }
  void synchronize(const ProviderAllocation&) override {
    counters_.synchronizations.fetch_add(1, std::memory_order_relaxed);
  }
  std::uint64_t bind_device(const ProviderAllocation&) override {
    throw_error(ErrorCode::unsupported, "external.bind_device", "external host memory has no device binding");
  }
  std::byte* unsafe_copy_base(const ProviderAllocation& a) override { return static_cast<std::byte*>(a.opaque); }

 private:
  std::byte* data_;
  std::uint64_t bytes_;
  std::shared_ptr<void> keeper_;
  bool handed_out_ = false;
};
}  // namespace

std::shared_ptr<Provider> make_external_host_provider(std::byte* data, std::uint64_t bytes,
                                                      std::shared_ptr<void> keeper) {
  if (data == nullptr && bytes > 0)
    throw_error(ErrorCode::invalid_argument, "external.import",
                fmt::format("a null address cannot hold {} bytes", bytes));
  return std::make_shared<ExternalHostProvider>(data, bytes, std::move(keeper));
}

}  // namespace pact
