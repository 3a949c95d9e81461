// Sealed artifacts (issue 8): the closed provider registry, the closed overflow-checked expression
// language, the parameter materializer's closed primitives, specialization, the compile profile,
// identity, evidence and publication. The manifest has its own file (manifest_test.cpp).

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "../support/expect_error.hpp"
#include "pact/seal/evidence.hpp"
#include "pact/seal/manifest.hpp"
#include "pact/seal/params.hpp"
#include "pact/seal/profile.hpp"
#include "pact/seal/publication.hpp"
#include "pact/seal/registry.hpp"
#include "pact/seal/specialize.hpp"
#include "seal_support.hpp"

namespace pact::seal {
namespace {

using ::pact::test::code_of;
using ::pact::test::mentions;
using ::pact::test::message_of;
using test::example_manifest;
using test::replaced;
using test::source_bytes;
using test::three_kernel_manifest;

TEST(SealRegistry, HoldsExactlyTheOneProviderWithSpecValues) {
  ASSERT_EQ(provider_registry().size(), 1u);
  const ArtifactProvider& p = require_provider("nvcc.cubin.v1");
  EXPECT_EQ(p.artifact_kind, "cuda_cubin");
  EXPECT_EQ(p.binding_abi, "cuda_driver_params.v1");
  EXPECT_EQ(p.build_phase, "sandboxed_prebuild_only");
  EXPECT_EQ(p.load_phase, "runtime_worker_only");
  EXPECT_EQ(p.patcher, "pact.build-nvcc-cubin.v1");
  EXPECT_EQ(p.rebuild_feature, "rebuild:nvcc_cubin");
  EXPECT_EQ(p.publication_dir, "nvcc_cubin");
  EXPECT_EQ(p.qualification, "authoritative");
  EXPECT_EQ(p.aot_feature(), "aot:nvcc.cubin.v1");
  EXPECT_EQ(p.profile_inputs.size(), 5u);
  EXPECT_EQ(code_of([] { require_provider("cutlass.cute.cubin.v1"); }), ErrorCode::unsupported);
  EXPECT_EQ(code_of([] { require_provider(""); }), ErrorCode::unsupported);
}

TEST(SealRegistry, TargetsMustAdmitBothFeaturesAndNothingUnregistered) {
  const std::vector<std::string> both{"aot:nvcc.cubin.v1", "rebuild:nvcc_cubin"};
  EXPECT_NO_THROW(admit_target("nvcc.cubin.v1", both));
  EXPECT_EQ(code_of([] { admit_target("nvcc.cubin.v1", std::vector<std::string>{"aot:nvcc.cubin.v1"}); }),
            ErrorCode::unsupported);
  EXPECT_EQ(code_of([] { admit_target("nvcc.cubin.v1", std::vector<std::string>{"rebuild:nvcc_cubin"}); }),
            ErrorCode::unsupported);
  EXPECT_EQ(
      code_of([] {
        admit_target("nvcc.cubin.v1", std::vector<std::string>{"aot:nvcc.cubin.v1", "rebuild:nvcc_cubin", "jit:ptx"});
      }),
      ErrorCode::unsupported);
  EXPECT_EQ(code_of([] { admit_target("triton.v1", std::vector<std::string>{"aot:triton.v1"}); }),
            ErrorCode::unsupported);
}

TEST(SealRegistry, ProfileInputsComeFromTheAllowlistOnce) {
  const auto& p = require_provider("nvcc.cubin.v1");
  EXPECT_NO_THROW(require_profile_inputs(
      p, std::vector<std::string>{"max_active_clusters.cluster_size_2", "max_active_clusters.cluster_size_16"}));
  EXPECT_EQ(code_of([&] { require_profile_inputs(p, std::vector<std::string>{"sm_count"}); }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] {
              require_profile_inputs(p, std::vector<std::string>{"max_active_clusters.cluster_size_1",
                                                                 "max_active_clusters.cluster_size_1"});
            }),
            ErrorCode::invalid_argument);
}

TEST(SealRegistry, SnapshotDigestIsStableAndCoversEveryField) {
  const Json snap = registry_snapshot();
  EXPECT_EQ(snap["schema"], "pact.artifact-provider-registry.v1");
  EXPECT_EQ(snap["providers"][0]["id"], "nvcc.cubin.v1");
  EXPECT_EQ(registry_digest(), registry_digest());
  EXPECT_EQ(registry_digest().rfind("sha256:", 0), 0u);
  EXPECT_EQ(registry_digest().size(), 7u + 64u);
  Json changed = snap;
  changed["providers"][0]["qualification"] = "experimental";
  EXPECT_NE(digest_json("pact.artifact-provider-registry.v1", changed), registry_digest());
}

CallData call() {
  CallData c;
  c.tensors["x"] = {Dims{8, 3, 5}, Dims{15, 5, 1}};
  c.tensors["w"] = {Dims{64}, Dims{1}};
  c.scalars["heads"] = 4;
  return c;
}

std::int64_t eval(std::string_view text) { return Expr::parse(text, "test").eval(call()); }

TEST(SealExpr, EvaluatesOverLiveCallData) {
  EXPECT_EQ(eval("1 + 2 * 3"), 7);
  EXPECT_EQ(eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(eval("dim(x, 0) * dim(x, -1)"), 40);
  EXPECT_EQ(eval("stride(x, 0)"), 15);
  EXPECT_EQ(eval("numel(x) + numel(w)"), 184);
  EXPECT_EQ(eval("rank(x)"), 3);
  EXPECT_EQ(eval("ceil_div(numel(w), 48)"), 2);
  EXPECT_EQ(eval("ceil_div(-7, 2)"), -3);
  EXPECT_EQ(eval("min(dim(x, 1), scalar(heads)) + max(-2, -5)"), 1);
  EXPECT_EQ(eval("-7 / 2"), -3);
  EXPECT_EQ(eval("-7 % 2"), -1);
  EXPECT_EQ(eval("--3"), 3);
  const Expr e = Expr::parse("dim(x, 0) * scalar(heads) + numel(w)", "t");
  EXPECT_EQ(e.tensor_names(), (std::vector<std::string>{"w", "x"}));
  EXPECT_EQ(e.scalar_names(), std::vector<std::string>{"heads"});
}

TEST(SealExpr, RefusesWhatTheLanguageDoesNotHave) {
  for (const char* bad : {"", "1 +", "(1", "1)", "dim(x)", "dim(x, y)", "dim(1, 0)", "pointer(x)", "call(1)", "x",
                          "1 ** 2", "numel(x, 1)", "99999999999999999999", "1; 2", "dim(x, 0) << 2"}) {
    EXPECT_EQ(code_of([&] { Expr::parse(bad, "t"); }), ErrorCode::parse_error) << bad;
  }
  EXPECT_EQ(code_of([] { Expr::parse(std::string(2000, '1'), "t"); }), ErrorCode::parse_error);
  EXPECT_EQ(code_of([] { Expr::parse(std::string(100, '(') + "1" + std::string(100, ')'), "t"); }),
            ErrorCode::parse_error);
  std::string many = "1";
  for (int i = 0; i < 300; ++i) many += "+1";
  EXPECT_EQ(code_of([&] { Expr::parse(many, "t"); }), ErrorCode::parse_error);
}

TEST(SealExpr, OverflowDivisionByZeroAndUnknownNamesAreTyped) {
  EXPECT_EQ(code_of([] { eval("9223372036854775807 + 1"); }), ErrorCode::layout_overflow);
  EXPECT_EQ(code_of([] { eval("4611686018427387904 * 2"); }), ErrorCode::layout_overflow);
  EXPECT_EQ(code_of([] { eval("-9223372036854775807 - 2"); }), ErrorCode::layout_overflow);
  EXPECT_EQ(code_of([] { eval("(-9223372036854775807 - 1) / -1"); }), ErrorCode::layout_overflow);
  EXPECT_EQ(code_of([] { eval("1 / (dim(x, 0) - 8)"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { eval("1 % 0"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { eval("ceil_div(4, 0)"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { eval("dim(y, 0)"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { eval("dim(x, 3)"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { eval("scalar(batch)"); }), ErrorCode::invalid_argument);
  CallData huge;
  huge.tensors["t"] = {Dims{1LL << 32, 1LL << 32}, Dims{1LL << 32, 1}};
  EXPECT_EQ(code_of([&] { Expr::parse("numel(t)", "t").eval(huge); }), ErrorCode::layout_overflow);
}

TEST(SealParams, FastDivmodDividesExactlyOverTheIntRange) {
  std::mt19937_64 rng(7);
  for (std::int64_t d : {1LL, 2LL, 3LL, 7LL, 10LL, 64LL, 1000LL, 65537LL, (1LL << 31) - 1, 1LL << 31, (1LL << 31) + 1,
                         (1LL << 32) - 1}) {
    const FastDivmod f = make_fast_divmod(d);
    EXPECT_EQ(f.divisor, static_cast<std::uint32_t>(d));
    for (std::uint32_t n : {0u, 1u, static_cast<std::uint32_t>(d - 1), static_cast<std::uint32_t>(d), 0x7fffffffu}) {
      EXPECT_EQ(f.quotient(n), n / static_cast<std::uint32_t>(d)) << n << " / " << d;
    }
    for (int k = 0; k < 2000; ++k) {
      const auto n = static_cast<std::uint32_t>(rng() & 0x7fffffffu);
      ASSERT_EQ(f.quotient(n), n / static_cast<std::uint32_t>(d)) << n << " / " << d;
    }
  }
  EXPECT_EQ(code_of([] { make_fast_divmod(0); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { make_fast_divmod(1LL << 32); }), ErrorCode::invalid_argument);
}

template <class T>
T read_at(const ParameterFrame& f, std::size_t offset) {
  T v;
  std::memcpy(&v, f.bytes.data() + offset, sizeof(T));
  return v;
}

TEST(SealParams, MaterializesTheExactFrameFromALiveCall) {
  std::vector<ParamSpec> params;
  params.emplace_back(PointerParam{"x"});
  params.emplace_back(ScalarParam{ScalarType::i32, Expr::parse("dim(x, 0)", "p1")});
  params.emplace_back(ScalarParam{ScalarType::i64, Expr::parse("numel(x) * 3", "p2")});
  params.emplace_back(PackedStructParam{
      16, 8, {{0, ScalarType::u32, Expr::parse("dim(x, 1)", "f0")}, {8, ScalarType::i64, Expr::parse("-1", "f1")}}});
  params.emplace_back(FastDivmodParam{Expr::parse("dim(x, 2)", "p4")});
  const std::vector<std::uint32_t> widths{8, 4, 8, 16, 12};
  const std::map<std::string, std::uint64_t, std::less<>> pointers{{"x", 0xdead0000ULL}};
  const ParameterFrame f = materialize(params, widths, call(), pointers);
  EXPECT_EQ(f.offsets, (std::vector<std::uint32_t>{0, 8, 16, 24, 40}));
  EXPECT_EQ(f.widths, widths);
  EXPECT_EQ(f.bytes.size(), 52u);
  EXPECT_EQ(read_at<std::uint64_t>(f, 0), 0xdead0000ULL);
  EXPECT_EQ(read_at<std::int32_t>(f, 8), 8);
  EXPECT_EQ(read_at<std::int32_t>(f, 12), 0);  // padding is zero
  EXPECT_EQ(read_at<std::int64_t>(f, 16), 360);
  EXPECT_EQ(read_at<std::uint32_t>(f, 24), 3u);
  EXPECT_EQ(read_at<std::uint32_t>(f, 28), 0u);  // a zeroed struct frame
  EXPECT_EQ(read_at<std::int64_t>(f, 32), -1);
  const FastDivmod five = make_fast_divmod(5);
  EXPECT_EQ(read_at<std::uint32_t>(f, 40), 5u);
  EXPECT_EQ(read_at<std::uint32_t>(f, 44), five.multiplier);
  EXPECT_EQ(read_at<std::uint32_t>(f, 48), five.shift);
}

// A tensor map through the validator's encoder (a stand-in here; admission installs the driver's): the
// request is in the driver's order (innermost first), the descriptor lands 64-byte aligned in the frame.
TEST(SealParams, TensorMapsAreEncodedThroughTheValidatorsEncoder) {
  CallData c;
  c.tensors["x"] = {Dims{4, 6, 64}, Dims{512, 64, 1}};  // 256-byte rows, 2048-byte planes (padded from 1536)
  c.scalars["rows"] = 2;
  const std::map<std::string, std::uint64_t, std::less<>> pointers{{"x", 0x10000}};
  std::vector<TmaRequest> seen;
  const TmaEncoder encoder = [&](const TmaRequest& r, std::byte* out) {
    seen.push_back(r);
    std::memset(out, 0xab, 128);
  };
  std::vector<ParamSpec> params;
  params.emplace_back(ScalarParam{ScalarType::i32, Expr::parse("1", "t")});
  params.emplace_back(TmaDescriptorParam{
      "x", "f32", {Expr::parse("1", "b"), Expr::parse("scalar(rows)", "b"), Expr::parse("32", "b")}, "128B"});
  const std::vector<std::uint32_t> widths{4, 128};
  const ParameterFrame f = materialize(params, widths, c, pointers, &encoder);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].dims, (std::vector<std::uint64_t>{64, 6, 4}));
  EXPECT_EQ(seen[0].stride_bytes, (std::vector<std::uint64_t>{256, 2048}));
  EXPECT_EQ(seen[0].box, (std::vector<std::uint32_t>{32, 2, 1}));
  EXPECT_EQ(seen[0].address, 0x10000u);
  EXPECT_EQ(seen[0].swizzle, "128B");
  EXPECT_EQ(f.offsets[1], 64u);
  for (std::size_t i = 0; i < 128; ++i) ASSERT_EQ(f.bytes[64 + i], std::byte{0xab}) << i;
  // What the driver could not encode is refused first, typed.
  auto code = [&](CallData cd, TmaDescriptorParam t) {
    std::vector<ParamSpec> v;
    v.emplace_back(std::move(t));
    return code_of([&] { materialize(v, std::vector<std::uint32_t>{128}, cd, pointers, &encoder); });
  };
  const auto box2 = [](const char* a, const char* b) {
    return std::vector<Expr>{Expr::parse(a, "b"), Expr::parse(b, "b")};
  };
  CallData strided;
  strided.tensors["x"] = {Dims{8, 64}, Dims{1, 8}};  // innermost not contiguous
  EXPECT_EQ(code(strided, {"x", "f32", box2("8", "8"), "none"}), ErrorCode::invalid_argument);
  CallData odd;
  odd.tensors["x"] = {Dims{8, 3}, Dims{3, 1}};  // a 12-byte row stride
  EXPECT_EQ(code(odd, {"x", "f32", box2("8", "4"), "none"}), ErrorCode::invalid_argument);
  CallData ok;
  ok.tensors["x"] = {Dims{8, 64}, Dims{64, 1}};
  EXPECT_EQ(code(ok, {"x", "f32", box2("8", "300"), "none"}), ErrorCode::invalid_argument);         // box past 256
  EXPECT_EQ(code(ok, {"x", "f32", box2("8", "2"), "none"}), ErrorCode::invalid_argument);           // 8-byte inner box
  EXPECT_EQ(code(ok, {"x", "f32", {Expr::parse("8", "b")}, "none"}), ErrorCode::invalid_argument);  // box rank
  EXPECT_EQ(code(ok, {"y", "f32", box2("8", "8"), "none"}), ErrorCode::invalid_argument);           // not admitted
  EXPECT_EQ(seen.size(), 1u);
  EXPECT_EQ(code_of([] { (void)tma_element_size("f8"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([] { require_tma_swizzle("256B"); }), ErrorCode::invalid_argument);
}

TEST(SealParams, MismatchesAndUnsupportedPrimitivesFailClosed) {
  const std::map<std::string, std::uint64_t, std::less<>> pointers{{"x", 64}};
  auto one = [&](ParamSpec p, std::uint32_t width) {
    std::vector<ParamSpec> v;
    v.push_back(std::move(p));
    const std::vector<std::uint32_t> w{width};
    return code_of([&] { materialize(v, w, call(), pointers); });
  };
  EXPECT_EQ(one(PointerParam{"x"}, 4), ErrorCode::invalid_argument);  // width differs from the contract
  EXPECT_EQ(one(PointerParam{"y"}, 8), ErrorCode::invalid_argument);  // not an admitted binding
  EXPECT_EQ(one(ScalarParam{ScalarType::u32, Expr::parse("-1", "t")}, 4), ErrorCode::layout_overflow);
  EXPECT_EQ(one(ScalarParam{ScalarType::i32, Expr::parse("2147483648", "t")}, 4), ErrorCode::layout_overflow);
  EXPECT_EQ(one(TmaDescriptorParam{"x", "f32", {Expr::parse("8", "b")}, "none"}, 128),
            ErrorCode::unsupported);                                  // no encoder: CUDA machine only
  EXPECT_EQ(one(GroupHandleParam{"tp"}, 8), ErrorCode::unsupported);  // no resolver: fails closed
  EXPECT_EQ(one(FastDivmodParam{Expr::parse("dim(x, 0) - 8", "t")}, 12), ErrorCode::invalid_argument);  // divisor 0
  EXPECT_EQ(one(PackedStructParam{12, 8, {}}, 12), ErrorCode::invalid_argument);  // size not a multiple of alignment
  EXPECT_EQ(one(PackedStructParam{16, 3, {}}, 16), ErrorCode::invalid_argument);  // alignment not a power of two
  EXPECT_EQ(one(PackedStructParam{8, 8, {{6, ScalarType::u32, Expr::parse("1", "t")}}}, 8),
            ErrorCode::invalid_argument);  // misaligned
  EXPECT_EQ(one(PackedStructParam{8, 8, {{4, ScalarType::i64, Expr::parse("1", "t")}}}, 8),
            ErrorCode::invalid_argument);  // leaves the struct
  EXPECT_EQ(one(
                PackedStructParam{
                    16, 8, {{0, ScalarType::i64, Expr::parse("1", "t")}, {4, ScalarType::u32, Expr::parse("1", "t")}}},
                16),
            ErrorCode::invalid_argument);  // overlapping fields
  std::vector<ParamSpec> two;
  two.emplace_back(PointerParam{"x"});
  EXPECT_EQ(code_of([&] {
              materialize(two, std::vector<std::uint32_t>{8, 8}, call(), pointers);
            }),
            ErrorCode::invalid_argument);
}

Predicate eq(const char* expr, std::int64_t v) { return {Expr::parse(expr, "pred"), v}; }

TEST(SealSpecialize, AStrictFallbackChainSelectsTheMostSpecificPlan) {
  std::vector<Specialization> v;
  v.push_back({"generic", {}});
  v.push_back({"rank3", {eq("rank(x)", 3)}});
  v.push_back({"rank3_batch8", {eq("rank( x )", 3), eq("dim(x, 0)", 8)}});  // whitespace does not make a new key
  v.push_back({"rank2", {eq("rank(x)", 2)}});                               // disjoint from rank3: no nesting needed
  EXPECT_NO_THROW(check_specializations(v));
  EXPECT_EQ(select_specialization(v, call()).plan, "rank3_batch8");
  CallData other = call();
  other.tensors["x"].shape = Dims{4, 3, 5};
  EXPECT_EQ(select_specialization(v, other).plan, "rank3");
  other.tensors["x"] = {Dims{4, 3}, Dims{3, 1}};
  EXPECT_EQ(select_specialization(v, other).plan, "rank2");
  other.tensors["x"] = {Dims{4}, Dims{1}};
  EXPECT_EQ(select_specialization(v, other).plan, "generic");
  // Without the unconditional fallback, a call no variant covers is an error.
  v.erase(v.begin());
  EXPECT_EQ(code_of([&] { select_specialization(v, other); }), ErrorCode::invalid_argument);
}

TEST(SealSpecialize, OverlapsThatAreNotAChainAreRefused) {
  std::vector<Specialization> crossing;
  crossing.push_back({"batch8", {eq("dim(x, 0)", 8)}});
  crossing.push_back({"heads4", {eq("scalar(heads)", 4)}});  // both apply to a batch-8, 4-head call
  EXPECT_EQ(code_of([&] { check_specializations(crossing); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { select_specialization(crossing, call()); }),
            ErrorCode::invalid_argument);  // ambiguous at run time too
  std::vector<Specialization> same;
  same.push_back({"a", {eq("dim(x, 0)", 8)}});
  same.push_back({"b", {eq("dim(x,0)", 8)}});
  EXPECT_EQ(code_of([&] { check_specializations(same); }), ErrorCode::invalid_argument);
  std::vector<Specialization> twice;
  twice.push_back({"a", {eq("dim(x, 0)", 8), eq("dim(x, 0)", 4)}});
  EXPECT_EQ(code_of([&] { check_specializations(twice); }), ErrorCode::invalid_argument);
  std::vector<Specialization> names;
  names.push_back({"a", {}});
  names.push_back({"a", {eq("rank(x)", 3)}});
  EXPECT_EQ(code_of([&] { check_specializations(names); }), ErrorCode::invalid_argument);
}

Json profile_json() {
  Json digests = Json::object();
  for (auto name : compile_profile_digest_names()) digests[std::string(name)] = "sha256:" + std::string(64, 'c');
  return {{"schema", "pact.nvcc-compile-profile.v1"},
          {"provider", "nvcc.cubin.v1"},
          {"logical_arch", "sm90"},
          {"compiler_arch", "sm_90a"},
          {"visible_gpus", 8},
          {"tp", 2},
          {"ep", 1},
          {"dp", 4},
          {"constants", {{"max_active_clusters.cluster_size_2", 66}}},
          {"digests", digests}};
}

TEST(SealProfile, ParsesAValidProfileAndItsDigestIgnoresFormatting) {
  const CompileProfile p = parse_compile_profile(profile_json().dump(), "p.json");
  EXPECT_EQ(p.compiler_arch, "sm_90a");
  EXPECT_EQ(p.constants.at("max_active_clusters.cluster_size_2"), 66);
  const CompileProfile q = parse_compile_profile(profile_json().dump(4), "q.json");  // other whitespace and layout
  EXPECT_EQ(compile_profile_digest(p), compile_profile_digest(q));
  EXPECT_NO_THROW(require_same_profile(p, q));
}

TEST(SealProfile, MalformedProfilesAreTypedAndNameTheField) {
  auto refused = [](const std::function<void(Json&)>& edit, const std::string& field) {
    Json j = profile_json();
    edit(j);
    try {
      parse_compile_profile(j.dump(), "p.json");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::parse_error);
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      return;
    }
    ADD_FAILURE() << "accepted a profile with a bad " << field;
  };
  refused([](Json& j) { j["schema"] = "pact.nvcc-compile-profile.v0"; }, "schema");
  refused([](Json& j) { j["provider"] = "cutlass.cute.cubin.v1"; }, "provider");
  refused([](Json& j) { j["compiler_arch"] = "sm_100a"; }, "compiler_arch");  // another family
  refused([](Json& j) { j["logical_arch"] = "gfx90a"; }, "logical_arch");
  refused([](Json& j) { j["visible_gpus"] = 0; }, "visible_gpus");
  refused([](Json& j) { j["tp"] = 16; }, "tp");
  refused([](Json& j) { j["dp"] = 8; }, "dp");  // tp 2 x dp 8 > 8 GPUs
  refused([](Json& j) { j["constants"]["sm_count"] = 132; }, "constants.sm_count");
  refused([](Json& j) { j["constants"]["max_active_clusters.cluster_size_2"] = -1; },
          "constants.max_active_clusters.cluster_size_2");
  refused([](Json& j) { j["digests"]["image"] = "md5:abc"; }, "digests.image");
  refused([](Json& j) { j["digests"].erase("topology"); }, "digests.topology");
  refused([](Json& j) { j["extra"] = true; }, "extra");
  refused([](Json& j) { j.erase("ep"); }, "ep");
  EXPECT_EQ(code_of([] { parse_compile_profile("{", "p.json"); }), ErrorCode::parse_error);
}

TEST(SealProfile, AnArtifactBuiltUnderAnotherProfileIsNotAuthority) {
  const CompileProfile built = parse_compile_profile(profile_json().dump(), "built.json");
  Json other = profile_json();
  other["digests"]["topology"] = "sha256:" + std::string(64, 'd');
  const CompileProfile launch = parse_compile_profile(other.dump(), "launch.json");
  try {
    require_same_profile(built, launch);
    ADD_FAILURE() << "a different topology was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("digests"), std::string::npos) << e.what();
  }
}

TEST(SealIdentity, TheExecutionIdentityIgnoresFormattingRowOrderAndTheCompatibilityEntry) {
  const std::string base = example_manifest();
  const std::string id = execution_identity(parse_manifest(base, "m"));
  EXPECT_EQ(id.rfind("sha256:", 0), 0u);
  // Whitespace, comments, expression spacing and the compatibility entry do not matter.
  std::string reformatted = replaced(base, "\"ceil_div(numel(a), 256)\"", "\"ceil_div( numel(a) ,256 )\"");
  reformatted = replaced(reformatted, "entry = \"compat_entry\"", "entry = \"another_entry\"  # still never executed");
  reformatted = "# a comment\n\n" + replaced(reformatted, "block = [256, 1, 1]", "block = [ 256,1,   1 ]");
  EXPECT_EQ(execution_identity(parse_manifest(reformatted, "m")), id);
  // Resource rows in another order.
  const std::string extra =
      "[[ops.artifact_resources]]\nname = \"state.cache\"\ndtype = \"u8\"\nalignment = 64\nshape = [ { factors = [ { "
      "constant = 4096 } ] } ]\n\n";
  const std::string after = replaced(base, "[[ops.aot_exports]]", extra + "[[ops.aot_exports]]");
  const std::string before = replaced(base, "[[ops.artifact_resources]]", extra + "[[ops.artifact_resources]]");
  EXPECT_EQ(execution_identity(parse_manifest(after, "m")), execution_identity(parse_manifest(before, "m")));
  // Every execution-bearing change does.
  EXPECT_NE(execution_identity(parse_manifest(replaced(base, "block = [256, 1, 1]", "block = [128, 1, 1]"), "m")), id);
  EXPECT_NE(execution_identity(parse_manifest(replaced(base, "divisor = 256 }", "divisor = 128 }"), "m")), id);
  EXPECT_NE(execution_identity(parse_manifest(replaced(base, "alignment = 256", "alignment = 512"), "m")), id);
}

TEST(SealIdentity, TheFingerprintCoversTheNormalizedSourceClosure) {
  namespace fs = std::filesystem;
  const test::ScratchBundle bundle;
  const fs::path& dir = bundle.dir;
  auto write = [&](const std::string& name, const std::string& text) { bundle.write(name, text); };
  std::string kernel;
  {
    std::ifstream in(std::string(PACT_SOURCE_DIR) + "/examples/seal/vector_add/vadd.cu");
    std::stringstream t;
    t << in.rdbuf();
    kernel = t.str();
  }
  const Manifest m = parse_manifest(example_manifest(), "m");
  write("vadd.cu", "#include \"helpers.h\"\n" + kernel);
  write("helpers.h", "#define PACT_HELPER 1\n");
  const std::string fp = provenance_fingerprint(m, dir.string());
  // Comments and whitespace are normalized away.
  write("vadd.cu", "#include \"helpers.h\"\n// reformatted\n\n" + kernel + "\n   \n");
  EXPECT_EQ(provenance_fingerprint(m, dir.string()), fp);
  // The included file is part of the closure.
  write("helpers.h", "#define PACT_HELPER 2\n");
  EXPECT_NE(provenance_fingerprint(m, dir.string()), fp);
  write("helpers.h", "#define PACT_HELPER 1\n");
  EXPECT_EQ(provenance_fingerprint(m, dir.string()), fp);
  // The kernel itself.
  write("vadd.cu", "#include \"helpers.h\"\n" + replaced(kernel, "a[k] + b[k]", "a[k] - b[k]"));
  EXPECT_NE(provenance_fingerprint(m, dir.string()), fp);
  // An include that leaves the bundle, a missing source.
  write("vadd.cu", "#include \"../outside.h\"\n" + kernel);
  EXPECT_EQ(code_of([&] { provenance_fingerprint(m, dir.string()); }), ErrorCode::invalid_argument);
  fs::remove(dir / "vadd.cu");
  EXPECT_EQ(code_of([&] { provenance_fingerprint(m, dir.string()); }), ErrorCode::io_error);
}

// Issue 21 item 3: at 67b41fb the closure walker looked for the text "#include \"" only, so every other
// spelling of an include that leaves the bundle reached the compiler unseen (`pact seal scan`: 0
// problems) and compiled a host file into the sandbox. Each spelling below is now refused, or (the
// spelled-out quoted forms) resolved into the closure, whatever white space, comments or splices it uses.
TEST(SealIdentity, NoSpellingOfAnIncludeEscapesTheClosure) {
  namespace fs = std::filesystem;
  const test::ScratchBundle bundle;
  const fs::path& dir = bundle.dir;
  auto write = [&](const std::string& name, const std::string& text) { bundle.write(name, text); };
  const Manifest m = parse_manifest(example_manifest(), "m");
  write("helpers.h", "#define PACT_HELPER 1\n");
  const std::string kernel = "extern \"C\" __global__ void k(float* a) { a[0] = 1; }\n";
  const std::vector<std::string> escapes{
      "# include \"../../outside.h\"\n",               // white space after #
      "  #\tinclude_next \"../outside.h\"\n",          // include_next, tabs
      "%:include \"../outside.h\"\n",                  // the digraph
      "/* c */ # /* c */ include \"../outside.h\"\n",  // comments stand for white space
      "#inc\\\nlude \"../outside.h\"\n",               // a line splice inside the keyword
      "#include /*\n*/ \"../outside.h\"\n",            // a directive continued inside a block comment
      "#include </etc/passwd>\n",                      // an absolute system include
      "#include <../../../etc/passwd>\n",              // a system include that climbs
      "#include \"/etc/passwd\"\n",                    // an absolute quoted include
      "#define P \"/etc/passwd\"\n#include P\n",       // macro-expanded
      "#import \"../outside.h\"\n",                    // import
  };
  for (const auto& head : escapes) {
    write("vadd.cu", head + kernel);
    EXPECT_EQ(code_of([&] { (void)source_closure(m, dir.string()); }), ErrorCode::invalid_argument) << head;
  }
  // Spelled other ways, an include of a bundle file still joins the closure (so the fingerprint covers it).
  for (const std::string head :
       {"  #  include \"helpers.h\"\n", "%:include \"helpers.h\"\n", "/**/#include/**/\"helpers.h\"\n"}) {
    write("vadd.cu", head + kernel);
    const auto closure = source_closure(m, dir.string());
    EXPECT_EQ(closure.count("helpers.h"), 1U) << head;
  }
  // Not directives: inside a comment, a string literal or a raw string literal, or not at a line's start.
  write("vadd.cu",
        "// #include \"../outside.h\"\n/*\n#include </etc/passwd>\n*/\nconst char* s = \"#include </etc/passwd>\";\n"
        "const char* r = R\"x(\n#include </etc/passwd>\n)x\";\nint a; #include </etc/passwd>\n#include <cstdint>\n" +
            kernel);
  EXPECT_EQ(source_closure(m, dir.string()).size(), 1U);
}

TEST(SealEvidence, TheCompletionGateNeedsLoadInvocationAndCompletionAndNoFallback) {
  EvidenceLog log;
  EXPECT_EQ(code_of([&] { log.invoked("a"); }), ErrorCode::invalid_argument);  // an invocation without a load
  EXPECT_EQ(code_of([&] { log.completed("a"); }), ErrorCode::invalid_argument);
  log.loaded("a");
  log.loaded("b");
  auto v = log.gate({"a", "b"});
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.reasons.size(), 2u);  // loaded, never ran
  log.invoked("a");
  log.completed("a");
  log.invoked("b");
  EXPECT_FALSE(log.gate({"a", "b"}).passed);  // b never completed
  log.completed("b");
  EXPECT_TRUE(log.gate({"a", "b"}).passed);
  EXPECT_FALSE(log.gate({"a", "c"}).passed);  // evidence for a and b says nothing of c
  EXPECT_FALSE(log.gate({}).passed);
  log.fallback("attention");
  const auto f = log.gate({"a", "b"});
  EXPECT_FALSE(f.passed);
  EXPECT_NE(f.reasons.back().find("attention"), std::string::npos);
  EXPECT_EQ(log.to_json()["aot_invoked"]["a"], 1);
}

TEST(SealEvidence, ArtifactStorageStaysWithinTheLiveBudget) {
  StorageBudget budget;
  budget.reserve("op/state.a", std::uint64_t{8} << 30);
  budget.reserve("op/state.b", std::uint64_t{8} << 30);
  EXPECT_EQ(budget.live_bytes(), kLiveStorageBudget);
  EXPECT_EQ(code_of([&] { budget.reserve("op/workspace.c", 1); }), ErrorCode::allocation_failed);
  EXPECT_EQ(code_of([&] { budget.reserve("op/state.a", 1); }), ErrorCode::invalid_argument);
  budget.release("op/state.a");
  EXPECT_EQ(code_of([&] { budget.release("op/state.a"); }), ErrorCode::invalid_argument);
  EXPECT_EQ(code_of([&] { budget.reserve("huge", ~std::uint64_t{0}); }), ErrorCode::allocation_failed);
  StorageBudget keys;
  for (std::size_t i = 0; i < kMaxAllocationKeys; ++i) keys.reserve(fmt::format("k{}", i), 1);
  EXPECT_EQ(code_of([&] { keys.reserve("one-more", 1); }), ErrorCode::allocation_failed);
  EXPECT_EQ(keys.live_keys(), kMaxAllocationKeys);
}

std::vector<std::byte> fixture_cubin() {
  std::ifstream in(std::string(PACT_SOURCE_DIR) + "/tests/fixtures/seal/vector_add/nvcc_cubin/vadd_run.cubin",
                   std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

TEST(SealPublication, TheCubinsOwnMetadataGivesThePlansParameterWidths) {
  const auto bytes = fixture_cubin();
  ASSERT_GT(bytes.size(), 64u);
  const auto kernels = read_cubin_kernels(bytes, "vadd_run.cubin");
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].symbol, "vadd");
  EXPECT_EQ(kernels[0].param_widths, (std::vector<std::uint32_t>{8, 8, 8, 4, 12}));  // pointers, i32, fast_divmod_u32
  // The toolkit agrees: nvcc's PTX of the same source declares the same kernel and widths.
  const auto ptx = test::ptx_kernels(std::string(PACT_SOURCE_DIR) + "/tests/fixtures/seal/ptx/vadd.ptx");
  ASSERT_EQ(ptx.size(), 1u);
  EXPECT_EQ(ptx[0].name, kernels[0].symbol);
  EXPECT_EQ(ptx[0].widths, kernels[0].param_widths);
  // Truncations and a wrong machine are typed, never a crash.
  for (std::size_t cut : {0ul, 16ul, 63ul, 64ul, bytes.size() / 2, bytes.size() - 1}) {
    EXPECT_EQ(code_of([&] { read_cubin_kernels(std::span(bytes).first(cut), "cut"); }), ErrorCode::parse_error) << cut;
  }
  auto x86 = bytes;
  x86[0x12] = std::byte{62};
  x86[0x13] = std::byte{0};
  EXPECT_EQ(code_of([&] { read_cubin_kernels(x86, "x86"); }), ErrorCode::parse_error);
}

// Issue 21 item 3: kernels bind by their extern "C" name. The fixture CUBIN's kernels are defined mid,
// alpha, zeta with one signature and stored zeta, alpha, mid; a plan lists them sorted by name. At
// 67b41fb binding was by position, so the plan's alpha bound the physical zeta and the publication
// verified because the widths agreed.
TEST(SealPublication, KernelsBindByNameNeverByPosition) {
  const auto cubin = source_bytes("tests/fixtures/seal/three_kernels/three.cubin");
  const auto physical = read_cubin_kernels(cubin, "three.cubin");
  ASSERT_EQ(physical.size(), 3U);
  std::vector<std::string> stored;
  for (const auto& k : physical) stored.push_back(k.symbol);
  ASSERT_NE(stored, (std::vector<std::string>{"alpha", "mid", "zeta"})) << "the fixture must not be stored sorted";
  // Pact's parser finds the kernels and widths the toolkit's PTX declares (in another order: PTX keeps the
  // definition order).
  std::map<std::string, std::vector<std::uint32_t>> parsed, declared;
  for (const auto& k : physical) parsed[k.symbol] = k.param_widths;
  for (const auto& k : test::ptx_kernels(std::string(PACT_SOURCE_DIR) + "/tests/fixtures/seal/ptx/three.ptx"))
    declared[k.name] = k.widths;
  EXPECT_EQ(parsed, declared);
  const Manifest m = parse_manifest(three_kernel_manifest({"alpha", "mid", "zeta"}, "alpha"), "m");
  const auto& plan = m.ops[0].exports[0].device_plan.kernels;
  const auto bound = bind_kernels_by_name(plan, physical, "three.cubin");
  ASSERT_EQ(bound.size(), 3U);
  for (std::size_t i = 0; i < plan.size(); ++i) EXPECT_EQ(physical[bound[i]].symbol, plan[i].name);

  const CompileProfile profile = parse_compile_profile(profile_json().dump(), "p");
  char tmpl[] = "/tmp/pact-names-XXXXXX";
  const std::filesystem::path root = ::mkdtemp(tmpl);
  auto publish = [&](const Manifest& manifest, const std::string& name) {
    const std::string dir = (root / name).string();
    write_publication(dir, manifest, profile, {{"vadd_run", cubin}}, Json::object());
    return dir;
  };
  EXPECT_NO_THROW(reopen_publication(publish(m, "sorted"), m, profile));
  // A plan that names a kernel the CUBIN lacks is refused, though its widths match a kernel there.
  const Manifest drifted = parse_manifest(three_kernel_manifest({"alpha", "beta", "zeta"}, "alpha"), "m");
  const std::string drifted_dir = publish(drifted, "drifted");
  const std::string why = message_of([&] { reopen_publication(drifted_dir, drifted, profile); });
  EXPECT_TRUE(mentions(why, "kernel 'beta' is not in")) << why;
  // A CUBIN kernel the plan does not declare is refused too (nothing runs unaccounted for).
  const Manifest partial = parse_manifest(three_kernel_manifest({"alpha", "zeta"}, "alpha"), "m");
  const std::string partial_dir = publish(partial, "partial");
  EXPECT_TRUE(mentions(message_of([&] { reopen_publication(partial_dir, partial, profile); }), "holds 3 kernels"));
  // A width mismatch under the right name is still refused.
  auto widths = plan;
  widths[1].param_widths[3] = 8;
  EXPECT_TRUE(mentions(message_of([&] { (void)bind_kernels_by_name(widths, physical, "three.cubin"); }),
                       "kernel 'mid' of 'three.cubin' has parameter widths [8,8,8,4,12]"));
  std::filesystem::remove_all(root);
}

struct PublicationFixture {
  std::filesystem::path dir;
  Manifest manifest;
  CompileProfile profile;
  PublicationFixture()
      : manifest(parse_manifest(example_manifest(), "m")), profile(parse_compile_profile(profile_json().dump(), "p")) {
    char tmpl[] = "/tmp/pact-pub-XXXXXX";
    dir = std::filesystem::path(::mkdtemp(tmpl)) / "publication";
    write_publication(dir.string(), manifest, profile, {{"vadd_run", fixture_cubin()}}, Json{{"nvcc", "13.0"}});
  }
  ~PublicationFixture() { std::filesystem::remove_all(dir.parent_path()); }
  ErrorCode reopen() const {
    return code_of([&] { reopen_publication(dir.string(), manifest, profile); });
  }
};

TEST(SealPublication, AFreshPublicationReopensGpuFree) {
  PublicationFixture f;
  const Json index = reopen_publication(f.dir.string(), f.manifest, f.profile);
  EXPECT_EQ(index["schema"], "pact.seal-publication.v1");
  EXPECT_EQ(index["execution_identity"], execution_identity(f.manifest));
  EXPECT_EQ(index["exports"][0]["cubin"], "nvcc_cubin/vadd_run.cubin");
  // A publication is never repaired in place.
  EXPECT_EQ(code_of([&] {
              write_publication(f.dir.string(), f.manifest, f.profile, {{"vadd_run", fixture_cubin()}}, Json::object());
            }),
            ErrorCode::invalid_argument);
}

TEST(SealPublication, TheCommittedSealedFixtureReopensAgainstTheExampleBundle) {
  // tests/fixtures/seal/vector_add was written by `pact seal build` (tests/fixtures/seal/regenerate.sh).
  const std::string dir = std::string(PACT_SOURCE_DIR) + "/tests/fixtures/seal/vector_add";
  const Json index = reopen_publication(dir);
  const std::string profile_path = std::string(PACT_SOURCE_DIR) + "/examples/seal/profiles/h100-sm90a.json";
  std::ifstream in(profile_path);
  std::stringstream text;
  text << in.rdbuf();
  const CompileProfile profile = parse_compile_profile(text.str(), profile_path);
  const Manifest m = parse_manifest(example_manifest(), "manifest.toml");
  EXPECT_EQ(reopen_publication(dir, m, profile), index);
  EXPECT_EQ(index["declaration"], execution_declaration(m));
  EXPECT_EQ(index["forced_options"], Json::parse(R"(["-cubin", "-arch=sm_90a", "-rdc=false"])"));
  // Under another profile (the test's sm90 profile with a different measurement) it is not authority.
  const CompileProfile other = parse_compile_profile(profile_json().dump(), "p");
  EXPECT_EQ(code_of([&] { reopen_publication(dir, m, other); }), ErrorCode::invalid_argument);
  // Nor for another declaration.
  const Manifest m2 = parse_manifest(replaced(example_manifest(), "block = [256, 1, 1]", "block = [128, 1, 1]"), "m2");
  EXPECT_EQ(code_of([&] { reopen_publication(dir, m2, profile); }), ErrorCode::invalid_argument);
}

TEST(SealPublication, EveryTamperingFailsClosed) {
  namespace fs = std::filesystem;
  {
    PublicationFixture f;  // a flipped CUBIN byte
    std::fstream io(f.dir / "nvcc_cubin/vadd_run.cubin", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(100);
    io.put('\x5a');
    io.close();
    EXPECT_EQ(f.reopen(), ErrorCode::invalid_argument);
  }
  {
    PublicationFixture f;  // an extra file
    std::ofstream(f.dir / "nvcc_cubin/extra.ptx") << "ptx";
    EXPECT_EQ(f.reopen(), ErrorCode::invalid_argument);
  }
  {
    PublicationFixture f;  // a missing file
    fs::remove(f.dir / "nvcc_cubin/vadd_run.cubin");
    EXPECT_EQ(f.reopen(), ErrorCode::invalid_argument);
  }
  {
    PublicationFixture f;  // a symlink in place of the CUBIN
    fs::rename(f.dir / "nvcc_cubin/vadd_run.cubin", f.dir.parent_path() / "outside.cubin");
    fs::create_symlink(f.dir.parent_path() / "outside.cubin", f.dir / "nvcc_cubin/vadd_run.cubin");
    EXPECT_EQ(f.reopen(), ErrorCode::invalid_argument);
  }
  {
    PublicationFixture f;  // parameter widths that differ from the plan
    f.manifest = parse_manifest(
        replaced(replaced(example_manifest(), "param_widths = [8, 8, 8, 4, 12]", "param_widths = [8, 8, 8, 8, 12]"),
                 "{ kind = \"scalar\", type = \"i32\", value = \"numel(a)\" }",
                 "{ kind = \"scalar\", type = \"i64\", value = \"numel(a)\" }"),
        "m");
    EXPECT_EQ(f.reopen(), ErrorCode::invalid_argument);  // the identity differs first
  }
  {
    PublicationFixture f;  // a plan with a second kernel the CUBIN lacks: a missing ordinal
    std::string two = replaced(
        example_manifest(), "kernels = [ { name = \"vadd\", param_widths = [8, 8, 8, 4, 12] } ]",
        "kernels = [ { name = \"vadd\", param_widths = [8, 8, 8, 4, 12] }, { name = \"vsub\", param_widths = [8] } ]");
    const Manifest m2 = parse_manifest(two, "m");
    const auto dir2 = f.dir.parent_path() / "two";
    write_publication(dir2.string(), m2, f.profile, {{"vadd_run", fixture_cubin()}}, Json::object());
    EXPECT_EQ(code_of([&] { reopen_publication(dir2.string(), m2, f.profile); }), ErrorCode::invalid_argument);
  }
  {
    PublicationFixture f;  // another compile profile: not authority
    Json other = profile_json();
    other["digests"]["image"] = "sha256:" + std::string(64, 'e');
    f.profile = parse_compile_profile(other.dump(), "p");
    EXPECT_EQ(f.reopen(), ErrorCode::invalid_argument);
  }
  {
    PublicationFixture f;  // an edited index
    std::ifstream in(f.dir / "index.json");
    std::stringstream t;
    t << in.rdbuf();
    in.close();
    std::ofstream(f.dir / "index.json") << replaced(t.str(), "\"binding_abi\":\"cuda_driver_params.v1\"",
                                                    "\"binding_abi\":\"cuda_driver_params.v2\"");
    EXPECT_EQ(f.reopen(), ErrorCode::invalid_argument);
  }
  // Only a CUDA ELF is published.
  PublicationFixture f;
  const auto dir3 = f.dir.parent_path() / "three";
  std::vector<std::byte> not_elf(100, std::byte{0});
  EXPECT_EQ(code_of([&] {
              write_publication(dir3.string(), f.manifest, f.profile, {{"vadd_run", not_elf}}, Json::object());
            }),
            ErrorCode::parse_error);
}

}  // namespace
}  // namespace pact::seal
