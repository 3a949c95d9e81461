#pragma once
// Helpers the sealed-artifact test files share: the example bundle's manifest text and anchored edits.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

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

}  // namespace pact::seal::test
