#pragma once
/// The typed tensor family (seed 001 G4): TypedTensor<T, R>, TypedView<T, R>, TypedViewMut<T, R>.
/// Each wraps its erased counterpart and adds a static element type and an optional static rank R
/// (kDynRank = known at run time). Nothing is implemented twice: every method forwards to the erased
/// family (Note [Method distribution]). Views and slices preserve R.

#include <array>
#include <complex>

#include "pact/core/tensor.hpp"

namespace pact {

/// Result rank of reinterpreting T as U at static rank R (the stated policy): same-size pairs keep R,
/// complex -> real adds one, real -> complex removes one; kDynRank stays kDynRank.
template <class T, class U>
constexpr int reinterpret_rank(int r) {
  if (r == kDynRank) return kDynRank;
  if constexpr (std::is_same_v<T, std::complex<float>> && std::is_same_v<U, float>) return r + 1;
  if constexpr (std::is_same_v<T, float> && std::is_same_v<U, std::complex<float>>) return r - 1;
  return r;
}

namespace core {
template <class T, int R>
void require_typed(const char* operation, const CheckedLayout& layout) {
  require_dtype(operation, layout.dtype(), dtype_of_v<T>);
  if (R != kDynRank && layout.rank() != R) {
    throw_error(ErrorCode::invalid_argument, operation,
                "static rank " + std::to_string(R) + " but the view has rank " + std::to_string(layout.rank()));
  }
}
}  // namespace core

template <class T, int R = kDynRank>
class TypedViewMut;
template <class T, int R = kDynRank>
class TypedTensor;

/// A shared read view with element type T and static rank R.
template <class T, int R = kDynRank>
class TypedView {
 public:
  /// Checks dtype and rank once; throws dtype_mismatch / invalid_argument.
  explicit TypedView(TensorView view) : view_(std::move(view)) {
    core::require_typed<T, R>("typed_view", view_.layout());
  }

  /// The erased view.
  const TensorView& erased() const noexcept { return view_; }
  /// The static rank (kDynRank when dynamic).
  static constexpr int static_rank = R;

  DType dtype() const noexcept { return view_.dtype(); }
  Dims shape() const noexcept { return view_.shape(); }
  Dims strides() const noexcept { return view_.strides(); }
  std::int64_t byte_offset() const noexcept { return view_.byte_offset(); }
  int rank() const noexcept { return view_.rank(); }
  std::int64_t numel() const noexcept { return view_.numel(); }
  std::uint64_t nbytes() const noexcept { return view_.nbytes(); }
  bool is_contiguous() const noexcept { return view_.is_contiguous(); }
  DeviceKind device() const noexcept { return view_.device(); }
  std::string_view provider_name() const noexcept { return view_.provider_name(); }
  SpanIdentity span_identity() const noexcept { return view_.span_identity(); }
  /// Checked random read as T.
  T get(const Dims& index) const {
    Scalar s = view_.get(index);
    if constexpr (std::is_same_v<T, std::complex<float>>) {
      return T(static_cast<float>(s.real), static_cast<float>(s.imag));
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(s.integer);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      return to_bf16(static_cast<float>(s.real));
    } else if constexpr (std::is_same_v<T, Half>) {
      return to_f16(static_cast<float>(s.real));
    } else {
      return static_cast<T>(s.real);
    }
  }
  TypedView slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const {
    return TypedView(view_.slice(dim, start, stop, step));
  }
  TypedView transpose(int a, int b) const { return TypedView(view_.transpose(a, b)); }
  TypedView flip(int dim) const { return TypedView(view_.flip(dim)); }
  /// The same elements in another shape (TensorView::reshape): the rank may change, so the result's is dynamic.
  TypedView<T> reshape(const Dims& shape) const { return TypedView<T>(view_.reshape(shape)); }
  /// Consumes the view; failure returns it.
  Expected<PreparedHostRead<T>, Returned<TypedView>> prepare_host() && {
    auto r = std::move(view_).template prepare_host<T>();
    if (r) return std::move(r).value();
    auto failed = std::move(r).error();
    return Unexpected(Returned<TypedView>{TypedView(std::move(failed.input)), std::move(failed.error)});
  }
  Expected<PreparedDevice, Returned<TypedView>> prepare_device() && {
    auto r = std::move(view_).prepare_device();
    if (r) return std::move(r).value();
    auto failed = std::move(r).error();
    return Unexpected(Returned<TypedView>{TypedView(std::move(failed.input)), std::move(failed.error)});
  }
  TypedTensor<T, R> duplicate() const;
  TypedTensor<T, R> transfer_to(std::shared_ptr<Provider> provider) const;
  TypedTensor<T, R> to_host() const;
  /// Element conversion to U (a new owner; see TensorView::convert).
  template <class U>
  TypedTensor<U, R> convert() const;
  /// Zero-copy reinterpretation; the result rank follows reinterpret_rank.
  template <class U>
  TypedView<U, reinterpret_rank<T, U>(R)> reinterpret_view() const {
    static_assert(!(R == 0 && std::is_same_v<T, float> && std::is_same_v<U, std::complex<float>>),
                  "a rank-0 f32 view has no trailing pair to reinterpret as c64");
    return TypedView<U, reinterpret_rank<T, U>(R)>(view_.reinterpret_view(dtype_of_v<U>));
  }
  std::string to_string() const { return view_.to_string(); }

 private:
  TensorView view_;
};

/// An exclusive write view with element type T and static rank R.
template <class T, int R>
class TypedViewMut {
 public:
  explicit TypedViewMut(TensorViewMut view) : view_(std::move(view)) {
    core::require_typed<T, R>("typed_view_mut", view_.layout());
  }
  TypedViewMut(TypedViewMut&&) noexcept = default;
  TypedViewMut& operator=(TypedViewMut&&) noexcept = default;

  /// Read reborrow.
  TypedView<T, R> as_view() const { return TypedView<T, R>(view_.as_view()); }
  TensorViewMut& erased() noexcept { return view_; }
  static constexpr int static_rank = R;

  DType dtype() const noexcept { return view_.dtype(); }
  Dims shape() const noexcept { return view_.shape(); }
  Dims strides() const noexcept { return view_.strides(); }
  std::int64_t byte_offset() const noexcept { return view_.byte_offset(); }
  int rank() const noexcept { return view_.rank(); }
  std::int64_t numel() const noexcept { return view_.numel(); }
  std::uint64_t nbytes() const noexcept { return view_.nbytes(); }
  bool is_contiguous() const noexcept { return view_.is_contiguous(); }
  DeviceKind device() const noexcept { return view_.device(); }
  std::string_view provider_name() const noexcept { return view_.provider_name(); }
  SpanIdentity span_identity() const noexcept { return view_.span_identity(); }
  T get(const Dims& index) const { return as_view().get(index); }
  TypedView<T, R> slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const {
    return as_view().slice(dim, start, stop, step);
  }
  TypedView<T, R> transpose(int a, int b) const { return as_view().transpose(a, b); }
  TypedView<T, R> flip(int dim) const { return as_view().flip(dim); }
  TypedView<T> reshape(const Dims& shape) const { return as_view().reshape(shape); }
  Expected<PreparedHostRead<T>, Returned<TypedView<T, R>>> prepare_host() const { return as_view().prepare_host(); }
  Expected<PreparedDevice, Returned<TypedView<T, R>>> prepare_device() const { return as_view().prepare_device(); }
  TypedTensor<T, R> duplicate() const { return as_view().duplicate(); }
  TypedTensor<T, R> transfer_to(std::shared_ptr<Provider> provider) const {
    return as_view().transfer_to(std::move(provider));
  }
  TypedTensor<T, R> to_host() const { return as_view().to_host(); }
  template <class U>
  TypedTensor<U, R> convert() const {
    return as_view().template convert<U>();
  }
  template <class U>
  TypedView<U, reinterpret_rank<T, U>(R)> reinterpret_view() const {
    return as_view().template reinterpret_view<U>();
  }
  std::string to_string() const { return view_.to_string(); }

  void set(const Dims& index, double value) { view_.set(index, value); }
  void fill(double value) { view_.fill(value); }
  void copy_from(const TypedView<T, R>& source) { view_.copy_from(source.erased()); }
  Expected<PreparedHostWrite<T>, Returned<TypedViewMut>> prepare_host_mut() && {
    auto r = std::move(view_).template prepare_host_mut<T>();
    if (r) return std::move(r).value();
    auto failed = std::move(r).error();
    return Unexpected(Returned<TypedViewMut>{TypedViewMut(std::move(failed.input)), std::move(failed.error)});
  }
  Expected<PreparedDevice, Returned<TypedViewMut>> prepare_device_mut() && {
    auto r = std::move(view_).prepare_device_mut();
    if (r) return std::move(r).value();
    auto failed = std::move(r).error();
    return Unexpected(Returned<TypedViewMut>{TypedViewMut(std::move(failed.input)), std::move(failed.error)});
  }
  TypedViewMut slice_mut(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) && {
    return TypedViewMut(std::move(view_).slice_mut(dim, start, stop, step));
  }

 private:
  TensorViewMut view_;
};

/// The typed owner.
template <class T, int R>
class TypedTensor {
 public:
  /// Checks dtype and rank; throws on mismatch (the erased owner is consumed either way only on success:
  /// use from() for a recoverable failure).
  static Expected<TypedTensor, Returned<Tensor>> from(Tensor&& tensor) {
    try {
      core::require_typed<T, R>("typed_tensor", tensor.layout());
    } catch (Error& e) {
      return Unexpected(Returned<Tensor>{std::move(tensor), std::move(e)});
    }
    return TypedTensor(std::move(tensor));
  }
  /// An uninitialised contiguous owner.
  static TypedTensor empty(const Dims& shape, std::shared_ptr<Provider> provider = cpu_provider()) {
    return TypedTensor(checked(Tensor::empty(shape, dtype_of_v<T>, std::move(provider))));
  }
  static TypedTensor zeros(const Dims& shape, std::shared_ptr<Provider> provider = cpu_provider()) {
    return TypedTensor(checked(Tensor::zeros(shape, dtype_of_v<T>, std::move(provider))));
  }
  static TypedTensor from_values(const Dims& shape, std::span<const T> values) {
    return TypedTensor(checked(Tensor::from_values<T>(shape, values)));
  }

  TypedTensor(TypedTensor&&) noexcept = default;
  TypedTensor& operator=(TypedTensor&&) noexcept = default;

  TypedView<T, R> as_view() const { return TypedView<T, R>(tensor_.as_view()); }
  TypedViewMut<T, R> as_view_mut() { return TypedViewMut<T, R>(tensor_.as_view_mut()); }
  static constexpr int static_rank = R;

  DType dtype() const noexcept { return tensor_.dtype(); }
  Dims shape() const noexcept { return tensor_.shape(); }
  Dims strides() const noexcept { return tensor_.strides(); }
  std::int64_t byte_offset() const noexcept { return tensor_.byte_offset(); }
  int rank() const noexcept { return tensor_.rank(); }
  std::int64_t numel() const noexcept { return tensor_.numel(); }
  std::uint64_t nbytes() const noexcept { return tensor_.nbytes(); }
  bool is_contiguous() const noexcept { return tensor_.is_contiguous(); }
  DeviceKind device() const noexcept { return tensor_.device(); }
  std::string_view provider_name() const noexcept { return tensor_.provider_name(); }
  SpanIdentity span_identity() const noexcept { return tensor_.span_identity(); }
  T get(const Dims& index) const { return as_view().get(index); }
  TypedView<T, R> slice(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) const {
    return as_view().slice(dim, start, stop, step);
  }
  TypedView<T, R> transpose(int a, int b) const { return as_view().transpose(a, b); }
  TypedView<T, R> flip(int dim) const { return as_view().flip(dim); }
  TypedView<T> reshape(const Dims& shape) const { return as_view().reshape(shape); }
  Expected<PreparedHostRead<T>, Returned<TypedView<T, R>>> prepare_host() const { return as_view().prepare_host(); }
  Expected<PreparedDevice, Returned<TypedView<T, R>>> prepare_device() const { return as_view().prepare_device(); }
  TypedTensor duplicate() const { return as_view().duplicate(); }
  TypedTensor transfer_to(std::shared_ptr<Provider> provider) const {
    return as_view().transfer_to(std::move(provider));
  }
  TypedTensor to_host() const { return as_view().to_host(); }
  template <class U>
  TypedTensor<U, R> convert() const {
    return as_view().template convert<U>();
  }
  template <class U>
  TypedView<U, reinterpret_rank<T, U>(R)> reinterpret_view() const {
    return as_view().template reinterpret_view<U>();
  }
  std::string to_string() const { return tensor_.to_string(); }

  void set(const Dims& index, double value) { as_view_mut().set(index, value); }
  void fill(double value) { as_view_mut().fill(value); }
  void copy_from(const TypedView<T, R>& source) { as_view_mut().copy_from(source); }
  Expected<PreparedHostWrite<T>, Returned<TypedViewMut<T, R>>> prepare_host_mut() {
    return as_view_mut().prepare_host_mut();
  }
  Expected<PreparedDevice, Returned<TypedViewMut<T, R>>> prepare_device_mut() {
    return as_view_mut().prepare_device_mut();
  }
  TypedViewMut<T, R> slice_mut(int dim, std::int64_t start, std::int64_t stop, std::int64_t step = 1) {
    return as_view_mut().slice_mut(dim, start, stop, step);
  }

  /// Gives up the static type.
  Tensor into_erased() && { return std::move(tensor_); }

 private:
  template <class, int>
  friend class TypedView;
  template <class, int>
  friend class TypedTensor;
  explicit TypedTensor(Tensor tensor) : tensor_(std::move(tensor)) {}
  static Tensor checked(Tensor t) {
    core::require_typed<T, R>("typed_tensor", t.layout());
    return t;
  }
  Tensor tensor_;
};

template <class T, int R>
TypedTensor<T, R> TypedView<T, R>::duplicate() const {
  return TypedTensor<T, R>(view_.duplicate());
}
template <class T, int R>
template <class U>
TypedTensor<U, R> TypedView<T, R>::convert() const {
  return TypedTensor<U, R>(view_.convert(dtype_of_v<U>));
}
template <class T, int R>
TypedTensor<T, R> TypedView<T, R>::transfer_to(std::shared_ptr<Provider> provider) const {
  return TypedTensor<T, R>(view_.transfer_to(std::move(provider)));
}
template <class T, int R>
TypedTensor<T, R> TypedView<T, R>::to_host() const {
  return TypedTensor<T, R>(view_.to_host());
}

}  // namespace pact
