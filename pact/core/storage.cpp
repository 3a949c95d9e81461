#include "pact/core/storage.hpp"

#include <fmt/format.h>

#include <atomic>

namespace pact {

namespace {
std::atomic<std::uint64_t> g_next_allocation_id{0};
}

RootResource::RootResource(std::shared_ptr<Provider> provider, ProviderAllocation allocation,
                           AllocationDiagnostics diagnostics)
    : provider_(std::move(provider)), allocation_(allocation), diagnostics_(diagnostics) {}

RootResource::~RootResource() { provider_->deallocate(allocation_); }

SpanBounds core::Claim::bounds() const noexcept {
  return SpanBounds{root->diagnostics().id, begin, end - begin, root->provider().alignment()};
}

core::Claim::~Claim() {
  if (!borrows.live()) return;
  const std::string owner =
      fmt::format("the owner of allocation {} bytes [{}, {})", root ? root->diagnostics().id : 0, begin, end);
  core::check_owner_destroyed(borrows, owner.c_str());
}

CheckedLayout core::Claim::check(const char* operation, const LayoutRequest& request) const {
  root->provider().note_validation();
  return check_layout(operation, request, bounds());
}

Storage Storage::allocate(std::shared_ptr<Provider> provider, std::uint64_t bytes, AllocationReason reason) {
  if (reason == AllocationReason::OperationOutput) reason = operation_output_reason();  // e.g. checkpoint recompute
  ProviderAllocation allocation = provider->allocate(bytes);
  AllocationDiagnostics diagnostics{g_next_allocation_id.fetch_add(1, std::memory_order_relaxed) + 1, reason};
  std::string_view provider_name = provider->name();
  auto root = std::make_shared<RootResource>(std::move(provider), allocation, diagnostics);
  record_allocation(AllocationEvent{reason, diagnostics.id, bytes, provider_name});
  auto claim = std::make_unique<core::Claim>();
  claim->root = std::move(root);
  claim->begin = 0;
  claim->end = bytes;
  return Storage(std::move(claim));
}

Storage Storage::import_host(std::byte* data, std::uint64_t bytes, std::shared_ptr<void> keeper) {
  return allocate(make_external_host_provider(data, bytes, std::move(keeper)), bytes, AllocationReason::ExternalImport);
}

Expected<std::pair<Storage, Storage>, Returned<Storage>> Storage::split(Storage&& owner, std::uint64_t at) {
  if (owner.empty() || at > owner.byte_size()) {
    auto span = owner.empty() ? SpanIdentity{} : owner.span_identity();
    std::uint64_t size = owner.empty() ? 0 : owner.byte_size();
    return Unexpected(
        Returned<Storage>{std::move(owner), Error(ErrorCode::invalid_argument, "storage.split",
                                                  fmt::format("split at byte {} of a {}-byte claim", at, size), span)});
  }
  if (owner.claim_->borrows.live()) {
    auto span = owner.span_identity();
    return Unexpected(Returned<Storage>{
        std::move(owner), Error(ErrorCode::borrow_conflict, "storage.split", "the claim has live views", span)});
  }
  auto tail = std::make_unique<core::Claim>();
  tail->root = owner.claim_->root;
  tail->begin = owner.claim_->begin + at;
  tail->end = owner.claim_->end;
  owner.claim_->end = owner.claim_->begin + at;
  return std::pair<Storage, Storage>{Storage(std::move(owner.claim_)), Storage(std::move(tail))};
}

}  // namespace pact
