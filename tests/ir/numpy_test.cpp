// NumPy's .npy and .npz: files NumPy wrote (tests/fixtures/numpy, made with numpy 1.24), round trips of
// every shared dtype and layout, and typed refusals of malformed, hostile and unsupported files.

#include "pact/ir/numpy.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "../support/expect_error.hpp"
#include "pact/core/file.hpp"

namespace pact::ir {
namespace {

using ::pact::test::code_of;
using ::pact::test::mentions;
using ::pact::test::message_of;

const std::string kFixtures = "tests/fixtures/numpy/";

std::vector<std::byte> bytes_of(const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

// A version 1.0 .npy file with this header text and `data` bytes of zeros.
std::vector<std::byte> npy_with(const std::string& header, std::size_t data) {
  std::string s = std::string("\x93NUMPY\x01\x00", 8);
  s.push_back(static_cast<char>(header.size() & 0xff));
  s.push_back(static_cast<char>(header.size() >> 8));
  s += header;
  s.append(data, '\0');
  return bytes_of(s);
}

TEST(Numpy, ReadsWhatNumpyWrites) {
  const SafetensorsFile a = read_tensor_file(kFixtures + "f32_2x3.npy");
  ASSERT_EQ(a.tensors.size(), 1U);
  EXPECT_EQ(a.tensors[0].first, "f32_2x3");
  const Tensor& x = a.tensors[0].second;
  EXPECT_EQ(x.dtype(), DType::f32);
  EXPECT_EQ(x.shape(), (Dims{2, 3}));
  EXPECT_EQ(x.get(Dims{1, 2}).real, 1.25);
  const Tensor b = std::move(read_tensor_file(kFixtures + "bool_3.npy").tensors[0].second);
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_EQ(b.get(Dims{1}).integer, 0);
  EXPECT_EQ(b.get(Dims{2}).integer, 1);
  const Tensor s = std::move(read_tensor_file(kFixtures + "i64_scalar.npy").tensors[0].second);
  EXPECT_EQ(s.shape(), Dims{});
  EXPECT_EQ(s.get(Dims{}).integer, -7);
  for (const char* archive : {"stored.npz", "deflated.npz"}) {
    SCOPED_TRACE(archive);
    const SafetensorsFile z = read_tensor_file(kFixtures + archive);
    ASSERT_EQ(z.tensors.size(), 2U);
    ASSERT_NE(z.find("x"), nullptr);
  }
  const SafetensorsFile stored = read_tensor_file(kFixtures + "stored.npz");
  EXPECT_EQ(stored.find("x")->get(Dims{2, 3}).real, 11.0);
  EXPECT_EQ(stored.find("labels")->get(Dims{0}).integer, 2);
  const SafetensorsFile deflated = read_tensor_file(kFixtures + "deflated.npz");
  EXPECT_EQ(deflated.find("x")->shape(), (Dims{2, 5}));
  EXPECT_EQ(deflated.find("x")->get(Dims{1, 4}).real, 1.0);
  EXPECT_EQ(deflated.find("mask")->dtype(), DType::boolean);
}

TEST(Numpy, RoundTripsEveryDtypeAndLayout) {
  const Tensor a = Tensor::from_values<float>(Dims{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  std::vector<Tensor> all;
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::i64, DType::i32, DType::u8, DType::i8, DType::boolean})
    all.push_back(a.convert(d));
  all.push_back(Tensor::zeros(Dims{0, 4}, DType::f64));
  all.push_back(Tensor::from_values<double>(Dims{}, std::vector<double>{3.5}));
  std::vector<std::pair<std::string, TensorView>> named;
  for (std::size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(i);
    const Tensor back = parse_npy(serialize_npy(all[i].as_view()), "memory");
    EXPECT_EQ(back.dtype(), all[i].dtype());
    EXPECT_EQ(back.shape(), all[i].shape());
    std::vector<std::byte> x, y;
    append_tensor_bytes(back.as_view(), x);
    append_tensor_bytes(all[i].as_view(), y);
    EXPECT_EQ(x, y);
    named.emplace_back(fmt::format("t{}", i), all[i].as_view());
  }
  // A transposed view is written in logical (C) order.
  const Tensor t = parse_npy(serialize_npy(a.transpose(0, 1)), "memory");
  EXPECT_EQ(t.shape(), (Dims{3, 2}));
  EXPECT_EQ(t.get(Dims{2, 1}).real, 6.0);
  named.emplace_back("transposed", a.transpose(0, 1));
  const SafetensorsFile z = parse_npz(serialize_npz(named), "memory");
  ASSERT_EQ(z.tensors.size(), named.size());
  for (std::size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(z.tensors[i].first, named[i].first);
    EXPECT_EQ(z.tensors[i].second.shape(), named[i].second.shape());
  }
  EXPECT_EQ(z.find("transposed")->get(Dims{2, 1}).real, 6.0);
  EXPECT_EQ(code_of([&] { serialize_npy(a.convert(DType::bf16).as_view()); }), ErrorCode::invalid_argument);
}

TEST(Numpy, NumpyReadsWhatPactWrites) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no numpy in /usr/bin/python3 (Debian python3-numpy): the fixtures above still test reading";
  const auto dir = std::filesystem::temp_directory_path() / ("pact-numpy-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Tensor a = Tensor::from_values<float>(Dims{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  const Tensor b = Tensor::from_values<std::int64_t>(Dims{3}, std::vector<std::int64_t>{7, -8, 9});
  write_tensor_file((dir / "a.npy").string(), {{"a", a.transpose(0, 1)}});
  write_tensor_file((dir / "ab.npz").string(), {{"a", a.as_view()}, {"b", b.as_view()}});
  const std::string check = "/usr/bin/python3 -c \"import numpy as np; a = np.load('" + (dir / "a.npy").string() +
                            "'); z = np.load('" + (dir / "ab.npz").string() +
                            "'); assert a.dtype == np.float32 and a.shape == (3, 2) and a[2, 1] == 6;"
                            " assert z['b'].tolist() == [7, -8, 9] and z['a'].shape == (2, 3)\"";
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
  std::filesystem::remove_all(dir);
}

TEST(Numpy, MalformedAndHostileFilesAreRefusedTyped) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(parse_npy(npy_with(ok, 24), "memory").shape(), (Dims{2, 3}));
  struct Case {
    std::vector<std::byte> bytes;
    ErrorCode code;
    const char* says;
  };
  const std::vector<Case> cases{
      {bytes_of("not numpy at all"), ErrorCode::parse_error, "magic"},
      {npy_with(ok, 23), ErrorCode::parse_error, "23 bytes"},
      {npy_with(ok, 25), ErrorCode::parse_error, "25 bytes"},
      {npy_with("{'descr': '<f4', 'fortran_order': False}", 0), ErrorCode::parse_error, "needs 'descr'"},
      {npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8), ErrorCode::parse_error,
       "unknown key 'x'"},
      {npy_with("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", 8), ErrorCode::parse_error, "True or False"},
      {npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", 8), ErrorCode::parse_error, "non-negative"},
      {npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 8),
       ErrorCode::parse_error, "beyond int64"},
      {npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 8),
       ErrorCode::parse_error, "more elements"},
      {npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", 4), ErrorCode::parse_error,
       "more than 8"},
      {npy_with("{'descr': 'O', 'fortran_order': False, 'shape': (1,)}", 8), ErrorCode::parse_error, "not a dtype"},
      {npy_with("{'descr': '<U8', 'fortran_order': False, 'shape': (1,)}", 32), ErrorCode::unsupported,
       "no Pact dtype"},
      {npy_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} trailing", 8), ErrorCode::parse_error,
       "after the dict"},
      {npy_with("{'descr': '<f4\\x', 'fortran_order': False, 'shape': (2,)}", 8), ErrorCode::parse_error, "escape"},
  };
  for (const auto& c : cases) {
    const std::string msg = message_of([&] { parse_npy(c.bytes, "memory"); });
    EXPECT_EQ(code_of([&] { parse_npy(c.bytes, "memory"); }), c.code) << msg;
    EXPECT_TRUE(mentions(msg, c.says)) << msg;
  }
  // A header length past the limit is refused from the length field, before the header is read.
  std::vector<std::byte> huge = npy_with(ok, 24);
  huge[6] = std::byte{2};  // version 2: a four-byte length
  huge.insert(huge.begin() + 10, {std::byte{0}, std::byte{0}});
  huge[8] = std::byte{0xff};
  huge[9] = std::byte{0xff};
  huge[10] = std::byte{0xff};
  huge[11] = std::byte{0x7f};
  EXPECT_TRUE(mentions(message_of([&] { parse_npy(huge, "memory"); }), "limit"));
  // Bool bytes other than 0 and 1 would be undefined as C++ bool: refused.
  std::vector<std::byte> b = npy_with("{'descr': '|b1', 'fortran_order': False, 'shape': (2,)}", 2);
  b.back() = std::byte{2};
  EXPECT_TRUE(mentions(message_of([&] { parse_npy(b, "memory"); }), "not 0 or 1"));
  // What NumPy writes but Pact does not read, each refused naming the fix.
  EXPECT_EQ(code_of([&] { read_tensor_file(kFixtures + "f64_fortran.npy"); }), ErrorCode::unsupported);
  EXPECT_TRUE(mentions(message_of([&] { read_tensor_file(kFixtures + "f64_fortran.npy"); }), "ascontiguousarray"));
  EXPECT_TRUE(mentions(message_of([&] { read_tensor_file(kFixtures + "f32_big_endian.npy"); }), "big-endian"));
  EXPECT_TRUE(mentions(
      message_of([&] { parse_npy(npy_with("{'descr': '<u2', 'fortran_order': False, 'shape': (2,)}", 4), "memory"); }),
      "'<u2'"));
  // int8 (a quantized weight) is read as i8.
  const SafetensorsFile i8 = read_tensor_file(kFixtures + "i8_4.npy");
  ASSERT_EQ(i8.tensors.size(), 1u);
  EXPECT_EQ(i8.tensors[0].second.dtype(), DType::i8);
  EXPECT_EQ(i8.tensors[0].second.shape(), Dims{4});
  EXPECT_EQ(i8.tensors[0].second.as_view().get(Dims{3}).integer, 3);
  // Archives: garbage, a truncated archive, a member that is not NAME.npy.
  EXPECT_EQ(code_of([&] { parse_npz(bytes_of("PK\x03\x04 not really"), "memory"); }), ErrorCode::parse_error);
  const std::string zip = read_file(kFixtures + "stored.npz", "test");
  const auto cut = bytes_of(zip.substr(0, zip.size() / 2));
  EXPECT_EQ(code_of([&] { parse_npz(cut, "memory"); }), ErrorCode::parse_error);
  EXPECT_EQ(code_of([&] { read_tensor_file(kFixtures + "f32_2x3.txt"); }), ErrorCode::invalid_argument);
  const Tensor a = Tensor::zeros(Dims{2}, DType::f32);
  EXPECT_TRUE(mentions(message_of([&] {
                         write_tensor_file("/tmp/never-written.npy", {{"a", a.as_view()}, {"b", a.as_view()}});
                       }),
                       "one array"));
  EXPECT_FALSE(std::filesystem::exists("/tmp/never-written.npy"));
}

}  // namespace
}  // namespace pact::ir
