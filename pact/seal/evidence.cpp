#include "pact/seal/evidence.hpp"

#include <fmt/format.h>

namespace pact::seal {

void EvidenceLog::loaded(const std::string& artifact) { ++loads_[artifact]; }

void EvidenceLog::invoked(const std::string& artifact) {
  if (!loads_.count(artifact)) {
    throw_error(ErrorCode::invalid_argument, "seal.evidence",
                fmt::format("an invocation of '{}' without a load is invalid", artifact));
  }
  ++invocations_[artifact];
}

void EvidenceLog::completed(const std::string& artifact) {
  if (!invocations_.count(artifact)) {
    throw_error(ErrorCode::invalid_argument, "seal.evidence",
                fmt::format("'{}' completed without an invocation", artifact));
  }
  ++completions_[artifact];
}

void EvidenceLog::fallback(const std::string& slot) { fallbacks_.push_back(slot); }

EvidenceLog::Verdict EvidenceLog::gate(const std::vector<std::string>& required) const {
  Verdict v;
  if (required.empty()) v.reasons.push_back("no artifact is required: an empty gate proves nothing");
  for (const auto& a : required) {
    if (!loads_.count(a))
      v.reasons.push_back(fmt::format("'{}' was never loaded", a));
    else if (!invocations_.count(a))
      v.reasons.push_back(fmt::format("'{}' was loaded but never ran", a));
    else if (!completions_.count(a))
      v.reasons.push_back(fmt::format("'{}' never completed", a));
  }
  for (const auto& s : fallbacks_) v.reasons.push_back(fmt::format("slot '{}' ran on a fallback", s));
  v.passed = v.reasons.empty();
  return v;
}

Json EvidenceLog::to_json() const {
  auto counts = [](const std::map<std::string, std::uint64_t>& m) {
    Json j = Json::object();
    for (const auto& [k, n] : m) j[k] = n;
    return j;
  };
  return {{"schema", "pact.seal-evidence.v1"},
          {"aot_loaded", counts(loads_)},
          {"aot_invoked", counts(invocations_)},
          {"completed", counts(completions_)},
          {"fallbacks", fallbacks_}};
}

void StorageBudget::reserve(const std::string& key, std::uint64_t bytes) {
  if (keys_.count(key))
    throw_error(ErrorCode::invalid_argument, "seal.storage", fmt::format("allocation key '{}' is already live", key));
  if (keys_.size() >= kMaxAllocationKeys) {
    throw_error(ErrorCode::allocation_failed, "seal.storage",
                fmt::format("'{}': the budget allows {} live allocation keys", key, kMaxAllocationKeys));
  }
  if (bytes > kLiveStorageBudget || live_ > kLiveStorageBudget - bytes) {
    throw_error(
        ErrorCode::allocation_failed, "seal.storage",
        fmt::format("'{}': {} bytes would bring live artifact storage past 16 GiB ({} live)", key, bytes, live_));
  }
  keys_.emplace(key, bytes);
  live_ += bytes;
}

void StorageBudget::release(const std::string& key) {
  auto it = keys_.find(key);
  if (it == keys_.end())
    throw_error(ErrorCode::invalid_argument, "seal.storage", fmt::format("allocation key '{}' is not live", key));
  live_ -= it->second;
  keys_.erase(it);
}

}  // namespace pact::seal
