// Sealed artifacts, the manifest (issue 8, item 2): the example bundle with its derived requirements,
// every bound and lifecycle rule of seed 002, specialization chains, and the collecting scan.

#include "pact/seal/manifest.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "../support/expect_error.hpp"
#include "pact/core/file.hpp"
#include "pact/seal/params.hpp"
#include "seal_support.hpp"

namespace pact::seal {
namespace {

using ::pact::test::code_of;
using ::pact::test::mentions;
using test::example_manifest;
using test::replaced;

TEST(SealManifest, TheExampleBundleParsesWithItsDerivedRequirements) {
  const Manifest m = parse_manifest(example_manifest(), "manifest.toml");
  ASSERT_EQ(m.ops.size(), 1u);
  const ManifestOp& op = m.ops[0];
  EXPECT_EQ(op.exports.size(), 1u);
  EXPECT_EQ(op.exports[0].device_plan.launches.size(), 1u);
  ASSERT_EQ(op.resources.size(), 1u);
  EXPECT_EQ(op.resources[0].lifetime, Lifetime::call);
  EXPECT_EQ(op.resources[0].max_bytes, 16777216u / 256u * 4u);
  EXPECT_EQ(
      m.capability_requirements["provider_capability_requirements"],
      Json::array({"aot:nvcc.cubin.v1", "profile_input:max_active_clusters.cluster_size_1", "rebuild:nvcc_cubin"}));
  EXPECT_NO_THROW(require_capability_requirements(m, m.capability_requirements));
  Json tampered = m.capability_requirements;
  tampered["provider_capability_requirements"].push_back("aot:other");
  EXPECT_EQ(code_of([&] { require_capability_requirements(m, tampered); }), ErrorCode::invalid_argument);
  // The launch materializes against a live call.
  CallData c;
  c.tensors["a"] = {Dims{1000}, Dims{1}};
  const Launch& l = op.exports[0].device_plan.launches[0];
  EXPECT_EQ(l.grid[0].eval(c), 4);
  const std::map<std::string, std::uint64_t, std::less<>> ptrs{{"a", 0x1000}, {"b", 0x2000}, {"out", 0x3000}};
  const ParameterFrame f = materialize(l.params, op.exports[0].device_plan.kernels[0].param_widths, c, ptrs);
  EXPECT_EQ(f.bytes.size(), 40u);
}

TEST(SealManifest, EnforcesEverySeedBound) {
  const std::string base = example_manifest();
  struct Case {
    const char* name;
    std::string text;
    ErrorCode code;
  };
  std::string many_kernels = "kernels = [";
  for (int i = 0; i < 1025; ++i)
    many_kernels += fmt::format("{}{{ name = \"k{:04}\", param_widths = [8] }}", i ? ", " : "", i);
  many_kernels += "]";
  // 257 launches: one past kMaxLaunches (256), each a copy of the example's one launch.
  const std::string launch_header = "[[ops.aot_exports.device_plan.launches]]";
  const std::size_t launch_at = base.find(launch_header);
  const std::size_t launch_end = base.find("\n]\n", launch_at) + 3;
  const std::string one_launch = base.substr(launch_at, launch_end - launch_at);
  std::string many_launches;
  for (int i = 0; i < 257; ++i) many_launches += one_launch + "\n";
  const std::string max_launches = [&] {
    std::string l;
    for (int i = 0; i < 256; ++i) l += one_launch + "\n";
    return base.substr(0, launch_at) + l + base.substr(launch_end);
  }();
  EXPECT_EQ(parse_manifest(max_launches, "manifest.toml").ops[0].exports[0].device_plan.launches.size(), 256u);
  std::string many_bindings = "bindings = [";
  for (int i = 0; i < 65; ++i) many_bindings += fmt::format("{}\"b{}\"", i ? ", " : "", i);
  many_bindings += "]";
  const std::vector<Case> cases{
      {"not toml", "[[ops]\n", ErrorCode::parse_error},
      {"unknown provider", replaced(base, "provider = \"nvcc.cubin.v1\"", "provider = \"cutlass.cute.cubin.v1\""),
       ErrorCode::unsupported},
      {"profile input off the allowlist", replaced(base, "\"max_active_clusters.cluster_size_1\"", "\"sm_count\""),
       ErrorCode::invalid_argument},
      {"unknown field", replaced(base, "role = \"run\"", "role = \"run\"\nlauncher = \"host.py\""),
       ErrorCode::parse_error},
      {"unknown role", replaced(base, "role = \"run\"", "role = \"serve\""), ErrorCode::parse_error},
      {"missing entry", replaced(base, "entry = \"compat_entry\"", ""), ErrorCode::parse_error},
      {"wrong plan schema", replaced(base, "pact.device-launch-plan.v1", "pact.device-launch-plan.v2"),
       ErrorCode::parse_error},
      {"width mismatch", replaced(base, "param_widths = [8, 8, 8, 4, 12]", "param_widths = [8, 8, 8, 8, 12]"),
       ErrorCode::invalid_argument},
      {"parameter count", replaced(base, "param_widths = [8, 8, 8, 4, 12]", "param_widths = [8, 8, 8, 4]"),
       ErrorCode::invalid_argument},
      {"unknown kernel", replaced(base, "kernel = \"vadd\"", "kernel = \"vsub\""), ErrorCode::invalid_argument},
      {"pointer from no binding",
       replaced(base, "{ kind = \"pointer\", binding = \"b\" }", "{ kind = \"pointer\", binding = \"c\" }"),
       ErrorCode::invalid_argument},
      {"unregistered primitive",
       replaced(base, "{ kind = \"pointer\", binding = \"b\" }", "{ kind = \"address\", value = 4096 }"),
       ErrorCode::parse_error},
      {"expression outside the language", replaced(base, "\"ceil_div(numel(a), 256)\"", "\"launch_bounds(a)\""),
       ErrorCode::parse_error},
      {"attribute off the allowlist",
       replaced(base, "dynamic_smem = 0", "dynamic_smem = 0\nattributes = [\"max_registers\"]"),
       ErrorCode::unsupported},
      {"too many kernels",
       replaced(base, "kernels = [ { name = \"vadd\", param_widths = [8, 8, 8, 4, 12] } ]", many_kernels),
       ErrorCode::invalid_argument},
      {"too many launches", base.substr(0, launch_at) + many_launches + base.substr(launch_end),
       ErrorCode::invalid_argument},
      {"too many bindings", replaced(base, "bindings = [\"a\", \"b\", \"out\", \"workspace.partials\"]", many_bindings),
       ErrorCode::invalid_argument},
      {"resource without lifetime prefix", replaced(base, "name = \"workspace.partials\"", "name = \"scratch\""),
       ErrorCode::invalid_argument},
      {"alignment not a power of two", replaced(base, "alignment = 256", "alignment = 96"),
       ErrorCode::invalid_argument},
      {"alignment over 1 MiB", replaced(base, "alignment = 256", "alignment = 2097152"), ErrorCode::invalid_argument},
      {"buffer over 64 GiB",
       replaced(base, "max = 16777216 } ], divisor = 256", "max = 1099511627776 } ], divisor = 16"),
       ErrorCode::invalid_argument},
      {"rank over 16",
       replaced(
           base, "shape = [ { factors = [ { tensor = \"a\", dim = 0, max = 16777216 } ], divisor = 256 } ]",
           "shape = [" +
               [] {
                 std::string d;
                 for (int i = 0; i < 17; ++i) d += std::string(i ? ", " : "") + "{ factors = [ { constant = 1 } ] }";
                 return d;
               }() +
               "]"),
       ErrorCode::invalid_argument},
      {"call-local group ipc", replaced(base, "alignment = 256", "alignment = 256\nscope = \"group_ipc\""),
       ErrorCode::invalid_argument},
      {"workspace in init", replaced(base, "role = \"run\"", "role = \"init\""), ErrorCode::invalid_argument},
      {"prepared never produced",
       replaced(replaced(base, "name = \"workspace.partials\"", "name = \"prepared.table\""), "\"workspace.partials\"]",
                "\"prepared.table\"]"),
       ErrorCode::invalid_argument},
      {"prelaunch other than fill",
       replaced(base, "role = \"run\"",
                "role = \"run\"\nprelaunch = [ { op = \"memcpy\", target = \"out\", value = 0 } ]"),
       ErrorCode::unsupported},
      {"prelaunch of an unauthorized target",
       replaced(base, "role = \"run\"",
                "role = \"run\"\nprelaunch = [ { op = \"fill\", target = \"weights\", value = 0 } ]"),
       ErrorCode::invalid_argument},
  };
  for (const auto& c : cases) {
    try {
      parse_manifest(c.text, "manifest.toml");
      ADD_FAILURE() << c.name << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), c.code) << c.name << ": " << e.what();
    }
  }
  // 33 resources.
  std::string resources;
  for (int i = 0; i < 33; ++i) {
    resources += fmt::format(
        "[[ops.artifact_resources]]\nname = \"state.r{}\"\ndtype = \"u8\"\nalignment = 1\nshape = [ {{ factors = [ {{ "
        "constant = 1 }} ] }} ]\n\n",
        i);
  }
  EXPECT_EQ(code_of([&] {
              parse_manifest(replaced(base, "[[ops.artifact_resources]]", resources + "[[ops.artifact_resources]]"),
                             "m");
            }),
            ErrorCode::invalid_argument);
  // Three 48 GiB engine buffers: each under 64 GiB, together over 128 GiB.
  std::string big;
  for (int i = 0; i < 3; ++i) {
    big += fmt::format(
        "[[ops.artifact_resources]]\nname = \"state.big{}\"\ndtype = \"u8\"\nalignment = 1\nshape = [ {{ factors = [ "
        "{{ constant = 51539607552 }} ] }} ]\n\n",
        i);
  }
  EXPECT_EQ(code_of([&] {
              parse_manifest(replaced(base, "[[ops.artifact_resources]]", big + "[[ops.artifact_resources]]"), "m");
            }),
            ErrorCode::invalid_argument);
  std::string two_big = big.substr(0, big.find("[[ops.artifact_resources]]", 10));
  EXPECT_NO_THROW(
      parse_manifest(replaced(base, "[[ops.artifact_resources]]", two_big + "[[ops.artifact_resources]]"), "m"));
}

TEST(SealManifest, OverlappingSpecializationsMustFormAChain) {
  const std::string base = example_manifest();
  const auto at = base.find("[[ops.aot_exports]]");
  const std::string export_text = base.substr(at, base.find("[[ops.aot_exports.device_plan.launches]]") - at);
  const std::string launch = base.substr(base.find("[[ops.aot_exports.device_plan.launches]]"));
  auto second = [&](const std::string& spec_a, const std::string& spec_b) {
    std::string a = replaced(export_text, "role = \"run\"", "role = \"run\"\n" + spec_a);
    std::string b = replaced(replaced(export_text, "name = \"vadd_run\"", "name = \"vadd_run_small\""),
                             "role = \"run\"", "role = \"run\"\n" + spec_b);
    return base.substr(0, at) + a + launch + "\n" + b + launch;
  };
  EXPECT_NO_THROW(parse_manifest(second("", "specializes = [ { expr = \"numel(a)\", equals = 1024 } ]"), "m"));
  EXPECT_EQ(code_of([&] {
              parse_manifest(second("specializes = [ { expr = \"rank(a)\", equals = 1 } ]",
                                    "specializes = [ { expr = \"numel(a)\", equals = 1024 } ]"),
                             "m");
            }),
            ErrorCode::invalid_argument);
}

TEST(SealManifest, TensorMapParametersDeclareTypeBoxAndSwizzle) {
  const std::string base = example_manifest();
  auto with = [&](const std::string& param) {
    std::string t = replaced(base, "{ kind = \"fast_divmod_u32\", divisor = 256 },",
                             "{ kind = \"fast_divmod_u32\", divisor = 256 },\n  " + param + ",");
    return replaced(t, "param_widths = [8, 8, 8, 4, 12]", "param_widths = [8, 8, 8, 4, 12, 128]");
  };
  const Manifest m = parse_manifest(
      with(
          R"({ kind = "tma_descriptor", binding = "a", dtype = "f32", box = ["numel(a) / 64", 64], swizzle = "128B" })"),
      "m");
  const auto& t = std::get<TmaDescriptorParam>(m.ops[0].exports[0].device_plan.launches[0].params.back());
  EXPECT_EQ(t.dtype, "f32");
  EXPECT_EQ(t.box.size(), 2u);
  EXPECT_EQ(t.swizzle, "128B");
  EXPECT_EQ(code_of([&] {
              parse_manifest(
                  with(R"({ kind = "tma_descriptor", binding = "a", dtype = "f32", box = [64], swizzle = "256B" })"),
                  "m");
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              parse_manifest(with(R"({ kind = "tma_descriptor", binding = "a", dtype = "f8", box = [64] })"), "m");
            }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { parse_manifest(with(R"({ kind = "tma_descriptor", binding = "a", dtype = "f32" })"), "m"); }),
            ErrorCode::parse_error);
  EXPECT_EQ(code_of([&] {
              parse_manifest(with(R"({ kind = "tma_descriptor", binding = "a", dtype = "f32", box = [] })"), "m");
            }),
            ErrorCode::invalid_argument);
}

TEST(SealManifest, TheScanReportsEveryProblemAndAgreesWithTheParse) {
  const std::string path = std::string(PACT_SOURCE_DIR) + "/tests/fixtures/seal/bad_bundle/manifest.toml";
  const std::string text = read_file(path, "test");
  const ManifestScan scan = scan_manifest(text, "bad");
  EXPECT_FALSE(scan.manifest.has_value());
  ASSERT_EQ(scan.problems.size(), 3u);  // the resource, the unknown provider, the undeclared kernel
  EXPECT_TRUE(mentions(scan.problems[0].what(), "alignment")) << scan.problems[0].what();
  EXPECT_EQ(scan.problems[1].code(), ErrorCode::unsupported);
  EXPECT_TRUE(mentions(scan.problems[2].what(), "no kernel 'missing'")) << scan.problems[2].what();
  // What parsed on its own is kept: the third export (whose source escapes; the closure check says so).
  ASSERT_EQ(scan.partial.ops.size(), 1u);
  ASSERT_EQ(scan.partial.ops[0].exports.size(), 1u);
  EXPECT_EQ(scan.partial.ops[0].exports[0].name, "escaping_source");
  EXPECT_EQ(
      code_of([&] { source_closure(scan.partial, std::string(PACT_SOURCE_DIR) + "/tests/fixtures/seal/bad_bundle"); }),
      ErrorCode::invalid_argument);
  // The throwing parse stops at the first of them.
  try {
    parse_manifest(text, "bad");
    ADD_FAILURE() << "the bad bundle parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), std::string(scan.problems[0].what()));
  }
  // A clean manifest scans clean.
  const ManifestScan clean = scan_manifest(example_manifest(), "m");
  EXPECT_TRUE(clean.problems.empty());
  ASSERT_TRUE(clean.manifest.has_value());
  EXPECT_EQ(execution_identity(*clean.manifest), execution_identity(parse_manifest(example_manifest(), "m")));
}

}  // namespace
}  // namespace pact::seal
