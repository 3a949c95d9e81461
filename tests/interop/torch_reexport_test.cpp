// Re-exports models with tools/torch_export.py at test time (Debian's python3-torch, which the test
// command's setup installs) and checks Pact's run against PyTorch's own output. Without torch the tests
// say so and skip; the committed corpus (torch_import_test.cpp) is still checked in full.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <tuple>

#include "tests/interop/torch_util.hpp"

namespace pact {
namespace {

const char* kPython = "/usr/bin/python3";

bool python_has(const std::string& module) {
  const std::string cmd = std::string(kPython) + " -c 'import " + module + "' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::string scratch(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("pact-reexport-" + std::to_string(::getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  return dir.string();
}

/// Exports `target` and returns the capture directory ("" on failure, with the exporter's log attached).
std::string export_model(const std::string& target, const std::string& shape, const std::string& extra,
                         const std::string& name) {
  const std::string dir = scratch(name);
  const std::string log = dir + ".log";
  const std::string cmd = std::string("PYTHONPATH=bench/models:. ") + kPython + " tools/torch_export.py " + target +
                          " --input-shape " + shape + " " + extra + " -o " + dir + " >" + log + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << cmd << "\n" << test::read_text(log);
    return "";
  }
  return dir;
}

#define REQUIRE_TORCH()                                                             \
  if (!python_has("torch"))                                                         \
  GTEST_SKIP() << "no torch in /usr/bin/python3 (Debian python3-torch): re-export " \
                  "tests skipped; the committed corpus is still tested"

TEST(TorchReexport, EveryCaptureMethodMatchesPyTorch) {
  REQUIRE_TORCH();
  for (const char* method : {"fx", "make_fx"}) {
    for (const auto& [model, shape] :
         std::vector<std::pair<std::string, std::string>>{{"small_cnn", "2,3,16,16"}, {"tiny_transformer", "2,6,16"}}) {
      const auto dir = export_model("tests.fixtures.torch.models:" + model, shape, std::string("--method ") + method,
                                    model + "-" + method);
      if (dir.empty()) continue;
      const auto bundle = ir::load_torch_export(dir);
      EXPECT_EQ(bundle.model.capture_method, std::string(method) == "fx" ? "fx.symbolic_trace" : "make_fx");
      EXPECT_LE(test::worst_relative_error(dir), 1e-4) << model << " via " << method;
      std::filesystem::remove_all(dir);
    }
  }
}

TEST(TorchReexport, ActivationsAndGroupNormMatchPyTorch) {
  REQUIRE_TORCH();
  // LeakyReLU, GroupNorm, ELU, Softplus, Mish, abs, PixelShuffle: each lowered to a sequence of table ops.
  const auto dir =
      export_model("tests.fixtures.torch.models:activations", "2,4,4,4", "--random-weights", "activations");
  if (dir.empty()) return;
  EXPECT_LE(test::worst_relative_error(dir), 1e-4);
  std::filesystem::remove_all(dir);
}

// Issue 22's ops through the importer, each model against PyTorch's own output: selection, comparison,
// scans, top-k, indexing, fills and casts; Llama's rotary embedding before causal attention;
// interpolation; nn.LSTM and nn.GRU (their unsafe_split and the GRU's in-place batch_first transpose).
TEST(TorchReexport, SelectionRotaryResamplingAndRecurrentModelsMatchPyTorch) {
  REQUIRE_TORCH();
  for (const auto& [model, shape] : std::vector<std::pair<std::string, std::string>>{
           {"selection", "2,6,8"}, {"rotary", "2,5,16"}, {"resample", "1,2,4,5"}, {"recurrent", "2,5,8"}}) {
    const auto dir = export_model("tests.fixtures.torch.models:" + model, shape, "", model);
    if (dir.empty()) continue;
    EXPECT_LE(test::worst_relative_error(dir), 1e-4) << model;
    std::filesystem::remove_all(dir);
  }
}

// Issue 22 item 3: a capture made at one batch size runs at another. The same model (the same seeded random
// weights) exported at two batch sizes: the first capture, fitted to the second's example input, must give
// the second capture's PyTorch outputs. Covers batch axes that move (the transformer's and the recurrent
// networks' time-major layouts) and reshapes that merge the batch with other dimensions.
TEST(TorchReexport, ACaptureRunsAtAnotherBatchSizeAsPyTorchDoes) {
  REQUIRE_TORCH();
  const contract::DefaultEvidenceResolver resolver;
  for (const auto& [model, small, large] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"recurrent", "2,5,8", "3,5,8"},
                                                                      {"rotary", "2,5,16", "4,5,16"},
                                                                      {"tiny_transformer", "2,6,16", "5,6,16"},
                                                                      {"small_cnn", "2,3,16,16", "1,3,16,16"}}) {
    SCOPED_TRACE(model);
    const auto a = export_model("tests.fixtures.torch.models:" + model, small, "--random-weights", model + "-a");
    const auto b = export_model("tests.fixtures.torch.models:" + model, large, "--random-weights", model + "-b");
    if (a.empty() || b.empty()) continue;
    auto bundle = ir::load_torch_export(a);
    ir::SafetensorsFile inputs = ir::read_safetensors(b + "/example_input.safetensors");
    const ir::SafetensorsFile expected = ir::read_safetensors(b + "/expected_output.safetensors");
    runtime::fit_inputs(bundle, inputs, b);
    const auto outs = bundle.model.outputs;
    auto result =
        runtime::run_imported(std::move(bundle), std::move(inputs), contract::builtin_profile("cpu-checked"), resolver);
    ASSERT_TRUE(result.accepted);
    for (const auto& o : outs) {
      EXPECT_LE(runtime::compare_outputs(o.name, result.outputs.at(o.name).as_view(), expected.find(o.name)->as_view())
                    .relative_error,
                1e-4)
          << o.name;
    }
    std::filesystem::remove_all(a);
    std::filesystem::remove_all(b);
  }
}

TEST(TorchReexport, TorchvisionArchitecturesWithRandomWeightsMatchPyTorch) {
  REQUIRE_TORCH();
  if (!python_has("torchvision")) GTEST_SKIP() << "no torchvision in /usr/bin/python3 (Debian python3-torchvision)";
  for (const char* arch : {"resnet18", "mobilenet_v2", "squeezenet1_0"}) {
    const auto dir = export_model(std::string("torchvision_zoo:") + arch, "1,3,64,64", "--random-weights", arch);
    if (dir.empty()) continue;
    EXPECT_LE(test::worst_relative_error(dir), 1e-4) << arch;
    std::filesystem::remove_all(dir);
  }
}

TEST(TorchReexport, UnsupportedModelsFailTypedNamingTheTarget) {
  REQUIRE_TORCH();
  // A transposed convolution is not in the lowering table: the import names the node and the target.
  const auto dir = export_model("torchvision_zoo:upsampler", "1,4,8,8", "", "upsampler");
  if (dir.empty()) return;
  try {
    ir::load_torch_export(dir);
    ADD_FAILURE() << "a transposed convolution imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported);
    EXPECT_NE(std::string(e.what()).find("aten.convolution"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("transposed"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pact
