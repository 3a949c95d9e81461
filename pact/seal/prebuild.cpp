#include "pact/seal/prebuild.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "pact/core/file.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/publication.hpp"
#include "pact/seal/registry.hpp"

namespace pact::seal {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(ErrorCode code, const std::string& why) { throw_error(code, "seal.build", why); }

std::optional<std::string> on_path(std::string_view name, std::string_view fallback) {
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest(path);
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      const fs::path candidate = fs::path(std::string(rest.substr(0, colon))) / std::string(name);
      if (candidate.is_absolute() && ::access(candidate.c_str(), X_OK) == 0) return fs::canonical(candidate).string();
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  if (::access(std::string(fallback).c_str(), X_OK) == 0) return fs::canonical(fallback).string();
  return std::nullopt;
}

std::string file_digest(const std::string& path) {
  const std::string bytes = read_file(path, "seal.build");
  return sha256_digest(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

/// A scratch directory removed on every exit path.
struct Scratch {
  fs::path root;
  Scratch() {
    char tmpl[] = "/tmp/pact-seal-build-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) refuse(ErrorCode::io_error, "cannot create a scratch directory");
    root = tmpl;
    fs::permissions(root, fs::perms(0755));
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

/// Copies the closure read-only (files 0444, directories 0555) into `dir`.
void stage_sources(const std::map<std::string, std::string>& closure, const fs::path& dir) {
  fs::create_directories(dir);
  for (const auto& [rel, bytes] : closure) {
    const fs::path to = dir / rel;
    fs::create_directories(to.parent_path());
    write_file_atomic(to.string(), bytes, "seal.build");
    fs::permissions(to, fs::perms(0444));
  }
  std::vector<fs::path> dirs{dir};
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory()) dirs.push_back(it->path());
  }
  for (const auto& d : dirs) fs::permissions(d, fs::perms(0555));
}

std::string tail(const std::string& text, std::size_t n) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

/// Where a tool's installation lies: the directory above its bin/, or its own directory.
fs::path install_root(const std::string& tool) {
  const fs::path dir = fs::path(tool).parent_path();
  return dir.filename() == "bin" ? dir.parent_path() : dir;
}

}  // namespace

std::vector<std::string> make_prerequisites(const std::string& rule, const std::string& where) {
  std::vector<std::string> tokens;
  std::string token;
  for (std::size_t i = 0; i < rule.size(); ++i) {
    const char c = rule[i];
    if (c == '\\' && i + 1 < rule.size() && (rule[i + 1] == '\n' || rule[i + 1] == '\r')) {
      ++i;
      if (rule[i] == '\r' && i + 1 < rule.size() && rule[i + 1] == '\n') ++i;
    } else if (c == '\\' && i + 1 < rule.size() && rule[i + 1] == ' ') {
      token += ' ';
      ++i;
      continue;
    } else if (c == '$' && i + 1 < rule.size() && rule[i + 1] == '$') {
      token += '$';
      ++i;
      continue;
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      token += c;
      continue;
    }
    if (!token.empty()) tokens.push_back(std::move(token));
    token.clear();
  }
  if (!token.empty()) tokens.push_back(std::move(token));
  const auto colon = std::find_if(tokens.begin(), tokens.end(), [](const std::string& t) { return t.back() == ':'; });
  if (colon == tokens.end()) {
    throw_error(ErrorCode::invalid_argument, "seal.build",
                fmt::format("{}: the preprocessor's dependency output is not a make rule", where));
  }
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(tokens.end() - colon));
  for (auto it = colon + 1; it != tokens.end(); ++it) out.push_back(*it);
  return out;
}

std::optional<Toolkit> find_toolkit() {
  auto nvcc = on_path("nvcc", "/usr/local/cuda/bin/nvcc");
  auto host = on_path("g++", "/usr/bin/g++");
  if (!nvcc || !host) return std::nullopt;
  return Toolkit{*nvcc, *host};
}

std::vector<std::string> unmeasured_profile_inputs(const Manifest& m, const CompileProfile& profile) {
  std::vector<std::string> missing;
  for (const auto& op : m.ops) {
    for (const auto& e : op.exports) {
      for (const auto& input : e.profile_inputs) {
        if (!profile.constants.count(input)) {
          missing.push_back(fmt::format(
              "export '{}' declares profile input '{}', which the compile profile does not measure", e.name, input));
        }
      }
    }
  }
  return missing;
}

std::string profile_input_macro(std::string_view input) {
  std::string out = "PACT_PROFILE_";
  for (char c : input)
    out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                                                       : '_';
  return out;
}

Json build_publication(const std::string& bundle_dir, const CompileProfile& profile, const std::string& out_dir,
                       const BuildOptions& options) {
  // Everything that needs no compiler is checked before anything runs.
  const std::string manifest_path = (fs::path(bundle_dir) / "manifest.toml").string();
  const Manifest m = parse_manifest(read_file(manifest_path, "seal.build"), manifest_path);
  const ArtifactProvider& provider = require_provider(profile.provider);
  std::error_code ec;
  if (fs::exists(out_dir, ec) && (!fs::is_directory(out_dir, ec) || !fs::is_empty(out_dir, ec))) {
    refuse(ErrorCode::invalid_argument,
           fmt::format("{} is not an empty directory: a publication is never repaired in place", out_dir));
  }
  if (const auto missing = unmeasured_profile_inputs(m, profile); !missing.empty())
    refuse(ErrorCode::invalid_argument, missing.front());
  struct Job {
    const AotExport* e;
    std::vector<std::string> macros;
  };
  std::vector<Job> jobs;
  for (const auto& op : m.ops) {
    for (const auto& e : op.exports) {
      if (e.provider != provider.id) {
        refuse(ErrorCode::invalid_argument, fmt::format("export '{}' names provider '{}'; the profile is for '{}'",
                                                        e.name, e.provider, provider.id));
      }
      Job job{&e, {}};
      for (const auto& input : e.profile_inputs) {
        job.macros.push_back(fmt::format("-D{}={}", profile_input_macro(input), profile.constants.at(input)));
      }
      jobs.push_back(std::move(job));
    }
  }
  const auto closure = source_closure(m, bundle_dir);
  const std::optional<Toolkit> toolkit = options.toolkit ? options.toolkit : find_toolkit();
  if (!toolkit)
    refuse(ErrorCode::unsupported,
           "no CUDA toolkit: nvcc is neither on PATH nor under /usr/local/cuda/bin (or g++ is missing)");

  Scratch scratch;
  const fs::path inputs = scratch.root / "in", output = scratch.root / "out", deps = scratch.root / "deps";
  stage_sources(closure, inputs);
  fs::create_directories(output);
  fs::create_directories(deps);

  // The child sees the toolkit's and the host compiler's installations, read-only, and nothing else of
  // the host beyond the system directories (sandbox.hpp).
  const fs::path nvcc_root = install_root(toolkit->nvcc), host_root = install_root(toolkit->host_compiler);
  auto run = [&](std::vector<std::string> argv, const fs::path& out_dir = {}) {
    SandboxSpec spec;
    spec.argv = std::move(argv);
    spec.inputs_dir = inputs.string();
    spec.output_dir = out_dir.empty() ? output.string() : out_dir.string();
    spec.read_only_dirs = {nvcc_root.string(), host_root.string()};
    spec.limits = options.limits;
    return run_sandboxed(spec);
  };
  // Note [The preprocessor's view]: source_closure read every include directive of the sources, but only
  // the preprocessor knows what it opens (a computed include, a search-path lookup). So before anything
  // is compiled, the preprocessor runs in the sandbox with the compile's options and writes the files it
  // opened (-M -MF); each must be a staged member of the source closure or a header of the toolkit's or
  // the host compiler's installation.
  const std::vector<fs::path> header_roots{nvcc_root, host_root / "include", host_root / "lib" / "gcc",
                                           host_root / "local" / "include"};
  auto within = [](const fs::path& path, const fs::path& root) {
    const auto rel = path.lexically_relative(root);
    return !rel.empty() && *rel.begin() != "..";
  };
  auto check_preprocessor_view = [&](const Job& job, const std::string& source) {
    std::vector<std::string> argv{toolkit->nvcc};
    for (const auto& o : nvcc_forced_options(profile)) {
      if (o != "-cubin") argv.push_back(o);  // -M is the phase; -cubin would be a second one
    }
    argv.insert(argv.end(), {"-ccbin", toolkit->host_compiler, "-I", std::string(kSandboxInputs)});
    argv.insert(argv.end(), job.macros.begin(), job.macros.end());
    const std::string rule = job.e->name + ".d";
    argv.insert(argv.end(), {"-M", "-MF", std::string(kSandboxOutput) + "/" + rule, source});
    const SandboxResult r = run(argv, deps);
    if (!r.ok()) {
      refuse(ErrorCode::invalid_argument, fmt::format("export '{}': the preprocessor failed in the sandbox ({}): {}",
                                                      job.e->name, r.describe(), tail(r.output, 4000)));
    }
    const fs::path rule_file = deps / rule;
    if (!fs::is_regular_file(rule_file, ec) || fs::is_symlink(rule_file, ec)) {
      refuse(ErrorCode::invalid_argument,
             fmt::format("export '{}': the preprocessor wrote no dependency list", job.e->name));
    }
    const std::string in_prefix = std::string(kSandboxInputs) + "/";
    for (const auto& dep : make_prerequisites(read_file(rule_file.string(), "seal.build"), rule)) {
      fs::path path(dep);
      if (path.is_relative()) path = fs::path(kSandboxOutput) / path;
      const std::string opened = path.lexically_normal().generic_string();
      if (opened.rfind(in_prefix, 0) == 0 && closure.count(opened.substr(in_prefix.size()))) continue;
      if (std::any_of(header_roots.begin(), header_roots.end(),
                      [&](const fs::path& root) { return within(path.lexically_normal(), root); })) {
        continue;
      }
      refuse(ErrorCode::invalid_argument,
             fmt::format("export '{}': the preprocessor opened {}, which is neither in the bundle's source closure "
                         "nor a header of the toolkit ({}) or the host compiler ({}); nothing was compiled",
                         job.e->name, printable(opened), nvcc_root.string(), host_root.string()));
    }
  };
  const SandboxResult version = run({toolkit->nvcc, "--version"});
  if (!version.ok())
    refuse(ErrorCode::invalid_argument, fmt::format("nvcc --version failed in the sandbox ({}): {}", version.describe(),
                                                    tail(version.output, 2000)));
  std::string release;
  for (std::size_t at = 0; at < version.output.size();) {
    const auto end = std::min(version.output.find('\n', at), version.output.size());
    const std::string line = version.output.substr(at, end - at);
    if (line.find("release") != std::string::npos) release = line;
    at = end + 1;
  }

  std::map<std::string, std::vector<std::byte>> cubins;
  for (const auto& job : jobs) {
    std::vector<std::string> argv{toolkit->nvcc};
    for (const auto& o : nvcc_forced_options(profile)) argv.push_back(o);
    argv.insert(argv.end(), {"-ccbin", toolkit->host_compiler, "-I", std::string(kSandboxInputs)});
    argv.insert(argv.end(), job.macros.begin(), job.macros.end());
    const std::string cubin = job.e->name + ".cubin";
    const std::string source =
        std::string(kSandboxInputs) + "/" + fs::path(job.e->factory).lexically_normal().generic_string();
    check_preprocessor_view(job, source);
    argv.insert(argv.end(), {"-o", std::string(kSandboxOutput) + "/" + cubin, source});
    const SandboxResult r = run(argv);
    if (!r.ok()) {
      refuse(ErrorCode::invalid_argument, fmt::format("export '{}': nvcc failed in the sandbox ({}): {}", job.e->name,
                                                      r.describe(), tail(r.output, 4000)));
    }
  }
  // CUBIN only: exactly one file per export, nothing else.
  std::set<std::string> expected;
  for (const auto& job : jobs) expected.insert(job.e->name + ".cubin");
  for (auto it = fs::recursive_directory_iterator(output); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = fs::relative(it->path(), output).generic_string();
    if (it->is_symlink() || !it->is_regular_file() || !expected.count(rel)) {
      refuse(ErrorCode::invalid_argument,
             fmt::format("the compiler left '{}', which is not a declared CUBIN: nothing is published", rel));
    }
  }
  for (const auto& job : jobs) {
    const fs::path file = output / (job.e->name + ".cubin");
    if (!fs::is_regular_file(file, ec))
      refuse(ErrorCode::invalid_argument, fmt::format("export '{}': nvcc produced no CUBIN", job.e->name));
    const std::string bytes = read_file(file.string(), "seal.build");
    auto span = std::as_bytes(std::span(bytes.data(), bytes.size()));
    cubins.emplace(job.e->name, std::vector<std::byte>(span.begin(), span.end()));
  }
  const Json toolkit_identity{{"nvcc", toolkit->nvcc},
                              {"nvcc_sha256", file_digest(toolkit->nvcc)},
                              {"nvcc_release", release},
                              {"host_compiler", toolkit->host_compiler},
                              {"host_compiler_sha256", file_digest(toolkit->host_compiler)}};
  try {
    write_publication(out_dir, m, profile, cubins, toolkit_identity);
    return reopen_publication(out_dir, m, profile);
  } catch (...) {
    // A publication that does not reopen is not left behind half-made.
    fs::remove_all(fs::path(out_dir) / provider.publication_dir, ec);
    fs::remove(fs::path(out_dir) / "index.json", ec);
    throw;
  }
}

}  // namespace pact::seal
