#include "pact/seal/publication.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "pact/core/file.hpp"
#include "pact/seal/registry.hpp"

namespace pact::seal {

namespace fs = std::filesystem;

namespace {

constexpr std::uint16_t kEmCuda = 190;
constexpr std::uint8_t kEiattrKparamInfo = 0x17;
constexpr std::uint8_t kEifmtSval = 0x04;

[[noreturn]] void malformed(std::string_view where, const std::string& why) {
  throw_error(ErrorCode::parse_error, "seal.cubin", fmt::format("{}: {}", where, why));
}

template <class T>
T read_le(std::span<const std::byte> bytes, std::uint64_t offset, std::string_view where, const char* what) {
  if (offset > bytes.size() || sizeof(T) > bytes.size() - offset)
    malformed(where, fmt::format("{} at byte {} is past the end", what, offset));
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;  // the host is little-endian like the CUBIN (checked in the header)
}

// The fields an index must hold for this declaration and profile, besides toolkit and exports.
Json expected_index_fields(const Json& declaration, const CompileProfile& profile) {
  const ArtifactProvider& p = require_provider(profile.provider);
  return {{"schema", std::string(kPublicationSchema)},
          {"provider", std::string(p.id)},
          {"binding_abi", std::string(p.binding_abi)},
          {"patcher", std::string(p.patcher)},
          {"registry_digest", registry_digest()},
          {"profile", compile_profile_json(profile)},
          {"profile_digest", compile_profile_digest(profile)},
          {"logical_arch", profile.logical_arch},
          {"compiler_arch", profile.compiler_arch},
          {"declaration", declaration},
          {"execution_identity", digest_json("pact.direct-artifact-execution.v1", declaration)},
          {"forced_options", nvcc_forced_options(profile)}};
}

[[noreturn]] void refuse(const std::string& dir, const std::string& why) {
  throw_error(ErrorCode::invalid_argument, "seal.reopen", fmt::format("{}: {}", dir, why));
}

}  // namespace

std::vector<CubinKernel> read_cubin_kernels(std::span<const std::byte> bytes, std::string_view where) {
  if (bytes.size() < 64) malformed(where, "shorter than an ELF64 header");
  const unsigned char* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (!(b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F')) malformed(where, "not an ELF file");
  if (b[4] != 2) malformed(where, "not ELF64");
  if (b[5] != 1) malformed(where, "not little-endian");
  if (read_le<std::uint16_t>(bytes, 0x12, where, "e_machine") != kEmCuda)
    malformed(where, "e_machine is not EM_CUDA (190)");
  const auto shoff = read_le<std::uint64_t>(bytes, 0x28, where, "e_shoff");
  const auto shentsize = read_le<std::uint16_t>(bytes, 0x3a, where, "e_shentsize");
  const auto shnum = read_le<std::uint16_t>(bytes, 0x3c, where, "e_shnum");
  const auto shstrndx = read_le<std::uint16_t>(bytes, 0x3e, where, "e_shstrndx");
  if (shentsize != 64) malformed(where, fmt::format("section header size {} is not 64", shentsize));
  // Every table the header points at lies inside the file (program headers included).
  const auto phoff = read_le<std::uint64_t>(bytes, 0x20, where, "e_phoff");
  const auto phentsize = read_le<std::uint16_t>(bytes, 0x36, where, "e_phentsize");
  const auto phnum = read_le<std::uint16_t>(bytes, 0x38, where, "e_phnum");
  if (phnum > 0 && (phentsize != 56 || phoff > bytes.size() || std::uint64_t{phnum} * 56 > bytes.size() - phoff)) {
    malformed(where, "the program header table lies outside the file");
  }
  if (shoff > bytes.size() || std::uint64_t{shnum} * 64 > bytes.size() - shoff)
    malformed(where, "the section header table lies outside the file");
  if (shstrndx >= shnum) malformed(where, "the section-name table index is out of range");
  struct Section {
    std::uint32_t name;
    std::uint64_t offset, size;
  };
  std::vector<Section> sections;
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + static_cast<std::uint64_t>(i) * 64;
    Section s{read_le<std::uint32_t>(bytes, h, where, "sh_name"),
              read_le<std::uint64_t>(bytes, h + 0x18, where, "sh_offset"),
              read_le<std::uint64_t>(bytes, h + 0x20, where, "sh_size")};
    if (s.offset > bytes.size() || s.size > bytes.size() - s.offset)
      malformed(where, fmt::format("section {} lies outside the file", i));
    sections.push_back(s);
  }
  const Section& strtab = sections[shstrndx];
  auto name_of = [&](const Section& s) {
    if (s.name >= strtab.size) malformed(where, "a section name is outside the name table");
    const char* start = reinterpret_cast<const char*>(bytes.data() + strtab.offset + s.name);
    const std::size_t max = static_cast<std::size_t>(strtab.size - s.name);
    const std::size_t len = strnlen(start, max);
    if (len == max) malformed(where, "an unterminated section name");
    return std::string(start, len);
  };
  std::vector<CubinKernel> kernels;
  const std::string prefix = ".nv.info.";
  for (const auto& s : sections) {
    const std::string name = name_of(s);
    if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) continue;
    CubinKernel k{name.substr(prefix.size()), {}};
    std::map<std::uint16_t, std::uint32_t> widths;  // ordinal -> size
    std::uint64_t at = s.offset;
    const std::uint64_t end = s.offset + s.size;
    while (at < end) {
      if (end - at < 4) malformed(where, fmt::format("{}: a truncated attribute record", name));
      const auto format = read_le<std::uint8_t>(bytes, at, where, "attribute format");
      const auto attribute = read_le<std::uint8_t>(bytes, at + 1, where, "attribute");
      const auto value = read_le<std::uint16_t>(bytes, at + 2, where, "attribute value");
      std::uint64_t length = 4;
      if (format == kEifmtSval) {
        length += value;
        if (length > end - at) malformed(where, fmt::format("{}: an attribute payload runs past the section", name));
        if (attribute == kEiattrKparamInfo) {
          if (value < 12) malformed(where, fmt::format("{}: a KPARAM_INFO record of {} bytes", name, value));
          const auto ordinal = read_le<std::uint16_t>(bytes, at + 8, where, "parameter ordinal");
          const auto flags = read_le<std::uint32_t>(bytes, at + 12, where, "parameter flags");
          const std::uint32_t size = (flags >> 18) & 0x3fff;
          if (!widths.emplace(ordinal, size).second)
            malformed(where, fmt::format("{}: parameter ordinal {} appears twice", name, ordinal));
        }
      } else if (format < 0x01 || format > 0x04) {
        malformed(where, fmt::format("{}: unknown attribute format {}", name, format));
      }
      at += length;
    }
    for (std::size_t i = 0; i < widths.size(); ++i) {  // size_t: a 65536-entry map must not wrap the counter
      auto it = widths.find(static_cast<std::uint16_t>(i));
      if (it == widths.end()) malformed(where, fmt::format("{}: parameter ordinal {} is missing", name, i));
      k.param_widths.push_back(it->second);
    }
    kernels.push_back(std::move(k));
  }
  return kernels;
}

std::vector<std::size_t> bind_kernels_by_name(std::span<const KernelContract> plan,
                                              std::span<const CubinKernel> physical, std::string_view where) {
  auto names = [](auto&& range) {
    std::vector<std::string> out;
    out.reserve(range.size());
    for (const auto& k : range) out.emplace_back(k);
    std::sort(out.begin(), out.end());
    return Json(out).dump();
  };
  auto physical_names = [&] {
    std::vector<std::string_view> v;
    v.reserve(physical.size());
    for (const auto& k : physical) v.push_back(k.symbol);
    return names(v);
  };
  std::map<std::string_view, std::size_t> by_name;
  for (std::size_t i = 0; i < physical.size(); ++i) {
    if (!by_name.emplace(physical[i].symbol, i).second) {
      throw_error(ErrorCode::invalid_argument, "seal.bind",
                  fmt::format("'{}' holds two kernels named '{}'", where, physical[i].symbol));
    }
  }
  std::vector<std::size_t> bound;
  bound.reserve(plan.size());
  for (const auto& k : plan) {
    const auto it = by_name.find(k.name);
    if (it == by_name.end()) {
      throw_error(ErrorCode::invalid_argument, "seal.bind",
                  fmt::format("the device plan's kernel '{}' is not in '{}', which holds {}; kernels bind by their "
                              "extern \"C\" name",
                              k.name, where, physical_names()));
    }
    const CubinKernel& found = physical[it->second];
    if (found.param_widths != k.param_widths) {
      throw_error(ErrorCode::invalid_argument, "seal.bind",
                  fmt::format("kernel '{}' of '{}' has parameter widths {}; the device plan declares {}", k.name, where,
                              Json(found.param_widths).dump(), Json(k.param_widths).dump()));
    }
    bound.push_back(it->second);
  }
  if (physical.size() != plan.size()) {
    std::vector<std::string_view> declared;
    declared.reserve(plan.size());
    for (const auto& k : plan) declared.push_back(k.name);
    throw_error(ErrorCode::invalid_argument, "seal.bind",
                fmt::format("'{}' holds {} kernels {}; the device plan declares {} {} (every kernel is declared)",
                            where, physical.size(), physical_names(), plan.size(), names(declared)));
  }
  return bound;
}

Json write_publication(const std::string& dir, const Manifest& m, const CompileProfile& profile,
                       const std::map<std::string, std::vector<std::byte>>& cubins, const Json& toolkit) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    throw_error(ErrorCode::invalid_argument, "seal.publish",
                fmt::format("{} is not empty: a publication is never repaired in place", dir));
  }
  const ArtifactProvider& p = require_provider(profile.provider);
  fs::create_directories(fs::path(dir) / p.publication_dir);
  Json index = expected_index_fields(execution_declaration(m), profile);
  index["toolkit"] = toolkit;
  Json exports = Json::array();
  std::set<std::string> names;
  for (const auto& op : m.ops) {
    for (const auto& e : op.exports) names.insert(e.name);
  }
  for (const auto& name : names) {
    auto it = cubins.find(name);
    if (it == cubins.end())
      throw_error(ErrorCode::invalid_argument, "seal.publish", fmt::format("no CUBIN for export '{}'", name));
    (void)read_cubin_kernels(it->second, name);  // only a CUDA ELF is published
    const std::string rel = std::string(p.publication_dir) + "/" + name + ".cubin";
    write_file_atomic((fs::path(dir) / rel).string(), std::span<const std::byte>(it->second), "seal.publish");
    exports.push_back(
        {{"export", name}, {"cubin", rel}, {"size", it->second.size()}, {"sha256", sha256_digest(it->second)}});
  }
  for (const auto& [name, bytes] : cubins) {
    if (!names.count(name))
      throw_error(ErrorCode::invalid_argument, "seal.publish", fmt::format("CUBIN '{}' belongs to no export", name));
  }
  index["exports"] = exports;
  write_file_atomic((fs::path(dir) / "index.json").string(), canonical_json(index) + "\n", "seal.publish");
  return index;
}

namespace {

/// Each export's kernel contracts, read from an index's declaration (typed refusal when malformed).
std::map<std::string, std::vector<KernelContract>> declared_kernels(const std::string& dir, const Json& declaration) {
  auto bad = [&](const std::string& why) { refuse(dir, fmt::format("the index's declaration is malformed: {}", why)); };
  if (!declaration.is_object() || !declaration.contains("ops") || !declaration["ops"].is_array()) bad("no ops");
  std::map<std::string, std::vector<KernelContract>> out;
  for (const auto& op : declaration["ops"]) {
    if (!op.is_object() || !op.contains("aot_exports") || !op["aot_exports"].is_array()) bad("an op without exports");
    for (const auto& e : op["aot_exports"]) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("device_plan") ||
          !e["device_plan"].is_object() || !e["device_plan"].contains("kernels") ||
          !e["device_plan"]["kernels"].is_array()) {
        bad("an export without a name or device plan");
      }
      std::vector<KernelContract> kernels;
      for (const auto& k : e["device_plan"]["kernels"]) {
        if (!k.is_object() || !k.contains("name") || !k["name"].is_string() || !k.contains("param_widths") ||
            !k["param_widths"].is_array()) {
          bad("a kernel without a name or parameter widths");
        }
        KernelContract c{k["name"].get<std::string>(), {}};
        for (const auto& w : k["param_widths"]) {
          if (!w.is_number_unsigned() || w.get<std::uint64_t>() > 0xffffffffu)
            bad("a parameter width is not an unsigned 32-bit integer");
          c.param_widths.push_back(w.get<std::uint32_t>());
        }
        kernels.push_back(std::move(c));
      }
      if (!out.emplace(e["name"].get<std::string>(), std::move(kernels)).second) bad("an export name appears twice");
    }
  }
  if (out.empty()) bad("it declares no export");
  return out;
}

}  // namespace

PublicationIndex parse_publication_index(std::string_view text, std::string_view where) {
  const std::string dir(where);
  PublicationIndex out;
  Json& index = out.index;
  try {
    index = parse_json(text, where);
  } catch (const Error& err) {
    refuse(dir, err.detail());
  }
  static const std::set<std::string> kKeys{"schema",          "provider",    "binding_abi",        "patcher",
                                           "registry_digest", "profile",     "profile_digest",     "logical_arch",
                                           "compiler_arch",   "declaration", "execution_identity", "forced_options",
                                           "toolkit",         "exports"};
  if (!index.is_object()) refuse(dir, "index.json is not a publication index");
  for (const auto& k : kKeys) {
    if (!index.contains(k)) refuse(dir, fmt::format("index field '{}' is missing", k));
  }
  for (const auto& [k, v] : index.items()) {
    if (!kKeys.count(k)) refuse(dir, fmt::format("unknown index field '{}'", k));
  }
  if (!index["exports"].is_array()) refuse(dir, "index field 'exports' is not an array");
  if (!index["provider"].is_string()) refuse(dir, "index field 'provider' is not a string");
  (void)require_provider(index["provider"].get<std::string>());
  try {
    out.profile = parse_compile_profile(index["profile"].dump(), "index.json profile");
  } catch (const Error& err) {
    refuse(dir, err.detail());
  }
  // Every bound field must be what the index's own declaration, profile and this registry give.
  const Json expected = expected_index_fields(index["declaration"], out.profile);
  for (const auto& [k, v] : expected.items()) {
    if (!(index[k] == v))
      refuse(dir, fmt::format("index field '{}' does not match its declaration, profile or this registry", k));
  }
  out.kernels = declared_kernels(dir, index["declaration"]);
  std::set<std::string> covered;
  for (const auto& entry : index["exports"]) {
    if (!entry.is_object() || entry.size() != 4 || !entry.contains("export") || !entry.contains("cubin") ||
        !entry.contains("size") || !entry.contains("sha256") || !entry["export"].is_string() ||
        !entry["cubin"].is_string() || !entry["size"].is_number_unsigned() || !entry["sha256"].is_string()) {
      refuse(dir, "an index entry is malformed");
    }
    const std::string name = entry["export"];
    if (!out.kernels.count(name))
      refuse(dir, fmt::format("the index publishes '{}', which the declaration does not export", name));
    if (!covered.insert(name).second) refuse(dir, fmt::format("'{}' is published twice", name));
    if (entry["cubin"] !=
        std::string(require_provider(index["provider"].get<std::string>()).publication_dir) + "/" + name + ".cubin") {
      refuse(dir, fmt::format("'{}' is not where the provider publishes", entry["cubin"].get<std::string>()));
    }
  }
  for (const auto& [name, k] : out.kernels) {
    if (!covered.count(name)) refuse(dir, fmt::format("export '{}' has no published CUBIN", name));
  }
  return out;
}

Json reopen_publication(const std::string& dir) {
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec || !fs::is_directory(root, ec)) refuse(dir, "no such publication");
  const fs::path index_path = root / "index.json";
  if (fs::is_symlink(index_path, ec) || !fs::is_regular_file(index_path, ec))
    refuse(dir, "index.json is missing or not a regular file");
  const PublicationIndex parsed = parse_publication_index(read_file(index_path.string(), "seal.reopen"), dir);
  const Json& index = parsed.index;
  const ArtifactProvider& p = require_provider(index["provider"].get<std::string>());
  const auto& contracts = parsed.kernels;

  // Inventory: regular files only, no symlinks, nothing outside index.json and the CUBIN directory.
  std::set<std::string> present;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::none, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const auto rel = fs::relative(it->path(), root).generic_string();
    if (it->is_symlink()) refuse(dir, fmt::format("'{}' is a symlink", rel));
    if (it->is_directory()) {
      if (rel != p.publication_dir) refuse(dir, fmt::format("unexpected directory '{}'", rel));
      continue;
    }
    if (!it->is_regular_file()) refuse(dir, fmt::format("'{}' is not a regular file", rel));
    present.insert(rel);
  }
  if (ec) refuse(dir, "cannot list the publication");
  std::set<std::string> listed{"index.json"};
  for (const auto& entry : index["exports"]) {
    const std::string name = entry["export"], rel = entry["cubin"];
    auto e = contracts.find(name);
    listed.insert(rel);
    if (!present.count(rel)) refuse(dir, fmt::format("'{}' is missing", rel));
    const std::string file = read_file((root / rel).string(), "seal.reopen");
    const auto bytes = std::as_bytes(std::span(file.data(), file.size()));
    if (bytes.size() != entry["size"].get<std::uint64_t>())
      refuse(dir, fmt::format("'{}' is {} bytes, the index says {}", rel, bytes.size(), entry["size"].dump()));
    if (sha256_digest(bytes) != entry["sha256"].get<std::string>())
      refuse(dir, fmt::format("'{}' does not match its SHA-256", rel));
    std::vector<CubinKernel> kernels;
    try {
      kernels = read_cubin_kernels(bytes, rel);
    } catch (const Error& err) {
      refuse(dir, err.detail());
    }
    // Kernels bind by their extern "C" name, never by position: the CUBIN's order is the compiler's.
    try {
      (void)bind_kernels_by_name(e->second, kernels, rel);
    } catch (const Error& err) {
      refuse(dir, err.detail());
    }
  }
  for (const auto& f : present) {
    if (!listed.count(f)) refuse(dir, fmt::format("'{}' is not part of the publication", f));
  }
  return index;
}

Json reopen_publication(const std::string& dir, const Manifest& m, const CompileProfile& profile) {
  const Json index = reopen_publication(dir);
  // Exact declaration equality with this manifest, and the same profile and registry.
  const Json expected = expected_index_fields(execution_declaration(m), profile);
  for (const auto& [k, v] : expected.items()) {
    if (!(index[k] == v))
      refuse(dir, fmt::format("index field '{}' does not match this manifest, profile or registry", k));
  }
  return index;
}

}  // namespace pact::seal
