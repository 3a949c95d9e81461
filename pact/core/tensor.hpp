#pragma once
/// The dtype-erased tensor family (SPEC §4, seed 001 G1/G4): Tensor (owner), TensorView (shared read),
/// TensorViewMut (exclusive write), and prepared host/device access.
///
/// Note [Method distribution]
/// Read-only behaviour is implemented once, on TensorView; mutation once, on TensorViewMut. The owner
/// and the mutable view delegate through as_view()/as_view_mut() (cheap reborrows: O(1), no allocation,
/// no reference-count change). Consuming operations (reinterpret of an owner, into_storage) live on
/// owners and groups only. The typed family (typed.hpp) wraps these and adds a static dtype and an
/// optional static rank; it implements nothing twice. The canonical method lists are
/// PACT_READ_METHODS and PACT_WRITE_METHODS below; tests/core/api_parity_test.cpp checks every
/// family against them.

#include <algorithm>
#include <array>
#include <complex>
#include <cstring>
#include <span>
#include <string>
#include <variant>

#include "pact/core/borrow.hpp"
#include "pact/core/dtype.hpp"
#include "pact/core/expected.hpp"
#include "pact/core/layout.hpp"
#include "pact/core/storage.hpp"

namespace pact {

// The canonical method lists (one source of truth for the API-parity test).
// clang-format off
#define PACT_READ_METHODS(X)                                                                   \
  X(dtype) X(shape) X(strides) X(byte_offset) X(rank) X(numel) X(nbytes) X(is_contiguous)      \
  X(device) X(provider_name) X(span_identity) X(get) X(slice) X(transpose) X(flip) X(reshape) X(prepare_host) \
  X(prepare_device) X(duplicate) X(transfer_to) X(to_host) X(convert) X(reinterpret_view) X(to_string)
#define PACT_WRITE_METHODS(X) X(set) X(fill) X(copy_from) X(prepare_host_mut) X(prepare_device_mut) X(slice_mut)
// clang-format on

/// One element of any dtype, as read by the erased checked get().
struct Scalar {
  DType dtype = DType::f32;
  double real = 0;           ///< the value for every dtype except i64 beyond 2^53 (see integer)
  double imag = 0;           ///< c64 only
  std::int64_t integer = 0;  ///< exact value for integer and bool dtypes
};

class TensorView;
class TensorViewMut;
class Tensor;
namespace core {
struct TensorAccess;  // core-internal access to a view's claim (copy routines); defined in tensor.cpp
}

/// A strided cursor over a prepared plan. next() performs only loop termination, typed pointer access
/// and the precomputed stride/carry increments: no bounds, dtype, provider or index decoding work.
template <class T>
class StridedCursor {
 public:
  StridedCursor(T* base, const StridedPlan& plan) noexcept : base_(base), plan_(&plan), remaining_(plan.count) {}

  /// The next element in logical row-major order, or nullptr when exhausted.
  T* next() noexcept {
    if (remaining_ == 0) return nullptr;
    T* p = base_ + offset_;
    --remaining_;
    int d = plan_->rank - 1;
    offset_ += plan_->stride[static_cast<std::size_t>(d)];
    while (++coord_[static_cast<std::size_t>(d)] == plan_->extent[static_cast<std::size_t>(d)] && d > 0) {
      coord_[static_cast<std::size_t>(d)] = 0;
      offset_ -= plan_->wrap[static_cast<std::size_t>(d)];
      --d;
      offset_ += plan_->stride[static_cast<std::size_t>(d)];
    }
    return p;
  }
  /// Elements not yet returned.
  std::int64_t remaining() const noexcept { return remaining_; }

 private:
  T* base_;
  const StridedPlan* plan_;
  std::int64_t offset_ = 0;
  std::int64_t remaining_;
  std::array<std::int64_t, kMaxRank> coord_{};
};

/// Calls f(offset, n, stride) for every innermost row of a plan, in logical order: the element offset of
/// the row's first element, its length and its element stride. Outer dimensions carry once per row.
template <class F>
void for_each_row(const StridedPlan& plan, F&& f) {
  if (plan.count == 0) return;
  const int inner = plan.rank - 1;
  const std::int64_t n = plan.extent[static_cast<std::size_t>(inner)];
  const std::int64_t s = plan.stride[static_cast<std::size_t>(inner)];
  std::array<std::int64_t, kMaxRank> coord{};
  std::int64_t offset = 0;
  for (std::int64_t rows = plan.count / n; rows > 0; --rows) {
    f(offset, n, s);
    for (int d = inner - 1; d >= 0; --d) {
      auto k = static_cast<std::size_t>(d);
      offset += plan.stride[k];
      if (++coord[k] < plan.extent[k]) break;
      coord[k] = 0;
      offset -= plan.wrap[k];
    }
  }
}

/// Calls f(offset) with the element offset of every element of a plan, in logical order. The innermost
/// dimension is a plain strided loop.
template <class F>
void for_each_offset(const StridedPlan& plan, F&& f) {
  for_each_row(plan, [&](std::int64_t offset, std::int64_t n, std::int64_t s) {
    for (std::int64_t i = 0; i < n; ++i) f(offset + i * s);
  });
}

/// gather_strided's transposing case: the innermost plan dimension is strided and an outer one, u, is
/// unit-stride (a permuted view: NCHW read as NHWC, a matrix read transposed). Copied in square tiles of
/// dimensions u and the innermost, so the reads (along u) and the writes (along the innermost) of a tile
/// stay within a few cache lines each, where a row-by-row copy reads a new cache line for every element
/// (ConvNeXt's layer scale, f32[96, 1, 1] times a [1, 56, 56, 96] activation permuted back to NCHW: 0.44 ->
/// 0.29 ms a call). False, writing nothing, where the plan has no such pair of dimensions.
template <class T>
bool gather_transposed(const T* base, const StridedPlan& plan, T* dst) {
  const int r = plan.rank - 1;
  if (plan.count == 0 || r < 1 || plan.stride[static_cast<std::size_t>(r)] == 1) return false;
  int u = -1;
  for (int d = r - 1; d >= 0 && u < 0; --d)
    if (plan.stride[static_cast<std::size_t>(d)] == 1 && plan.extent[static_cast<std::size_t>(d)] > 1) u = d;
  if (u < 0) return false;
  std::array<std::int64_t, kMaxRank> out{};  // the logical (row-major) strides of dst
  out[static_cast<std::size_t>(r)] = 1;
  for (int d = r - 1; d >= 0; --d)
    out[static_cast<std::size_t>(d)] =
        out[static_cast<std::size_t>(d) + 1] * plan.extent[static_cast<std::size_t>(d) + 1];
  const auto uu = static_cast<std::size_t>(u), rr = static_cast<std::size_t>(r);
  const std::int64_t nu = plan.extent[uu], nr = plan.extent[rr], sr = plan.stride[rr], ou = out[uu];
  constexpr std::int64_t kTile = 16;
  std::array<std::int64_t, kMaxRank> coord{};
  std::int64_t src = 0, at = 0;  // the current block's first element in base and in dst
  for (std::int64_t blocks = plan.count / (nu * nr); blocks > 0; --blocks) {
    for (std::int64_t i0 = 0; i0 < nu; i0 += kTile)
      for (std::int64_t j0 = 0; j0 < nr; j0 += kTile) {
        const std::int64_t i1 = std::min(nu, i0 + kTile), j1 = std::min(nr, j0 + kTile);
        for (std::int64_t i = i0; i < i1; ++i) {
          const T* s = base + src + i;
          T* o = dst + at + i * ou;
          for (std::int64_t j = j0; j < j1; ++j) o[j] = s[j * sr];
        }
      }
    for (int d = r - 1; d >= 0; --d) {  // the next block: every dimension but u and the innermost
      if (d == u) continue;
      const auto k = static_cast<std::size_t>(d);
      src += plan.stride[k];
      at += out[k];
      if (++coord[k] < plan.extent[k]) break;
      coord[k] = 0;
      src -= plan.stride[k] * plan.extent[k];
      at -= out[k] * plan.extent[k];
    }
  }
  return true;
}

/// Copies the elements of a plan, in logical order, to dst (plan.count elements): the innermost
/// dimension as one block copy per row where it is unit-stride, in tiles where it is strided and an outer
/// dimension is unit-stride (gather_transposed), a strided loop otherwise.
template <class T>
void gather_strided(const T* base, const StridedPlan& plan, T* dst) {
  if (gather_transposed(base, plan, dst)) return;
  for_each_row(plan, [&](std::int64_t offset, std::int64_t n, std::int64_t s) {
    const T* src = base + offset;
    if (s == 1) {
      std::copy(src, src + n, dst);
    } else {
      for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i * s];
    }
    dst += n;
  });
}

/// Calls f(T&) for every element of a plan in logical order.
template <class T, class F>
void for_each_strided(T* base, const StridedPlan& plan, F&& f) {
  for_each_offset(plan, [&](std::int64_t offset) { f(base[offset]); });
}

/// Prepared contiguous read: the checked range as a typed span.
template <class T>
class PreparedContiguousRead {
 public:
  std::span<const T> as_span() const noexcept { return data_; }
  const T* begin() const noexcept { return data_.data(); }
  const T* end() const noexcept { return data_.data() + data_.size(); }

 private:
  friend class TensorView;
  PreparedContiguousRead(std::span<const T> data, core::BorrowToken borrow) : data_(data), borrow_(std::move(borrow)) {}
  std::span<const T> data_;
  core::BorrowToken borrow_;
};

/// Prepared strided read: a base and a precomputed carry plan.
template <class T>
class PreparedStridedRead {
 public:
  StridedCursor<const T> cursor() const noexcept { return StridedCursor<const T>(base_, plan_); }
  template <class F>
  void for_each(F&& f) const {
    for_each_strided(base_, plan_, [&](const T& v) { f(v); });
  }
  /// Copies every element, in logical order, to dst (room for plan().count elements).
  void gather(T* dst) const { gather_strided(base_, plan_, dst); }
  const StridedPlan& plan() const noexcept { return plan_; }
  /// unsafe_base: element [0, ..., 0] for kernels that address elements by the view's own strides.
  /// Valid only while this prepared object lives; every address base + sum(i_d * stride_d) with i_d in
  /// range lies inside the checked span. The pointer must not escape the kernel.
  const T* unsafe_base() const noexcept { return base_; }

 private:
  friend class TensorView;
  PreparedStridedRead(const T* base, const StridedPlan& plan, core::BorrowToken borrow)
      : base_(base), plan_(plan), borrow_(std::move(borrow)) {}
  const T* base_;
  StridedPlan plan_;
  core::BorrowToken borrow_;
};

/// Prepared contiguous write.
template <class T>
class PreparedContiguousWrite {
 public:
  std::span<T> as_span() const noexcept { return data_; }
  T* begin() const noexcept { return data_.data(); }
  T* end() const noexcept { return data_.data() + data_.size(); }

 private:
  friend class TensorViewMut;
  PreparedContiguousWrite(std::span<T> data, core::BorrowToken borrow) : data_(data), borrow_(std::move(borrow)) {}
  std::span<T> data_;
  core::BorrowToken borrow_;
};

/// Prepared strided write over an injective plan: each element is yielded exactly once.
template <class T>
class PreparedStridedWrite {
 public:
  StridedCursor<T> cursor() const noexcept { return StridedCursor<T>(base_, plan_); }
  template <class F>
  void for_each(F&& f) const {
    for_each_strided(base_, plan_, std::forward<F>(f));
  }
  const StridedPlan& plan() const noexcept { return plan_; }
  /// unsafe_base: as PreparedStridedRead::unsafe_base, for writes through an injective layout.
  T* unsafe_base() const noexcept { return base_; }

 private:
  friend class TensorViewMut;
  PreparedStridedWrite(T* base, const StridedPlan& plan, core::BorrowToken borrow)
      : base_(base), plan_(plan), borrow_(std::move(borrow)) {}
  T* base_;
  StridedPlan plan_;
  core::BorrowToken borrow_;
};

/// Exactly one host traversal state, selected once at preparation.
template <class T>
using PreparedHostRead = std::variant<PreparedContiguousRead<T>, PreparedStridedRead<T>>;
template <class T>
using PreparedHostWrite = std::variant<PreparedContiguousWrite<T>, PreparedStridedWrite<T>>;

class DeviceBinding;

/// Device-prepared access: the checked layout and an opaque provider binding. No host pointer.
class PreparedDevice {
 public:
  /// The checked layout the binding was prepared for.
  const CheckedLayout& layout() const noexcept { return layout_; }
  /// The provider's opaque binding token.
  std::uint64_t binding() const noexcept { return binding_; }
  /// True when prepared for writing.
  bool writable() const noexcept { return writable_; }
  /// Provider name ("cuda-stub", "fake").
  std::string_view provider_name() const noexcept { return claim_->root->provider().name(); }
  /// Records one dispatch of work over this binding with its provider.
  void dispatch() const { claim_->root->provider().dispatch(); }

 private:
  std::uint64_t unsafe_device_address() const noexcept;
  friend class TensorView;
  friend class TensorViewMut;
  friend class DeviceBinding;
  PreparedDevice(const core::Claim* claim, const CheckedLayout& layout, std::uint64_t binding, bool writable,
                 core::BorrowToken borrow)
      : claim_(claim), layout_(layout), binding_(binding), writable_(writable), borrow_(std::move(borrow)) {}
  const core::Claim* claim_;
  CheckedLayout layout_;
  std::uint64_t binding_;
  bool writable_;
  core::BorrowToken borrow_;
};

/// A bound device access (seed 001 G5): made only by bind() from a PreparedDevice, which already carries
/// the checked layout, the capability (shared or exclusive) and the provider, reached through its root.
/// bind takes no replacement descriptor, range, key or provider and repeats no check. A distinct state
/// from PreparedDevice, not a flag on it.
class DeviceBinding {
 public:
  /// Attaches the prepared access (binding-time provider work only). On failure (the provider refuses;
  /// nothing was enqueued) the exact prepared access comes back with the error.
  static Expected<DeviceBinding, Returned<PreparedDevice>> bind(PreparedDevice&& prepared);
  const CheckedLayout& layout() const noexcept { return prepared_.layout(); }
  std::uint64_t token() const noexcept { return prepared_.binding(); }
  bool writable() const noexcept { return prepared_.writable(); }
  std::string_view provider_name() const noexcept { return prepared_.provider_name(); }
  /// Records one dispatch of work over this binding with its provider.
  void dispatch() const { prepared_.dispatch(); }
  /// unsafe_device_address: the device address of the view's element 0 (the token of a "cuda" provider's
  /// binding plus the claim's and the layout's byte offsets), for a kernel launch's parameters only. Valid
  /// while the binding lives; the work that reads it must be ordered on the provider's stream before the
  /// storage is released (the CUDA provider's releases are stream-ordered, pact/core/cuda_device.hpp).
  std::uint64_t unsafe_device_address() const noexcept { return prepared_.unsafe_device_address(); }

 private:
  explicit DeviceBinding(PreparedDevice prepared) : prepared_(std::move(prepared)) {}
  PreparedDevice prepared_;
};

/// A shared read view: a borrowed claim plus a checked layout. Copyable (each copy is one more shared
/// borrow). Valid while its owner (Tensor or AllocationGroup) lives.
class TensorView {
 public:
  friend struct core::TensorAccess;
  /// Element type.
  DType dtype() const noexcept { return layout_.dtype(); }
  /// Extents.
  Dims shape() const noexcept { return layout_.shape(); }
  /// Strides in elements.
  Dims strides() const noexcept { return layout_.strides(); }
  /// Byte offset of element [0...] within the claim.
  std::int64_t byte_offset() const noexcept { return layout_.byte_offset(); }
  /// Number of dimensions.
  int rank() const noexcept { return layout_.rank(); }
  /// Number of elements.
  std::int64_t numel() const noexcept { return layout_.numel(); }
  /// numel * element size.
  std::uint64_t nbytes() const noexcept;
  /// True when row-major contiguous.
  bool is_contiguous() const noexcept { return layout_.is_contiguous(); }
  /// Placement.
  DeviceKind device() const noexcept { return claim_->root->provider().device(); }
  /// "cpu", "meta", "cuda-stub", "fake".
  std::string_view provider_name() const noexcept { return claim_->root->provider().name(); }
  /// Allocation id and the view's byte envelope within the root.
  SpanIdentity span_identity() const noexcept;
  /// The checked layout.
  const CheckedLayout& layout() const noexcept { return layout_; }

  /// Checked random read: validates the index (O(rank)) and maps once per call. Not a hot-loop API.
  Scalar get(const Dims& index) const;
  /// Elements [start, stop) with `step` (> 0) along `dim`; a new checked descriptor, same rank.
  TensorView slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const;
  /// Swaps two dimensions.
  TensorView transpose(int a, int b) const;
  /// Reverses one dimension (negative stride).
  TensorView flip(int dim) const;
  /// The same elements in another shape of the same count, in row-major order: zero copy, so only of a
  /// contiguous view (invalid_argument otherwise, or for a count mismatch).
  TensorView reshape(const Dims& shape) const;

  /// Consumes the view and prepares host access of element type T (must equal dtype()). Maps and
  /// synchronizes once; selects the contiguous or strided variant once. Failure returns the view.
  template <class T>
  Expected<PreparedHostRead<T>, Returned<TensorView>> prepare_host() &&;
  /// Consumes the view and prepares a device binding (no host pointer). Failure returns the view.
  Expected<PreparedDevice, Returned<TensorView>> prepare_device() &&;

  /// A new contiguous owner on the same provider with the same values: one ExplicitDuplicate copy event
  /// and one ExplicitDuplicateDestination allocation event.
  Tensor duplicate() const;
  /// A new contiguous owner on `provider`: one Transfer copy event and one TransferDestination
  /// allocation event.
  Tensor transfer_to(std::shared_ptr<Provider> provider) const;
  /// A new contiguous owner in host memory with the same values, to read them on the host: a device view
  /// through one transfer_to(cpu_provider()), a host view through one duplicate().
  Tensor to_host() const;
  /// A new contiguous cpu owner holding every element converted to `to` (convert_element's rules):
  /// one OperationOutput allocation, no copy event. Converting to the same dtype is duplicate().
  Tensor convert(DType to) const;
  /// Every element converted to double, in row-major order (a copy; c64 is unsupported, as in convert).
  std::vector<double> to_doubles() const;
  /// The same bytes as another dtype (f32<->i32, f64<->i64, c64<->f32 pairs); zero copy, same root.
  /// Rank policy: same-size pairs keep the rank; c64->f32 appends a dimension of 2 (rank + 1);
  /// f32->c64 needs a trailing dimension of 2 with stride 1 and removes it (rank - 1).
  TensorView reinterpret_view(DType to) const;
  /// "f32[2, 3] cpu".
  std::string to_string() const;

 private:
  friend class Tensor;
  friend class TensorViewMut;
  friend class AllocationGroup;
  friend class PreparedDevice;
  TensorView(const core::Claim* claim, const CheckedLayout& layout, core::BorrowToken borrow) noexcept
      : claim_(claim), layout_(layout), borrow_(std::move(borrow)) {}
  TensorView derive(const char* operation, const LayoutRequest& request) const;
  std::byte* mapped_base(const char* operation) const;

  const core::Claim* claim_;
  CheckedLayout layout_;
  core::BorrowToken borrow_;
};

/// An exclusive write view. Move-only. Read behaviour through as_view().
class TensorViewMut {
 public:
  friend struct core::TensorAccess;
  TensorViewMut(TensorViewMut&&) noexcept = default;
  TensorViewMut& operator=(TensorViewMut&&) noexcept = default;
  TensorViewMut(const TensorViewMut&) = delete;
  TensorViewMut& operator=(const TensorViewMut&) = delete;

  /// Read reborrow: O(1), allocation-free. While it lives this view may not write.
  TensorView as_view() const;

  DType dtype() const noexcept { return layout_.dtype(); }
  Dims shape() const noexcept { return layout_.shape(); }
  Dims strides() const noexcept { return layout_.strides(); }
  std::int64_t byte_offset() const noexcept { return layout_.byte_offset(); }
  int rank() const noexcept { return layout_.rank(); }
  std::int64_t numel() const noexcept { return layout_.numel(); }
  std::uint64_t nbytes() const noexcept { return as_view().nbytes(); }
  bool is_contiguous() const noexcept { return layout_.is_contiguous(); }
  DeviceKind device() const noexcept { return claim_->root->provider().device(); }
  std::string_view provider_name() const noexcept { return claim_->root->provider().name(); }
  SpanIdentity span_identity() const noexcept { return as_view().span_identity(); }
  const CheckedLayout& layout() const noexcept { return layout_; }
  Scalar get(const Dims& index) const { return as_view().get(index); }
  TensorView slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const {
    return as_view().slice(dim, start, stop, step);
  }
  TensorView transpose(int a, int b) const { return as_view().transpose(a, b); }
  TensorView flip(int dim) const { return as_view().flip(dim); }
  TensorView reshape(const Dims& shape) const { return as_view().reshape(shape); }
  template <class T>
  Expected<PreparedHostRead<T>, Returned<TensorView>> prepare_host() const {
    return as_view().template prepare_host<T>();
  }
  Expected<PreparedDevice, Returned<TensorView>> prepare_device() const { return as_view().prepare_device(); }
  Tensor duplicate() const;
  Tensor transfer_to(std::shared_ptr<Provider> provider) const;
  Tensor to_host() const;
  Tensor convert(DType to) const;
  TensorView reinterpret_view(DType to) const { return as_view().reinterpret_view(to); }
  std::string to_string() const { return as_view().to_string(); }

  /// Checked random write (converts `value` to the dtype). O(rank) per call.
  void set(const Dims& index, double value);
  /// Writes `value` to every element.
  void fill(double value);
  /// Copies `source` (same shape and dtype) into this view: one copy event (ExplicitDuplicate, or
  /// Transfer when the providers differ), no allocation event.
  void copy_from(const TensorView& source);
  /// Consumes the view and prepares host write access (injective layouts only). Failure returns it.
  template <class T>
  Expected<PreparedHostWrite<T>, Returned<TensorViewMut>> prepare_host_mut() &&;
  /// Consumes the view and prepares a writable device binding. Failure returns it.
  Expected<PreparedDevice, Returned<TensorViewMut>> prepare_device_mut() &&;
  /// A mutable sub-view; consumes this view (the exclusive borrow moves to the result).
  TensorViewMut slice_mut(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) &&;
  /// Mutable reinterpretation: needs the exclusive view and an injective result. Failure returns it.
  static Expected<TensorViewMut, Returned<TensorViewMut>> reinterpret(TensorViewMut&& view, DType to);

 private:
  friend class Tensor;
  friend class TensorView;
  friend class AllocationGroup;
  TensorViewMut(const core::Claim* claim, const CheckedLayout& layout, core::BorrowToken borrow) noexcept
      : claim_(claim), layout_(layout), borrow_(std::move(borrow)) {}
  std::byte* mapped_base(const char* operation) const;
  /// Where this view's read reborrows are counted: its own slot for split_mut children (so a reborrow
  /// of one child never freezes a disjoint sibling), otherwise the borrowed claim's state.
  core::BorrowState* freeze_state() const noexcept { return freeze_ != nullptr ? freeze_ : borrow_.state(); }

  const core::Claim* claim_;
  CheckedLayout layout_;
  core::BorrowToken borrow_;
  core::BorrowState* freeze_ = nullptr;
  std::shared_ptr<core::BorrowState[]> freeze_block_;  // keeps split children's freeze slots alive
};

/// The owner: a storage claim plus a checked descriptor. Move-only.
class Tensor {
 public:
  friend struct core::TensorAccess;
  /// An uninitialised contiguous tensor (one OperationOutput allocation event, or `reason`).
  static Tensor empty(const Dims& shape, DType dtype, std::shared_ptr<Provider> provider = cpu_provider(),
                      AllocationReason reason = AllocationReason::OperationOutput);
  /// A zero-filled contiguous tensor.
  static Tensor zeros(const Dims& shape, DType dtype, std::shared_ptr<Provider> provider = cpu_provider());
  /// A contiguous tensor whose every element is `value` converted to `dtype` (as fill does).
  static Tensor full(const Dims& shape, DType dtype, double value, std::shared_ptr<Provider> provider = cpu_provider());
  /// A contiguous cpu tensor holding `values` (row-major); values.size() must equal the shape's count.
  template <class T>
  static Tensor from_values(const Dims& shape, std::span<const T> values);
  /// Wraps an owner with a descriptor checked against its claim. Failure returns the owner.
  static Expected<Tensor, Returned<Storage>> from_storage(Storage&& storage, const LayoutRequest& request);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  /// Shared reborrow: O(1), no allocation, no reference-count change.
  TensorView as_view() const;
  /// Exclusive reborrow: O(1), no allocation, no reference-count change.
  TensorViewMut as_view_mut();

  DType dtype() const noexcept { return layout_.dtype(); }
  Dims shape() const noexcept { return layout_.shape(); }
  Dims strides() const noexcept { return layout_.strides(); }
  std::int64_t byte_offset() const noexcept { return layout_.byte_offset(); }
  int rank() const noexcept { return layout_.rank(); }
  std::int64_t numel() const noexcept { return layout_.numel(); }
  std::uint64_t nbytes() const noexcept { return as_view().nbytes(); }
  bool is_contiguous() const noexcept { return layout_.is_contiguous(); }
  DeviceKind device() const noexcept { return storage_.claim_->root->provider().device(); }
  std::string_view provider_name() const noexcept { return storage_.claim_->root->provider().name(); }
  SpanIdentity span_identity() const noexcept { return as_view().span_identity(); }
  const CheckedLayout& layout() const noexcept { return layout_; }
  Scalar get(const Dims& index) const { return as_view().get(index); }
  TensorView slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const {
    return as_view().slice(dim, start, stop, step);
  }
  TensorView transpose(int a, int b) const { return as_view().transpose(a, b); }
  TensorView flip(int dim) const { return as_view().flip(dim); }
  TensorView reshape(const Dims& shape) const { return as_view().reshape(shape); }
  template <class T>
  Expected<PreparedHostRead<T>, Returned<TensorView>> prepare_host() const {
    return as_view().template prepare_host<T>();
  }
  Expected<PreparedDevice, Returned<TensorView>> prepare_device() const { return as_view().prepare_device(); }
  Tensor duplicate() const { return as_view().duplicate(); }
  Tensor transfer_to(std::shared_ptr<Provider> provider) const { return as_view().transfer_to(std::move(provider)); }
  Tensor to_host() const { return as_view().to_host(); }
  Tensor convert(DType to) const { return as_view().convert(to); }
  std::vector<double> to_doubles() const { return as_view().to_doubles(); }
  TensorView reinterpret_view(DType to) const { return as_view().reinterpret_view(to); }
  std::string to_string() const { return as_view().to_string(); }

  void set(const Dims& index, double value) { as_view_mut().set(index, value); }
  void fill(double value) { as_view_mut().fill(value); }
  void copy_from(const TensorView& source) { as_view_mut().copy_from(source); }
  template <class T>
  Expected<PreparedHostWrite<T>, Returned<TensorViewMut>> prepare_host_mut() {
    return as_view_mut().template prepare_host_mut<T>();
  }
  Expected<PreparedDevice, Returned<TensorViewMut>> prepare_device_mut() { return as_view_mut().prepare_device_mut(); }
  TensorViewMut slice_mut(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) {
    return as_view_mut().slice_mut(dim, start, stop, step);
  }

  /// Consuming reinterpretation over the same root (see TensorView::reinterpret_view for the rank
  /// policy). Zero copy; the write layout must stay injective. Failure returns the owner unchanged.
  static Expected<Tensor, Returned<Tensor>> reinterpret(Tensor&& owner, DType to);
  /// Gives up the descriptor and returns the storage owner. A hand-off: refused (borrow_conflict, the
  /// tensor unchanged) while a view of it is live.
  Storage into_storage() &&;
  /// Number of shared_ptr holders of the root (diagnostics and tests; never authority).
  long root_use_count() const noexcept { return storage_.root_use_count(); }

 private:
  friend class AllocationGroup;
  Tensor(Storage storage, const CheckedLayout& layout) noexcept : storage_(std::move(storage)), layout_(layout) {}
  Storage storage_;
  CheckedLayout layout_;
};

/// `t` itself when it lives on `device`, else its transfer to provider_for(device): where a profile's values
/// go (the weights and inputs of a model run under a cuda profile, a training session's parameters).
Tensor placed_on(Tensor t, DeviceKind device);

// ---- templates -------------------------------------------------------------------------------------

namespace core {
/// Throws dtype_mismatch unless `actual` is T's dtype.
void require_dtype(const char* operation, DType actual, DType wanted);
/// Rejects host preparation of a view: returns the error, or nullopt when host access is possible.
std::optional<Error> host_refusal(const char* operation, const core::Claim& claim, const CheckedLayout& layout,
                                  DType wanted, bool write);
}  // namespace core

template <class T>
Expected<PreparedHostRead<T>, Returned<TensorView>> TensorView::prepare_host() && {
  constexpr const char* op = "tensor.prepare_host";
  if (auto refusal = core::host_refusal(op, *claim_, layout_, dtype_of_v<T>, false)) {
    return Unexpected(Returned<TensorView>{std::move(*this), std::move(*refusal)});
  }
  std::byte* base = nullptr;
  try {
    base = mapped_base(op);
  } catch (Error& e) {
    return Unexpected(Returned<TensorView>{std::move(*this), std::move(e)});
  }
  const T* first = reinterpret_cast<const T*>(base);
  if (layout_.is_contiguous()) {
    return PreparedHostRead<T>(PreparedContiguousRead<T>(
        std::span<const T>(first, static_cast<std::size_t>(layout_.numel())), std::move(borrow_)));
  }
  return PreparedHostRead<T>(PreparedStridedRead<T>(first, layout_.plan(), std::move(borrow_)));
}

template <class T>
Expected<PreparedHostWrite<T>, Returned<TensorViewMut>> TensorViewMut::prepare_host_mut() && {
  constexpr const char* op = "tensor.prepare_host_mut";
  std::byte* base = nullptr;
  try {
    core::require_unfrozen(op, freeze_state());
    if (auto refusal = core::host_refusal(op, *claim_, layout_, dtype_of_v<T>, true)) throw std::move(*refusal);
    base = mapped_base(op);
  } catch (Error& e) {
    return Unexpected(Returned<TensorViewMut>{std::move(*this), std::move(e)});
  }
  T* first = reinterpret_cast<T*>(base);
  if (layout_.is_contiguous()) {
    return PreparedHostWrite<T>(
        PreparedContiguousWrite<T>(std::span<T>(first, static_cast<std::size_t>(layout_.numel())), std::move(borrow_)));
  }
  return PreparedHostWrite<T>(PreparedStridedWrite<T>(first, layout_.plan(), std::move(borrow_)));
}

template <class T>
Tensor Tensor::from_values(const Dims& shape, std::span<const T> values) {
  Tensor t = empty(shape, dtype_of_v<T>);
  PACT_CHECK(static_cast<std::int64_t>(values.size()) == t.numel(), invalid_argument, "tensor.from_values",
             "got " + std::to_string(values.size()) + " values for shape " + shape.to_string());
  auto prepared = t.prepare_host_mut<T>();
  auto& contiguous = std::get<PreparedContiguousWrite<T>>(prepared.value());
  std::copy(values.begin(), values.end(), contiguous.begin());
  return t;
}

}  // namespace pact
