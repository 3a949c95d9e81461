// The module layering of pact/README.md, checked on the sources: a pipeline module includes only modules
// before it in the flow (core, ops, kernels, contract, ir, plan, runtime, train); capture, seal and verify
// sit beside the pipeline, may include any pipeline module, and neither each other nor are included by
// a pipeline module. Runs from the repository root (pact_add_test sets the working directory).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace {

constexpr std::array<std::string_view, 8> kPipeline{"core", "ops",  "kernels", "contract",
                                                    "ir",   "plan", "runtime", "train"};
constexpr std::array<std::string_view, 3> kBeside{"capture", "seal", "verify"};

int pipeline_rank(std::string_view module) {
  const auto it = std::find(kPipeline.begin(), kPipeline.end(), module);
  return it == kPipeline.end() ? -1 : static_cast<int>(it - kPipeline.begin());
}
bool beside(std::string_view module) { return std::find(kBeside.begin(), kBeside.end(), module) != kBeside.end(); }

// Why `from` may not include `to`, or "" when it may.
std::string violation(std::string_view from, std::string_view to) {
  if (from == to) return "";
  const int f = pipeline_rank(from), t = pipeline_rank(to);
  if (f >= 0 && t > f) return "reaches up the pipeline";
  if (f >= 0 && beside(to)) return "a pipeline module includes a module beside the pipeline";
  if (beside(from) && beside(to)) return "modules beside the pipeline do not include each other";
  if (f < 0 && !beside(from)) return "an unknown module (add it to pact/README.md and this test)";
  if (t < 0 && !beside(to)) return "includes an unknown module";
  return "";
}

struct Found {
  std::string file, include, why;
};

std::vector<Found> scan(const std::filesystem::path& root) {
  const std::regex include(R"(^\s*#\s*include\s*"pact/([a-z_]+)/[^"]+")");
  std::vector<Found> found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root / "pact")) {
    const auto ext = entry.path().extension();
    if (!entry.is_regular_file() || (ext != ".hpp" && ext != ".cpp" && ext != ".inc")) continue;
    const std::string module = std::filesystem::relative(entry.path(), root / "pact").begin()->string();
    std::ifstream in(entry.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (!std::regex_search(line, m, include)) continue;
      const std::string why = violation(module, m[1].str());
      if (!why.empty()) found.push_back({entry.path().string(), line, why});
    }
  }
  return found;
}

TEST(Layers, NoIncludeReachesUpOrAcrossTheModuleMap) {
  const auto found = scan(std::filesystem::current_path());
  for (const auto& f : found) ADD_FAILURE() << f.file << ": " << f.include << " — " << f.why;
  EXPECT_TRUE(found.empty());
}

TEST(Layers, TheRuleRefusesWhatItShould) {
  EXPECT_EQ(violation("kernels", "ops"), "");
  EXPECT_EQ(violation("train", "core"), "");
  EXPECT_EQ(violation("capture", "runtime"), "");
  EXPECT_NE(violation("ops", "kernels"), "");      // up the pipeline
  EXPECT_NE(violation("runtime", "capture"), "");  // into a module beside the pipeline
  EXPECT_NE(violation("kernels", "verify"), "");
  EXPECT_NE(violation("seal", "verify"), "");  // across the modules beside the pipeline
  EXPECT_NE(violation("newmodule", "core"), "");
}

}  // namespace
