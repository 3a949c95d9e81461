#pragma once
/// Roots, claims and the storage owner (SPEC §4, seed 001 G1).
///
/// A RootResource is one physical allocation: shared by std::shared_ptr, which grants lifetime only.
/// A claim is a byte range of a root held by exactly one owner; Storage is that owner and is move-only.
/// Write authority comes from holding the owner (or an exclusive view derived from it), never from a
/// root pointer, an allocation id or a reference count.

#include <cstdint>
#include <memory>
#include <utility>

#include "pact/core/accounting.hpp"
#include "pact/core/borrow.hpp"
#include "pact/core/error.hpp"
#include "pact/core/expected.hpp"
#include "pact/core/layout.hpp"
#include "pact/core/provider.hpp"

namespace pact {

/// Observation-only facts about an allocation.
struct AllocationDiagnostics {
  std::uint64_t id = 0;  ///< process-unique allocation id (never an address)
  AllocationReason reason = AllocationReason::OperationOutput;
};

/// One physical allocation. Deallocates through its provider exactly once, when the last shared_ptr
/// (owner claims, retained records) lets go.
class RootResource {
 public:
  RootResource(std::shared_ptr<Provider> provider, ProviderAllocation allocation, AllocationDiagnostics diagnostics);
  ~RootResource();
  RootResource(const RootResource&) = delete;
  RootResource& operator=(const RootResource&) = delete;

  /// The provider that made the allocation.
  Provider& provider() const noexcept { return *provider_; }
  /// The provider, shared.
  const std::shared_ptr<Provider>& provider_ptr() const noexcept { return provider_; }
  /// The provider's record.
  const ProviderAllocation& allocation() const noexcept { return allocation_; }
  /// Capacity in bytes.
  std::uint64_t capacity() const noexcept { return allocation_.bytes; }
  /// Allocation id and reason.
  const AllocationDiagnostics& diagnostics() const noexcept { return diagnostics_; }

 private:
  std::shared_ptr<Provider> provider_;
  ProviderAllocation allocation_;
  AllocationDiagnostics diagnostics_;
};

namespace core {
/// A claim: a byte range of a root plus its borrow counts. Heap-allocated once per claim so that
/// views stay valid while their owner is moved.
struct Claim {
  Claim() = default;
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  /// Checked builds terminate with a diagnostic when the claim dies under a live view (borrow.hpp).
  ~Claim();

  std::shared_ptr<RootResource> root;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  BorrowState borrows;

  /// The bounds a descriptor over this claim is checked against.
  SpanBounds bounds() const noexcept;
  /// Checks a descriptor request against this claim (one validation counted by the provider).
  CheckedLayout check(const char* operation, const LayoutRequest& request) const;
  /// The span identity for errors.
  SpanIdentity identity() const noexcept { return {root->diagnostics().id, begin, end}; }
};
}  // namespace core

/// The owner of one claim. Move-only: claims are never copied.
class Storage {
 public:
  /// Allocates `bytes` from `provider` and records one allocation event with `reason`.
  static Storage allocate(std::shared_ptr<Provider> provider, std::uint64_t bytes, AllocationReason reason);
  /// Adopts `bytes` of host memory at `data` that another runtime allocated and owns (a numpy array's
  /// buffer, a DLPack tensor's data) as a root of its own (Note [External host memory]): zero copy, one
  /// allocation event with reason ExternalImport and provider "external". The root holds `keeper` and
  /// releases it, and nothing else, when it dies. invalid_argument for a null `data` with bytes > 0.
  static Storage import_host(std::byte* data, std::uint64_t bytes, std::shared_ptr<void> keeper);

  Storage(Storage&&) noexcept = default;
  Storage& operator=(Storage&&) noexcept = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() = default;

  /// Claim length in bytes.
  std::uint64_t byte_size() const noexcept { return claim_->end - claim_->begin; }
  /// Allocation id and claim byte range.
  SpanIdentity span_identity() const noexcept { return claim_->identity(); }
  /// The provider.
  Provider& provider() const noexcept { return claim_->root->provider(); }
  /// Number of shared_ptr holders of the root (diagnostics and tests; never authority).
  long root_use_count() const noexcept { return claim_->root.use_count(); }
  /// True for a moved-from owner.
  bool empty() const noexcept { return claim_ == nullptr; }

  /// Consumes the owner and returns the claims [0, at) and [at, size). On failure (at > size)
  /// returns the unchanged owner with invalid_argument.
  static Expected<std::pair<Storage, Storage>, Returned<Storage>> split(Storage&& owner, std::uint64_t at);

 private:
  friend class Tensor;
  friend class AllocationGroup;
  explicit Storage(std::unique_ptr<core::Claim> claim) noexcept : claim_(std::move(claim)) {}
  std::unique_ptr<core::Claim> claim_;
};

}  // namespace pact
