// Canonical JSON, digests and the bench report schema.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "test_util.hpp"

namespace pact {
namespace {

TEST(CanonicalJson, SortsKeysAndTagsFloatsExactly) {
  Json a = parse_json(R"({"b": 1, "a": [true, null, 1.5, -0.0], "c": {"z": "é", "y": 2}})", "test");
  EXPECT_EQ(canonical_json(a), R"({"a":[true,null,{"$f64":"0x1.8p+0"},{"$f64":"-0x0p+0"}],"b":1,"c":{"y":2,"z":"é"}})");
  Json b = parse_json(R"({"c": {"y": 2, "z": "é"}, "a": [true, null, 1.5, -0.0], "b": 1})", "test");
  EXPECT_EQ(canonical_json(a), canonical_json(b));
  // Integers and floats of the same value are different canonical values.
  EXPECT_NE(canonical_json(Json(1)), canonical_json(Json(1.0)));
  // 0.1 is written exactly, not as a rounded decimal.
  EXPECT_EQ(canonical_json(Json(0.1)), R"({"$f64":"0x1.999999999999ap-4"})");
}

TEST(CanonicalJson, RejectsNonFiniteReservedKeysAndBadUtf8) {
  EXPECT_EQ(test::code_of([] { canonical_json(Json(std::nan(""))); }), ErrorCode::non_finite);
  EXPECT_EQ(test::code_of([] { canonical_json(Json(INFINITY)); }), ErrorCode::non_finite);
  EXPECT_EQ(test::code_of([] { canonical_json(Json{{"$f64", "0x1p+0"}}); }), ErrorCode::invalid_argument);
  EXPECT_EQ(test::code_of([] { canonical_json(Json(std::string("\xff\xfe"))); }), ErrorCode::invalid_argument);
}

TEST(CanonicalJson, ParseErrorsNameWhereAndOffset) {
  try {
    parse_json("{\"a\": [1, 2", "model.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::parse_error);
    EXPECT_NE(std::string(e.what()).find("model.json: byte"), std::string::npos) << e.what();
  }
}

TEST(CanonicalJson, TextPastTheLimitIsRefusedBeforeParsing) {
  const std::string text(kMaxJsonTextBytes + 1, ' ');
  auto parse = [&] { parse_json(text, "huge.json"); };
  EXPECT_EQ(test::code_of(parse), ErrorCode::parse_error);
  EXPECT_TRUE(test::mentions(test::message_of(parse), "the limit is 67108864"));
}

TEST(Digest, Sha256KnownVectorsAndDomainSeparation) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Json v = Json{{"x", 1}};
  EXPECT_NE(digest_json("pact.graph-shape.v1", v), digest_json("pact.values.v1", v));
  EXPECT_EQ(digest_json("d", v), "sha256:" + sha256_hex(std::string("d") + '\0' + R"({"x":1})"));
  EXPECT_EQ(digest_json("d", parse_json(R"({ "x" : 1 })", "t")), digest_json("d", v));
}

TEST(BenchReport, SchemaRoundTripAndForcedBaselineIsInvalid) {
  BenchReport r("traversal", "bench/pact_bench_traversal");
  r.add_case({"raw", "raw_loop", "ns_per_element", "ns", 1.0, 5});
  r.add_case({"span", "prepared_span", "ns_per_element", "ns", 1.02, 5});
  r.add_ratio({"span_vs_raw", "span", "raw", 1.05, false});
  r.add_ratio({"forced", "span", "raw", 1.05, true});
  EXPECT_EQ(test::code_of([&] { r.add_ratio({"x", "missing", "raw", 1.0, false}); }), ErrorCode::invalid_argument);
  Json j = r.to_json();
  EXPECT_NO_THROW(validate_bench_report(j));
  EXPECT_EQ(j["ratios"][0]["verdict"], "pass");
  EXPECT_EQ(j["ratios"][1]["verdict"], "invalid");
  EXPECT_NEAR(j["ratios"][0]["value"].get<double>(), 1.02, 1e-12);
  Json broken = j;
  broken["ratios"][1]["verdict"] = "pass";
  EXPECT_EQ(test::code_of([&] { validate_bench_report(broken); }), ErrorCode::parse_error);
  broken = j;
  broken["cases"][0].erase("value");
  EXPECT_EQ(test::code_of([&] { validate_bench_report(broken); }), ErrorCode::parse_error);
  broken = j;
  broken["ratios"][0]["denominator"] = "nope";
  EXPECT_EQ(test::code_of([&] { validate_bench_report(broken); }), ErrorCode::parse_error);
}

// A baseline left to choose its own kernel that chose one below the CPU's level (OpenBLAS 0.3.21 runs
// Prescott on an Emerald Rapids) is invalid whatever the ratio, and a report claiming otherwise is refused.
TEST(BenchReport, ADegradedBaselineIsInvalid) {
  EXPECT_EQ(openblas_kernel_level("Prescott"), Isa::portable);
  EXPECT_EQ(openblas_kernel_level("Sandybridge"), Isa::portable);
  EXPECT_EQ(openblas_kernel_level("Haswell"), Isa::avx2);
  EXPECT_EQ(openblas_kernel_level("ZEN"), Isa::avx2);
  EXPECT_EQ(openblas_kernel_level("Cooperlake"), Isa::avx512);
  EXPECT_EQ(openblas_kernel_level("SkylakeX"), Isa::avx512);
  EXPECT_EQ(openblas_kernel_level(""), Isa::portable);

  const char* saved = std::getenv("OPENBLAS_CORETYPE");
  const std::string restore = saved ? saved : "";
  ::unsetenv("OPENBLAS_CORETYPE");
  const OpenBlasBaseline prescott = openblas_baseline("Prescott"), skylake = openblas_baseline("SkylakeX");
  if (saved) ::setenv("OPENBLAS_CORETYPE", restore.c_str(), 1);
  EXPECT_FALSE(prescott.forced);
  EXPECT_EQ(prescott.degraded, cpu_facts().best >= Isa::avx2);  // below any CPU with AVX2
  EXPECT_EQ(prescott.invalid(), prescott.degraded);
  if (prescott.degraded) {
    EXPECT_NE(prescott.note.find("Prescott"), std::string::npos) << prescott.note;
  }
  EXPECT_FALSE(skylake.degraded);  // nothing an x86 CPU runs is above it
  EXPECT_FALSE(skylake.invalid());

  BenchReport r("gemm", "test");
  r.add_case({"native", "native", "seconds_per_call", "s", 1.0, 1});
  r.add_case({"openblas", "openblas", "seconds_per_call", "s", 5.0, 1});
  r.add_ratio({"degraded", "native", "openblas", 1.1, false, false, true});
  r.add_ratio({"fair", "native", "openblas", 1.1, false, false, false});
  Json j = r.to_json();
  EXPECT_EQ(j["ratios"][0]["verdict"], "invalid");  // 5x faster than a baseline that does not use the CPU
  EXPECT_EQ(j["ratios"][0]["baseline_degraded"], true);
  EXPECT_EQ(j["ratios"][1]["verdict"], "pass");
  EXPECT_NO_THROW(validate_bench_report(j));
  Json broken = j;
  broken["ratios"][0]["verdict"] = "pass";
  EXPECT_EQ(test::code_of([&] { validate_bench_report(broken); }), ErrorCode::parse_error);
  broken = j;
  broken["ratios"][1]["baseline_degraded"] = "no";
  EXPECT_EQ(test::code_of([&] { validate_bench_report(broken); }), ErrorCode::parse_error);
  broken = j;
  broken["ratios"][1].erase("baseline_degraded");  // optional: reports written before it was recorded
  EXPECT_NO_THROW(validate_bench_report(broken));
}

}  // namespace
}  // namespace pact

namespace pact {
namespace {
TEST(CanonicalJson, DeepNestingIsRefusedTyped) {
  std::string deep(100000, '[');
  EXPECT_EQ(test::code_of([&] { parse_json(deep, "deep"); }), ErrorCode::parse_error);
  std::string ok = std::string(200, '[') + std::string(200, ']');
  EXPECT_NO_THROW(canonical_json(parse_json(ok, "ok")));
  // Brackets inside strings do not count.
  EXPECT_NO_THROW(parse_json("[\"" + std::string(1000, '[') + "\\\"\"]", "strings"));
}
}  // namespace
}  // namespace pact
