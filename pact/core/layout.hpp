#pragma once
/// Shapes, layouts and the checked layout: descriptor arithmetic validated once (SPEC §4, seed 001 G1).

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>

#include "pact/core/dtype.hpp"
#include "pact/core/error.hpp"

namespace pact {

/// The most dimensions a descriptor may have. Dimensions are stored inline, so copying a layout never
/// allocates (views stay O(1) and allocation-free).
inline constexpr int kMaxRank = 8;
/// Rank parameter meaning "rank known only at run time".
inline constexpr int kDynRank = -1;

/// A small inline vector of int64 dimensions (extents or strides), at most kMaxRank long.
class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<std::int64_t> values);
  explicit Dims(std::span<const std::int64_t> values);

  /// Number of entries.
  int size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::int64_t operator[](int i) const noexcept { return values_[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) noexcept { return values_[static_cast<std::size_t>(i)]; }
  const std::int64_t* begin() const noexcept { return values_.data(); }
  const std::int64_t* end() const noexcept { return values_.data() + size_; }
  std::span<const std::int64_t> span() const noexcept { return {values_.data(), static_cast<std::size_t>(size_)}; }
  /// Appends one entry; throws rank_exceeded past kMaxRank.
  void push_back(std::int64_t value);
  bool operator==(const Dims& other) const noexcept;
  /// "[2, 3, 4]".
  std::string to_string() const;

 private:
  std::array<std::int64_t, kMaxRank> values_{};
  int size_ = 0;
};

/// Row-major strides (in elements) for a shape.
Dims contiguous_strides(const Dims& shape);

/// A requested descriptor, before checking: dtype, shape, strides in elements (negative allowed),
/// and the byte offset of element [0, ..., 0] from the start of the owning claim.
struct LayoutRequest {
  DType dtype = DType::f32;
  Dims shape;
  Dims strides;
  std::int64_t byte_offset = 0;

  /// A row-major request.
  static LayoutRequest contiguous(DType dtype, Dims shape, std::int64_t byte_offset = 0);
};

/// What a descriptor is checked against: the exact root-bound span of its claim.
struct SpanBounds {
  std::uint64_t allocation_id = 0;
  std::uint64_t claim_begin = 0;     ///< byte offset of the claim within its root
  std::uint64_t claim_bytes = 0;     ///< byte length of the claim
  std::uint64_t root_alignment = 1;  ///< alignment guaranteed for the root's first byte
};

/// Traversal plan for a strided layout: dimensions merged where they are contiguous with their
/// neighbour and extent-1 dimensions dropped, so next() carries as rarely as possible.
struct StridedPlan {
  int rank = 0;                                 ///< number of plan dimensions (>= 1 unless empty)
  std::array<std::int64_t, kMaxRank> extent{};  ///< plan extents, outermost first
  std::array<std::int64_t, kMaxRank> stride{};  ///< element strides
  std::array<std::int64_t, kMaxRank> wrap{};    ///< extent * stride, subtracted on carry
  std::int64_t count = 0;                       ///< total elements
};

/// A layout whose arithmetic, bounds, alignment and injectivity were checked once, at construction.
/// Only check_layout() makes one; copies retain the proofs.
class CheckedLayout {
 public:
  /// Element type.
  DType dtype() const noexcept { return dtype_; }
  /// Extents.
  const Dims& shape() const noexcept { return shape_; }
  /// Strides in elements.
  const Dims& strides() const noexcept { return strides_; }
  /// Byte offset of element [0, ..., 0] from the claim start.
  std::int64_t byte_offset() const noexcept { return byte_offset_; }
  /// Number of dimensions.
  int rank() const noexcept { return shape_.size(); }
  /// Number of elements.
  std::int64_t numel() const noexcept { return numel_; }
  /// True when the elements occupy one row-major run of bytes.
  bool is_contiguous() const noexcept { return contiguous_; }
  /// True when no two elements share an address (a write layout needs this).
  bool is_injective() const noexcept { return injective_; }
  /// The reachable byte envelope [begin, end) relative to the claim start; empty when numel is 0.
  std::uint64_t envelope_begin() const noexcept { return envelope_begin_; }
  std::uint64_t envelope_end() const noexcept { return envelope_end_; }
  /// The traversal plan (meaningful for any layout; contiguous ones collapse to rank 1).
  const StridedPlan& plan() const noexcept { return plan_; }

 private:
  friend CheckedLayout check_layout(const char*, const LayoutRequest&, const SpanBounds&);
  DType dtype_ = DType::f32;
  Dims shape_;
  Dims strides_;
  std::int64_t byte_offset_ = 0;
  std::int64_t numel_ = 0;
  bool contiguous_ = false;
  bool injective_ = false;
  std::uint64_t envelope_begin_ = 0;
  std::uint64_t envelope_end_ = 0;
  StridedPlan plan_;
};

/// Validates a request against a span: overflow-safe shape/stride/offset arithmetic, non-negative
/// extents, the exact claim span, dtype alignment, and computes injectivity. Throws pact::Error with
/// layout_overflow, out_of_span, misaligned, rank_exceeded or invalid_argument, naming `operation`,
/// the request and the span identity.
CheckedLayout check_layout(const char* operation, const LayoutRequest& request, const SpanBounds& bounds);

/// True when no two index tuples map to the same element offset, proven by sorting dimensions by
/// |stride| and requiring each stride to exceed the reach of all smaller ones. Conservative: a false
/// result means "not provably injective".
bool provably_injective(const Dims& shape, const Dims& strides) noexcept;

/// "f32[2, 3] strides [3, 1] byte_offset 0".
std::string describe(const LayoutRequest& request);

}  // namespace pact
