#include "pact/ir/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include "pact/core/file.hpp"
#include "pact/core/json.hpp"

namespace pact::ir {

const Tensor* SafetensorsFile::find(std::string_view name) const noexcept {
  for (const auto& [n, t] : tensors) {
    if (n == name) return &t;
  }
  return nullptr;
}

std::string_view safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::c64:
      return "C64";
    case DType::i64:
      return "I64";
    case DType::i32:
      return "I32";
    case DType::u8:
      return "U8";
    case DType::boolean:
      return "BOOL";
    case DType::i8:
      return "I8";
  }
  return "?";
}

namespace {

[[noreturn]] void bad(std::string_view where, const std::string& field, const std::string& why) {
  throw_error(ErrorCode::parse_error, "safetensors", fmt::format("{}: {}: {}", where, field, why));
}

// Calls f(T{}) with the C++ element type of a dtype.
template <class F>
void visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
#define PACT_ST_CASE(name, wire, type, size) \
  case DType::name:                          \
    f(type{});                               \
    return;
    PACT_DTYPES(PACT_ST_CASE)
#undef PACT_ST_CASE
  }
}

// Calls f(bytes) with the writable bytes of a fresh contiguous tensor, through prepared access of its
// own element type.
template <class F>
void with_bytes(Tensor& t, F&& f) {
  if (t.numel() == 0) return;
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto p = t.prepare_host_mut<T>();
    f(std::as_writable_bytes(std::get<PreparedContiguousWrite<T>>(p.value()).as_span()));
  });
}

}  // namespace

Tensor tensor_from_bytes(DType dtype, const Dims& shape, std::span<const std::byte> bytes) {
  Tensor t = Tensor::empty(shape, dtype);
  if (static_cast<std::uint64_t>(t.numel()) * dtype_size(dtype) != bytes.size()) {
    throw_error(ErrorCode::invalid_argument, "tensor.from_bytes",
                fmt::format("{} bytes for {}{}", bytes.size(), dtype_name(dtype), shape.to_string()));
  }
  with_bytes(t, [&](std::span<std::byte> dst) { std::memcpy(dst.data(), bytes.data(), bytes.size()); });
  return t;
}

void append_tensor_bytes(const TensorView& v, std::vector<std::byte>& out) {
  if (v.numel() == 0) return;
  // Bytes are read on the host: a device view (a model trained on the GPU) comes through one transfer, a
  // strided host view through one contiguous duplicate.
  std::optional<Tensor> packed;
  if (v.device() != DeviceKind::cpu || !v.is_contiguous()) packed.emplace(v.to_host());
  const TensorView src = packed ? packed->as_view() : v;
  visit_dtype(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto p = TensorView(src).prepare_host<T>();
    if (!p) throw std::move(p).error().error;
    auto bytes = std::as_bytes(std::get<PreparedContiguousRead<T>>(p.value()).as_span());
    out.insert(out.end(), bytes.begin(), bytes.end());
  });
}

namespace {

DType dtype_from(std::string_view where, const std::string& field, const std::string& s) {
  for (DType d : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::c64, DType::i64, DType::i32, DType::u8,
                  DType::boolean, DType::i8}) {
    if (safetensors_dtype(d) == s) return d;
  }
  bad(where, field, fmt::format("unsupported dtype '{}'", s));
}

}  // namespace

namespace {

struct Entry {
  std::string name;
  DType dtype;
  Dims shape;
  std::uint64_t begin, end;
};

// The header's length from the first 8 bytes, checked against the limit and the `available` bytes after them.
std::uint64_t header_length(std::span<const std::byte> first8, std::uint64_t available, std::string_view where) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(first8[static_cast<std::size_t>(i)]);
  if (n > kMaxSafetensorsHeader)
    bad(where, "header length", fmt::format("{} exceeds the {}-byte limit", n, kMaxSafetensorsHeader));
  if (n > available)
    bad(where, "header length", fmt::format("{} bytes of header but only {} after the length", n, available));
  return n;
}

// The header's tensors, checked against a data section of `data_size` bytes, in data order (their offsets
// tile the section exactly); the metadata goes into `file`.
std::vector<Entry> parse_header(std::string_view text, std::uint64_t data_size, std::string_view where,
                                SafetensorsFile& file) {
  if (text.empty() || text.front() != '{') bad(where, "header", "does not start with '{'");
  const Json header = parse_json(text, where);
  if (!header.is_object()) bad(where, "header", "is not an object");
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) bad(where, "__metadata__", "is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) bad(where, "__metadata__." + k, "metadata values are strings");
        file.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    if (!value.is_object()) bad(where, name, "is not an object");
    if (has_control_characters(name)) bad(where, name, "a tensor name holds a control character");
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(key)) bad(where, name + "." + key, "missing");
    }
    if (!value["dtype"].is_string()) bad(where, name + ".dtype", "is not a string");
    Entry e{name, dtype_from(where, name + ".dtype", value["dtype"].get<std::string>()), {}, 0, 0};
    const Json& shape = value["shape"];
    if (!shape.is_array() || shape.size() > static_cast<std::size_t>(kMaxRank))
      bad(where, name + ".shape", "is not a shape of rank <= 8");
    std::uint64_t count = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0))
        bad(where, name + ".shape", "extents are non-negative integers");
      const auto extent = d.get<std::uint64_t>();
      if (extent > (1ULL << 62) || (extent != 0 && count > (1ULL << 62) / extent))
        bad(where, name + ".shape", "element count overflows");
      count *= extent;
      e.shape.push_back(static_cast<std::int64_t>(extent));
    }
    const Json& off = value["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      if (!(off.is_array() && off.size() == 2 && off[0].is_number_integer() && off[1].is_number_integer() &&
            off[0].get<std::int64_t>() >= 0 && off[1].get<std::int64_t>() >= 0)) {
        bad(where, name + ".data_offsets", "needs two non-negative integers");
      }
    }
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    if (e.begin > e.end || e.end > data_size) {
      bad(where, name + ".data_offsets",
          fmt::format("[{}, {}) outside the {}-byte data section", e.begin, e.end, data_size));
    }
    const std::uint64_t size = dtype_size(e.dtype);
    if (count > (~0ULL) / size || count * size != e.end - e.begin) {
      bad(where, name + ".data_offsets",
          fmt::format("[{}, {}) holds {} bytes; {}{} needs {}", e.begin, e.end, e.end - e.begin,
                      safetensors_dtype(e.dtype), e.shape.to_string(), count * size));
    }
    entries.push_back(std::move(e));
  }
  // Offsets must tile the data section exactly: sorted, no overlap, no gap, no trailing bytes.
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::pair(a.begin, a.end) < std::pair(b.begin, b.end); });
  std::uint64_t cursor = 0;
  for (const auto& e : entries) {
    if (e.begin != cursor) {
      bad(where, e.name + ".data_offsets",
          e.begin < cursor ? fmt::format("overlaps the previous tensor at byte {}", e.begin)
                           : fmt::format("leaves a gap [{}, {})", cursor, e.begin));
    }
    cursor = e.end;
  }
  if (cursor != data_size)
    bad(where, "data", fmt::format("{} trailing bytes after the last tensor", data_size - cursor));
  return entries;
}

}  // namespace

SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, std::string_view where) {
  if (bytes.size() < 8) bad(where, "header length", fmt::format("file has {} bytes; at least 8 needed", bytes.size()));
  const std::uint64_t n = header_length(bytes.first(8), bytes.size() - 8, where);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), static_cast<std::size_t>(n));
  const std::span<const std::byte> data = bytes.subspan(8 + static_cast<std::size_t>(n));
  SafetensorsFile file;
  for (const auto& e : parse_header(text, data.size(), where, file)) {
    file.tensors.emplace_back(e.name, tensor_from_bytes(e.dtype, e.shape,
                                                        data.subspan(static_cast<std::size_t>(e.begin),
                                                                     static_cast<std::size_t>(e.end - e.begin))));
  }
  return file;
}

// The file is read as parse_safetensors reads bytes, with the same checks, but tensor by tensor into each
// tensor's own storage (through a 4 MiB buffer), so no whole-file copy is held beside the tensors: reading
// the file whole first held every weight twice and spent most of a 500 MB checkpoint's load faulting in
// and copying the second copy. Allocations stay bounded by the file's size, as the header must tile it.
SafetensorsFile read_safetensors(const std::string& path) {
  constexpr const char* op = "safetensors";
  constexpr std::size_t kReadChunk = std::size_t{4} << 20;
  std::uint64_t size = 0;
  std::ifstream in = open_for_read(path, op, size);
  auto read = [&](void* dst, std::uint64_t bytes) {
    if (bytes > 0 && !in.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes)))
      throw_error(ErrorCode::io_error, op, fmt::format("cannot read all {} bytes of '{}'", size, path));
  };
  if (size < 8) bad(path, "header length", fmt::format("file has {} bytes; at least 8 needed", size));
  std::array<std::byte, 8> first8{};
  read(first8.data(), 8);
  const std::uint64_t n = header_length(first8, size - 8, path);
  std::string text(static_cast<std::size_t>(n), '\0');
  read(text.data(), n);
  SafetensorsFile file;
  std::vector<std::byte> chunk;
  for (const auto& e : parse_header(text, size - 8 - n, path, file)) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    with_bytes(t, [&](std::span<std::byte> dst) {
      // Through a small buffer: a tensor whose pages the kernel faulted in inside read() was measured
      // slower to read afterwards than one written from user space (a 512-token prefill 0.72 -> 1.3 s).
      chunk.resize(std::min<std::size_t>(dst.size(), kReadChunk));
      for (std::size_t at = 0; at < dst.size(); at += chunk.size()) {
        const std::size_t bytes = std::min(chunk.size(), dst.size() - at);
        read(chunk.data(), bytes);
        std::memcpy(dst.data() + at, chunk.data(), bytes);
      }
    });
    file.tensors.emplace_back(e.name, std::move(t));
  }
  return file;
}

std::vector<std::byte> serialize_safetensors(const std::vector<std::pair<std::string, TensorView>>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  std::vector<std::byte> data;
  std::set<std::string> names;
  for (const auto& [name, view] : tensors) {
    if (name == "__metadata__" || !names.insert(name).second) {
      throw_error(ErrorCode::invalid_argument, "safetensors",
                  fmt::format("tensor name '{}' is reserved or repeated", name));
    }
    const std::uint64_t begin = data.size();
    append_tensor_bytes(view, data);
    const Dims shape = view.shape();  // one object: begin() and end() must come from the same Dims
    header[name] = Json{{"dtype", std::string(safetensors_dtype(view.dtype()))},
                        {"shape", std::vector<std::int64_t>(shape.begin(), shape.end())},
                        {"data_offsets", std::vector<std::uint64_t>{begin, static_cast<std::uint64_t>(data.size())}}};
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // align the data section, as the reference writer does
  std::vector<std::byte> out(8 + text.size() + data.size());
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, text.data(), text.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + text.size(), data.data(), data.size());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, TensorView>>& tensors,
                       const std::map<std::string, std::string>& metadata, const std::function<void()>& before_rename) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata), "safetensors", before_rename);
}

}  // namespace pact::ir
