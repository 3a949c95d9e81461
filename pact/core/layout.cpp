#include "pact/core/layout.hpp"

#include <fmt/format.h>

#include <limits>
#include <numeric>

#include "pact/core/checked_math.hpp"

namespace pact {

Dims::Dims(std::initializer_list<std::int64_t> values)
    : Dims(std::span<const std::int64_t>(values.begin(), values.size())) {}

Dims::Dims(std::span<const std::int64_t> values) {
  if (values.size() > static_cast<std::size_t>(kMaxRank)) {
    throw_error(ErrorCode::rank_exceeded, "dims", fmt::format("{} dimensions; at most {}", values.size(), kMaxRank));
  }
  std::copy(values.begin(), values.end(), values_.begin());
  size_ = static_cast<int>(values.size());
}

void Dims::push_back(std::int64_t value) {
  if (size_ == kMaxRank) {
    throw_error(ErrorCode::rank_exceeded, "dims", fmt::format("more than {} dimensions", kMaxRank));
  }
  values_[static_cast<std::size_t>(size_++)] = value;
}

bool Dims::operator==(const Dims& other) const noexcept {
  return size_ == other.size_ && std::equal(begin(), end(), other.begin());
}

std::string Dims::to_string() const { return fmt::format("[{}]", fmt::join(span(), ", ")); }

Dims contiguous_strides(const Dims& shape) {
  Dims strides = shape;
  std::int64_t running = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    strides[d] = running;
    // Saturate instead of overflowing: only an empty shape (some extent 0) can get here with a product
    // beyond int64, and its strides are never used to address an element.
    auto next = core::checked_mul(running, std::max<std::int64_t>(shape[d], 1));
    running = next ? *next : std::numeric_limits<std::int64_t>::max();
  }
  return strides;
}

LayoutRequest LayoutRequest::contiguous(DType dtype, Dims shape, std::int64_t byte_offset) {
  LayoutRequest r;
  r.dtype = dtype;
  r.strides = contiguous_strides(shape);
  r.shape = shape;
  r.byte_offset = byte_offset;
  return r;
}

std::string describe(const LayoutRequest& request) {
  return fmt::format("{}{} strides {} byte_offset {}", dtype_name(request.dtype), request.shape.to_string(),
                     request.strides.to_string(), request.byte_offset);
}

bool provably_injective(const Dims& shape, const Dims& strides) noexcept {
  std::array<std::pair<std::int64_t, std::int64_t>, kMaxRank> dims{};  // (|stride|, extent)
  int n = 0;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return true;  // no elements, nothing can collide
  }
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (strides[d] == 0) return false;
    // |stride| cannot overflow: check_layout bounded every |(extent-1)*stride| already, and callers
    // outside it pass strides that came from a checked layout.
    dims[static_cast<std::size_t>(n++)] = {strides[d] < 0 ? -strides[d] : strides[d], shape[d]};
  }
  for (int i = 1; i < n; ++i) {  // insertion sort: at most kMaxRank entries
    for (int j = i; j > 0 && dims[static_cast<std::size_t>(j)] < dims[static_cast<std::size_t>(j - 1)]; --j) {
      std::swap(dims[static_cast<std::size_t>(j)], dims[static_cast<std::size_t>(j - 1)]);
    }
  }
  std::int64_t reach = 0;  // largest offset reachable with the dimensions seen so far
  for (int i = 0; i < n; ++i) {
    auto [stride, extent] = dims[static_cast<std::size_t>(i)];
    if (stride <= reach) return false;
    auto step = core::checked_mul(extent - 1, stride);
    if (!step) return false;
    auto next = core::checked_add(reach, *step);
    if (!next) return false;
    reach = *next;
  }
  return true;
}

namespace {

StridedPlan make_plan(const Dims& shape, const Dims& strides, std::int64_t numel) {
  StridedPlan plan;
  plan.count = numel;
  if (numel == 0) return plan;
  // Keep dims with extent > 1, outermost first, merging a dim into the one inside it when the outer
  // stride equals extent*stride of the inner (they then walk one arithmetic progression).
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    auto i = static_cast<std::size_t>(plan.rank);
    if (plan.rank > 0 && plan.stride[i - 1] == shape[d] * strides[d]) {
      plan.extent[i - 1] *= shape[d];
      plan.stride[i - 1] = strides[d];
      continue;
    }
    plan.extent[i] = shape[d];
    plan.stride[i] = strides[d];
    ++plan.rank;
  }
  if (plan.rank == 0) {  // a single element
    plan.rank = 1;
    plan.extent[0] = 1;
    plan.stride[0] = 1;
  }
  for (int d = 0; d < plan.rank; ++d) {
    auto i = static_cast<std::size_t>(d);
    plan.wrap[i] = plan.extent[i] * plan.stride[i];
  }
  return plan;
}

}  // namespace

CheckedLayout check_layout(const char* operation, const LayoutRequest& request, const SpanBounds& bounds) {
  SpanIdentity span{bounds.allocation_id, bounds.claim_begin, bounds.claim_begin + bounds.claim_bytes};
  auto fail = [&](ErrorCode code, const std::string& why) {
    throw_error(code, operation, fmt::format("{}: {}", describe(request), why), span);
  };
  if (request.shape.size() != request.strides.size()) {
    fail(ErrorCode::invalid_argument,
         fmt::format("shape has {} dimensions, strides {}", request.shape.size(), request.strides.size()));
  }
  const auto elem = static_cast<std::int64_t>(dtype_size(request.dtype));
  bool empty = false;
  for (int d = 0; d < request.shape.size(); ++d) {
    if (request.shape[d] < 0) fail(ErrorCode::invalid_argument, fmt::format("negative extent in dimension {}", d));
    empty = empty || request.shape[d] == 0;
  }
  // An empty layout addresses no element: its other extents and strides constrain nothing.
  std::int64_t numel = empty ? 0 : 1;
  std::int64_t low = 0;   // smallest element offset reached, relative to element [0, ..., 0]
  std::int64_t high = 0;  // largest
  for (int d = 0; d < request.shape.size() && !empty; ++d) {
    const std::int64_t extent = request.shape[d];
    auto n = core::checked_mul(numel, extent);
    if (!n) fail(ErrorCode::layout_overflow, "element count overflows");
    numel = *n;
    auto reach = core::checked_mul(extent - 1, request.strides[d]);
    // wrap = extent*stride is used by the traversal plan; require it to be representable too.
    if (!reach || !core::checked_mul(extent, request.strides[d])) {
      fail(ErrorCode::layout_overflow, fmt::format("extent*stride overflows in dimension {}", d));
    }
    auto next = *reach < 0 ? core::checked_add(low, *reach) : core::checked_add(high, *reach);
    if (!next) fail(ErrorCode::layout_overflow, "offset range overflows");
    (*reach < 0 ? low : high) = *next;
  }

  CheckedLayout layout;
  layout.dtype_ = request.dtype;
  layout.shape_ = request.shape;
  layout.strides_ = request.strides;
  layout.byte_offset_ = request.byte_offset;
  layout.numel_ = numel;

  if (numel > 0) {
    auto lo_bytes = core::checked_mul(low, elem);
    auto hi_bytes = core::checked_mul(high, elem);
    if (!lo_bytes || !hi_bytes) fail(ErrorCode::layout_overflow, "byte range overflows");
    auto begin = core::checked_add(request.byte_offset, *lo_bytes);
    auto last = core::checked_add(request.byte_offset, *hi_bytes);
    auto end = last ? core::checked_add(*last, elem) : std::nullopt;
    if (!begin || !end) fail(ErrorCode::layout_overflow, "byte range overflows");
    if (*begin < 0 || static_cast<std::uint64_t>(*end) > bounds.claim_bytes) {
      fail(ErrorCode::out_of_span,
           fmt::format("reaches bytes [{}, {}) of a {}-byte claim", *begin, *end, bounds.claim_bytes));
    }
    layout.envelope_begin_ = static_cast<std::uint64_t>(*begin);
    layout.envelope_end_ = static_cast<std::uint64_t>(*end);
  } else {
    if (request.byte_offset < 0 || static_cast<std::uint64_t>(request.byte_offset) > bounds.claim_bytes) {
      fail(ErrorCode::out_of_span,
           fmt::format("offset {} outside a {}-byte claim", request.byte_offset, bounds.claim_bytes));
    }
    layout.envelope_begin_ = layout.envelope_end_ = static_cast<std::uint64_t>(request.byte_offset);
  }

  // Every element address is base + byte_offset + k*elem; since the root base is aligned to
  // root_alignment (>= every dtype's alignment) and elem is a multiple of the dtype alignment,
  // alignment holds for all elements exactly when it holds for the first.
  const auto align = dtype_alignment(request.dtype);
  if (bounds.root_alignment % align != 0 ||
      (bounds.claim_begin + static_cast<std::uint64_t>(request.byte_offset)) % align != 0) {
    fail(ErrorCode::misaligned,
         fmt::format("element [0...] at root byte {} is not {}-byte aligned",
                     bounds.claim_begin + static_cast<std::uint64_t>(request.byte_offset), align));
  }

  const Dims expect = contiguous_strides(request.shape);
  bool contiguous = true;
  for (int d = 0; d < request.shape.size(); ++d) {
    if (request.shape[d] > 1 && request.strides[d] != expect[d]) contiguous = false;
  }
  layout.contiguous_ = contiguous;
  layout.injective_ = contiguous || provably_injective(request.shape, request.strides);
  layout.plan_ = make_plan(request.shape, request.strides, numel);
  return layout;
}

}  // namespace pact
