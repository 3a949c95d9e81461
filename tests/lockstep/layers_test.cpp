// The module layering of pact/README.md, checked on the sources: a pipeline module includes only modules
// before it in the flow (core, spec, ops, kernels, contract, ir, plan, runtime, train); capture, seal, picture,
// verify, ledger, llm and dist sit beside the pipeline, may include any pipeline module, and neither each other nor
// are included by a pipeline module. Each folder of pact/ is one CMake target of its name (the second
// test). Runs from the repository root (pact_add_test sets the working directory).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace {

constexpr std::array<std::string_view, 9> kPipeline{"core", "spec", "ops",     "kernels", "contract",
                                                    "ir",   "plan", "runtime", "train"};
constexpr std::array<std::string_view, 7> kBeside{"capture", "seal", "verify", "ledger", "llm", "picture", "dist"};

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

// One folder per CMake target: every folder of pact/ declares exactly one module, named after the folder.
TEST(Layers, EachFolderIsOneTargetOfItsName) {
  const std::regex module(R"(pact_add_module\(\s*([a-z_]+))");
  std::size_t folders = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::current_path() / "pact")) {
    if (!entry.is_directory()) continue;
    ++folders;
    const std::string name = entry.path().filename().string();
    std::ifstream in(entry.path() / "CMakeLists.txt");
    ASSERT_TRUE(in) << name << " has no CMakeLists.txt";
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> declared;
    for (std::sregex_iterator it(text.begin(), text.end(), module), end; it != end; ++it) declared.push_back((*it)[1]);
    EXPECT_EQ(declared, std::vector<std::string>{name}) << "pact/" << name << "/CMakeLists.txt";
    EXPECT_TRUE(pipeline_rank(name) >= 0 || beside(name)) << name << " is not in pact/README.md's module map";
  }
  EXPECT_EQ(folders, kPipeline.size() + kBeside.size());
}

TEST(Layers, TheRuleRefusesWhatItShould) {
  EXPECT_EQ(violation("kernels", "ops"), "");
  EXPECT_EQ(violation("train", "core"), "");
  EXPECT_EQ(violation("capture", "runtime"), "");
  EXPECT_NE(violation("ops", "kernels"), "");      // up the pipeline
  EXPECT_NE(violation("runtime", "capture"), "");  // into a module beside the pipeline
  EXPECT_NE(violation("kernels", "verify"), "");
  EXPECT_NE(violation("seal", "verify"), "");  // across the modules beside the pipeline
  EXPECT_NE(violation("verify", "ledger"), "");
  EXPECT_NE(violation("spec", "ops"), "");  // the contract parser sits below the op table
  EXPECT_NE(violation("newmodule", "core"), "");
}

}  // namespace
