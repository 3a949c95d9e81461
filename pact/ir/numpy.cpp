#include "pact/ir/numpy.hpp"

#include <fmt/format.h>
#include <zip.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include "pact/core/checked_math.hpp"
#include "pact/core/file.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::ir {

namespace {

[[noreturn]] void bad(std::string_view where, std::string_view field, const std::string& why,
                      ErrorCode code = ErrorCode::parse_error) {
  throw_error(code, "numpy", fmt::format("{}: {}: {}", where, field, why));
}

constexpr char kMagic[] = "\x93NUMPY";

// NumPy's descr of each dtype it shares with Pact (little-endian; one-byte types have no byte order).
struct Descr {
  DType dtype;
  const char* code;  // kind and size: "f4"
};
constexpr Descr kDescrs[] = {{DType::f32, "f4"}, {DType::f64, "f8"},     {DType::f16, "f2"},
                             {DType::i64, "i8"}, {DType::i32, "i4"},     {DType::u8, "u1"},
                             {DType::i8, "i1"},  {DType::boolean, "b1"}, {DType::c64, "c8"}};

DType dtype_of_descr(std::string_view where, const std::string& descr) {
  if (descr.size() < 2) bad(where, "descr", fmt::format("'{}' is not a dtype", descr));
  const char order = descr[0];
  const std::string code = descr.substr(1);
  for (const auto& d : kDescrs) {
    if (code != d.code) continue;
    const bool one_byte = dtype_size(d.dtype) == 1;
    if (order == '<' || order == '=' || order == '|' || (order == '>' && one_byte)) return d.dtype;
    if (order == '>')
      bad(where, "descr", fmt::format("'{}' is big-endian; convert with array.astype('<{}')", descr, code),
          ErrorCode::unsupported);
  }
  bad(where, "descr", fmt::format("'{}' has no Pact dtype (f4 f8 f2 i8 i4 u1 b1 c8)", descr), ErrorCode::unsupported);
}

// The Python literal of a .npy header: a dict of 'descr' (a string), 'fortran_order' (True or False) and
// 'shape' (a tuple of non-negative integers), nothing else.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view where) : s_(text), where_(where) {}

  void parse(std::string& descr, bool& fortran, Dims& shape) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      space();
      expect(':');
      space();
      if (key == "descr") {
        descr = string_literal();
        seen_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        seen_order = true;
      } else if (key == "shape") {
        shape = tuple();
        seen_shape = true;
      } else {
        fail(fmt::format("unknown key '{}'", key));
      }
      if (!more('}')) break;
    }
    ++i_;
    space();
    if (i_ != s_.size()) fail("text after the dict");
    if (!seen_descr || !seen_order || !seen_shape) fail("needs 'descr', 'fortran_order' and 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { bad(where_, "header", fmt::format("{} at byte {}", why, i_)); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  // After an item: true past a ',' (another item may follow), false at `close`; anything else fails.
  bool more(char close) {
    space();
    if (peek() == ',') {
      ++i_;
      return true;
    }
    if (peek() != close) fail(fmt::format("expected ',' or '{}'", close));
    return false;
  }
  void expect(char c) {
    space();
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++i_;
  }
  std::string string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a string");
    const std::size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\' || static_cast<unsigned char>(s_[i_]) < 0x20) fail("an escape or control character");
      ++i_;
    }
    if (i_ >= s_.size()) fail("an unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    fail("expected True or False");
  }
  Dims tuple() {
    expect('(');
    Dims shape;
    while (true) {
      space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("expected a non-negative integer");
      std::int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        const auto scaled = core::checked_mul(v, std::int64_t{10});
        const auto next = scaled ? core::checked_add(*scaled, static_cast<std::int64_t>(peek() - '0')) : std::nullopt;
        if (!next) fail("an extent beyond int64");
        v = *next;
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2's long suffix
      if (shape.size() >= kMaxRank) fail(fmt::format("more than {} dimensions", kMaxRank));
      shape.push_back(v);
      if (!more(')')) break;
    }
    ++i_;
    return shape;
  }

  std::string_view s_;
  std::string_view where_;
  std::size_t i_ = 0;
};

std::string shape_literal(const Dims& shape) {
  std::string s = "(";
  for (int d = 0; d < shape.size(); ++d)
    s += fmt::format("{}{}", shape[d], shape.size() == 1 ? "," : (d + 1 < shape.size() ? ", " : ""));
  return s + ")";
}

std::string_view descr_of(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "<f4";
    case DType::f64:
      return "<f8";
    case DType::f16:
      return "<f2";
    case DType::i64:
      return "<i8";
    case DType::i32:
      return "<i4";
    case DType::u8:
      return "|u1";
    case DType::i8:
      return "|i1";
    case DType::boolean:
      return "|b1";
    case DType::c64:
      return "<c8";
    case DType::bf16:
      break;
  }
  throw_error(ErrorCode::invalid_argument, "numpy",
              fmt::format("{} has no NumPy dtype; cast to f32 first", dtype_name(dtype)));
}

// libzip handles, released on every path.
struct ZipArchive {
  zip_t* z = nullptr;
  ~ZipArchive() {
    if (z != nullptr) zip_discard(z);
  }
};
struct ZipMember {
  zip_file_t* f = nullptr;
  ~ZipMember() {
    if (f != nullptr) zip_fclose(f);
  }
};

}  // namespace

Tensor parse_npy(std::span<const std::byte> bytes, std::string_view where) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0)
    bad(where, "magic", "not a .npy file (no \\x93NUMPY magic)");
  const auto major = std::to_integer<unsigned>(bytes[6]);
  if (major < 1 || major > 3) bad(where, "version", fmt::format("format version {} is not 1, 2 or 3", major));
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes) bad(where, "header length", "truncated");
  std::uint64_t n = 0;
  for (std::size_t i = length_bytes; i-- > 0;) n = (n << 8) | std::to_integer<std::uint64_t>(bytes[8 + i]);
  if (n > kMaxNpyHeader) bad(where, "header length", fmt::format("{} exceeds the {}-byte limit", n, kMaxNpyHeader));
  const std::size_t start = 8 + length_bytes;
  if (n > bytes.size() - start)
    bad(where, "header length", fmt::format("{} bytes of header but {} in the file", n, bytes.size() - start));
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + start), static_cast<std::size_t>(n));
  std::string descr;
  bool fortran = false;
  Dims shape;
  HeaderParser(text, where).parse(descr, fortran, shape);
  const DType dtype = dtype_of_descr(where, descr);
  const auto count = ops::checked_numel(shape);
  const auto data = bytes.subspan(start + static_cast<std::size_t>(n));
  const auto need = count ? core::checked_mul(*count, static_cast<std::int64_t>(dtype_size(dtype))) : std::nullopt;
  if (!need) bad(where, "shape", fmt::format("{} holds more elements than int64 counts", shape.to_string()));
  if (static_cast<std::uint64_t>(*need) != data.size())
    bad(where, "data", fmt::format("{} bytes; {} {} needs {}", data.size(), descr, shape.to_string(), *need));
  if (fortran && shape.size() > 1) {
    bad(where, "fortran_order", "a Fortran-order array; save numpy.ascontiguousarray(a) instead",
        ErrorCode::unsupported);
  }
  if (dtype == DType::boolean) {
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (std::to_integer<unsigned>(data[i]) > 1)
        bad(where, "data",
            fmt::format("bool element {} is byte {}, not 0 or 1", i, std::to_integer<unsigned>(data[i])));
    }
  }
  return tensor_from_bytes(dtype, shape, data);
}

std::vector<std::byte> serialize_npy(const TensorView& view) {
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr_of(view.dtype()),
                                   shape_literal(view.shape()));
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::vector<std::byte> out(10 + header.size());
  std::memcpy(out.data(), kMagic, 6);
  out[6] = std::byte{1};
  out[7] = std::byte{0};
  out[8] = static_cast<std::byte>(header.size() & 0xff);
  out[9] = static_cast<std::byte>((header.size() >> 8) & 0xff);
  std::memcpy(out.data() + 10, header.data(), header.size());
  append_tensor_bytes(view, out);
  return out;
}

SafetensorsFile parse_npz(std::span<const std::byte> bytes, std::string_view where) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  if (source == nullptr) bad(where, "archive", zip_error_strerror(&error));
  ZipArchive archive{zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error)};
  if (archive.z == nullptr) {
    zip_source_free(source);
    const std::string why = zip_error_strerror(&error);
    zip_error_fini(&error);
    bad(where, "archive", fmt::format("not a zip archive: {}", why));
  }
  zip_error_fini(&error);
  const zip_int64_t members = zip_get_num_entries(archive.z, 0);
  if (members < 0 || static_cast<std::uint64_t>(members) > kMaxNpzMembers)
    bad(where, "archive", fmt::format("{} members (at most {})", members, kMaxNpzMembers));
  std::vector<zip_stat_t> stats(static_cast<std::size_t>(members));
  std::uint64_t total = 0;
  for (zip_int64_t i = 0; i < members; ++i) {
    zip_stat_t& st = stats[static_cast<std::size_t>(i)];
    if (zip_stat_index(archive.z, static_cast<zip_uint64_t>(i), 0, &st) != 0 || (st.valid & ZIP_STAT_SIZE) == 0 ||
        (st.valid & ZIP_STAT_NAME) == 0)
      bad(where, fmt::format("member {}", i), zip_strerror(archive.z));
    if (st.size > kMaxNpzInflatedBytes - total)
      bad(where, st.name, fmt::format("the members inflate past the {}-byte limit", kMaxNpzInflatedBytes),
          ErrorCode::invalid_argument);
    total += st.size;
  }
  SafetensorsFile file;
  std::set<std::string> names;
  for (zip_int64_t i = 0; i < members; ++i) {
    const zip_stat_t& st = stats[static_cast<std::size_t>(i)];
    std::string name = st.name;
    if (name.size() < 5 || name.substr(name.size() - 4) != ".npy")
      bad(where, name, "an .npz member that is not NAME.npy");
    name.resize(name.size() - 4);
    if (!names.insert(name).second) bad(where, name, "a member name repeats");
    std::vector<std::byte> data(static_cast<std::size_t>(st.size) + 1);
    ZipMember member{zip_fopen_index(archive.z, static_cast<zip_uint64_t>(i), 0)};
    if (member.f == nullptr) bad(where, st.name, zip_strerror(archive.z));
    std::uint64_t got = 0;
    while (got < data.size()) {  // one byte past the declared size: a member that inflates further fails
      const zip_int64_t r = zip_fread(member.f, data.data() + got, data.size() - got);
      if (r < 0) bad(where, st.name, zip_file_strerror(member.f));
      if (r == 0) break;
      got += static_cast<std::uint64_t>(r);
    }
    if (got != st.size) bad(where, st.name, fmt::format("inflates to {} bytes; the directory says {}", got, st.size));
    data.resize(static_cast<std::size_t>(st.size));
    file.tensors.emplace_back(name, parse_npy(data, fmt::format("{}:{}", where, st.name)));
  }
  return file;
}

std::vector<std::byte> serialize_npz(const std::vector<std::pair<std::string, TensorView>>& tensors) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* out = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (out == nullptr) throw_error(ErrorCode::io_error, "numpy", zip_error_strerror(&error));
  zip_source_keep(out);  // the archive's close releases one reference; the bytes are read after it
  std::unique_ptr<zip_source_t, decltype(&zip_source_free)> keep(out, &zip_source_free);
  zip_t* z = zip_open_from_source(out, ZIP_TRUNCATE, &error);
  if (z == nullptr) {
    zip_source_free(out);
    throw_error(ErrorCode::io_error, "numpy", zip_error_strerror(&error));
  }
  std::vector<std::vector<std::byte>> members;  // alive until zip_close reads them
  members.reserve(tensors.size());
  std::set<std::string> names;
  for (const auto& [name, view] : tensors) {
    if (name.empty() || !names.insert(name).second) {
      zip_discard(z);
      throw_error(ErrorCode::invalid_argument, "numpy", fmt::format("tensor name '{}' is empty or repeated", name));
    }
    members.push_back(serialize_npy(view));
    zip_source_t* m = zip_source_buffer_create(members.back().data(), members.back().size(), 0, &error);
    if (m == nullptr || zip_file_add(z, (name + ".npy").c_str(), m, ZIP_FL_ENC_UTF_8) < 0) {
      if (m != nullptr) zip_source_free(m);
      const std::string why = zip_strerror(z);
      zip_discard(z);
      throw_error(ErrorCode::io_error, "numpy", fmt::format("adding '{}': {}", name, why));
    }
    zip_set_file_compression(z, static_cast<zip_uint64_t>(members.size() - 1), ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    const std::string why = zip_strerror(z);
    zip_discard(z);
    throw_error(ErrorCode::io_error, "numpy", why);
  }
  if (zip_source_open(out) != 0 || zip_source_seek(out, 0, SEEK_END) != 0)
    throw_error(ErrorCode::io_error, "numpy", "reading the archive back");
  const zip_int64_t size = zip_source_tell(out);
  std::vector<std::byte> bytes(static_cast<std::size_t>(std::max<zip_int64_t>(size, 0)));
  zip_source_seek(out, 0, SEEK_SET);
  const zip_int64_t read = zip_source_read(out, bytes.data(), bytes.size());
  zip_source_close(out);
  if (read != size) throw_error(ErrorCode::io_error, "numpy", "reading the archive back");
  return bytes;
}

namespace {
std::string extension_of(const std::string& path) { return std::filesystem::path(path).extension().string(); }
}  // namespace

SafetensorsFile read_tensor_file(const std::string& path) {
  const std::string ext = extension_of(path);
  if (ext == ".safetensors") return read_safetensors(path);
  if (ext == ".npz" || ext == ".npy") {
    const std::string bytes = read_file(path, "numpy", std::numeric_limits<std::uint64_t>::max());
    const auto span = std::as_bytes(std::span(bytes.data(), bytes.size()));
    if (ext == ".npz") return parse_npz(span, path);
    SafetensorsFile file;
    file.tensors.emplace_back(std::filesystem::path(path).stem().string(), parse_npy(span, path));
    return file;
  }
  throw_error(ErrorCode::invalid_argument, "tensor file", fmt::format("{}: not .safetensors, .npz or .npy", path));
}

void write_tensor_file(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors) {
  const std::string ext = extension_of(path);
  if (ext == ".safetensors") {
    write_safetensors(path, tensors, {});
  } else if (ext == ".npz") {
    write_file_atomic(path, serialize_npz(tensors), "numpy");
  } else if (ext == ".npy") {
    if (tensors.size() != 1)
      throw_error(ErrorCode::invalid_argument, "tensor file",
                  fmt::format("{}: a .npy file holds one array; there are {} (write .npz or .safetensors)", path,
                              tensors.size()));
    write_file_atomic(path, serialize_npy(tensors.front().second), "numpy");
  } else {
    throw_error(ErrorCode::invalid_argument, "tensor file", fmt::format("{}: not .safetensors, .npz or .npy", path));
  }
}

}  // namespace pact::ir
