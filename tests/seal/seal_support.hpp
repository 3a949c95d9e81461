#pragma once
// Helpers the sealed-artifact test files share: the example bundle's manifest text and anchored edits.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace pact::seal::test {

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
