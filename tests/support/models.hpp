#pragma once
// The example models shipped in examples/models (tests run from the repository root).

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace pact::test {

/// Paths of examples/models/*.json, sorted.
inline std::vector<std::string> example_models() {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator("examples/models")) {
    if (e.path().extension() == ".json") paths.push_back(e.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace pact::test
