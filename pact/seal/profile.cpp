#include "pact/seal/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "pact/seal/registry.hpp"

namespace pact::seal {

const std::vector<std::string_view>& compile_profile_digest_names() {
  static const std::vector<std::string_view> names{"constants_measurement", "device_policy", "image",
                                                   "logical_hardware",      "platform",      "topology",
                                                   "worker_distribution"};
  return names;
}

namespace {

[[noreturn]] void bad(std::string_view where, const std::string& field, const std::string& why) {
  throw_error(ErrorCode::parse_error, "seal.compile_profile", fmt::format("{}: {}: {}", where, field, why));
}

// The architecture number of "sm90" (logical) or "sm_90a" / "sm_103f" (compiler); empty when malformed.
std::string arch_number(std::string_view s, bool compiler) {
  const std::string_view prefix = compiler ? "sm_" : "sm";
  if (s.substr(0, prefix.size()) != prefix) return {};
  std::string_view rest = s.substr(prefix.size());
  if (compiler && !rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) rest.remove_suffix(1);
  if (rest.size() < 2 || rest.size() > 3 ||
      !std::all_of(rest.begin(), rest.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return {};
  }
  return std::string(rest);
}

bool is_digest(const std::string& s) {
  return s.size() == 71 && s.rfind("sha256:", 0) == 0 && std::all_of(s.begin() + 7, s.end(), [](char c) {
           return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

CompileProfile parse_compile_profile(std::string_view text, std::string_view where) {
  const Json j = parse_json(text, where);
  if (!j.is_object()) bad(where, "(document)", "a compile profile is a JSON object");
  static const std::vector<std::string> keys{"schema", "provider", "logical_arch", "compiler_arch", "visible_gpus",
                                             "tp",     "ep",       "dp",           "constants",     "digests"};
  for (const auto& [k, v] : j.items()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) bad(where, k, "unknown field");
  }
  for (const auto& k : keys) {
    if (!j.contains(k)) bad(where, k, "missing");
  }
  auto str = [&](const char* k) {
    if (!j[k].is_string()) bad(where, k, "expected a string");
    return j[k].get<std::string>();
  };
  auto degree = [&](const char* k) {
    const auto i = json_int64(j[k]);
    if (!i) bad(where, k, "expected an int64 integer");
    return *i;
  };
  if (str("schema") != kCompileProfileSchema) bad(where, "schema", fmt::format("expected {}", kCompileProfileSchema));
  CompileProfile p;
  p.provider = str("provider");
  const ArtifactProvider* provider = nullptr;
  try {
    provider = &require_provider(p.provider);
  } catch (const Error& e) {
    bad(where, "provider", e.detail());
  }
  p.logical_arch = str("logical_arch");
  p.compiler_arch = str("compiler_arch");
  const std::string logical = arch_number(p.logical_arch, false), compiler = arch_number(p.compiler_arch, true);
  if (logical.empty()) bad(where, "logical_arch", fmt::format("'{}' is not smNN", p.logical_arch));
  if (compiler.empty()) bad(where, "compiler_arch", fmt::format("'{}' is not sm_NN[a|f]", p.compiler_arch));
  if (logical != compiler) {
    bad(where, "compiler_arch",
        fmt::format("{} is not of the family of the logical architecture {}", p.compiler_arch, p.logical_arch));
  }
  p.visible_gpus = degree("visible_gpus");
  if (p.visible_gpus < 1 || p.visible_gpus > 1024)
    bad(where, "visible_gpus", fmt::format("{} is outside [1, 1024]", p.visible_gpus));
  p.tp = degree("tp");
  p.ep = degree("ep");
  p.dp = degree("dp");
  for (const auto& [name, v] : {std::pair{"tp", p.tp}, std::pair{"ep", p.ep}, std::pair{"dp", p.dp}}) {
    if (v < 1 || v > p.visible_gpus)
      bad(where, name, fmt::format("{} is outside [1, visible_gpus = {}]", v, p.visible_gpus));
  }
  if (p.tp * p.dp > p.visible_gpus)
    bad(where, "dp", fmt::format("tp {} x dp {} exceeds the {} visible GPUs", p.tp, p.dp, p.visible_gpus));
  if (!j["constants"].is_object()) bad(where, "constants", "expected an object");
  for (const auto& [k, v] : j["constants"].items()) {
    if (std::find(provider->profile_inputs.begin(), provider->profile_inputs.end(), k) ==
        provider->profile_inputs.end()) {
      bad(where, "constants." + k, "not a profile input of the provider");
    }
    const auto i = json_int64(v);
    if (!i || *i < 0 || *i > kMaxProviderConstant) {
      bad(where, "constants." + k, fmt::format("expected an integer in [0, {}]", kMaxProviderConstant));
    }
    p.constants.emplace(k, *i);
  }
  if (!j["digests"].is_object()) bad(where, "digests", "expected an object");
  for (const auto& [k, v] : j["digests"].items()) {
    const auto& names = compile_profile_digest_names();
    if (std::find(names.begin(), names.end(), k) == names.end()) bad(where, "digests." + k, "unknown digest");
    if (!v.is_string() || !is_digest(v.get<std::string>()))
      bad(where, "digests." + k, "expected sha256:<64 lowercase hex>");
    p.digests.emplace(k, v.get<std::string>());
  }
  for (auto name : compile_profile_digest_names()) {
    if (!p.digests.count(std::string(name))) bad(where, "digests." + std::string(name), "missing");
  }
  return p;
}

Json compile_profile_json(const CompileProfile& p) {
  Json constants = Json::object(), digests = Json::object();
  for (const auto& [k, v] : p.constants) constants[k] = v;
  for (const auto& [k, v] : p.digests) digests[k] = v;
  return {{"schema", std::string(kCompileProfileSchema)},
          {"provider", p.provider},
          {"logical_arch", p.logical_arch},
          {"compiler_arch", p.compiler_arch},
          {"visible_gpus", p.visible_gpus},
          {"tp", p.tp},
          {"ep", p.ep},
          {"dp", p.dp},
          {"constants", constants},
          {"digests", digests}};
}

std::string compile_profile_digest(const CompileProfile& p) {
  return digest_json(kCompileProfileSchema, compile_profile_json(p));
}

void require_same_profile(const CompileProfile& built_under, const CompileProfile& launch) {
  const Json a = compile_profile_json(built_under), b = compile_profile_json(launch);
  if (a == b) return;
  std::string field;
  for (const auto& [k, v] : a.items()) {
    if (!(v == b[k])) {
      field = k;
      break;
    }
  }
  throw_error(
      ErrorCode::invalid_argument, "seal.compile_profile",
      fmt::format("the artifact was built under profile {} but the launch runs under {} (first difference: {}); "
                  "it is not authority for this launch",
                  compile_profile_digest(built_under), compile_profile_digest(launch), field));
}

std::vector<std::string> nvcc_forced_options(const CompileProfile& p) {
  return {"-cubin", "-arch=" + p.compiler_arch, "-rdc=false"};
}

}  // namespace pact::seal
