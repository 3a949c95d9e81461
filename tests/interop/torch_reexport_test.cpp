// Re-exports models with tools/torch_export.py at test time (Debian's python3-torch, which the test
// command's setup installs) and checks Pact's run against PyTorch's own output. Without torch the tests
// say so and skip; the committed corpus (torch_import_test.cpp) is still checked in full.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <tuple>

#include "pact/capture/capture.hpp"
#include "pact/core/json.hpp"
#include "tests/interop/torch_util.hpp"
#include "tests/support/expect_error.hpp"

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

/// Exports `target` and expects Pact's run of the capture within 1e-4 of PyTorch's own output; `check`, where
/// given, inspects the capture directory first. The capture and its log are removed afterwards.
void expect_reexport_matches(const std::string& target, const std::string& shape, const std::string& extra,
                             const std::string& name, const std::function<void(const std::string&)>& check = {}) {
  SCOPED_TRACE(target + " " + extra);
  const auto dir = export_model(target, shape, extra, name);
  if (dir.empty()) return;
  if (check) check(dir);
  EXPECT_LE(test::worst_relative_error(dir), 1e-4);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(dir + ".log");
}

/// The capture method a capture directory records, as `--method` names it.
std::string recorded_method(const std::string& dir) {
  const std::string m = ir::load_torch_export(dir).model.capture_method;
  return m == "fx.symbolic_trace" ? "fx" : m;
}

#define REQUIRE_TORCH()                                                             \
  if (!python_has("torch"))                                                         \
  GTEST_SKIP() << "no torch in /usr/bin/python3 (Debian python3-torch): re-export " \
                  "tests skipped; the committed corpus is still tested"

TEST(TorchReexport, EveryCaptureMethodMatchesPyTorch) {
  REQUIRE_TORCH();
  for (const std::string method : {"fx", "make_fx"}) {
    for (const auto& [model, shape] :
         std::vector<std::pair<std::string, std::string>>{{"small_cnn", "2,3,16,16"}, {"tiny_transformer", "2,6,16"}}) {
      expect_reexport_matches("tests.fixtures.torch.models:" + model, shape, "--method " + method, model + "-" + method,
                              [&](const std::string& dir) { EXPECT_EQ(recorded_method(dir), method); });
    }
  }
}

TEST(TorchReexport, ActivationsAndGroupNormMatchPyTorch) {
  REQUIRE_TORCH();
  // LeakyReLU, GroupNorm, ELU, Softplus, Mish, abs, PixelShuffle: each lowered to a sequence of table ops.
  expect_reexport_matches("tests.fixtures.torch.models:activations", "2,4,4,4", "--random-weights", "activations");
}

// Issue 22's ops through the importer, each model against PyTorch's own output: selection, comparison,
// scans, top-k, indexing, fills and casts; Llama's rotary embedding before causal attention;
// interpolation; nn.LSTM and nn.GRU (their unsafe_split and the GRU's in-place batch_first transpose).
TEST(TorchReexport, SelectionRotaryResamplingAndRecurrentModelsMatchPyTorch) {
  REQUIRE_TORCH();
  for (const auto& [model, shape] :
       std::vector<std::pair<std::string, std::string>>{{"selection", "2,6,8"},
                                                        {"rotary", "2,5,16"},
                                                        {"resample", "1,2,4,5"},
                                                        {"recurrent", "2,5,8"},
                                                        {"repeat_interleave", "2,2,5,8"}}) {
    expect_reexport_matches("tests.fixtures.torch.models:" + model, shape, "", model);
  }
}

// Note [In-place writes] in python/pact/torch_export.py: writes through views (Swin's mask, Swin V2's bias
// zeroed in place, a row of an activation), by both capture methods, and the ops Swin and MaxViT need (roll,
// constant_pad_nd, index.Tensor, norms), each against PyTorch's own output. Without the functionalized
// retrace the mask stays zero and the outputs differ by far more than the tolerance (checked once by hand).
TEST(TorchReexport, WritesThroughViewsAndSwinOpsMatchPyTorch) {
  REQUIRE_TORCH();
  for (const std::string method : {"fx", "make_fx"}) {
    expect_reexport_matches("tests.fixtures.torch.models:window_writes", "2,6,6", "--random-weights --method " + method,
                            "writes-" + method,
                            [&](const std::string& dir) { EXPECT_EQ(recorded_method(dir), method); });
  }
}

// Operators lowered to sequences of table ops (tests/fixtures/torch/models.py, Compositions): erf, log1p, sign,
// maximum, clamp by tensors, logical ops, floor, ceil, trunc, frac, div with rounding modes, amin, max and min
// with indices, var, std, logsumexp, any, flip, unfold, sort, reflection and replication padding, instance
// norm, PReLU, GLU, CELU, adaptive max pooling, linear upsampling, index_put (x[:, idx] = v on a copy, kept as
// an in-place op); all three outputs against PyTorch's.
// EdgeValues: the same compositions at infinities, signed zeros, NaN, halves and values beyond 2^23.
TEST(TorchReexport, CompositionsOfTableOpsMatchPyTorch) {
  REQUIRE_TORCH();
  for (const auto& [model, shape] :
       std::vector<std::pair<std::string, std::string>>{{"compositions", "3,4,6"}, {"edge_values", "2,3"}}) {
    expect_reexport_matches("tests.fixtures.torch.models:" + model, shape, "--random-weights", model);
  }
}

// A write through a view whose base is read later: the node-by-node capture says why it cannot follow it
// and the whole-module functionalized trace captures it.
TEST(TorchReexport, AWriteThroughAnAliasFallsBackToTheWholeModuleTrace) {
  REQUIRE_TORCH();
  expect_reexport_matches("tests.fixtures.torch.models:aliased_write", "3,4", "", "aliased_write",
                          [](const std::string& dir) {
                            EXPECT_EQ(recorded_method(dir), "make_fx");
                            const std::string log = test::read_text(dir + ".log");
                            EXPECT_TRUE(test::mentions(log, "cannot follow a write")) << log;
                          });
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

// Issue 22 item 6: a PyTorch model too large to materialise is exported structure-only (built on the meta
// device: shapes and parameter geometry, no weights) and planned like a built-in model. A Llama-2-13B-shaped
// module (13.0 billion parameters, 52 GB of f32 weights) exports with under 2 GB resident, and its capture
// counts every parameter.
TEST(TorchReexport, AStructureOnlyExportOfA13BLlamaPlansWithoutItsWeights) {
  REQUIRE_TORCH();
  const auto dir =
      export_model("tests.fixtures.torch.models:llama_13b", "1,32", "--input-dtype i64 --structure-only", "llama13b");
  if (dir.empty()) return;
  EXPECT_FALSE(std::filesystem::exists(dir + "/weights.safetensors"));
  const Json doc = parse_json(test::read_text(dir + "/graph.json"), "graph.json");
  ASSERT_TRUE(doc["capture"].value("structure_only", false));
  const auto rss = doc["capture"]["peak_rss_bytes"].get<std::int64_t>();  // the exporter's getrusage
  EXPECT_GT(rss, 0);
  EXPECT_LT(rss, std::int64_t{2} << 30) << "peak resident bytes of the structure-only export";
  const ir::TorchBundle bundle = ir::load_torch_export(dir);
  EXPECT_TRUE(bundle.model.structure_only);
  EXPECT_TRUE(bundle.weights.tensors.empty());
  const capture::StructureCapture c = capture::capture(capture::graph_model(bundle.model.graph), {});
  EXPECT_EQ(c.parameter_count(), 13015864320LL);  // Llama-2-13B's, counted from the captured geometry
  // At least 2 FLOPs per token for every parameter but the embedding table (a lookup), over 32 tokens.
  EXPECT_GT(c.flops(), 2 * (13015864320LL - 32000LL * 5120) * 32);
  // Values it does not have are refused, typed, naming what to do instead.
  const std::string msg = test::message_of([&] { ir::require_weights(bundle.model, dir, "pact run"); });
  EXPECT_TRUE(test::mentions(msg, "structure_only_values_unsupported") && test::mentions(msg, "--structure-only"))
      << msg;
  std::filesystem::remove_all(dir);
}

// The structure-only export records the graph the real one does: the same ops, attributes and types, node
// for node, and parameters of the same geometry (a tiny Llama exported both ways).
TEST(TorchReexport, StructureOnlyAndRealExportsRecordTheSameGraph) {
  REQUIRE_TORCH();
  const auto real = export_model("tests.fixtures.torch.models:llama_tiny", "2,6", "--input-dtype i64", "tiny-real");
  const auto meta =
      export_model("tests.fixtures.torch.models:llama_tiny", "2,6", "--input-dtype i64 --structure-only", "tiny-meta");
  if (real.empty() || meta.empty()) return;
  const ir::TorchBundle a = ir::load_torch_export(real), b = ir::load_torch_export(meta);
  ASSERT_EQ(a.model.graph.nodes.size(), b.model.graph.nodes.size());
  for (std::size_t i = 0; i < a.model.graph.nodes.size(); ++i) {
    const ir::Node &x = a.model.graph.nodes[i], &y = b.model.graph.nodes[i];
    EXPECT_EQ(x.op, y.op) << x.id << " / " << y.id;
    EXPECT_EQ(x.type, y.type) << x.id << " / " << y.id;
    EXPECT_EQ(ir::attributes_to_json(x.attrs), ir::attributes_to_json(y.attrs)) << x.id << " / " << y.id;
    if (x.op == ops::OpTag::parameter) {
      EXPECT_EQ(x.id, y.id);
    }
  }
  // The real capture runs and matches PyTorch; the structure-only one is refused for running.
  EXPECT_LE(test::worst_relative_error(real), 1e-4);
  EXPECT_EQ(test::code_of([&] { ir::require_weights(b.model, meta, "pact run"); }), ErrorCode::unsupported);
  std::filesystem::remove_all(real);
  std::filesystem::remove_all(meta);
}

TEST(TorchReexport, TorchvisionArchitecturesWithRandomWeightsMatchPyTorch) {
  REQUIRE_TORCH();
  if (!python_has("torchvision")) GTEST_SKIP() << "no torchvision in /usr/bin/python3 (Debian python3-torchvision)";
  // swin_t: its shifted-window mask is written through views (Note [In-place writes]), with roll, pad and a
  // relative-position table indexed by a buffer.
  for (const std::string arch : {"resnet18", "mobilenet_v2", "squeezenet1_0", "swin_t"}) {
    expect_reexport_matches("torchvision_zoo:" + arch, "1,3,64,64", "--random-weights", arch);
  }
}

/// Exports fixture module `factory` expecting the exporter to refuse it: returns the exporter's log, after
/// checking that it failed and wrote no graph.
std::string refused_export(const std::string& factory, const std::string& shape) {
  const std::string dir = scratch(factory), log = dir + ".log";
  const std::string cmd = std::string("PYTHONPATH=. ") + kPython +
                          " tools/torch_export.py tests.fixtures.torch.models:" + factory + " --input-shape " + shape +
                          " -o " + dir + " >" + log + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0) << factory << " exported";
  const std::string out = test::read_text(log);
  EXPECT_FALSE(std::filesystem::exists(dir + "/graph.json"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove(log);
  return out;
}

// A forward that writes a buffer in place (a KV cache) exports to a graph that is silently wrong under
// PyTorch 1.13's tracers (the write is dropped or its value baked in); the exporter refuses it instead.
TEST(TorchReexport, AModuleThatWritesABufferInPlaceIsRefused) {
  REQUIRE_TORCH();
  const std::string out = refused_export("kv_cache_in_place", "1,1,8");
  EXPECT_TRUE(test::mentions(out, "writes its buffer 'cache' in place")) << out;
}

// Note [Undefined constants] in tools/torch_export.py: a module that reads torch.empty's values is refused,
// naming the node (repeat_interleave's empty, overwritten whole by fill_, exports: the test above).
TEST(TorchReexport, ReadingTheValuesOfEmptyIsRefused) {
  REQUIRE_TORCH();
  const std::string out = refused_export("reads_empty", "2,4");
  EXPECT_TRUE(test::mentions(out, "reads the values of a tensor made by aten.empty")) << out;
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
