// pact seal build | verify | scan: sealed kernel artifacts (pact/seal; docs/guides/sealed-artifacts.md).

#include <cstdio>
#include <filesystem>

#include "pact/core/error.hpp"
#include "pact/core/file.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/prebuild.hpp"
#include "pact/seal/publication.hpp"
#include "pact/seal/registry.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

namespace fs = std::filesystem;

namespace {

seal::CompileProfile load_profile(const std::string& path) {
  return seal::parse_compile_profile(read_file(path, "pact seal"), path);
}

void print_index(const Json& index, const std::string& what, bool json) {
  if (json) {
    std::printf("%s\n", index.dump().c_str());
    return;
  }
  std::printf("%s: provider %s, %s (%s), execution identity %s\n", what.c_str(),
              index["provider"].get<std::string>().c_str(), index["compiler_arch"].get<std::string>().c_str(),
              index["logical_arch"].get<std::string>().c_str(), index["execution_identity"].get<std::string>().c_str());
  for (const auto& e : index["exports"]) {
    std::printf("  %-24s %s  %llu bytes  %s\n", e["export"].get<std::string>().c_str(),
                e["cubin"].get<std::string>().c_str(), static_cast<unsigned long long>(e["size"].get<std::uint64_t>()),
                e["sha256"].get<std::string>().c_str());
  }
}

}  // namespace

int run_seal_build(const SealArgs& args) {
  if (args.out.empty()) throw Error(ErrorCode::invalid_argument, "pact seal build", "-o OUT is required");
  if (args.profile.empty())
    throw Error(ErrorCode::invalid_argument, "pact seal build",
                "--profile FILE (the measured compile profile) is required");
  const Json index = seal::build_publication(args.bundle, load_profile(args.profile), args.out);
  print_index(index, "sealed " + args.out, args.json);
  return 0;
}

int run_seal_verify(const SealArgs& args) {
  Json index;
  if (!args.bundle.empty()) {
    const std::string path = (fs::path(args.bundle) / "manifest.toml").string();
    const seal::Manifest m = seal::parse_manifest(read_file(path, "pact seal verify"), path);
    const seal::CompileProfile profile =
        args.profile.empty()
            ? seal::parse_publication_index(read_file((fs::path(args.dir) / "index.json").string(), "pact seal verify"),
                                            args.dir)
                  .profile
            : load_profile(args.profile);
    index = seal::reopen_publication(args.dir, m, profile);
  } else {
    index = seal::reopen_publication(args.dir);
    if (!args.profile.empty()) {
      seal::require_same_profile(seal::parse_compile_profile(index["profile"].dump(), "index.json profile"),
                                 load_profile(args.profile));
    }
  }
  print_index(index, "verified " + args.dir, args.json);
  return 0;
}

int run_seal_scan(const SealArgs& args) {
  std::vector<Error> problems;
  auto check = [&](auto&& part) {
    try {
      part();
    } catch (const Error& e) {
      problems.push_back(e);
    }
  };
  Json report{{"bundle", args.bundle}};
  const std::string path = (fs::path(args.bundle) / "manifest.toml").string();
  std::optional<seal::Manifest> manifest;
  check([&] {
    auto scan = seal::scan_manifest(read_file(path, "pact seal scan"), path);
    problems.insert(problems.end(), scan.problems.begin(), scan.problems.end());
    manifest = std::move(scan.manifest);
    if (!manifest) {
      check([&] { (void)seal::source_closure(scan.partial, args.bundle); });  // the sources of what did parse
    }
  });
  // Symlinks anywhere in the bundle: the prebuild copies sources by content, never through a link.
  check([&] {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(args.bundle, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_symlink()) {
        problems.emplace_back(ErrorCode::invalid_argument, "seal.scan",
                              fs::relative(it->path(), args.bundle).generic_string() + " is a symlink");
      }
    }
  });
  if (manifest) {
    report["execution_identity"] = seal::execution_identity(*manifest);
    check([&] {
      const auto closure = seal::source_closure(*manifest, args.bundle);
      Json sources = Json::array();
      for (const auto& [rel, bytes] : closure) sources.push_back(rel);
      report["sources"] = sources;
      report["provenance_fingerprint"] = seal::provenance_fingerprint(*manifest, args.bundle);
    });
  }
  if (!args.profile.empty()) {
    std::optional<seal::CompileProfile> profile;
    check([&] { profile = load_profile(args.profile); });
    if (profile && manifest) {
      for (const auto& missing : seal::unmeasured_profile_inputs(*manifest, *profile)) {
        problems.emplace_back(ErrorCode::invalid_argument, "seal.scan", missing + " (" + args.profile + ")");
      }
    }
  }
  Json list = Json::array();
  for (const auto& p : problems)
    list.push_back({{"code", std::string(error_code_name(p.code()))}, {"message", p.what()}});
  report["problems"] = list;
  if (args.json) {
    std::printf("%s\n", report.dump().c_str());
  } else {
    std::printf("scan %s: %zu problem%s\n", args.bundle.c_str(), problems.size(), problems.size() == 1 ? "" : "s");
    for (const auto& p : problems) std::printf("  %s\n", p.what());
    if (report.contains("execution_identity"))
      std::printf("execution identity %s\n", report["execution_identity"].get<std::string>().c_str());
    if (report.contains("provenance_fingerprint")) {
      std::printf("provenance fingerprint %s\n", report["provenance_fingerprint"].get<std::string>().c_str());
    }
  }
  return problems.empty() ? 0 : 1;
}

namespace {

const bool registered = register_command("seal", [](CLI::App& app) {
  auto a = std::make_shared<SealArgs>();
  auto* seal_cmd = app.add_subcommand(
      "seal", "sealed GPU kernel artifacts: build (hermetic prebuild), verify (GPU-free reopen), scan");
  seal_cmd->require_subcommand(1);
  auto* s_build = seal_cmd->add_subcommand(
      "build", "compile a bundle's CUDA sources in the sandbox and publish the CUBINs with their index");
  s_build->add_option("bundle", a->bundle, "bundle directory (manifest.toml and sources)")->required();
  s_build->add_option("-o,--out", a->out, "publication directory to create (absent or empty)")->required();
  s_build->add_option("--profile", a->profile, "the measured compile profile (pact.nvcc-compile-profile.v1 JSON)")
      ->required();
  auto* s_verify = seal_cmd->add_subcommand(
      "verify", "reopen a publication without a GPU: inventory, sizes, SHA-256, ELF, parameter widths");
  s_verify->add_option("dir", a->dir, "publication directory")->required();
  s_verify->add_option("--bundle", a->bundle, "also require exact declaration equality with this bundle's manifest");
  s_verify->add_option("--profile", a->profile, "also require this compile profile (the launch's)");
  auto* s_scan =
      seal_cmd->add_subcommand("scan", "the author's pre-flight: every check that needs no GPU, all problems at once");
  s_scan->add_option("bundle", a->bundle, "bundle directory")->required();
  s_scan->add_option("--profile", a->profile, "also check the bundle against this compile profile");
  for (auto* sub : {s_build, s_verify, s_scan}) sub->add_flag("--json", a->json, "print JSON");

  return std::vector<Runner>{{s_build, [a] { return run_seal_build(*a); }},
                             {s_verify, [a] { return run_seal_verify(*a); }},
                             {s_scan, [a] { return run_seal_scan(*a); }}};
});

}  // namespace

}  // namespace pact::cli
