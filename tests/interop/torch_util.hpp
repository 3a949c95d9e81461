#pragma once
// Helpers shared by the PyTorch import tests: reading fixture directories and running them.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "pact/contract/check.hpp"
#include "pact/ir/torch_import.hpp"
#include "pact/runtime/torch_run.hpp"

namespace pact::test {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The worst relative error over the outputs of a capture directory run under `profile`.
inline double worst_relative_error(const std::string& dir, const std::string& profile = "cpu-checked") {
  ir::TorchBundle bundle = ir::load_torch_export(dir);
  ir::SafetensorsFile inputs = ir::read_safetensors(dir + "/example_input.safetensors");
  const ir::SafetensorsFile expected = ir::read_safetensors(dir + "/expected_output.safetensors");
  std::vector<std::string> names;
  for (const auto& o : bundle.model.outputs) names.push_back(o.name);
  const contract::DefaultEvidenceResolver resolver;
  auto result =
      runtime::run_imported(std::move(bundle), std::move(inputs), contract::builtin_profile(profile), resolver);
  EXPECT_TRUE(result.accepted) << dir << " was rejected under " << profile;
  double worst = 0;
  for (const auto& name : names) {
    const Tensor* want = expected.find(name);
    EXPECT_NE(want, nullptr) << dir << ": expected output " << name;
    if (want == nullptr || !result.outputs.count(name)) return 1e30;
    worst = std::max(worst,
                     runtime::compare_outputs(name, result.outputs.at(name).as_view(), want->as_view()).relative_error);
  }
  return worst;
}

}  // namespace pact::test
