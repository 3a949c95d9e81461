#pragma once
// Helpers the sealed-artifact test files share: the example bundle's manifest text and anchored edits.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace pact::seal::test {

/// A kernel as the CUDA toolkit's own PTX declares it: `.entry NAME(.param .u64 NAME_param_0, ...)`.
struct PtxKernel {
  std::string name;
  std::vector<std::uint32_t> widths;  ///< bytes per parameter: .u64/.b64/.f64 8, .u32/.s32/.f32 4, .b8 x[N] N
};

/// The kernels of a PTX file that nvcc wrote (tests/fixtures/seal/ptx, tests/fixtures/seal/regenerate.sh),
/// in the order it declares them. Read with no code of Pact's, so the stand-in driver's kernel inventory is
/// evidence independent of Pact's CUBIN parser. A parameter type it does not know is a test failure.
inline std::vector<PtxKernel> ptx_kernels(const std::string& path) {
  std::ifstream in(path);
  if (!in) ADD_FAILURE() << "cannot read " << path;
  std::vector<PtxKernel> out;
  std::string line;
  bool in_params = false;
  while (std::getline(in, line)) {
    if (const auto at = line.find(".entry "); at != std::string::npos) {
      const auto start = at + 7, open = line.find('(', start);
      out.push_back({line.substr(start, open - start), {}});
      in_params = true;
      continue;
    }
    if (!in_params) continue;
    if (line.find(')') != std::string::npos && line.find(".param") == std::string::npos) {
      in_params = false;
      continue;
    }
    if (line.find(".param") == std::string::npos) continue;
    std::uint32_t width = 0;
    if (const auto b8 = line.find(".b8 "); b8 != std::string::npos) {
      const auto open = line.find('[', b8), close = line.find(']', b8);
      width = static_cast<std::uint32_t>(std::stoul(line.substr(open + 1, close - open - 1)));
    } else {
      for (const auto& [type, bytes] : std::vector<std::pair<std::string, std::uint32_t>>{{".u64", 8},
                                                                                          {".s64", 8},
                                                                                          {".b64", 8},
                                                                                          {".f64", 8},
                                                                                          {".u32", 4},
                                                                                          {".s32", 4},
                                                                                          {".b32", 4},
                                                                                          {".f32", 4}}) {
        if (line.find(type + " ") != std::string::npos) width = bytes;
      }
    }
    if (width == 0) ADD_FAILURE() << path << ": unknown parameter type in '" << line << "'";
    out.back().widths.push_back(width);
  }
  return out;
}

/// examples/seal/vector_add/manifest.toml as text.
inline std::string example_manifest() {
  std::ifstream in(std::string(PACT_SOURCE_DIR) + "/examples/seal/vector_add/manifest.toml");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// `s` with the first `from` replaced by `to`; a test failure when the anchor is missing.
inline std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "anchor not found: " << from;
    return s;
  }
  return s.replace(at, from.size(), to);
}

/// The example manifest with its device plan's kernels replaced by `kernels` (names, each with vadd's
/// parameter widths, listed as given) and its launch naming `launched`: the plan of a publication of
/// tests/fixtures/seal/three_kernels/three.cubin.
inline std::string three_kernel_manifest(const std::vector<std::string>& kernels, const std::string& launched) {
  std::string list;
  for (const auto& k : kernels) {
    list += (list.empty() ? "" : ", ") + std::string("{ name = \"") + k + "\", param_widths = [8, 8, 8, 4, 12] }";
  }
  const std::string m =
      replaced(example_manifest(), "kernels = [ { name = \"vadd\", param_widths = [8, 8, 8, 4, 12] } ]",
               "kernels = [ " + list + " ]");
  return replaced(m, "kernel = \"vadd\"", "kernel = \"" + launched + "\"");
}

/// A scratch bundle directory under /tmp, removed at the end of the test; write() puts a file in it.
struct ScratchBundle {
  std::filesystem::path dir;
  ScratchBundle() {
    char tmpl[] = "/tmp/pact-seal-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~ScratchBundle() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  ScratchBundle(const ScratchBundle&) = delete;
  ScratchBundle& operator=(const ScratchBundle&) = delete;
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name, std::ios::binary) << text;
  }
};

/// The bytes of a file under the source tree.
inline std::vector<std::byte> source_bytes(const std::string& rel) {
  std::ifstream in(std::string(PACT_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) b[i] = static_cast<std::byte>(c[i]);
  return b;
}

}  // namespace pact::seal::test
