// safetensors: round trip of every dtype and layout, the exact byte format, and typed refusals of
// malformed files.

#include "pact/ir/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "../support/expect_error.hpp"

namespace pact::ir {
namespace {

using ::pact::test::code_of;

std::vector<std::byte> file_of(const std::string& header, std::size_t data_bytes) {
  std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0});
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, header.data(), header.size());
  return out;
}

TEST(Safetensors, RoundTripsDtypesLayoutsAndMetadata) {
  Tensor a = Tensor::from_values<float>(Dims{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::from_values<std::int64_t>(Dims{3}, std::vector<std::int64_t>{-1, 0, 1LL << 40});
  Tensor c = a.convert(DType::bf16);
  Tensor d = a.convert(DType::f16);
  Tensor e = Tensor::zeros(Dims{0, 4}, DType::f64);
  std::vector<std::pair<std::string, TensorView>> in{{"a", a.as_view()}, {"aT", a.transpose(0, 1)}, {"b", b.as_view()},
                                                     {"c", c.as_view()}, {"d", d.as_view()},        {"e", e.as_view()}};
  auto bytes = serialize_safetensors(in, {{"format", "pt"}});
  SafetensorsFile f = parse_safetensors(bytes, "memory");
  ASSERT_EQ(f.tensors.size(), 6u);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.find("aT")->shape(), (Dims{3, 2}));
  EXPECT_EQ(f.find("aT")->get(Dims{2, 1}).real, 6.0);  // written in logical order
  EXPECT_EQ(f.find("b")->get(Dims{2}).integer, 1LL << 40);
  EXPECT_EQ(f.find("c")->dtype(), DType::bf16);
  EXPECT_EQ(f.find("d")->get(Dims{1, 2}).real, 6.0);
  EXPECT_EQ(f.find("e")->numel(), 0);
  EXPECT_EQ(f.find("missing"), nullptr);
  // The header length is 8-byte aligned and little-endian.
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(static_cast<char>(bytes[8]), '{');
}

TEST(Safetensors, ReadsAHandWrittenFile) {
  // One F32 [2] tensor holding 1.0 and -2.0, exactly as the reference implementation lays it out.
  const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}})";
  auto bytes = file_of(header, 8);
  const float v[2] = {1.0f, -2.0f};
  std::memcpy(bytes.data() + 8 + header.size(), v, 8);
  SafetensorsFile f = parse_safetensors(bytes, "hand");
  EXPECT_EQ(f.find("w")->get(Dims{1}).real, -2.0);
  EXPECT_EQ(f.metadata.at("k"), "v");
}

TEST(Safetensors, MalformedFilesAreTypedErrorsNamingTheField) {
  auto bad = [](const std::string& header, std::size_t data) {
    auto bytes = file_of(header, data);
    return code_of([&] { parse_safetensors(bytes, "t"); });
  };
  EXPECT_EQ(code_of([] { parse_safetensors(std::vector<std::byte>(5), "t"); }), ErrorCode::parse_error);  // < 8 bytes
  {
    std::vector<std::byte> huge(16, std::byte{0xff});
    EXPECT_EQ(code_of([&] { parse_safetensors(huge, "t"); }), ErrorCode::parse_error);  // header length too large
  }
  EXPECT_EQ(bad("[]", 0), ErrorCode::parse_error);
  EXPECT_EQ(bad("{not json", 0), ErrorCode::parse_error);
  EXPECT_EQ(bad(R"({"w":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", 1), ErrorCode::parse_error);
  EXPECT_EQ(bad(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
            ErrorCode::parse_error);  // size mismatch
  EXPECT_EQ(bad(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
            ErrorCode::parse_error);  // beyond data
  EXPECT_EQ(bad(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), ErrorCode::parse_error);  // reversed
  EXPECT_EQ(
      bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          8),
      ErrorCode::parse_error);                                                                             // overlap
  EXPECT_EQ(bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), ErrorCode::parse_error);  // gap
  EXPECT_EQ(bad(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8), ErrorCode::parse_error);  // trailing
  EXPECT_EQ(bad(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4), ErrorCode::parse_error);
  EXPECT_EQ(bad(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})", 4),
            ErrorCode::parse_error);
  EXPECT_EQ(bad(R"({"a":{"dtype":"F32","shape":[1]}})", 4), ErrorCode::parse_error);
  EXPECT_EQ(bad(R"({"__metadata__":{"k":1}})", 0), ErrorCode::parse_error);
  {  // a header length past 16 MiB is refused from the 8-byte length, before any header byte is parsed
    std::vector<std::byte> claim(8 + 64, std::byte{' '});
    const std::uint64_t n = kMaxSafetensorsHeader + 1;
    for (int i = 0; i < 8; ++i)
      claim[static_cast<std::size_t>(i)] = std::byte(static_cast<unsigned char>(n >> (8 * i)));
    EXPECT_EQ(code_of([&] { parse_safetensors(claim, "t"); }), ErrorCode::parse_error);
  }
  // A tensor name with an escape sequence (it would retitle the terminal when printed) is refused.
  EXPECT_EQ(bad(R"({"w\u001b]0;x\u0007":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4),
            ErrorCode::parse_error);
  try {
    bad(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
    parse_safetensors(file_of(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "model.safetensors");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.safetensors: w.data_offsets"), std::string::npos) << e.what();
  }
  EXPECT_EQ(code_of([] { read_safetensors("/nonexistent.safetensors"); }), ErrorCode::io_error);
  Tensor a = Tensor::zeros(Dims{1}, DType::f32);
  EXPECT_EQ(code_of([&] {
              serialize_safetensors({{"x", a.as_view()}, {"x", a.as_view()}}, {});
            }),
            ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace pact::ir
