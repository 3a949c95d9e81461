#include "pact/seal/params.hpp"

#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace pact::seal {

std::string_view scalar_type_name(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::i32:
      return "i32";
    case ScalarType::u32:
      return "u32";
    case ScalarType::i64:
      return "i64";
    case ScalarType::u64:
      return "u64";
  }
  return "?";
}

ScalarType parse_scalar_type(std::string_view name) {
  for (auto t : {ScalarType::i32, ScalarType::u32, ScalarType::i64, ScalarType::u64}) {
    if (scalar_type_name(t) == name) return t;
  }
  throw_error(ErrorCode::invalid_argument, "seal.params",
              fmt::format("scalar type '{}' is not i32, u32, i64 or u64", name));
}

std::uint32_t scalar_width(ScalarType t) noexcept { return t == ScalarType::i32 || t == ScalarType::u32 ? 4 : 8; }

std::uint32_t param_width(const ParamSpec& p) {
  struct {
    std::uint32_t operator()(const PointerParam&) const { return 8; }
    std::uint32_t operator()(const ScalarParam& s) const { return scalar_width(s.type); }
    std::uint32_t operator()(const PackedStructParam& s) const { return s.size; }
    std::uint32_t operator()(const FastDivmodParam&) const { return 12; }
    std::uint32_t operator()(const TmaDescriptorParam&) const { return 128; }
    std::uint32_t operator()(const GroupHandleParam&) const { return 8; }
  } width;
  return std::visit(width, p);
}

namespace {

std::uint32_t param_alignment(const ParamSpec& p) noexcept {
  if (const auto* s = std::get_if<ScalarParam>(&p)) return scalar_width(s->type);
  if (const auto* s = std::get_if<PackedStructParam>(&p)) return s->alignment;
  if (std::holds_alternative<FastDivmodParam>(p)) return 4;
  if (std::holds_alternative<TmaDescriptorParam>(p)) return 64;
  return 8;
}

bool power_of_two(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Writes `value` as `type` at `out` after checking that it fits.
void pack_scalar(ScalarType type, std::int64_t value, std::byte* out, const std::string& what) {
  auto refuse = [&] {
    throw_error(ErrorCode::layout_overflow, "seal.params",
                fmt::format("{}: {} does not fit {}", what, value, scalar_type_name(type)));
  };
  switch (type) {
    case ScalarType::i32: {
      if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max())
        refuse();
      const auto v = static_cast<std::int32_t>(value);
      std::memcpy(out, &v, 4);
      return;
    }
    case ScalarType::u32: {
      if (value < 0 || value > std::numeric_limits<std::uint32_t>::max()) refuse();
      const auto v = static_cast<std::uint32_t>(value);
      std::memcpy(out, &v, 4);
      return;
    }
    case ScalarType::i64:
      std::memcpy(out, &value, 8);
      return;
    case ScalarType::u64: {
      if (value < 0) refuse();
      const auto v = static_cast<std::uint64_t>(value);
      std::memcpy(out, &v, 8);
      return;
    }
  }
}

}  // namespace

void check_packed_struct(const PackedStructParam& p) {
  auto bad = [](const std::string& why) { throw_error(ErrorCode::invalid_argument, "seal.packed_struct", why); };
  if (!power_of_two(p.alignment) || p.alignment > 16)
    bad(fmt::format("alignment {} is not a power of two up to 16", p.alignment));
  if (p.size == 0 || p.size > 4096 || p.size % p.alignment != 0) {
    bad(fmt::format("size {} is not a positive multiple of the alignment {} up to 4096", p.size, p.alignment));
  }
  std::vector<std::pair<std::uint32_t, std::uint32_t>> spans;
  for (const auto& f : p.fields) {
    const std::uint32_t w = scalar_width(f.type);
    if (f.offset % w != 0) bad(fmt::format("field at offset {} is not aligned to its width {}", f.offset, w));
    if (f.offset > p.size || w > p.size - f.offset)
      bad(fmt::format("field at offset {} (width {}) leaves the {}-byte struct", f.offset, w, p.size));
    for (const auto& [b, e] : spans) {
      if (f.offset < e && b < f.offset + w)
        bad(fmt::format("field at offset {} overlaps the field at offset {}", f.offset, b));
    }
    spans.emplace_back(f.offset, f.offset + w);
  }
}

std::uint32_t FastDivmod::quotient(std::uint32_t n) const noexcept {
  if (divisor == 1) return n;
  return static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * multiplier) >> 32) >> shift;
}

FastDivmod make_fast_divmod(std::int64_t divisor) {
  if (divisor < 1 || divisor > std::numeric_limits<std::uint32_t>::max()) {
    throw_error(ErrorCode::invalid_argument, "seal.fast_divmod",
                fmt::format("divisor {} is outside [1, 2^32)", divisor));
  }
  const auto d = static_cast<std::uint32_t>(divisor);
  if (d == 1) return {1, 0, 0};
  std::uint32_t log2 = 0;  // ceil(log2(d))
  while ((std::uint64_t{1} << log2) < d) ++log2;
  const std::uint32_t p = 31 + log2;
  const std::uint64_t m = ((std::uint64_t{1} << p) + d - 1) / d;
  return {d, static_cast<std::uint32_t>(m), p - 32};
}

std::uint32_t tma_element_size(std::string_view dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "f16" || dtype == "bf16") return 2;
  if (dtype == "f64") return 8;
  if (dtype == "u8") return 1;
  throw_error(ErrorCode::invalid_argument, "seal.params",
              fmt::format("'{}' is not a TMA element type (f32, f16, bf16, f64, i32, u8)", dtype));
}

void require_tma_swizzle(std::string_view swizzle) {
  if (swizzle != "none" && swizzle != "32B" && swizzle != "64B" && swizzle != "128B") {
    throw_error(ErrorCode::invalid_argument, "seal.params",
                fmt::format("'{}' is not a TMA swizzle (none, 32B, 64B, 128B)", swizzle));
  }
}

namespace {

TmaRequest tma_request(const TmaDescriptorParam& t, const CallData& call,
                       const std::map<std::string, std::uint64_t, std::less<>>& device_pointers,
                       const std::string& what) {
  auto bad = [&](const std::string& why) {
    throw_error(ErrorCode::invalid_argument, "seal.params", fmt::format("{}: {}", what, why));
  };
  const auto tensor = call.tensors.find(t.binding);
  const auto address = device_pointers.find(t.binding);
  if (tensor == call.tensors.end() || address == device_pointers.end())
    bad(fmt::format("'{}' is not an admitted tensor binding", t.binding));
  const Dims& shape = tensor->second.shape;
  const Dims& strides = tensor->second.strides;
  const int rank = shape.size();
  if (rank < 1 || rank > 5) bad(fmt::format("a tensor map covers rank 1-5; '{}' has rank {}", t.binding, rank));
  if (static_cast<int>(t.box.size()) != rank)
    bad(fmt::format("the box has {} extents for a rank-{} tensor", t.box.size(), rank));
  const std::uint64_t esize = tma_element_size(t.dtype);
  TmaRequest r{t.dtype, address->second, {}, {}, {}, t.swizzle};
  if (strides[rank - 1] != 1) bad("the innermost dimension is not contiguous");
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] < 1) bad(fmt::format("dimension {} is empty", d));
    r.dims.push_back(static_cast<std::uint64_t>(shape[d]));
    const std::int64_t b = t.box[static_cast<std::size_t>(d)].eval(call);
    if (b < 1 || b > 256) bad(fmt::format("box extent {} of dimension {} is outside [1, 256]", b, d));
    r.box.push_back(static_cast<std::uint32_t>(b));
    if (d < rank - 1) {
      if (strides[d] < 1) bad(fmt::format("dimension {} has stride {}", d, strides[d]));
      const std::uint64_t bytes = static_cast<std::uint64_t>(strides[d]) * esize;
      if (bytes % 16 != 0) bad(fmt::format("dimension {} has a stride of {} bytes, not a multiple of 16", d, bytes));
      r.stride_bytes.push_back(bytes);
    }
  }
  if (r.box[0] * esize % 16 != 0)
    bad(fmt::format("the box's innermost extent is {} bytes, not a multiple of 16", r.box[0] * esize));
  if (r.address % 16 != 0) bad("the tensor's address is not 16-byte aligned");
  return r;
}

}  // namespace

ParameterFrame materialize(std::span<const ParamSpec> params, std::span<const std::uint32_t> declared_widths,
                           const CallData& call,
                           const std::map<std::string, std::uint64_t, std::less<>>& device_pointers,
                           const TmaEncoder* tma) {
  if (params.size() != declared_widths.size()) {
    throw_error(ErrorCode::invalid_argument, "seal.params",
                fmt::format("{} parameters for a kernel contract of {} formal parameters", params.size(),
                            declared_widths.size()));
  }
  ParameterFrame frame;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const ParamSpec& p = params[i];
    const std::uint32_t width = param_width(p);
    if (width != declared_widths[i]) {
      throw_error(
          ErrorCode::invalid_argument, "seal.params",
          fmt::format("parameter {} is {} bytes; the kernel contract declares {}", i, width, declared_widths[i]));
    }
    if (std::holds_alternative<TmaDescriptorParam>(p) && (tma == nullptr || !*tma)) {
      throw_error(ErrorCode::unsupported, "seal.params",
                  fmt::format("parameter {}: a TMA descriptor is encoded only on a CUDA machine", i));
    }
    if (const auto* g = std::get_if<GroupHandleParam>(&p)) {
      throw_error(
          ErrorCode::unsupported, "seal.params",
          fmt::format("parameter {}: group handle '{}' has no resolver installed; the plan fails closed", i, g->group));
    }
    const std::uint32_t align = param_alignment(p);
    const std::size_t offset = (frame.bytes.size() + align - 1) / align * align;
    frame.bytes.resize(offset + width, std::byte{0});
    std::byte* out = frame.bytes.data() + offset;
    const std::string what = fmt::format("parameter {}", i);
    if (const auto* ptr = std::get_if<PointerParam>(&p)) {
      auto it = device_pointers.find(ptr->binding);
      if (it == device_pointers.end()) {
        throw_error(ErrorCode::invalid_argument, "seal.params",
                    fmt::format("{}: '{}' is not an admitted binding", what, ptr->binding));
      }
      std::memcpy(out, &it->second, 8);
    } else if (const auto* s = std::get_if<ScalarParam>(&p)) {
      pack_scalar(s->type, s->value.eval(call), out, what);
    } else if (const auto* st = std::get_if<PackedStructParam>(&p)) {
      check_packed_struct(*st);
      for (const auto& f : st->fields)
        pack_scalar(f.type, f.value.eval(call), out + f.offset, fmt::format("{} field at {}", what, f.offset));
    } else if (const auto* t = std::get_if<TmaDescriptorParam>(&p)) {
      (*tma)(tma_request(*t, call, device_pointers, what), out);
    } else if (const auto* dm = std::get_if<FastDivmodParam>(&p)) {
      const FastDivmod r = make_fast_divmod(dm->divisor.eval(call));
      std::memcpy(out, &r.divisor, 4);
      std::memcpy(out + 4, &r.multiplier, 4);
      std::memcpy(out + 8, &r.shift, 4);
    }
    frame.offsets.push_back(static_cast<std::uint32_t>(offset));
    frame.widths.push_back(width);
  }
  return frame;
}

}  // namespace pact::seal
